"""A local RPM repository for the dnf tests, built here by rpmbuild and createrepo_c: noarch
packages that install one small file each, in the versions a test asks for."""
from __future__ import annotations

import os
import shutil
import subprocess

TOOLS = ("rpmbuild", "createrepo_c", "dnf", "rpm")

SPEC = """Name: {name}
Version: {version}
Release: 1
Summary: a package of the fleetops tests
License: MIT
BuildArch: noarch
{requires}%description
What the dnf tests install, upgrade and remove.
%install
mkdir -p %{{buildroot}}/usr/share/{name}
echo {version} > %{{buildroot}}/usr/share/{name}/version
%files
/usr/share/{name}/version
"""


def available() -> str | None:
    """None when a repository can be built and used here, else why not."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} missing: scripts/setup.sh installs Debian's rpm, createrepo-c and dnf"
    return None


def build(directory: str, packages: dict, requires: dict | None = None) -> str:
    """{name: [versions]} built into directory/repo, indexed; returns the repository's path.
    `requires`: {name: the package it needs}."""
    top = os.path.join(directory, "rpmbuild")
    repo = os.path.join(directory, "repo")
    os.makedirs(repo, exist_ok=True)
    for name, versions in packages.items():
        for version in versions:
            spec = os.path.join(directory, f"{name}-{version}.spec")
            with open(spec, "w") as fh:
                need = (requires or {}).get(name)
                fh.write(SPEC.format(name=name, version=version, requires=f"Requires: {need}\n" if need else ""))
            subprocess.run(["rpmbuild", "--define", f"_topdir {top}", "--nodeps", "-bb", spec],
                           check=True, capture_output=True)
    for dirpath, _dirs, files in os.walk(os.path.join(top, "RPMS")):
        for f in files:
            shutil.copy(os.path.join(dirpath, f), repo)
    subprocess.run(["createrepo_c", "-q", repo], check=True, capture_output=True)
    return repo
