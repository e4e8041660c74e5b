"""The inputs of a salvage: the arguments and the source checked, and a consistent private
or immutable image of the source (its WAL applied to a copy, never to the source).
"""
import mmap
import os
import shutil
import sqlite3
import tempfile

from fleetops.remote.host.durable import sha256_file
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import infer_header, parse_header
from fleetops.remote.sqlite.fileformat.reader import SQLiteFile
from fleetops.remote.sqlite.fileformat.wal import apply_wal
from fleetops.remote.sqlite.salvage.state import SalvageInputError


def discard_output(s):
    """Close and remove the temporary output of a failed run (the source is untouched)."""
    out = s.out
    if out is not None:
        try:
            out.close()
        except sqlite3.Error:
            pass
    tmp = s.tmp_out
    for suffix in ("", "-wal", "-shm", "-journal"):
        if tmp and os.path.exists(tmp + suffix):
            os.unlink(tmp + suffix)


def check_inputs(s):
    if not os.path.isfile(s.source):
        raise SalvageInputError("source %s is not a file" % s.source)
    if os.path.exists(s.output):
        raise SalvageInputError("output %s already exists; salvage never overwrites" % s.output)
    if not os.path.isdir(os.path.dirname(s.output)):
        raise SalvageInputError("output directory %s does not exist" % os.path.dirname(s.output))
    if os.path.realpath(s.source) == os.path.realpath(s.output):
        raise SalvageInputError("output must differ from source")
    if s.schema_from and not os.path.isfile(s.schema_from):
        raise SalvageInputError("schema_from %s is not a file" % s.schema_from)
    with open(s.source, "rb") as fh:
        head = fh.read(100)
    s.inferred_header = None
    try:
        parse_header(head)
    except FormatError as e:
        try:
            with open(s.source, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                try:
                    s.inferred_header = infer_header(mm)
                finally:
                    if size:
                        mm.close()
        except FormatError as e2:
            if not s.schema_from:
                raise SalvageInputError("source is not a SQLite database (%s) and its header "
                                        "cannot be inferred (%s); a damaged header needs "
                                        "schema_from" % (e, e2)) from e2


def make_image(s):
    """A consistent, private-or-immutable view of the source; never writes it."""
    wal = s.source + "-wal"
    info = {"wal_present": os.path.exists(wal), "wal_applied": None}
    journal = s.source + "-journal"
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        s.notes.append("a rollback journal is present and was NOT applied "
                       "(immutable read of the main file)")
    has_wal = info["wal_present"] and os.path.getsize(wal) > 0
    if has_wal or s.inferred_header:
        s.tmpdir = tempfile.mkdtemp(prefix="fleetops-salvage-",
                                    dir=os.path.dirname(s.output))
        image = os.path.join(s.tmpdir, "image.db")
        shutil.copyfile(s.source, image)
    if s.inferred_header:
        # the private copy gets the inferred header, so SQLite can read it too
        hdr, fields = s.inferred_header
        with open(image, "r+b") as fh:
            fh.write(hdr)
        s.header_inferred = list(fields)
        info["header_inferred"] = list(fields)
        s.notes.append("damaged file header: inferred %s from the pages (private copy)"
                       % ", ".join(fields))
    if has_wal:
        wal_copy = image + "-wal"
        shutil.copyfile(wal, wal_copy)
        try:
            info["wal_applied"] = apply_wal(image, wal_copy)
        except (OSError, FormatError) as e:
            info["wal_applied"] = {"error": str(e)}
            s.notes.append("WAL could not be applied: %s" % e)
        os.unlink(wal_copy)
        wa = info["wal_applied"]
        if wa.get("torn"):
            s.notes.append("WAL has a torn tail: %d of %d frames after the last commit "
                           "were ignored, as SQLite would" % (
                                  wa["frames_total"] - wa["frames_committed"]
                                  - wa.get("stale_frames", 0), wa["frames_total"]))
        if wa.get("stale_frames"):
            s.notes.append("WAL holds %d stale frames of an earlier generation after its "
                           "%d valid ones (left by a WAL restart: normal), ignored"
                           % (wa["stale_frames"], wa["frames_valid"]))
    if has_wal or s.inferred_header:
        info["copied"] = True
    else:
        image = s.source
        info["copied"] = False
    info["path"] = image
    info["size"] = os.path.getsize(image)
    if not info["copied"] and s.source_before.get("db", {}).get("size") == info["size"]:
        info["sha256"] = s.source_before["db"]["sha256"]    # the same file, just hashed
    else:
        info["sha256"] = sha256_file(image)
    return image, info


def source_format(image, header, image_info, inferred=(), fallback=None):
    """What the output keeps of the source: journal mode (WAL when the header says so or a
    WAL was applied), page size, encoding, user_version, application_id, auto_vacuum. From
    the source's own header; where that was damaged (fields inferred from the pages), the
    fields other than the page size come from the fallback header (schema_from: a healthy
    store of the same host) when there is one, else they are the inferred ones, said so."""
    with open(image, "rb") as fh:
        raw = fh.read(100)
    try:
        own = parse_header(raw)
        origin = "header"
    except FormatError:
        own = header
        origin = "fallback header (the source's is unreadable)"
    fields = own
    known = True
    if inferred:
        origin = "header inferred from the pages (%s)" % ", ".join(inferred)
        known = "file_format_versions" not in inferred
        if fallback:
            try:
                fields = parse_header(fallback)
                origin += "; the other fields from schema_from's header"
                known = True
            except FormatError:
                pass
    applied = bool(image_info.get("wal_present") and image_info.get("wal_applied"))
    wal = (fields.write_version, fields.read_version) == (2, 2) or applied
    # nothing says which mode it was: DELETE, which never exposes the store to the WAL-reset
    # bug; Hermes switches it to WAL itself where its SQLite is safe
    return {"journal_mode": "wal" if wal else "delete", "page_size": own.page_size,
            "journal_mode_known": known or applied,
            "encoding": {2: "UTF-16le", 3: "UTF-16be"}.get(fields.text_encoding, "UTF-8"),
            "user_version": fields.user_version, "application_id": fields.application_id,
            "auto_vacuum": (2 if fields.incremental_vacuum else 1) if fields.vacuum_mode else 0,
            "from": origin}


def open_reader(image, fallback_header=None):
    try:
        return SQLiteFile(image)
    except FormatError:
        if not fallback_header:
            raise
    with open(image, "rb") as fh:
        data = bytearray(fh.read())
    hdr = bytearray(fallback_header[:100])
    hdr[32:40] = b"\x00" * 8          # the healthy file's freelist is not ours
    data[:100] = hdr
    rd = SQLiteFile(data=bytes(data))
    rd.header_from = "schema_from"
    return rd
