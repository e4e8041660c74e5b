"""Run a host-side payload (a module under fleetops/remote/) in one SSH round trip.

The payload and every `fleetops.remote.*` module it imports travel as one
compressed line on stdin; a short bootstrap, passed with `python3 -I -S -c`
(isolated and without site: payloads are stdlib-only, and site costs start-up
time on every call), imports them from memory, so nothing is installed or left on the host and the
host's python needs nothing but its stdlib. The result is JSON after a marker
that is unique per call, so stray output can never be mistaken for it.
"""
from __future__ import annotations

import ast
import base64
import json
import marshal
import os
import re
import shlex
import threading
import time
import uuid
import zlib
from typing import cast

import fleetops.remote
from fleetops.engine.connection.become import become_failure, become_wrap
from fleetops.engine.connection.transport import CommandResult, Transport
from fleetops.engine.module import Result, result
from fleetops.remote import PAYLOADS

REMOTE_PKG = "fleetops.remote"
REMOTE_DIR = os.path.dirname(os.path.abspath(fleetops.remote.__file__))
DEFAULT_PYTHONS = ("python3", "/usr/bin/python3", "/usr/libexec/platform-python")
NO_PYTHON = "FLEETOPS_NO_PYTHON"
TAIL_LINES = 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# What a payload lowers itself to unless told not to: it runs beside the host's own services
# (nice 10; the idle I/O class: its reads wait for every other process's).
LOW_PRIORITY = {"nice": 10, "io_class": 3, "io_level": 0}

# Python 3.8+ on the host; kept to constructs that also parse on old 3.x so an
# old interpreter reports its version instead of a SyntaxError.
BOOTSTRAP = r'''
import sys, os
M = @MARKER@
R = os.dup(1)
os.dup2(2, 1)
sys.stdout = sys.stderr
try:
    # JSON text without importing json, whose regular expressions cost a light payload a third
    # of its start-up: _json's own C encoder, as json.dumps(o, default=repr) uses it
    from _json import encode_basestring_ascii, make_encoder
    C = make_encoder({}, repr, encode_basestring_ascii, None, ":", ",", False, False, True)
except Exception:
    C = None
def F(o):
    # keys JSON cannot hold (a tuple, say) as their repr
    if isinstance(o, dict):
        return dict((k if k is None or isinstance(k, (str, int, float)) else repr(k), F(v)) for k, v in o.items())
    if isinstance(o, (list, tuple)):
        return [F(v) for v in o]
    return o
def J(o):
    if C is None:
        import json
        return json.dumps(F(o), default=repr)
    try:
        return "".join(C(o, 0))
    except TypeError:
        return "".join(C(F(o), 0))
def E(r):
    b = ("\n" + M + "\n" + J(r) + "\n").encode()
    while b:
        b = b[os.write(R, b):]
if sys.version_info < (3, 8):
    E({"failed": True, "changed": False, "msg": "python " + sys.version.split()[0] + " on host is too old; fleetops payloads need 3.8+"})
    sys.exit(0)
# marshal in (the line is code we execute anyway, so it is no less trusted than JSON would
# be); binascii, not base64 (which imports re)
import marshal, zlib, binascii
ModuleSpec = type(sys.__spec__)   # importlib.machinery's, without importing importlib
D = marshal.loads(zlib.decompress(binascii.a2b_base64(sys.stdin.buffer.readline())))
# the task's `environment`: for the payload and every program it starts
if D.get("env"):
    os.environ.update(D["env"])
# stdin is read: what the payload starts reads /dev/null, even where the channel's stdin stays open
N = os.open(os.devnull, os.O_RDONLY)
os.dup2(N, 0)
os.close(N)
def Z():
    # libc's syscall(2) from _ctypes itself: the ctypes package costs a light payload a sixth of
    # its start-up (its classes and struct), for one call; ctypes where _ctypes is not there.
    try:
        import _ctypes
        class F(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
        class H(object):
            _handle = _ctypes.dlopen(None, 0)
        return F(("syscall", H()))
    except (ImportError, AttributeError, TypeError):
        import ctypes
        return ctypes.CDLL(None).syscall
def Y(q):
    # Lower this process's CPU and I/O priority as asked (before any thread or child exists:
    # both inherit it), then read back the priority it really runs at.
    o = {"nice": None, "io_class": None, "io_level": None, "lowered": bool(q)}
    try:
        if q and os.getpriority(os.PRIO_PROCESS, 0) < q["nice"]:
            os.setpriority(os.PRIO_PROCESS, 0, q["nice"])
        o["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        pass
    n = {"x86_64": 251, "aarch64": 30, "riscv64": 30, "loongarch64": 30, "i686": 289, "i386": 289,
         "armv7l": 314, "armv6l": 314, "ppc64le": 273, "ppc64": 273, "s390x": 282}.get(os.uname()[4])
    if n is None:
        return o
    try:
        c = Z()
        if q:
            c(n, 1, 0, (q["io_class"] << 13) | q["io_level"])
        v = c(n + 1, 1, 0)
        if v >= 0:
            o["io_class"] = ("none", "realtime", "best-effort", "idle")[(v >> 13) & 3]
            o["io_level"] = v & 0x1fff
    except Exception:
        pass
    return o
Q = Y(D.get("priority"))
S = D["modules"]
P = set()
for n in S:   # every package that holds a shipped module
    while "." in n:
        n = n.rpartition(".")[0]
        P.add(n)
# A duck-typed finder/loader: importlib.abc would pull in typing (~50 ms per call on a host).
class L(object):
    def find_spec(self, name, path=None, target=None):
        if name in S or name in P:
            return ModuleSpec(name, self, origin="<fleetops>", is_package=name in P)
    def create_module(self, spec):
        return None
    def exec_module(self, mod):
        src = S.get(mod.__name__, "")
        fn = "<fleetops:" + mod.__name__ + ">"
        mod.__file__ = fn
        exec(compile(src, fn, "exec"), mod.__dict__)
sys.meta_path.insert(0, L())
try:
    __import__(D["entry"])
    r = sys.modules[D["entry"]].main(D["args"])
except Exception:
    import linecache, traceback
    for n in S:   # the sources, for the traceback's lines (only now: linecache costs start-up)
        f = "<fleetops:" + n + ">"
        linecache.cache[f] = (len(S[n]), None, S[n].splitlines(True), f)
    traceback.print_exc()
    sys.stderr.flush()
    sys.exit(1)
if not isinstance(r, dict):
    r = {"failed": True, "changed": False, "msg": "payload returned " + type(r).__name__ + ", not a dict"}
r.setdefault("host_priority", Q)
sys.stdout.flush()
E(r)
'''

