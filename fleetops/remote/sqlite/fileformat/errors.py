"""The one error of the file-format reader, so callers can skip one bad page or cell and go on."""


class FormatError(Exception):
    """The bytes do not form what the SQLite file format says they should."""
