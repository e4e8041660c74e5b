"""The docs site builds with `mkdocs build --strict` (a broken link, a page missing from the
nav, a bad anchor or a failing reference generator fails the test command), and the pages it
builds load nothing from the network: no CDN script or stylesheet, no web font."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from tests.support.paths import REPO

EXTERNAL = re.compile(r'<(?:link|script|img|iframe)\b[^>]*\b(?:href|src)="(?:https?:)?//[^"]+"', re.I)
FONTS = ("fonts.googleapis.com", "fonts.gstatic.com")


def build(config, out):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(out)], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    p = build(REPO / "mkdocs.yml", out)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def test_the_site_builds_strict_with_the_generated_reference(site):
    for page in ("index.html", "getting-started.html", "runbooks.html", "reference/commands.html",
                 "reference/playbooks.html", "reference/audit-codes.html", "reference/exit-codes.html",
                 "reference/results-schema.html", "reference/ansible-compatibility.html", "ARCHITECTURE.html"):
        assert (site / page).is_file(), page
    assert "fleetops audit -i hosts.yml" in (site / "reference" / "commands.html").read_text()
    assert not (site / "_incoming").exists()
    compat = (site / "reference" / "ansible-compatibility.html").read_text()
    assert "listed as ansible-core lists it" in compat and "refused by both" in compat   # the oracle's rows


def test_the_site_loads_nothing_from_the_network(site):
    bad = []
    for p in site.rglob("*"):
        if p.suffix not in (".html", ".css"):
            continue
        text = p.read_text(errors="replace")
        bad += [f"{p.relative_to(site)}: {m}" for m in EXTERNAL.findall(text)]
        bad += [f"{p.relative_to(site)}: {f}" for f in FONTS if f in text]
    assert bad == []


def test_a_broken_link_fails_the_build(tmp_path):
    """The strict build is what catches it: the same config over a copy of docs/ with one bad link."""
    import shutil
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    (docs / "getting-started.md").write_text((docs / "getting-started.md").read_text()
                                             + "\nSee [nowhere](no-such-page.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((REPO / "mkdocs.yml").read_text().replace(
        "scripts/docs_reference.py", str(REPO / "scripts" / "docs_reference.py")))
    p = build(config, tmp_path / "site")
    assert p.returncode != 0
    assert "no-such-page.md" in p.stdout + p.stderr
