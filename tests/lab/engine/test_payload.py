"""The payload runner: bundling, the in-memory bootstrap, and results over real SSH."""
import os
import platform
import threading
import time
import uuid

import pytest

from fleetops.engine import payload as payload_mod
from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.payload import bundle_sources, run_modules, run_payload
from fleetops.engine.connection.ssh import SSHTransport


@pytest.fixture
def conn(lab):
    t = SSHTransport(lab.ssh_params(lab.hosts[0]))
    t.connect()
    yield t
    t.close()


def _mods(**sources):
    return {f"fleetops.remote.{k}": v for k, v in sources.items()}


ECHO = "def main(args):\n    return {'changed': False, 'failed': False, 'msg': '', 'echo': args}\n"


@pytest.mark.lab
def test_facts_on_every_host_in_parallel(lab):
    results, errors = {}, []

    def one(h):
        try:
            t = SSHTransport(lab.ssh_params(h))
            t.connect()
            results[h["name"]] = run_payload(t, "facts", {})
            t.close()
        except Exception as e:                      # reported below, with the host
            errors.append((h["name"], e))

    threads = [threading.Thread(target=one, args=(h,)) for h in lab.hosts]
    started = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - started
    print(f"\nconnect + facts payload on {len(lab.hosts)} hosts in parallel threads: {elapsed:.2f}s")
    assert not errors
    for h in lab.hosts:
        r = results[h["name"]]
        assert r["failed"] is False and r["changed"] is False, r
        f = r["ansible_facts"]
        assert f["ansible_user_id"] == h["user"]
        assert f["ansible_user_dir"] == h["home"]
        assert f["ansible_architecture"] == platform.machine()
        assert f["ansible_system"] == "Linux"
        assert f["ansible_python"].startswith("/")
        assert f["ansible_sqlite_version"].count(".") == 2
        assert isinstance(f["fleetops_sqlite_fts5"], bool)
        assert isinstance(r["payload_seconds"], float)


@pytest.mark.lab
def test_traceback_becomes_failed_result_with_stderr_tail(conn):
    src = "import sys\nprint('noise')\n\ndef main(args):\n    helper = args['x']\n    return helper / 0\n"
    r = run_modules(conn, _mods(boom=src), "fleetops.remote.boom", {"x": 1})
    assert r["failed"] is True
    assert r["msg"] == "payload boom failed (rc 1): ZeroDivisionError: division by zero"
    assert "Traceback (most recent call last)" in r["stderr"]
    assert "return helper / 0" in r["stderr"]                 # source line from the shipped module
    assert "noise" in r["stderr"]


@pytest.mark.lab
def test_hostile_args_arrive_as_data(conn):
    pwned = f"/tmp/pwned-{uuid.uuid4().hex}"
    evil = f"$(touch {pwned})`touch {pwned}`'\"\n--rm -rf / ;|&><* ${{HOME}} \\ \u00e9\u2603"
    args = {"v": evil, evil: [evil, "-x", {"--y": evil}], "n": 3, "f": 1.5, "b": None}
    r = run_modules(conn, _mods(echo=ECHO), "fleetops.remote.echo", args)
    assert r["failed"] is False and r["echo"] == args
    assert not os.path.exists(pwned)


@pytest.mark.lab
def test_stray_output_cannot_corrupt_the_result(conn):
    src = ("import os, subprocess, sys\n"
           "def main(args):\n"
           "    print('{\"failed\": true}')\n"
           "    os.write(1, b'\\n--fleetops-result-fake--\\n{}\\n')\n"
           "    subprocess.run(['echo', 'child output'])\n"
           "    sys.__stdout__.write('more')\n"
           "    return {'changed': True, 'msg': 'ok'}\n")
    r = run_modules(conn, _mods(noisy=src), "fleetops.remote.noisy", {})
    assert (r["failed"], r["changed"], r["msg"]) == (False, True, "ok")