_cache: dict[tuple[str, str], tuple[tuple, dict]] = {}
_cache_lock = threading.Lock()
# Building a bundle calls ast.parse, which CPython 3.11 before 3.11.8 (gh-106905) cannot
# run in two threads at once ("AST constructor recursion depth mismatch"): builds are
# serialised here; afterwards every call is a cache hit.
_build_lock = threading.Lock()


def _referenced(source: str, filename: str, name: str, is_pkg: bool) -> set[str]:
    """Dotted names (relative to fleetops.remote) that module `name` may import from the
    package, absolute or relative; a name that is not a module is skipped by the caller."""
    pkg = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.update(a.name[len(REMOTE_PKG) + 1:] for a in node.names if a.name.startswith(REMOTE_PKG + "."))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                mod = node.module or ""
                if mod != REMOTE_PKG and not mod.startswith(REMOTE_PKG + "."):
                    continue
                base = mod[len(REMOTE_PKG) + 1:]
            else:
                parts = pkg.split(".") if pkg else []
                if node.level - 1 > len(parts):
                    continue
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            if base:
                found.add(base)
            found.update(f"{base}.{a.name}" if base else a.name for a in node.names if a.name != "*")
    return found


def _locate(root: str, name: str) -> tuple[str | None, bool]:
    """(file, is a package) of dotted `name` under root, or (None, False)."""
    base = os.path.join(root, *name.split("."))
    if os.path.isfile(base + ".py"):
        return base + ".py", False
    init = os.path.join(base, "__init__.py")
    if os.path.isfile(init):
        return init, True
    return None, False


def resolve(name: str, root: str = REMOTE_DIR) -> str | None:
    """The dotted path (relative to fleetops.remote) of a payload given by its registered name
    (fleetops.remote.PAYLOADS) or its dotted path; None if there is no such module."""
    dotted = PAYLOADS.get(name, name) if isinstance(name, str) else ""
    if not all(_NAME.match(p) for p in dotted.split(".")):
        return None
    return dotted if _locate(root, dotted)[0] else None


