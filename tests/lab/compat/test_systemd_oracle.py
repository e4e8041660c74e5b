"""`systemd`, `systemd_service` and `service` on a host whose PID 1 is a real systemd (a
systemd-nspawn container: tests/support/systemd_host.py), run by ansible-core 2.19 and by
fleetops with the same playbook and `become: true`: every task's outcome and the values it
returns (changed, state, enabled, the unit's ActiveState before the task, failure messages), then
what systemd itself says of each unit afterwards, must agree. The container is put back to the
same starting state before each tool runs."""
from __future__ import annotations

import os

import pytest

from tests.support import lab_parity, oracle, systemd_host

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh"),
              pytest.mark.skipif(systemd_host.available() is not None, reason=str(systemd_host.available()))]

UNITS = {
    "fotest-daemon.service": "[Unit]\nDescription=a daemon\n[Service]\nExecStart=/bin/sleep infinity\n"
                             "ExecReload=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    "fotest-static.service": "[Unit]\nDescription=no install section\n[Service]\nExecStart=/bin/sleep infinity\n",
    "fotest-broken.service": "[Unit]\nDescription=no command to run\n[Service]\nType=simple\n",
}

SHOW = ("{{ r.changed }} {{ r.state | default('-') }} {{ r.enabled | default('-') }} {{ r.status.ActiveState | default('-') }} {{ r.failed | default(false) }} {{ r.msg | default('-') if r.failed | default(false) else '-' }}")


def _task(name: str, body: str, extra: str = "") -> str:
    return lab_parity.task_and_said(name, body, SHOW, extra)


TASKS = "".join([
    _task("only read it", "      systemd:\n        name: fotest-daemon\n"),
    _task("start", "      systemd:\n        name: fotest-daemon\n        state: started\n"),
    _task("start again", "      ansible.builtin.systemd:\n        name: fotest-daemon.service\n        state: started\n"),
    _task("restart", "      systemd_service:\n        unit: fotest-daemon\n        state: restarted\n"),
    _task("reload", "      systemd:\n        name: fotest-daemon\n        state: reloaded\n"),
    _task("stop", "      systemd:\n        name: fotest-daemon\n        state: stopped\n"),
    _task("stop again", "      systemd:\n        name: fotest-daemon\n        state: stopped\n"),
    _task("reload a stopped unit", "      systemd:\n        name: fotest-daemon\n        state: reloaded\n"),
    _task("stop for the next", "      systemd:\n        name: fotest-daemon\n        state: stopped\n"),
    _task("enable", "      systemd:\n        name: fotest-daemon\n        enabled: true\n"),
    _task("enable again", "      systemd:\n        name: fotest-daemon\n        enabled: yes\n"),
    _task("disable", "      systemd:\n        name: fotest-daemon\n        enabled: false\n"),
    _task("mask", "      systemd:\n        name: fotest-daemon\n        masked: true\n"),
    _task("start a masked unit", "      systemd:\n        name: fotest-daemon\n        state: started\n",
          "      ignore_errors: true\n"),
    _task("unmask", "      systemd:\n        name: fotest-daemon\n        masked: false\n"),
    _task("daemon-reload alone", "      systemd:\n        daemon_reload: true\n"),
    _task("daemon-reload and start", "      systemd:\n        daemon-reload: true\n        name: fotest-daemon\n"
          "        state: started\n"),
    _task("check mode stop", "      systemd:\n        name: fotest-daemon\n        state: stopped\n",
          "      check_mode: true\n"),
    _task("service start and enable", "      service:\n        name: fotest-static\n        state: started\n"
          "        enabled: true\n"),
    _task("service on a running unit", "      ansible.builtin.service:\n        name: fotest-daemon\n"
          "        state: started\n        pattern: sleep\n"),
    _task("service with a name only", "      service:\n        name: fotest-static\n"),
    _task("service stop", "      service:\n        name: fotest-static\n        state: stopped\n"),
    _task("a unit nobody has", "      systemd:\n        name: fotest-nosuch\n        state: started\n",
          "      ignore_errors: true\n"),
    _task("enable a unit nobody has", "      systemd:\n        name: fotest-nosuch\n        enabled: true\n",
          "      ignore_errors: true\n"),
    _task("a unit that does not load", "      systemd:\n        name: fotest-broken\n        state: started\n",
          "      ignore_errors: true\n"),
])

USER_TASKS = "".join([
    _task("user start", "      systemd:\n        name: fotest-mine\n        state: started\n        scope: user\n"),
    _task("user enable", "      systemd:\n        name: fotest-mine\n        enabled: true\n        scope: user\n"
          "        daemon_reload: true\n"),
    _task("user restart", "      systemd_service:\n        name: fotest-mine\n        state: restarted\n"
          "        scope: user\n"),
    _task("user stop", "      systemd:\n        name: fotest-mine\n        state: stopped\n        scope: user\n"),
    _task("a system unit without root", "      systemd:\n        name: fotest-daemon\n        state: stopped\n",
          "      ignore_errors: true\n"),
])

PLAYBOOK = """
- name: systemd units on a systemd host
  hosts: sysd
  gather_facts: false
  become: true
  tasks:
""" + TASKS + """
- name: the login user's own manager
  hosts: sysd
  gather_facts: false
  tasks:
""" + USER_TASKS
USER_UNIT = ("[Unit]\nDescription=the login user's daemon\n[Service]\nExecStart=/bin/sleep infinity\n"
             "[Install]\nWantedBy=default.target\n")