@pytest.mark.lab
def test_siblings_are_shipped_and_imported_from_memory(conn, tmp_path):
    (tmp_path / "__init__.py").write_text('"""pkg"""\n')
    (tmp_path / "a.py").write_text("from fleetops.remote import b\nimport json\n"
                                   "def main(args):\n    return {'v': b.value(), 'file': __file__}\n")
    (tmp_path / "b.py").write_text("import fleetops.remote.c as c\ndef value():\n    return c.value() + 1\n")
    (tmp_path / "c.py").write_text("from . import d\nfrom .e import E\ndef value():\n    return d.D + E\n")
    (tmp_path / "d.py").write_text("D = 40\n")
    (tmp_path / "e.py").write_text("E = 1\n")
    (tmp_path / "unused.py").write_text("raise SystemExit('must not be shipped')\n")
    mods = bundle_sources("a", root=str(tmp_path))
    assert sorted(mods) == ["fleetops.remote", "fleetops.remote.a", "fleetops.remote.b",
                            "fleetops.remote.c", "fleetops.remote.d", "fleetops.remote.e"]
    r = run_modules(conn, mods, "fleetops.remote.a", {})
    assert r["failed"] is False and r["v"] == 42 and r["file"] == "<fleetops:fleetops.remote.a>"
    # the cache notices an edited sibling
    (tmp_path / "d.py").write_text("D = 400  # edited\n")
    assert bundle_sources("a", root=str(tmp_path))["fleetops.remote.d"].startswith("D = 400")


@pytest.mark.lab
def test_sub_packages_are_shipped_with_their_init(conn, tmp_path):
    """A payload in a sub-package carries its package's __init__ and every sub-package module it
    imports (absolute or relative, one or two levels up), and nothing else."""
    (tmp_path / "__init__.py").write_text("PAYLOADS = {}\n")
    for pkg, init in (("app", "INIT = 'app'\n"), ("lib", "")):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(init)
    (tmp_path / "app" / "entry.py").write_text(
        "from . import helper\nfrom ..lib.deep import D\nfrom fleetops.remote import app\n"
        "def main(args):\n    return {'v': helper.H + D, 'init': app.INIT, 'pkg': __package__}\n")
    (tmp_path / "app" / "helper.py").write_text("from fleetops.remote.lib import shallow\nH = shallow.S\n")
    (tmp_path / "app" / "unused.py").write_text("raise SystemExit('must not be shipped')\n")
    (tmp_path / "lib" / "shallow.py").write_text("S = 40\n")
    (tmp_path / "lib" / "deep.py").write_text("D = 2\n")
    mods = bundle_sources("app.entry", root=str(tmp_path))
    assert sorted(mods) == ["fleetops.remote", "fleetops.remote.app", "fleetops.remote.app.entry",
                            "fleetops.remote.app.helper", "fleetops.remote.lib", "fleetops.remote.lib.deep",
                            "fleetops.remote.lib.shallow"]
    r = run_modules(conn, mods, "fleetops.remote.app.entry", {})
    assert r["failed"] is False and (r["v"], r["init"], r["pkg"]) == (42, "app", "fleetops.remote.app"), r


def test_payloads_are_found_by_registered_name_or_dotted_path():
    """Every registered name resolves to a module with main(); a dotted path is a name too."""
    import fleetops.remote
    for name, dotted in fleetops.remote.PAYLOADS.items():
        assert payload_mod.resolve(name) == dotted, name
        assert payload_mod.resolve(dotted) == dotted
        assert "def main(" in bundle_sources(name)[f"fleetops.remote.{dotted}"], name
    assert payload_mod.resolve("sqlite.salvage") == "sqlite.salvage"   # a package
    for bad in ("no_such_payload", "../x", "host..ping", "", "host.durable.x"):
        assert payload_mod.resolve(bad) is None, bad