def bundle_sources(module: str, root: str = REMOTE_DIR) -> dict[str, str]:
    """{dotted name: source} for payload `module` (a registered name or a dotted path under
    fleetops.remote), every fleetops.remote module it imports (transitively) and the packages
    that hold them."""
    rel = PAYLOADS.get(module, module) if isinstance(module, str) else ""
    if not all(_NAME.match(p) for p in rel.split(".")):
        raise ValueError(f"bad payload name {module!r}")
    key = (root, rel)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        stamp, mods = hit
        if all(_stamp(path) == st for path, st in stamp):
            return mods
    with _build_lock:
        return _build(rel, root, key)


def _build(module: str, root: str, key: tuple) -> dict[str, str]:
    mods: dict[str, str] = {}
    stamp = []
    todo = [module]
    while todo:
        name = todo.pop()
        dotted = f"{REMOTE_PKG}.{name}"
        if dotted in mods:
            continue
        path, is_pkg = _locate(root, name)
        if path is None:
            if name == module:
                raise FileNotFoundError(f"no payload named {module!r} ({os.path.join(root, *name.split('.'))}.py)")
            continue                    # `from fleetops.remote.x import y` where y is not a module
        with open(path, encoding="utf-8") as f:
            src = f.read()
        stamp.append((path, _stamp(path)))
        mods[dotted] = src
        if "." in name:
            todo.append(name.rpartition(".")[0])     # its package runs first on import
        todo.extend(n for n in _referenced(src, path, name, is_pkg) if all(_NAME.match(p) for p in n.split(".")))
    init = os.path.join(root, "__init__.py")
    if os.path.isfile(init):
        with open(init, encoding="utf-8") as f:
            mods[REMOTE_PKG] = f.read()
        stamp.append((init, _stamp(init)))
    with _cache_lock:
        _cache[key] = (tuple(stamp), mods)
    return mods


def _stamp(path: str):
    try:
        st = os.stat(path)
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None


def build_command(marker: str, python: str | None = None) -> tuple[str, list[str]]:
    """(POSIX sh command line, interpreters tried): find python, exec it with the bootstrap."""
    # its comments stay here: the host would tokenize them on every call
    boot = "\n".join(line for line in BOOTSTRAP.replace("@MARKER@", repr(marker)).splitlines()
                     if not line.lstrip().startswith("#"))
    # base64 keeps the -c argument one line of plain characters for any login shell
    code = "import binascii;exec(binascii.a2b_base64('%s'))" % base64.b64encode(boot.encode()).decode()
    qcode = shlex.quote(code)
    if python:
        words = shlex.split(python)
        first = shlex.quote(words[0])
        rest = "".join(" " + shlex.quote(w) for w in words[1:])
        probe = (f"if command -v {first} >/dev/null 2>&1; then exec {first}{rest} -I -S -c {qcode}; fi; ")
        tried = [python]
    else:
        cands = " ".join(shlex.quote(p) for p in DEFAULT_PYTHONS)
        probe = (f'for p in {cands}; do if command -v "$p" >/dev/null 2>&1; then '
                 f'exec "$p" -I -S -c {qcode}; fi; done; ')
        tried = list(DEFAULT_PYTHONS)
    return probe + f"echo {NO_PYTHON} >&2; exit 127", tried


def encode_input(modules: dict, entry: str, args: dict, low_priority: bool = False,
                 environment: dict | None = None) -> bytes:
    """The stdin line: marshal (format 4, read by every Python 3.4+) of plain JSON data. Through
    JSON first, so the payload sees exactly what JSON would give it (lists, str keys, plain str
    for templated strings) and anything JSON cannot carry fails here, on the controller.
    `low_priority`: the payload lowers itself to LOW_PRIORITY before it runs; `environment`: set
    in its os.environ first (on stdin, never on the command line)."""
    doc = json.loads(json.dumps({"modules": modules, "entry": entry, "args": args,
                                 "priority": LOW_PRIORITY if low_priority else None, "env": environment or None}))
    return base64.b64encode(zlib.compress(marshal.dumps(doc, 4), 6)) + b"\n"


