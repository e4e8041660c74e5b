"""Each host's state for the run and its one connection, opened on first use with the run lock.

One connection per host per run, so a host's run lock (engine/connection/runlock.py) is held
from its first task to the end of the run and no other fleetops run interleaves with it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.connection.runlock import HostBusy
from fleetops.engine.connection.session import HostSession
from fleetops.engine.connection.transport import ConnParams, Transport
from fleetops.engine.runcontext import HostState
from fleetops.engine.templating import Templar, TemplateError
from fleetops.errors import BadInput, Unreachable


@dataclass
class HostPool:
    """Host name -> HostState, and the connection parameters and transports behind them."""

    inventory: Any
    options: Any
    templar: Templar
    playbook_dir: Any
    run_id: str
    transport_factory: Callable[[ConnParams], Transport]
    lock: threading.RLock
    hosts: dict[str, HostState] = field(default_factory=dict)
    _params: dict = field(default_factory=dict)

    def state(self, host: str) -> HostState:
        st = self.hosts.get(host)
        if st is None:
            with self.lock:
                st = self.hosts.setdefault(host, HostState(name=host))
        return st

    def params_for(self, host: str, remote_user: str | None = None, connection: str | None = None) -> ConnParams:
        key = (host, remote_user, connection)
        p = self._params.get(key)
        if p is None:
            extra = self.options.extra_vars or {}
            env = self.inventory.template_vars(host, extra)
            env["playbook_dir"] = self.playbook_dir
            p = self.inventory.connection_params(host, render=lambda value: self.templar.render(value, env),
                                                 extra_vars=extra, remote_user=remote_user,
                                                 connection=connection)
            if self.options.known_hosts:
                p.known_hosts = self.options.known_hosts
            p.accept_new_host_keys = bool(p.accept_new_host_keys or self.options.accept_new_host_keys)
            with self.lock:
                self._params[key] = p
        return p

    def inventory_become_user(self, host: str) -> str | None:
        try:
            return self.params_for(host, None).become_user
        except (BadInput, TemplateError):
            return None

    def inventory_become(self, host: str) -> bool:
        """ansible_become on the host: as in Ansible, it applies to every task there."""
        try:
            return self.params_for(host).become
        except (BadInput, TemplateError):
            return False

    def transport_for(self, host: str, delegated: bool, remote_user: str | None = None,
                      connection: str | None = None) -> Transport:
        """The host's one transport (connected on first use); LocalTransport for delegate_to: localhost.

        A play or task whose remote_user gives another login user than the open connection's
        closes it (releasing the host's run lock) and logs in again as that user; so does one whose
        `connection` keyword (local, ssh) gives another transport."""
        st = self.state(host)
        if delegated:
            if st.local is None:
                st.local = LocalTransport()
            return st.local
        try:
            params = self.params_for(host, remote_user, connection)
        except (BadInput, TemplateError) as e:
            raise Unreachable(f"{host}: {e}") from None
        if st.transport is not None and (st.transport.params.user != params.user
                                         or st.transport.params.connection != params.connection):
            self.close_host(st)
        if st.transport is None:
            inner = LocalTransport(params) if params.connection == "local" else self.transport_factory(params)
            st.transport = HostSession(inner, self.run_id, busy=st.busy)
        try:
            st.transport.connect()          # HostBusy when the host was refused earlier in the run
        except (Unreachable, HostBusy):
            raise
        except Exception as e:  # noqa: BLE001 - any connect failure means unreachable
            raise Unreachable(f"{host}: {type(e).__name__}: {e}") from None
        return st.transport

    @staticmethod
    def close_host(st: HostState) -> None:
        """Release the host's run lock and close its connection (a later task may open another)."""
        if st.transport is not None:
            st.busy = st.transport.busy or st.busy
            st.transport.close()
        st.transport = None

    def close_all(self) -> None:
        for st in self.hosts.values():
            self.close_host(st)
            if st.local is not None:
                try:
                    st.local.close()
                except Exception:  # noqa: BLE001 - closing must not hide the run's result
                    pass