@pytest.mark.lab
def test_nothing_is_written_on_the_host(lab, conn):
    home = lab.hosts[0]["home"]

    def snapshot():
        found = set()
        for top in (home, "/tmp"):
            for d, dirs, files in os.walk(top):
                dirs[:] = [x for x in dirs if not os.path.ismount(os.path.join(d, x))]  # a chroot's /proc
                for n in dirs + files:
                    p = os.path.join(d, n)
                    try:
                        if os.lstat(p).st_uid == os.stat(home).st_uid:
                            found.add(p)
                    except OSError:
                        pass
        return found

    before = snapshot()
    assert run_payload(conn, "facts", {})["failed"] is False
    assert snapshot() == before


@pytest.mark.lab
def test_missing_python_is_a_failed_result(conn):
    r = run_payload(conn, "facts", {}, python="/nonexistent/python3")
    assert r["failed"] is True and r["msg"] == "no python3 on host (tried /nonexistent/python3)"
    r = run_payload(conn, "facts", {}, python="/usr/bin/env python3")      # multi-word interpreter
    assert r["failed"] is False and r["ansible_facts"]["ansible_python_version"]


@pytest.mark.lab
def test_timeout_is_a_failed_result(conn):
    src = "import time\ndef main(args):\n    time.sleep(60)\n"
    r = run_modules(conn, _mods(slow=src), "fleetops.remote.slow", {}, timeout=1)
    assert r["failed"] is True and r["msg"] == "payload slow timed out after 1s"
    assert run_payload(conn, "facts", {})["failed"] is False     # the connection survives


@pytest.mark.lab
def test_bad_results_are_failed_results(conn):
    r = run_modules(conn, _mods(lst="def main(a):\n    return [1]\n"), "fleetops.remote.lst", {})
    assert r["failed"] is True and r["msg"] == "payload returned list, not a dict"
    r = run_modules(conn, _mods(quit="import os\ndef main(a):\n    os._exit(0)\n"), "fleetops.remote.quit", {})
    assert r["failed"] is True and r["msg"] == "payload quit returned no result (rc 0)"
    r = run_modules(conn, _mods(obj="def main(a):\n    return {'o': object()}\n"), "fleetops.remote.obj", {})
    assert r["failed"] is False and r["o"].startswith("<object object")
    r = run_modules(conn, _mods(syn="def main(:\n"), "fleetops.remote.syn", {})
    assert r["failed"] is True and "SyntaxError" in r["msg"]


@pytest.mark.lab
def test_become_failure_is_a_failed_result(conn):
    r = run_payload(conn, "facts", {}, become_user="root")       # the lab has no (passwordless) sudo
    assert r["failed"] is True and r["msg"].startswith("payload facts failed (rc ")


def test_input_errors_are_failed_results():
    t = LocalTransport()
    r = run_payload(t, "no_such_payload", {})
    assert r["failed"] is True and "no payload named 'no_such_payload'" in r["msg"]
    r = run_payload(t, "../errors", {})
    assert r["failed"] is True and "bad payload name" in r["msg"]
    r = run_payload(t, "facts", {"x": object()})
    assert r["failed"] is True and "not JSON-serialisable" in r["msg"]


def test_facts_over_local_transport():
    r = run_payload(LocalTransport(), "facts", {})
    assert r["failed"] is False
    assert r["ansible_facts"]["ansible_user_uid"] == os.getuid()
    assert r["ansible_facts"]["fleetops_sqlite_fts5"] in (True, False)


def test_command_line_is_one_line_and_quoted():
    cmd, tried = payload_mod.build_command("--m--", python="'/opt/py thon/bin/python3' -X utf8")
    assert "\n" not in cmd
    assert "exec '/opt/py thon/bin/python3' -X utf8 -I -S -c 'import binascii;" in cmd
    cmd, tried = payload_mod.build_command("--m--")
    assert tried == ["python3", "/usr/bin/python3", "/usr/libexec/platform-python"]
    assert "\n" not in cmd