@pytest.fixture(scope="module")
def sysd(tmp_path_factory):
    host = systemd_host.SystemdHost(str(tmp_path_factory.mktemp("systemd-host")))
    host.build(UNITS)
    host.write_user_file(".config/systemd/user/fotest-mine.service", USER_UNIT)
    host.start()
    try:
        yield host
    finally:
        host.stop()


def _reset(host) -> None:
    link = host.path(f"/home/{systemd_host.USER}/.config/systemd/user/default.target.wants/fotest-mine.service")
    if os.path.lexists(link):
        os.unlink(link)
    for unit in UNITS:
        host.systemctl("unmask", unit)
        host.systemctl("stop", unit)
        host.systemctl("disable", unit)
        host.systemctl("reset-failed", unit)


def _truth(host) -> dict:
    out = {unit: (host.systemctl("is-active", unit).stdout.strip(), host.systemctl("is-enabled", unit).stdout.strip())
           for unit in UNITS}
    out["user"] = os.path.lexists(host.path(f"/home/{systemd_host.USER}/.config/systemd/user/default.target.wants/"
                                           "fotest-mine.service"))
    return out


def test_systemd_and_service_as_ansible_core(sysd, tmp_path):
    results, truth = {}, {}
    for who in ("ansible", "fleetops"):
        _reset(sysd)
        d = lab_parity.write_project(tmp_path / who, {"site.yml": PLAYBOOK})
        inv = sysd.inventory(os.path.join(d, "inv.yml"))
        pb = os.path.join(d, "site.yml")
        got = (lab_parity.ansible_results(pb, inv, sysd.known_hosts_path) if who == "ansible"
               else lab_parity.fleetops_results(pb, inv))
        # ansible-core keeps systemctl's closing newline in a failure's message; fleetops does not
        results[who] = {k: [(o, m.rstrip("\n") if m else m) for o, m in v] for k, v in got.items()}
        truth[who] = _truth(sysd)
    for key in sorted(set(results["ansible"]) | set(results["fleetops"])):
        assert results["fleetops"].get(key) == results["ansible"].get(key), key
    assert results["fleetops"] == results["ansible"]
    assert truth["fleetops"] == truth["ansible"]
    said = {task: outcomes[0][1] for (task, _host), outcomes in results["ansible"].items() if task.endswith(" said")}
    # what the comparison rests on: ansible-core's own answers, so a run that did nothing fails here
    assert said["only read it said"] == "False - - inactive False -"
    assert said["start said"] == "True started - inactive False -"
    assert said["start again said"] == "False started - active False -"
    assert said["enable said"] == "True - True inactive False -"
    assert said["a unit nobody has said"].endswith("Could not find the requested service fotest-nosuch: host")
    assert said["a unit that does not load said"].startswith("False - - - True Error loading unit file 'fotest-broken'")
    assert said["check mode stop said"] == "True stopped - active False -"
    assert truth["ansible"]["fotest-daemon.service"] == ("active", "disabled")
    assert truth["ansible"]["fotest-static.service"][0] == "inactive"
    assert said["user start said"] == "True started - inactive False -"
    assert said["user enable said"] == "True - True active False -"
    assert said["a system unit without root said"].startswith("False - - - True ")
    assert truth["ansible"]["user"] is True


def test_systemd_where_pid_1_is_not_systemd(lab_clean, tmp_path):
    """On the ordinary lab hosts (no systemd as PID 1) the task fails with systemctl's reason."""
    d = lab_parity.write_project(tmp_path, {"site.yml": """
        - hosts: lab[0]
          gather_facts: false
          tasks:
            - name: start
              systemd:
                name: cron
                state: started
              register: r
              ignore_errors: true
            - name: said
              debug:
                msg: "{{ r.failed }} {{ r.msg }}"
        """})
    inv = lab_parity.lab_inventory(lab_clean, os.path.join(d, "inv.yml"))
    got = lab_parity.fleetops_results(os.path.join(d, "site.yml"), inv)
    (outcome, msg), = got[("said", lab_clean.hosts[0]["name"])]
    assert msg.startswith("True "), msg
    assert "systemd" in msg or "systemctl" in msg, msg


def test_systemd_user_module_on_a_real_user_manager(sysd, tmp_path):
    """fleetops' own `systemd_user` (no ansible-core twin) against the login user's real manager:
    the probe answers, enable and start change, a second run does not."""
    _reset(sysd)
    d = lab_parity.write_project(tmp_path, {"site.yml": """
        - hosts: sysd
          gather_facts: false
          tasks:
            - name: probe
              systemd_user: {}
              register: p
            - name: probe said
              debug:
                msg: "{{ p.manager }} {{ p.skipped | default(false) }}"
            - name: enable and start
              systemd_user:
                name: fotest-mine.service
                enabled: true
                state: started
                daemon_reload: true
              register: r
            - name: first said
              debug:
                msg: "{{ r.changed }} {{ r.actions | join(',') }}"
            - name: again
              systemd_user:
                name: fotest-mine.service
                enabled: true
                state: started
              register: r
            - name: again said
              debug:
                msg: "{{ r.changed }} {{ r.actions | join(',') }}"
            - name: what the manager says
              command: systemctl --user is-active fotest-mine.service
              register: a
            - name: manager said
              debug:
                msg: "{{ a.stdout }}"
        """})
    got = lab_parity.fleetops_results(os.path.join(d, "site.yml"), sysd.inventory(os.path.join(d, "inv.yml")))
    said = {task: outcomes[0][1] for (task, _h), outcomes in got.items() if task.endswith(" said")}
    assert said == {"probe said": "True False",
                    "first said": "True daemon-reload,enable fotest-mine.service,start fotest-mine.service",
                    "again said": "False ", "manager said": "active"}
    assert _truth(sysd)["user"] is True
