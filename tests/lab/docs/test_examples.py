"""Every shell example in README.md and docs/ runs, against the lab, and where a page shows
output its shape is what the command prints today.

- A ```sh block is run line by line (a comment after `#` is the page's, not the shell's) in one
  working directory per test, in page order, each distinct command once: `INV` is an inventory
  of two lab hosts holding a healthy store of the real hermes-agent, `HOST` the first of them.
  Exit 0 is expected, or 5 from `fleetops audit`; no `fleetops: error:` line.
- A ```text block whose lines start with `$ fleetops …` shows a command and its output: the
  command is run the same way (the demo's inventory and host names mapped onto the lab's) and
  every line of the shown output that names a task, a table header or the recap must appear in
  what it prints (values, hosts and timings may differ; `…` elides).
- A ```shell block installs something or is the test command itself; each of its commands must
  be one of NOT_RUN, with the reason it is not run here.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.cli_run import write_inventory
from tests.support.paths import REPO
from tests.support.seed import Seeder, find_venv

NOT_RUN = {
    "bash scripts/demo.sh": "installs packages and starts a lab of its own; measured by hand (README)",
    "bash scripts/test.sh": "the test command itself",
    "pipx install .": "installs; tests/lab/install/ installs the built wheel and runs it outside the checkout",
    "python3 -m venv ~/.venvs/fleetops && ~/.venvs/fleetops/bin/pip install .": "as pipx install .",
    "pip install '.[postgresql]'": "installs; tests/lab/postgres/ runs the PostgreSQL store",
}
FENCE = re.compile(r"^```(\w*)\s*$")
SHOWN = re.compile(r"^(TASK .*|Recap|host\s+(profile|ok)\b.*|Hermes state\.db audit)\s*$")
DEMO = {"fleetops-demo/lab/inventory.yml": "INV", "-l lab01": "-l HOST"}


def pages() -> list[Path]:
    docs = sorted(p for p in (REPO / "docs").rglob("*.md") if "_incoming" not in p.parts)
    first = [REPO / "docs" / "getting-started.md"]
    return [REPO / "README.md", *first, *[p for p in docs if p not in first]]


def blocks(path: Path):
    """(info string, [lines]) of each fenced block of a page."""
    lang, body = None, []
    for line in path.read_text().splitlines():
        m = FENCE.match(line)
        if m and lang is None:
            lang, body = m.group(1), []
        elif line.startswith("```") and lang is not None:
            yield lang, body
            lang = None
        elif lang is not None:
            body.append(line)


def commands(body) -> list[str]:
    out = []
    for line in body:
        cmd = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if cmd:
            out.append(cmd)
    return out


def shown(body) -> list[tuple[str, list[str]]]:
    """[(command, the output lines the page shows under it)] of a text block of `$ ` lines."""
    out: list = []
    for line in body:
        if line.startswith("$ "):
            out.append((line[2:].strip(), []))
        elif out:
            out[-1][1].append(line)
    return out


def _norm(line: str) -> str:
    return " ".join(line.split())


@pytest.fixture(scope="module")
def work(lab, std_src, tmp_path_factory):
    """Two lab hosts, each with a healthy store written by hermes-agent's own SessionDB (no holders)."""
    d = tmp_path_factory.mktemp("docs-examples")
    seeder = Seeder(lab, d / "seed-registry.json", venv=find_venv())
    for h in lab.hosts[:2]:
        seeder.wipe(h["name"])
        seeder.seed_image(h["name"], std_src)
    inv = write_inventory(d / "inventory.yml", lab, [0, 1])
    yield d, inv, lab.hosts[0]["name"]
    run("fleetops run backup-units -i INV -e backup_state=absent", (d, inv, lab.hosts[0]["name"]))  # the crontab lines
    for h in lab.hosts[:2]:
        seeder.wipe(h["name"])


def run(cmd: str, work) -> subprocess.CompletedProcess:
    d, inv, host = work
    for a, b in DEMO.items():
        cmd = cmd.replace(a, b)
    cmd = re.sub(r"\bINV\b", inv, re.sub(r"\bHOST\b", host, cmd))
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
               COLUMNS="80")
    env.pop("FLEETOPS_DEBUG", None)
    return subprocess.run(["bash", "-c", cmd], cwd=d, env=env, capture_output=True, text=True, timeout=900)


def _check(cmd, p):
    ok = (0, 5) if re.match(r"fleetops audit\b", cmd) else (0,)
    assert p.returncode in ok and "fleetops: error:" not in p.stderr, \
        f"{cmd}\nexit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"


def test_every_shell_block_is_run_or_says_why_not():
    for page in pages():
        for lang, body in blocks(page):
            if lang == "shell":
                assert set(commands(body)) <= set(NOT_RUN), (page, commands(body))
            assert lang in ("sh", "shell", "text", "sql", "yaml", "ini", "json", ""), (page, lang)


def test_the_sh_examples_run(work):
    done = set()
    for page in pages():
        for lang, body in blocks(page):
            if lang != "sh":
                continue
            for cmd in commands(body):
                if cmd not in done:
                    done.add(cmd)
                    _check(cmd, run(cmd, work))
    assert len(done) >= 15


def test_the_shown_output_is_what_the_command_prints(work):
    checked = 0
    for page in pages():
        for lang, body in blocks(page):
            if lang != "text":
                continue
            for cmd, lines in shown(body):
                if not cmd.startswith("fleetops ") or cmd.endswith("--help"):
                    continue    # the reference's --help blocks are generated from the parser itself
                p = run(cmd, work)
                _check(cmd, p)
                printed = {_norm(ln) for ln in p.stdout.splitlines()}
                want = [_norm(ln) for ln in lines if SHOWN.match(ln.strip())]
                missing = [ln for ln in want if ln not in printed]
                assert not missing, f"{page.name}: {cmd}: not printed: {missing}\n{p.stdout[-3000:]}"
                checked += len(want)
    assert checked >= 10