TRICKY = ("import sys\n"
          "class O:\n"
          "    def __repr__(self):\n"
          "        return 'O<\\u2603>'\n"
          "def main(args):\n"
          "    if args.get('use_json'):\n"
          "        import json\n"
          "    r = {'changed': False, 'failed': False, 'msg': 'm\\n\"q\"\\\\ \\x00\\x1f \\u00e9 \\U0001f600 \\udcff',\n"
          "         'nums': [0, -1, 2 ** 70, 1.5, -0.0, 1e-300, float('nan'), float('inf'), float('-inf')],\n"
          "         'flags': [True, False, None], 'tup': (1, 'a'), 'nested': {'a': {'b': [[], {}]}},\n"
          "         1: 'int key', 2.5: 'float key', False: 'bool key', None: 'none key',\n"
          "         'obj': O(), 'json_loaded': 'json' in sys.modules, 'args': args}\n"
          "    return r\n")


@pytest.mark.parametrize("use_json", [False, True])
def test_result_writer_without_json_matches_json_dumps(use_json):
    """The bootstrap writes results without importing json (start-up time); what reaches the
    controller must be exactly what json.dumps(default=repr) would have sent."""
    import json
    import math
    r = run_modules(LocalTransport(), _mods(tricky=TRICKY), "fleetops.remote.tricky",
                    {"use_json": use_json, "s": "\u2603", "l": [1, None]})
    assert r["failed"] is False, r
    assert r["json_loaded"] is use_json          # both writers really ran
    assert r["msg"] == 'm\n"q"\\ \x00\x1f \u00e9 \U0001f600 \udcff'
    nums = r["nums"]
    assert nums[:6] == [0, -1, 2 ** 70, 1.5, -0.0, 1e-300] and math.isnan(nums[6])
    assert nums[7:] == [float("inf"), float("-inf")]
    assert (r["flags"], r["tup"], r["nested"]) == ([True, False, None], [1, "a"], {"a": {"b": [[], {}]}})
    assert (r["1"], r["2.5"], r["false"], r["null"]) == ("int key", "float key", "bool key", "none key")
    assert r["obj"] == "O<\u2603>"
    assert r["args"] == {"use_json": use_json, "s": "\u2603", "l": [1, None]}
    assert json.loads(json.dumps(r["args"])) == r["args"]


# Reads the payload process's own priority the way an operator would: nice from /proc/<pid>/stat
# (field 19), the I/O class and level from util-linux `ionice -p <pid>` (the kernel has no /proc
# file for it), in the same process the bootstrap lowered.
PRIORITY_PROBE = '''
import os, subprocess
def main(args):
    with open("/proc/%d/stat" % os.getpid()) as f:
        nice = int(f.read().rsplit(")", 1)[1].split()[16])
    io = subprocess.run(["ionice", "-p", str(os.getpid())], stdout=subprocess.PIPE,
                        universal_newlines=True).stdout.strip()
    return {"changed": False, "failed": False, "msg": "", "stat_nice": nice, "ionice": io}
'''


@pytest.mark.lab
@pytest.mark.parametrize("low", [True, False], ids=["low_priority", "login_priority"])
def test_payload_runs_at_the_priority_it_reports(conn, low):
    r = run_modules(conn, _mods(prio=PRIORITY_PROBE), "fleetops.remote.prio", {}, low_priority=low)
    assert r["failed"] is False, r
    rep = r["host_priority"]
    assert rep["lowered"] is low
    assert rep["nice"] == r["stat_nice"]
    # what ionice prints: "idle" (its level is meaningless), "best-effort: prio 4", "none: prio 0"
    assert r["ionice"].split(":")[0] == rep["io_class"], r["ionice"]
    if low:
        assert (rep["nice"], rep["io_class"]) == (payload_mod.LOW_PRIORITY["nice"], "idle")
    else:
        assert rep["nice"] < payload_mod.LOW_PRIORITY["nice"] and rep["io_class"] != "idle"

