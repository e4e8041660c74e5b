"""Real headless Chromium (Debian's `chromium`), driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` speaks CDP as NUL-terminated JSON on fds 3 (in) and 4 (out), so no
websocket client and no TCP port are needed. Every console error, uncaught exception and
failed load (Log.entryAdded, level error) is collected in `errors`. The browser runs with a
fresh profile, networking extras off, and is killed by its PID on exit.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
         "--remote-debugging-pipe"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    def __init__(self, user_data_dir: str, width: int = 1400, height: int = 900):
        self.user_data_dir = user_data_dir
        self.width, self.height = width, height
        self.errors: list[str] = []
        self.console: list[str] = []
        self._id = 0
        self._buf = b""
        self._events: list[dict] = []

    def __enter__(self):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("no chromium on PATH (scripts/setup.sh installs Debian's chromium)")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # the child's ends numbered 10 and up, so placing them on 3 and 4 cannot clobber each other
        hi_r, hi_w = fcntl_dup(to_chrome_r), fcntl_dup(from_chrome_w)

        def place():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self.user_data_dir}",
                                      f"--window-size={self.width},{self.height}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=place, pass_fds=(3, 4),
                                     start_new_session=True)
        for fd in (to_chrome_r, from_chrome_w, hi_r, hi_w):
            os.close(fd)
        self._w, self._r = to_chrome_w, from_chrome_r
        target = next(t for t in self.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.user_data_dir, ignore_errors=True)

    # -- protocol --

    def _read_message(self, timeout: float) -> dict:
        import select
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _note(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params") or {}
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.console.append(f"{p.get('type')}: {text}")
            if p.get("type") in ("error", "assert"):
                self.errors.append(f"console.{p.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails") or {}
            self.errors.append("exception: " + str((d.get("exception") or {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded" and (p.get("entry") or {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"log: {e.get('text')} {e.get('url') or ''}".strip())
        else:
            self._events.append(msg)

    def send(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message(timeout)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result") or {}
            self._note(reply)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        for i, ev in enumerate(self._events):
            if ev.get("method") == method:
                return self._events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_message(max(0.01, deadline - time.monotonic()))
            if msg.get("method") == method:
                return msg
            self._note(msg)

    # -- page --

    def open(self, path: str | os.PathLike, wait_for: str | None = None, timeout: float = 60) -> None:
        """Navigate to a file (with an optional #fragment) and wait for load, then for a selector."""
        path = str(path)
        frag = ""
        if "#" in path:
            path, frag = path.split("#", 1)
            frag = "#" + frag
        if frag:   # a new fragment on the same page is not a load: leave the page first
            self._navigate("about:blank", timeout)
        self._navigate(Path(path).resolve().as_uri() + frag, timeout)
        if wait_for:
            self.wait_for(wait_for, timeout)

    def _navigate(self, url: str, timeout: float) -> None:
        self._events = [e for e in self._events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired", timeout)

    def eval(self, expr: str, timeout: float = 60):
        r = self.send("Runtime.evaluate", session=True, timeout=timeout, expression=expr, returnByValue=True,
                      awaitPromise=True)
        if r.get("exceptionDetails"):
            raise RuntimeError(f"{expr[:80]}: {r['exceptionDetails']}")
        return (r.get("result") or {}).get("value")

    def wait_for(self, selector: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.eval(f"!!document.querySelector({json.dumps(selector)})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{selector} never appeared; errors: {self.errors}")
            time.sleep(0.01)

    def text(self, selector: str = "body") -> str:
        return self.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''")

    def texts(self, selector: str) -> list:
        return self.eval(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => e.innerText)")

    def screenshot(self, dest: str | os.PathLike, full_page: bool = True) -> None:
        params = {"format": "png"}
        if full_page:
            h = self.eval("Math.min(document.documentElement.scrollHeight, 6000)")
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", session=True, **params)["data"]
        Path(dest).write_bytes(base64.b64decode(data))

    def load_time(self, path: str, selector: str) -> float:
        """Milliseconds from navigation start until `selector` is in the DOM (the page's own clock,
        read at the first 10 ms poll that finds it)."""
        self.open(path)
        self.wait_for(selector)
        return self.eval("performance.now()")


def fcntl_dup(fd: int) -> int:
    """A duplicate of fd numbered 10 or above."""
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
