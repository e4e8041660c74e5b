"""A latency-injecting TCP proxy in front of lab hosts: a link 30-150 ms long, on loopback.

Real fleets are far from the operator, and there round trips decide; the lab's hosts are 0.05 ms
away. Each listener on 127.0.0.1 forwards to one host's sshd, holding every chunk `one_way`
seconds in each direction (order kept, bandwidth unlimited). The TCP handshake itself is not
delayed (the kernel accepts on loopback): a real link adds one round trip before the first byte.

It counts two things per host, over every connection to it:
- `turns`: direction changes of the byte stream (a rough count: two peers that both talk at
  once, as SSH's version and KEXINIT exchange does, make it vary);
- `trips`: the causal depth of the exchange, the round trips a connection has cost. A chunk
  from the server is one trip deeper than the deepest client chunk delivered to the server
  before it was read; a client chunk is as deep as the deepest server chunk delivered to the
  client before it was read. A reply can only be read after what caused it was delivered, so
  a wait on the other side is never missed; a client that sends on its own (not answering)
  after a delivery is counted as answering it. The count depends on order, not on speed.
"""
from __future__ import annotations

import asyncio
import threading
import time


class _Link:
    """One proxied connection: the deepest chunk delivered in each direction."""

    def __init__(self) -> None:
        self.to_server = 0          # depth of the deepest chunk delivered to the server
        self.to_client = 0          # ... to the client: the round trips the connection has cost


class DelayProxy:
    """One listener per lab host on 127.0.0.1, each forwarding to the host's sshd with every chunk
    delayed by `one_way` seconds in each direction; counts turns and trips per host."""

    def __init__(self, targets: dict, one_way: float):
        self.targets = targets                  # host name -> sshd port
        self.one_way = one_way
        self.ports: dict = {}                   # host name -> proxy port
        self.turns: dict = {h: 0 for h in targets}
        self._links: dict = {h: [] for h in targets}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _shutdown(self) -> None:
        """Let connections just closed drain (their last chunks are still delayed), then end every
        pump still waiting on a connection a tool left open."""
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=2 * self.one_way + 0.5)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def reset_counts(self) -> None:
        self.turns = {h: 0 for h in self.targets}
        self._links = {h: [] for h in self.targets}

    def trips(self, host: str) -> int:
        """Round trips the host's connections have cost so far (summed over connections)."""
        return sum(link.to_client for link in list(self._links[host]))

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        for host, port in self.targets.items():
            server = self._loop.run_until_complete(asyncio.start_server(
                lambda r, w, h=host, p=port: self._serve(h, p, r, w), "127.0.0.1", 0))
            self.ports[host] = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, host, port, client_r, client_w) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            client_w.close()
            return
        last = {"dir": None}
        link = _Link()
        self._links[host].append(link)
        try:
            await asyncio.gather(self._pump(host, client_r, server_w, "up", last, link),
                                 self._pump(host, server_r, client_w, "down", last, link))
        except asyncio.CancelledError:
            pass        # the proxy is shutting down; a cancelled handler would be reported by asyncio

    async def _pump(self, host, reader, writer, direction, last, link) -> None:
        queue: asyncio.Queue = asyncio.Queue()
        up = direction == "up"

        async def deliver():
            while True:
                due, depth, data = await queue.get()
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                if data is None:
                    writer.close()
                    return
                if up:          # counted before the peer can see it, so no answer is read first
                    link.to_server = max(link.to_server, depth)
                else:
                    link.to_client = max(link.to_client, depth)
                writer.write(data)
                await writer.drain()
        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                if last["dir"] != direction:
                    last["dir"] = direction
                    self.turns[host] += 1
                depth = link.to_client if up else link.to_server + 1
                queue.put_nowait((time.monotonic() + self.one_way, depth, data or None))
                if not data:
                    break
        except (ConnectionError, OSError):
            queue.put_nowait((time.monotonic() + self.one_way, 0, None))
        try:
            await sender
        except (ConnectionError, OSError):
            pass
