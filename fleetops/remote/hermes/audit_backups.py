"""Backup evidence beside a state.db: the newest verified backup and its age, and every other
backup-like file (Hermes snapshots, pre-update copies, corrupt copies, retired-WAL captures)
listed so nobody restores or deletes one blindly.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
from typing import Any, Dict, Optional

from fleetops.remote.hermes import audit_open
from fleetops.remote.hermes import persistence as hermes_persistence
from fleetops.remote.host.durable import sha256_file


def iso(ts: float) -> str:
    return datetime.datetime.utcfromtimestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: Any) -> Optional[float]:
    """UTC ISO timestamps as written by backup manifests ('Z' or +00:00); None if unparsable."""
    if not isinstance(text, str) or not text:
        return None
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    dt: Optional[datetime.datetime]
    try:
        dt = datetime.datetime.fromisoformat(t)
    except ValueError:
        for fmt in ("%Y%m%dT%H%M%S", "%Y%m%d-%H%M%S", "%Y%m%d_%H%M%S"):
            try:
                dt = datetime.datetime.strptime(text.strip()[:15], fmt)
                break
            except ValueError:
                dt = None
        if dt is None:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def backups(home: str, db: str, profile: Optional[str], root: str, now: float,
            verify_sha256: bool = False) -> Dict[str, Any]:
    """Newest verified backup and everything else backup-like beside state.db.

    Verified means a fleetops backup manifest with integrity "ok" whose file is still there
    (size, and sha256 when asked, matching). Hermes' own state-snapshots are consistent copies
    but never integrity-checked: listed, not counted as verified. Corrupt copies and
    retired-WAL captures are listed so nobody restores or deletes them blindly.
    """
    out: Dict[str, Any] = {"newest_verified": None, "newest_any": None, "items": [], "corrupt_copies": [],
                           "retired_wal_captures": [], "problems": []}
    # (path, filtered): the root's manifests name other profiles' backups too
    manifests = [(m, False) for m in glob.glob(os.path.join(home, "fleetops", "backups", "*.json"))]
    if home != root:
        manifests += [(m, True) for m in glob.glob(os.path.join(root, "fleetops", "backups", "*.json"))]
    for mpath, filtered in manifests:
        try:
            with open(mpath, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError) as exc:
            out["problems"].append("%s: unreadable manifest (%s)" % (mpath, exc))
            continue
        if not isinstance(m, dict):
            continue
        if filtered and m.get("profile") != profile and m.get("source") != db:
            continue
        bpath = m.get("path") or ""
        if bpath and not os.path.isabs(bpath):
            bpath = os.path.join(os.path.dirname(mpath), bpath)
        created = parse_utc(m.get("created"))
        item = {"kind": "fleetops", "path": bpath, "manifest": mpath, "created": m.get("created"),
                "age_hours": round((now - created) / 3600.0, 2) if created else None,
                "integrity": m.get("integrity"), "verified": False, "why": None}
        st = audit_open.file_facts(bpath) if bpath else None
        if m.get("integrity") != "ok":
            item["why"] = "integrity %r" % m.get("integrity")
        elif st is None:
            item["why"] = "backup file missing"
        elif m.get("size") is not None and int(m["size"]) != st["size"]:
            item["why"] = "size %d != manifest %s" % (st["size"], m.get("size"))
        elif created is None:
            item["why"] = "no created time"
        elif verify_sha256 and m.get("sha256") and sha256_file(bpath) != m.get("sha256"):
            item["why"] = "sha256 mismatch"
        else:
            item["verified"] = True
        out["items"].append(item)
    for mpath in glob.glob(os.path.join(home, "state-snapshots", "*", "manifest.json")):
        try:
            with open(mpath, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        files = m.get("files") if isinstance(m, dict) else None
        if not isinstance(files, dict) or "state.db" not in files:
            continue
        snap_db = os.path.join(os.path.dirname(mpath), "state.db")
        st = audit_open.file_facts(snap_db)
        created = parse_utc(m.get("timestamp") or m.get("id")) or (st["mtime"] if st else None)
        out["items"].append({"kind": "hermes-snapshot", "path": snap_db, "manifest": mpath,
                             "created": iso(created) if created else None,
                             "age_hours": round((now - created) / 3600.0, 2) if created else None,
                             "verified": False, "why": "consistent copy, never integrity-checked"
                             if st and st["size"] == files["state.db"] else "snapshot file missing or size differs"})
    extra = [(p, "hermes-pre-update") for p in glob.glob(os.path.join(home, "backups", "pre-update-*.zip"))]
    extra += [(p, "pre-update-emergency") for p in glob.glob(db + ".pre-update-emergency-*.bak")]
    for p, kind in extra:
        st = audit_open.file_facts(p)
        if st:
            out["items"].append({"kind": kind, "path": p, "created": iso(st["mtime"]),
                                 "age_hours": round((now - st["mtime"]) / 3600.0, 2), "verified": False,
                                 "why": "not integrity-checked"})
    for p in sorted(glob.glob(db + ".malformed-backup-*") + glob.glob(db + ".corrupt.*.bak")):
        if p.endswith(("-wal", "-shm")):
            continue
        st = audit_open.file_facts(p)
        if st:
            out["corrupt_copies"].append({"path": p, "size": st["size"], "mtime": iso(st["mtime"])})
    for d in sorted(glob.glob(db + ".retired-wal-*")):
        out["retired_wal_captures"].append(hermes_persistence.retired_wal_capture(d))
    dated = [i for i in out["items"] if i.get("age_hours") is not None]
    ver = [i for i in dated if i["verified"]]
    if ver:
        out["newest_verified"] = min(ver, key=lambda i: i["age_hours"])
    if dated:
        out["newest_any"] = min(dated, key=lambda i: i["age_hours"])
    out["items"] = sorted(out["items"], key=lambda i: (i.get("age_hours") is None, i.get("age_hours")))[:20]
    return out
