"""The inputs of a salvage: the arguments and the source checked, and a consistent private
or immutable image of the source (its WAL applied to a copy, never to the source).
"""
import mmap
import os
import shutil
import sqlite3

from fleetops.remote.host.durable import sha256_file
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import infer_header, parse_header
from fleetops.remote.sqlite.fileformat.reader import SQLiteFile
from fleetops.remote.sqlite.fileformat.wal import apply_wal
from fleetops.remote.sqlite.salvage.sqlutil import file_fingerprints
from fleetops.remote.sqlite.salvage.state import SalvageInputError


def discard_output(s):
    """Close and remove the temporary output of a failed run (the source is untouched)."""
    out = s.dest.out
    if out is not None:
        try:
            out.close()
        except sqlite3.Error:
            pass
    tmp = s.dest.tmp_out
    for suffix in ("", "-wal", "-shm", "-journal"):
        if tmp and os.path.exists(tmp + suffix):
            os.unlink(tmp + suffix)


def check_inputs(s):
    if not os.path.isfile(s.args.source):
        raise SalvageInputError("source %s is not a file" % s.args.source)
    if os.path.exists(s.args.output):
        raise SalvageInputError("output %s already exists; salvage never overwrites" % s.args.output)
    if not os.path.isdir(os.path.dirname(s.args.output)):
        raise SalvageInputError("output directory %s does not exist" % os.path.dirname(s.args.output))
    if os.path.realpath(s.args.source) == os.path.realpath(s.args.output):
        raise SalvageInputError("output must differ from source")
    if s.args.schema_from and not os.path.isfile(s.args.schema_from):
        raise SalvageInputError("schema_from %s is not a file" % s.args.schema_from)
    with open(s.args.source, "rb") as fh:
        head = fh.read(100)
    s.image.inferred_header = None
    try:
        parse_header(head)
    except FormatError as e:
        try:
            with open(s.args.source, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                try:
                    s.image.inferred_header = infer_header(mm)
                finally:
                    if size:
                        mm.close()
        except FormatError as e2:
            if not s.args.schema_from:
                raise SalvageInputError("source is not a SQLite database (%s) and its header "
                                        "cannot be inferred (%s); a damaged header needs "
                                        "schema_from" % (e, e2)) from e2


def make_image(s):
    """A consistent, private-or-immutable view of the source; never writes it."""
    wal = s.args.source + "-wal"
    info = {"wal_present": os.path.exists(wal), "wal_applied": None}
    journal = s.args.source + "-journal"
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        s.notes.append("a rollback journal is present and was NOT applied "
                       "(immutable read of the main file)")
    has_wal = info["wal_present"] and os.path.getsize(wal) > 0
    if has_wal or s.image.inferred_header:
        image = os.path.join(s.scratch_dir(), "image.db")
        shutil.copyfile(s.args.source, image)
    if s.image.inferred_header:
        # the private copy gets the inferred header, so SQLite can read it too
        hdr, fields = s.image.inferred_header
        with open(image, "r+b") as fh:
            fh.write(hdr)
        s.image.header_inferred = list(fields)
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
    if has_wal or s.image.inferred_header:
        info["copied"] = True
    else:
        image = s.args.source
        info["copied"] = False
    info["path"] = image
    info["size"] = os.path.getsize(image)
    if not info["copied"] and s.image.source_before.get("db", {}).get("size") == info["size"]:
        info["sha256"] = s.image.source_before["db"]["sha256"]    # the same file, just hashed
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


def fingerprint_source(s):
    """The source files' fingerprints at the start (compared with theirs at the end)."""
    s.image.source_before = file_fingerprints(s.args.source)
    return s.image.source_before


def read_header(s, image):
    """The image's reader and header: which header fields are not the source's own, and the
    format the output keeps (page size, encoding, journal mode, ...)."""
    fallback = None
    if s.args.schema_from:
        with open(s.args.schema_from, "rb") as fh:
            fallback = fh.read(100)
    s.image.reader = open_reader(image, fallback)
    if getattr(s.image.reader, "header_from", None) == "schema_from":
        s.image.header_inferred = ["freelist_trunk", "freelist_count", "header (schema_from's)"]
    s.report["header"] = s.image.reader.header.as_dict()
    h = s.image.reader.header
    if (h.freelist_trunk > s.image.reader.page_count or h.freelist_count > s.image.reader.page_count
            ) and "freelist_trunk" not in s.image.header_inferred:
        # pointing outside the file: not the freelist's, whatever the rest says
        s.image.header_inferred += ["freelist_trunk", "freelist_count"]
        s.notes.append("header freelist fields point outside the file (trunk %d, count "
                       "%d): free pages found from the pages instead"
                       % (h.freelist_trunk, h.freelist_count))
    s.report["header_inferred"] = list(s.image.header_inferred)
    s.image.keep = source_format(image, s.image.reader.header, s.report["image"], s.image.header_inferred,
                                 fallback)
    s.report["source_format"] = s.image.keep
    if not s.image.keep["journal_mode_known"]:
        s.notes.append("the source's journal mode is lost with its header (no -wal, no "
                       "schema_from): the output is in DELETE mode")