def _tail(data: bytes, lines: int = TAIL_LINES, limit: int = 4000) -> str:
    text = data.decode("utf-8", errors="replace").rstrip()
    return "\n".join(text.splitlines()[-lines:])[-limit:]


def _failed(msg: str, **extra) -> Result:
    return cast(Result, result(failed=True, msg=msg, **extra))


def run_payload(transport: Transport, module: str, args: dict, python: str | None = None,
                become_user: str | None = None, timeout: float | None = None,
                low_priority: bool = True, environment: dict | None = None) -> Result:
    """Run payload `module`'s main(args) (a registered name or a dotted path under
    fleetops.remote) on the transport's host; returns its result.

    Payload errors come back as failed results; only a lost connection raises (Unreachable).
    The payload runs at LOW_PRIORITY unless `low_priority` is false; its result's
    `host_priority` says what it ran at.
    """
    try:
        modules = bundle_sources(module)
    except (OSError, ValueError, SyntaxError) as e:
        return _failed(f"cannot bundle payload {module}: {e}", payload_seconds=0.0)
    return run_modules(transport, modules, f"{REMOTE_PKG}.{PAYLOADS.get(module, module)}", args, python=python,
                       become_user=become_user, timeout=timeout, label=module, low_priority=low_priority,
                       environment=environment)


def run_modules(transport: Transport, modules: dict, entry: str, args: dict, python: str | None = None,
                become_user: str | None = None, timeout: float | None = None, label: str | None = None,
                low_priority: bool = True, environment: dict | None = None) -> Result:
    """Lower level of run_payload: ship an explicit {dotted name: source} bundle; `label` names
    the payload in messages (default: the entry module's last name)."""
    if python is None:
        python = transport.params.python
    if timeout is None:
        timeout = transport.params.command_timeout
    label = label or entry.rsplit(".", 1)[-1]
    marker = f"--fleetops-result-{uuid.uuid4().hex}--"
    try:
        stdin = encode_input(modules, entry, args, low_priority=low_priority, environment=environment)
    except (TypeError, ValueError) as e:
        return _failed(f"payload {label}: arguments are not JSON-serialisable: {e}", payload_seconds=0.0)
    command, tried = build_command(marker, python)
    command = become_wrap(command, become_user)
    started = time.monotonic()
    res = transport.run_payload(command, stdin, timeout=timeout)
    seconds = round(time.monotonic() - started, 4)
    why = become_failure(become_user, res.rc, res.stderr)
    if why and f"\n{marker}\n".encode() not in res.stdout:
        out = _failed(f"payload {label} failed (rc {res.rc}): {why}", rc=res.rc, stderr=_tail(res.stderr))
    else:
        out = _parse(res, marker, label, tried, timeout)
    out["payload_seconds"] = seconds
    return out


def _parse(res: CommandResult, marker: str, label: str, tried: list, timeout) -> Result:
    if res.timed_out:
        return _failed(f"payload {label} timed out after {timeout:g}s", stderr=_tail(res.stderr))
    if res.rc == 127 and NO_PYTHON.encode() in res.stderr:
        return _failed(f"no python3 on host (tried {', '.join(tried)})")
    sep = f"\n{marker}\n".encode()
    at = res.stdout.rfind(sep)
    if at < 0:
        tail = _tail(res.stderr)
        last = tail.splitlines()[-1] if tail else ""
        if res.rc != 0:
            return _failed(f"payload {label} failed (rc {res.rc}): {last or 'no output'}", rc=res.rc,
                           stderr=tail)
        excerpt = res.stdout[-400:].decode("utf-8", errors="replace")
        return _failed(f"payload {label} returned no result (rc 0)", rc=res.rc, stderr=tail,
                       stdout_excerpt=excerpt)
    body = res.stdout[at + len(sep):]
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        excerpt = body[:400].decode("utf-8", errors="replace")
        return _failed(f"payload {label} result is not JSON: {excerpt!r}", stderr=_tail(res.stderr))
    if not isinstance(data, dict):
        return _failed(f"payload {label} result is {type(data).__name__}, not an object")
    data.setdefault("changed", False)
    data.setdefault("failed", False)
    data.setdefault("skipped", False)
    data.setdefault("msg", "")
    return cast(Result, data)
