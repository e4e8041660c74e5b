"""`dnf` on a host with a real dnf 4 and rpm (the systemd host of tests/support/systemd_host.py,
whose /usr carries this machine's dnf) and a local repository built by rpmbuild and
createrepo_c (tests/support/rpm_repo.py), run by ansible-core 2.19's dnf module and by fleetops
with the same playbook and `become: true`: every task's outcome, `changed`, `msg`, `results` and
`failures`, and rpm's database afterwards, must agree. The packages are removed before each
tool runs."""
from __future__ import annotations

import os

import pytest

from tests.support import lab_parity, oracle, rpm_repo, systemd_host

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh"),
              pytest.mark.skipif(systemd_host.available() is not None, reason=str(systemd_host.available())),
              pytest.mark.skipif(rpm_repo.available() is not None, reason=str(rpm_repo.available()))]

PACKAGES = {"fotest-hello": ["1.0", "1.1"], "fotest-other": ["2.0"], "fotest-app": ["3.0"], "fotest-lib": ["3.0"]}
REQUIRES = {"fotest-app": "fotest-lib"}
SHOW = ("{{ r.changed }} {{ r.failed | default(false) }} [{{ r.msg }}] {{ r.results | default([]) | sort | join(',') }} {{ r.failures | default([]) | join(',') }}")


def _task(name: str, body: str, extra: str = "") -> str:
    # ansible-core's dnf action picks dnf 4 or 5 from the pkg_mgr fact, which says apt on this
    # Debian host: the task names its backend
    if "dnf:\n" in body:
        body += "        use_backend: dnf4\n"
    return lab_parity.task_and_said(name, body, SHOW, extra)


TASKS = "".join([
    _task("install a version", "      dnf:\n        name: fotest-hello-1.0\n        state: present\n"),
    _task("present when installed", "      ansible.builtin.dnf:\n        name: fotest-hello\n"),
    _task("latest upgrades", "      dnf:\n        name: fotest-hello\n        state: latest\n"),
    _task("latest again", "      dnf:\n        name: fotest-hello\n        state: latest\n"),
    _task("check mode remove", "      dnf:\n        name: fotest-hello\n        state: absent\n",
          "      check_mode: true\n"),
    _task("remove", "      dnf:\n        name: fotest-hello\n        state: absent\n"),
    _task("remove again", "      dnf:\n        name: fotest-hello\n        state: removed\n"),
    _task("a package nobody has", "      dnf:\n        name: fotest-nosuch\n        state: present\n",
          "      ignore_errors: true\n"),
    _task("remove a package nobody has", "      dnf:\n        name: fotest-nosuch\n        state: absent\n"),
    _task("a list", "      dnf:\n        name: [fotest-hello, fotest-other]\n        state: installed\n"),
    _task("latest of a list, one missing", "      dnf:\n        name: fotest-hello,fotest-nosuch\n"
          "        state: latest\n", "      ignore_errors: true\n"),
    _task("a package and what it needs", "      dnf:\n        name: fotest-app\n"),
    _task("check mode remove what another needs", "      dnf:\n        name: fotest-lib\n        state: absent\n",
          "      check_mode: true\n"),
    _task("remove what another needs", "      dnf:\n        name: fotest-lib\n        state: absent\n"),
    _task("update the cache", "      dnf:\n        update_cache: true\n"),
    _task("pkg alias", "      dnf:\n        pkg: fotest-other\n        state: absent\n"),
    _task("package module", "      package:\n        name: fotest-other\n        state: present\n        use: dnf\n",
          ""),
])

PLAYBOOK = """
- name: dnf on an RPM host
  hosts: sysd
  gather_facts: false
  become: true
  tasks:
""" + TASKS


@pytest.fixture(scope="module")
def rpmhost(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("rpm-host"))
    repo = rpm_repo.build(os.path.join(d, "build"), PACKAGES, REQUIRES)
    host = systemd_host.SystemdHost(os.path.join(d, "host"))
    os.makedirs(host.directory)
    host.build({})
    host.add_rpm_repo(repo)
    host.start()
    try:
        yield host
    finally:
        host.stop()


def _installed(host) -> list:
    out = host.inside("rpm", "-qa", "--qf", "%{NAME}-%{VERSION}\\n").stdout.split()
    return sorted(p for p in out if p.startswith("fotest-"))


def test_dnf_as_ansible_core(rpmhost, tmp_path):
    results, truth = {}, {}
    for who in ("ansible", "fleetops"):
        if _installed(rpmhost):
            rpmhost.inside("rpm", "-e", "--nodeps", *_installed(rpmhost))
        d = lab_parity.write_project(tmp_path / who, {"site.yml": PLAYBOOK})
        inv = rpmhost.inventory(os.path.join(d, "inv.yml"))
        pb = os.path.join(d, "site.yml")
        results[who] = (lab_parity.ansible_results(pb, inv, rpmhost.known_hosts_path) if who == "ansible"
                        else lab_parity.fleetops_results(pb, inv))
        truth[who] = _installed(rpmhost)
    for key in sorted(set(results["ansible"]) | set(results["fleetops"])):
        assert results["fleetops"].get(key) == results["ansible"].get(key), key
    assert truth["fleetops"] == truth["ansible"]
    said = {task: outcomes[0][1] for (task, _host), outcomes in results["ansible"].items() if task.endswith(" said")}
    # ansible-core's own answers, so a run that did nothing fails here
    assert said["install a version said"].startswith("True False [] Installed: fotest-hello-1.0-1.noarch")
    assert said["present when installed said"] == "False False [Nothing to do]  "
    assert said["a package nobody has said"].startswith("False True [Failed to install some of the specified packages]")
    assert said["a package and what it needs said"].startswith(
        "True False [] Installed: fotest-app-3.0-1.noarch,Installed: fotest-lib-3.0-1.noarch")
    assert said["remove what another needs said"].startswith(
        "True False [] Removed: fotest-app-3.0-1.noarch,Removed: fotest-lib-3.0-1.noarch")
    assert truth["ansible"] == ["fotest-hello-1.1", "fotest-other-2.0"]
