"""The swap journal's steps: each move of a quarantine, swap or rollback recorded by (st_dev,
st_ino) before it happens, so the next run can tell which happened and finish or undo them.

Moves are renames that never land on an existing path, plus, for state.db itself, a hard link
aside followed by a rename over the file just linked (image_swap.db_moves), so the path never
stands empty. Stdlib only, Python 3.8+.
"""
import os

from fleetops.remote.hermes import steplib
from fleetops.remote.host.durable import fsync_dir, sha256_file


class SwapError(Exception):
    """A refusal or a failed precondition; the message says what to do."""


def journal_path(loc):
    return os.path.join(loc["fleetops"], "state", "swap-journal.json")


def same_dev(a, b):
    return os.stat(a).st_dev == os.stat(b).st_dev


def where(m):
    """"src" / "dst" when the file with the recorded inode is there, else None (a "link" move
    has happened once its destination holds the inode, whether or not its source still does)."""
    for key in (("dst", "src") if m.get("mode") == "link" else ("src", "dst")):
        try:
            st = os.lstat(m[key])
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (m["dev"], m["ino"]):
            return key
    return None


def rename_new(src, dst):
    """rename(2) that refuses to replace anything (an existing dst is never overwritten)."""
    if os.path.lexists(dst):
        raise SwapError("refusing to overwrite %s (moving %s)" % (dst, src))
    os.rename(src, dst)
    fsync_dir(os.path.dirname(dst))
    if os.path.dirname(src) != os.path.dirname(dst):
        fsync_dir(os.path.dirname(src))


def move(src, dst, role, sha=None, mode="rename"):
    st = os.lstat(src)
    return {"src": src, "dst": dst, "role": role, "dev": st.st_dev, "ino": st.st_ino,
            "size": st.st_size, "sha256": sha, "mode": mode}


def can_link(directory):
    """True when `directory`'s filesystem takes hard links (a scratch file of ours, then gone)."""
    a = os.path.join(directory, ".fleetops-link-probe-%d" % os.getpid())
    b = a + ".2"
    try:
        fd = os.open(a, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.link(a, b)
        return True
    except OSError:
        return False
    finally:
        for f in (b, a):
            try:
                os.unlink(f)
            except OSError:
                pass


def db_moves(db, aside, aside_role, aside_sha, incoming, in_role, in_sha):
    """The two moves that replace state.db: the file there now goes aside, `incoming` comes in.
    Where the filesystem takes hard links, the old file is linked aside and the new one renamed
    over it, so state.db never stops existing: a Hermes backend that respawns and opens it at
    that moment finds a file (the old one, fenced, or the new one), never an empty path where
    SQLite would create a new, empty store. Elsewhere: two renames, as before."""
    if can_link(os.path.dirname(db)) and same_dev(db, os.path.dirname(aside)):
        return [move(db, aside, aside_role, aside_sha, mode="link"),
                move(incoming, db, in_role, in_sha, mode="replace")]
    return [move(db, aside, aside_role, aside_sha), move(incoming, db, in_role, in_sha)]


def do(m, moves):
    """One journal step: rename (never onto an existing path), link the file aside (its source
    stays), or rename over the file a preceding link put aside (and nothing else)."""
    mode = m.get("mode") or "rename"
    if mode == "link":
        if os.path.lexists(m["dst"]):
            raise SwapError("refusing to overwrite %s (linking %s)" % (m["dst"], m["src"]))
        os.link(m["src"], m["dst"])
        fsync_dir(os.path.dirname(m["dst"]))
        return
    if mode == "replace" and os.path.lexists(m["dst"]):
        st = os.lstat(m["dst"])
        linked = [x for x in moves if x.get("mode") == "link" and x["src"] == m["dst"]]
        if not linked or (st.st_dev, st.st_ino) != (linked[0]["dev"], linked[0]["ino"]) \
                or where(linked[0]) != "dst":
            raise SwapError("refusing to overwrite %s (moving %s): it is not the file the swap put aside"
                            % (m["dst"], m["src"]))
        os.rename(m["src"], m["dst"])
        fsync_dir(os.path.dirname(m["dst"]))
        return
    rename_new(m["src"], m["dst"])


def undo(m):
    """Undo one journal step that happened: rename back (a link whose source still holds the file
    is left as it is: the file was never away)."""
    if m.get("mode") == "link":
        try:
            st = os.lstat(m["src"])
            if (st.st_dev, st.st_ino) == (m["dev"], m["ino"]):
                return
        except OSError:
            pass
    rename_new(m["dst"], m["src"])


def run_journal(loc, j):
    """Write the journal, then do each rename, re-writing it before every step."""
    path = journal_path(loc)
    steplib.makedirs_private(os.path.dirname(path))
    j["status"] = "pending"
    j["next"] = 0
    steplib.write_json(path, j)
    for i, m in enumerate(j["moves"]):
        j["next"] = i
        steplib.write_json(path, j)
        if where(m) == "src":
            do(m, j["moves"])
    j["next"] = len(j["moves"])
    finish_checks(j)
    j["status"] = "done"
    j["finished_at"] = steplib.iso()
    steplib.write_json(path, j)
    return j


def finish_checks(j):
    """After the last move: owner/mode of the file now in place; sha256 of everything moved."""
    post = j.get("post") or {}
    if post.get("chmod") is not None and os.path.exists(j["db"]):
        os.chmod(j["db"], int(post["chmod"], 8))
    bad = []
    for m in j["moves"]:
        if m.get("sha256") and sha256_file(m["dst"]) != m["sha256"]:
            bad.append(m["dst"])
    if bad:
        raise SwapError("sha256 mismatch after the moves: %s" % ", ".join(bad))


