"""One playbook run on the lab hosts by ansible-core 2.19 and by fleetops, each read back as
(task, host) -> [(outcome, message)], so a test compares the two runs whole.

ansible-core's `json` callback lives in a collection, so its default output with `-v` and
one-line JSON results is read instead; a loop's items are folded into one result, as fleetops
reports a loop. A message is a debug or fail `msg`, as text (ansible-core 2.19 keeps a
`"{{ expr }}"` message's native type, fleetops shows it as text).
"""
from __future__ import annotations

import json
import os
import re

from fleetops.engine.connection.ssh import SSHTransport
from fleetops.engine.executor import RunOptions, run_playbook
from fleetops.engine.inventory import load_inventory
from fleetops.engine.lint import check_playbook
from fleetops.engine.playbook import load_playbook
from fleetops.engine.recap import result_status
from fleetops.engine.validate import validate
from fleetops.extensions import registry
from tests.support import oracle
from tests.support.playbook_run import Recorder


def outcome(r: dict) -> str:
    """As ansible-playbook's result line words it: an ignored or rescued failure is still `fatal`."""
    status = result_status(r)
    return "failed" if status in ("rescued", "ignored") else status


# a delegated task's host is printed "host -> delegate(address)": the result is the host's
_LINE = re.compile(r"^(ok|changed|skipping|fatal): \[([^\]]+?)(?: -> [^\]]+)?\](?:: FAILED!)?"
                   r"(?: => (\(item=.*?\) => )?(\{.*\}))?$")
_INCLUDED = re.compile(r"^included: .+? for ((?:[^ ,=]+)(?:, [^ ,=]+)*)(?: => \(item=.*\))?$")
_MSG_ONLY = {"msg", "changed", "_ansible_verbose_always", "_ansible_no_log", "failed"}
_FLEETOPS_ALWAYS = {"skipped", "host_priority", "duration", "payload_seconds", "ignored", "rescued", "unreachable"}


def ansible_results(playbook: str, inventory: str, known_hosts: str, ok_rc=(0,), extra=()) -> dict:
    """ansible-playbook -v on the lab: (task, host) -> [(outcome, debug/fail msg)]."""
    ssh_args = (f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
                "-o ControlMaster=no -o ControlPath=none")
    project = os.path.dirname(playbook)
    p = oracle.run("ansible-playbook", "-v", "-i", inventory, playbook, *extra, cwd=project,
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False",
                        "ANSIBLE_SSH_ARGS": ssh_args, "ANSIBLE_HOST_KEY_CHECKING": "True"})
    assert p.returncode in ok_rc, (p.stdout + p.stderr)[-3000:]
    out: dict = {}
    items: dict = {}
    task = None
    for line in p.stdout.splitlines():
        head = re.match(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \**$", line)
        if head:
            task = head.group(1)
            continue
        inc = _INCLUDED.match(line)
        if inc and task is not None:       # each file a host includes: an ok result of the include
            for host in inc.group(1).split(", "):
                out.setdefault((task, host), []).append(("ok", None))
            continue
        m = _LINE.match(line)
        if not m or task is None:
            continue
        status, host, item, body = m.groups()
        result = json.loads(body) if body else {}
        got = {"ok": "ok", "changed": "changed", "skipping": "skipped", "fatal": "failed"}[status]
        if item:
            items.setdefault((task, host), []).append(got)
            continue
        if result.get("results") and (task, host) in items:
            outcomes = items.pop((task, host))
            got = ("failed" if "failed" in outcomes else "changed" if "changed" in outcomes
                   else "skipped" if set(outcomes) == {"skipped"} else "ok")
        msg = result.get("msg") if "msg" in result and set(result) <= _MSG_ONLY else None
        out.setdefault((task, host), []).append((got, None if msg is None or got == "skipped" else str(msg)))
    for key, outcomes in items.items():     # a loop whose summary line was not printed
        got = "failed" if "failed" in outcomes else "changed" if "changed" in outcomes else "ok"
        out.setdefault(key, []).append((got, None))
    return out


def fleetops_results(playbook: str, inventory: str, extra_vars: dict | None = None) -> dict:
    """The same playbook run by fleetops (validated first, as the CLI does), read the same way."""
    inv = load_inventory(inventory)
    book = load_playbook(playbook, registry().modules)
    validate(book, inv, extra_vars or {}, registry().modules)
    check_playbook(book, registry().modules)
    rec = Recorder()
    run_playbook(book, inv, RunOptions(results_dir=os.path.join(os.path.dirname(playbook), "runs"),
                                       extra_vars=extra_vars or {}),
                 rec, "parity", registry().modules, transport_factory=SSHTransport)
    out: dict = {}
    for host, _pi, _ti, name, module, res, *_ in rec.of("host_result"):
        if module == "meta":
            continue          # ansible-core prints no result line for a meta task
        msg = res.get("msg") if module in ("debug", "fail") and not res.get("results") else None
        if msg is None and outcome(res) == "failed" and set(res) <= _MSG_ONLY | _FLEETOPS_ALWAYS:
            msg = res.get("msg")    # a failure that says only why, as ansible-playbook prints it
        msg = None if msg is None or outcome(res) == "skipped" else str(msg)
        out.setdefault((name, host), []).append((outcome(res), msg))
    return out


def write_project(directory, files: dict) -> str:
    """Write {relative path: text} under directory; returns the directory."""
    import textwrap
    for rel, text in files.items():
        path = os.path.join(str(directory), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(textwrap.dedent(text))
    return str(directory)


def lab_inventory(lab, path: str, host_vars: dict | None = None) -> str:
    """The lab's inventory with extra variables on some hosts ({host: {var: value}}), written to path."""
    import yaml
    with open(lab.inventory_path) as fh:
        inv = yaml.safe_load(fh)
    hosts = inv["all"]["children"]["lab"]["hosts"]
    for host, extra in (host_vars or {}).items():
        hosts[host] = {**(hosts[host] or {}), **extra}
    with open(path, "w") as fh:
        yaml.safe_dump(inv, fh, sort_keys=False)
    return path


def task_and_said(name: str, body: str, show: str, extra: str = "") -> str:
    """Playbook text: a task named `name` (`body`: its module's lines, indented 6 spaces; `extra`:
    more task keys) registered as `r`, then a debug task "NAME said" whose msg is `show`, a
    template over `r`; so a test compares what each tool's module returned, value by value."""
    return (f"\n    - name: {name}\n{body}      register: r\n{extra}"
            f"\n    - name: \"{name} said\"\n      debug:\n        msg: \"{show}\"\n")
