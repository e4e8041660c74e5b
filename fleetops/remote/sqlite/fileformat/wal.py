"""The write-ahead log: committed frames as SQLite would replay them (cumulative checksums,
salts, torn tails), and replaying them into a private copy."""
import struct

from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import parse_header

WAL_MAGIC = (0x377F0682, 0x377F0683)


def _wal_checksum(data, s0, s1, big_endian):
    fmt = (">" if big_endian else "<") + "%dI" % (len(data) // 4)
    words = struct.unpack(fmt, data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def read_wal(path, page_size=None):
    """Committed frames of a WAL file, as SQLite would replay them.

    Returns dict(pages={pgno: bytes} as of the last valid commit, db_pages,
    frames_total, frames_valid, frames_committed, stale_frames, uncommitted_frames,
    partial_frame_bytes, torn). Frames of an earlier generation after the valid ones (other
    salts) are stale, not torn; a torn tail (a frame of this generation failing its checksum,
    frames after the last commit, a partial frame) is ignored, never applied.
    """
    with open(path, "rb") as fh:
        return parse_wal(fh.read(), page_size)


def parse_wal(data, page_size=None):
    """read_wal of a WAL's bytes (read by the caller, e.g. through a pinned descriptor)."""
    res = {"pages": {}, "db_pages": None, "frames_total": 0, "frames_valid": 0,
           "frames_committed": 0, "torn": False, "error": None}
    if len(data) < 32:
        res["error"] = "wal shorter than its header" if data else None
        return res
    magic, version, psize, _ckseq, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:32])
    if magic not in WAL_MAGIC:
        res["error"] = "bad wal magic"
        return res
    big = magic & 1
    if psize == 1:
        psize = 65536
    if page_size and psize != page_size:
        res["error"] = "wal page size %d != db page size %d" % (psize, page_size)
        return res
    if psize < 512 or psize > 65536 or psize & (psize - 1):
        res["error"] = "bad wal page size"
        return res
    s0, s1 = _wal_checksum(data[:24], 0, 0, big)
    if (s0, s1) != (c1, c2):
        res["error"] = "wal header checksum mismatch"
        return res
    fsize = 24 + psize
    nframes = (len(data) - 32) // fsize
    res["frames_total"] = nframes
    pending = {}
    off = 32
    broke = None
    for _ in range(nframes):
        fh_ = data[off:off + 24]
        pgno, commit, fs1, fs2, fc1, fc2 = struct.unpack(">6I", fh_)
        if (fs1, fs2) != (salt1, salt2):
            broke = "salt"
            break
        if pgno == 0:
            broke = "frame"
            break
        s0, s1 = _wal_checksum(fh_[:8], s0, s1, big)
        s0, s1 = _wal_checksum(data[off + 24:off + fsize], s0, s1, big)
        if (s0, s1) != (fc1, fc2):
            broke = "checksum"
            break
        res["frames_valid"] += 1
        pending[pgno] = data[off + 24:off + fsize]
        if commit:
            res["pages"].update(pending)
            pending = {}
            res["db_pages"] = commit
            res["frames_committed"] = res["frames_valid"]
        off += fsize
    # after the valid frames: frames of an earlier generation (other salts: what a WAL
    # restart leaves behind, normal) are stale; frames of this generation that do not check
    # out, valid frames with no commit after them, or a partial frame are a torn tail
    rest = nframes - res["frames_valid"]
    stale = 0
    if broke == "salt":
        for k in range(res["frames_valid"], nframes):
            o = 32 + k * fsize
            if struct.unpack(">II", data[o + 8:o + 16]) != (salt1, salt2):
                stale += 1
    res["stale_frames"] = stale
    res["uncommitted_frames"] = res["frames_valid"] - res["frames_committed"]
    res["partial_frame_bytes"] = (len(data) - 32) % fsize
    res["torn"] = bool(res["uncommitted_frames"] or rest - stale or res["partial_frame_bytes"])
    return res


def apply_wal(db_path, wal_path):
    """Write the WAL's committed frames into db_path (a private copy!).

    Returns the read_wal summary without the page bytes.
    """
    with open(db_path, "rb") as fh:
        head = fh.read(100)
    try:
        psize = parse_header(head).page_size
    except FormatError:
        psize = None
    w = read_wal(wal_path, psize)
    psize = psize or (len(next(iter(w["pages"].values()))) if w["pages"] else None)
    if w["pages"] and psize:
        with open(db_path, "r+b") as fh:
            for pgno in sorted(w["pages"]):
                fh.seek((pgno - 1) * psize)
                fh.write(w["pages"][pgno])
            if w["db_pages"]:
                fh.truncate(w["db_pages"] * psize)
    summary = dict((k, v) for k, v in w.items() if k != "pages")
    summary["pages_applied"] = len(w["pages"])
    return summary
