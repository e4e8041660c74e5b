"""Find an honest SQLite `.recover` for bench/salvage.py, or say why there is none.

`.recover` is SQLite's own recovery (ext/recover/sqlite3recover.c, compiled into the sqlite3
shell); it reads pages through the `sqlite_dbpage` virtual table, which exists only in a
library built with SQLITE_ENABLE_DBPAGE_VTAB. Candidates, in order:

1. ``$FLEETOPS_RECOVER_SHELL``: a sqlite3 shell given by the user, used as is.
2. The system ``sqlite3``, if its `.recover` works. Debian 12's 3.40.1 shell has the recover
   code but its libsqlite3 lacks sqlite_dbpage, so `.recover` fails (field report 01).
3. APSW's bundled shell (PyPI ``apsw``, SQLite 3.54.x, in a venv under /opt/fleetops-test/):
   its library has sqlite_dbpage but the shell is built without `.recover`.
4. The system shell's `.recover` code on APSW's bundled SQLite library
   (``libsqlite3_tool.so``, ENABLE_DBPAGE_VTAB) through LD_LIBRARY_PATH. That library lacks
   a few symbols the Debian shell links against (session extension, column metadata) and the
   shell refuses a library whose source id differs from its own; a tiny LD_PRELOAD shim
   (our code, built here with gcc) supplies those symbols as stubs that abort if ever called,
   and reports the shell's own source id. Every page read and every recovery decision is
   SQLite's own code: the 3.40.1 recover module on the 3.54.x core.

Each candidate is accepted only if a probe proves it: a small database with one table and
an orphaned (unreachable) leaf page must come back through `.recover | sqlite3 fresh.db`
with its reachable rows in the table.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

RECOVER_VENV = os.environ.get("FLEETOPS_RECOVER_VENV", "/opt/fleetops-test/recover-venv")
SHIM_DIR = os.environ.get("FLEETOPS_RECOVER_SHIM", "/opt/fleetops-test/recover-shim")


@dataclass
class RecoverTool:
    shell: Optional[str] = None          # path of the sqlite3 shell to run
    env: Dict[str, str] = field(default_factory=dict)
    description: str = ""
    sqlite_version: str = ""
    tried: List[str] = field(default_factory=list)  # why earlier candidates were rejected

    @property
    def available(self) -> bool:
        return self.shell is not None

    def environ(self) -> Dict[str, str]:
        e = dict(os.environ)
        e.update(self.env)
        return e


def _run(cmd, env=None, input_text=None, timeout=60):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, input=input_text,
                          timeout=timeout)


def _probe(shell: str, env: Dict[str, str]) -> Optional[str]:
    """None if `.recover` of a probe db replays into a fresh db with every row, else the reason."""
    tmp = tempfile.mkdtemp(prefix="fleetops-recover-probe-")
    try:
        src = os.path.join(tmp, "src.db")
        con = sqlite3.connect(src)
        con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "row %d " % i + "x" * 200) for i in range(1, 301)])
        con.commit()
        con.close()
        e = dict(os.environ)
        e.update(env)
        try:
            p = _run([shell, src, ".recover"], env=e)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return "cannot run %s: %s" % (shell, exc)
        if p.returncode != 0 or "INSERT" not in p.stdout:
            err = (p.stderr.strip() or "no INSERT in its output").splitlines()[-1][:200]
            return ".recover failed (exit %d): %s" % (p.returncode, err)
        fresh = os.path.join(tmp, "fresh.db")
        q = _run([shell, fresh], env=e, input_text=p.stdout)
        if q.returncode != 0:
            return "replaying .recover output failed: %s" % q.stderr.strip()[:200]
        n = sqlite3.connect(fresh).execute("SELECT count(*) FROM t NOT INDEXED").fetchone()[0]
        if n != 300:
            return ".recover brought back %d of 300 probe rows" % n
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _version(shell: str, env: Dict[str, str]) -> str:
    e = dict(os.environ)
    e.update(env)
    try:
        p = _run([shell, ":memory:", "SELECT sqlite_version()"], env=e)
        return p.stdout.strip()
    except OSError:
        return "?"


def _has_dbpage(shell: str, env: Dict[str, str]) -> bool:
    e = dict(os.environ)
    e.update(env)
    p = _run([shell, ":memory:", "SELECT count(*) FROM sqlite_dbpage"], env=e)
    return p.returncode == 0


def ensure_recover_venv() -> Optional[str]:
    """The venv holding apsw (bundled SQLite library and shell); None if it cannot be made."""
    py = os.path.join(RECOVER_VENV, "bin", "python")
    if not os.path.exists(py):
        r = subprocess.run([sys.executable, "-m", "venv", RECOVER_VENV], capture_output=True)
        if r.returncode:
            return None
    chk = subprocess.run([py, "-c", "import apsw.sqlite_extra"], capture_output=True)
    if chk.returncode:
        r = subprocess.run([os.path.join(RECOVER_VENV, "bin", "pip"), "install", "-q", "apsw"],
                           capture_output=True, text=True)
        if r.returncode:
            return None
    return py


def _apsw_extra(py: str, name: str) -> Optional[str]:
    p = subprocess.run([py, "-c", "import apsw.sqlite_extra as x; print(x.path(%r))" % name],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


def _symbols(path: str, defined: bool) -> set:
    flag = "--defined-only" if defined else "--undefined-only"
    p = _run(["nm", "-D", flag, path])
    if p.returncode:
        raise OSError("nm failed on %s: %s" % (path, p.stderr.strip()))
    return {ln.split()[-1].split("@")[0] for ln in p.stdout.splitlines() if ln.split()}


def _build_shim(shell: str, lib: str) -> str:
    """LD_PRELOAD shim: stubs for symbols the shell needs that lib lacks, plus its source id."""
    os.makedirs(SHIM_DIR, exist_ok=True)
    missing = sorted(s for s in _symbols(shell, False) - _symbols(lib, True)
                     if s.startswith("sqlite3"))
    sysver = _run([shell, "--version"]).stdout.split()
    source_id = " ".join(sysver[1:4])  # the shell's SQLITE_SOURCE_ID (same package as its library)
    lines = ["/* generated by fleetops bench/_recover.py: stubs never used by .recover */",
             "#include <stdio.h>", "#include <stdlib.h>"]
    for s in missing:
        if s == "sqlite3_sourceid":
            continue
        lines.append('void %s(void){ fputs("recover shim: %s called\\n", stderr); abort(); }' % (s, s))
    lines.append('const char *sqlite3_sourceid(void){ return "%s"; }' % source_id)
    src = os.path.join(SHIM_DIR, "shim.c")
    so = os.path.join(SHIM_DIR, "libshim.so")
    text = "\n".join(lines) + "\n"
    if not (os.path.exists(so) and os.path.exists(src) and open(src).read() == text):
        with open(src, "w") as fh:
            fh.write(text)
        r = _run(["gcc", "-shared", "-fPIC", "-O2", "-o", so, src])
        if r.returncode:
            raise OSError("gcc failed: %s" % r.stderr.strip()[:300])
    libdir = os.path.join(SHIM_DIR, "lib")
    os.makedirs(libdir, exist_ok=True)
    link = os.path.join(libdir, "libsqlite3.so.0")
    if os.path.islink(link) and os.readlink(link) != lib:
        os.unlink(link)
    if not os.path.lexists(link):
        os.symlink(lib, link)
    return so


def find_recover(allow_install: bool = True) -> RecoverTool:
    tool = RecoverTool()
    # 1. user-given shell
    user = os.environ.get("FLEETOPS_RECOVER_SHELL")
    if user:
        why = _probe(user, {})
        if why is None:
            tool.shell, tool.description = user, "%s (FLEETOPS_RECOVER_SHELL)" % user
            tool.sqlite_version = _version(user, {})
            return tool
        tool.tried.append("FLEETOPS_RECOVER_SHELL=%s: %s" % (user, why))
    # 2. system sqlite3
    system = shutil.which("sqlite3")
    if system:
        why = _probe(system, {})
        ver = _version(system, {})
        if why is None:
            tool.shell, tool.sqlite_version = system, ver
            tool.description = "%s (SQLite %s)" % (system, ver)
            return tool
        dbp = "" if _has_dbpage(system, {}) else "; its library has no sqlite_dbpage (built without SQLITE_ENABLE_DBPAGE_VTAB)"
        tool.tried.append("system %s (SQLite %s): %s%s" % (system, ver, why, dbp))
    else:
        tool.tried.append("no sqlite3 shell on PATH")
    if not allow_install:
        return tool
    # 3. APSW's bundled shell
    py = ensure_recover_venv()
    if not py:
        tool.tried.append("could not create %s with apsw from PyPI" % RECOVER_VENV)
        return tool
    ashell = _apsw_extra(py, "sqlite3_shell")
    # the library the bundled tools link against (not an "extra" of its own)
    alib = os.path.join(os.path.dirname(ashell), "libsqlite3_tool.so") if ashell else None
    if alib and not os.path.exists(alib):
        alib = None
    if ashell:
        why = _probe(ashell, {})
        ver = _version(ashell, {})
        if why is None:
            tool.shell, tool.sqlite_version = ashell, ver
            tool.description = "apsw's bundled shell %s (SQLite %s)" % (ashell, ver)
            return tool
        tool.tried.append("apsw's bundled sqlite3_shell (SQLite %s, has sqlite_dbpage: %s): %s"
                          % (ver, _has_dbpage(ashell, {}), why))
    else:
        tool.tried.append("apsw ships no sqlite3_shell on this platform")
    # 4. system shell's recover code on apsw's bundled library
    if not (system and alib):
        tool.tried.append("no system shell or no apsw libsqlite3_tool to combine")
        return tool
    if not (shutil.which("gcc") and shutil.which("nm")):
        tool.tried.append("gcc/nm missing: cannot build the symbol shim for system shell + apsw library")
        return tool
    try:
        shim = _build_shim(system, alib)
    except OSError as exc:
        tool.tried.append("shim: %s" % exc)
        return tool
    env = {"LD_LIBRARY_PATH": os.path.join(SHIM_DIR, "lib"), "LD_PRELOAD": shim}
    why = _probe(system, env)
    ver = _version(system, env)
    if why is None and _has_dbpage(system, env):
        sysver = _run([system, "--version"]).stdout.split()[0]
        tool.shell, tool.env, tool.sqlite_version = system, env, ver
        tool.description = ("%s's .recover (shell %s, Debian) on SQLite %s from apsw's bundled "
                            "libsqlite3_tool.so (ENABLE_DBPAGE_VTAB), via LD_LIBRARY_PATH + stub shim"
                            % (system, sysver, ver))
        return tool
    tool.tried.append("system shell on apsw's library (SQLite %s): %s" % (ver, why or "no sqlite_dbpage"))
    return tool


if __name__ == "__main__":
    t = find_recover()
    for x in t.tried:
        print("rejected:", x)
    print("using:", t.description if t.available else "none")
