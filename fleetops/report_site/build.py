"""Writing the site: HTML shells, the shipped assets, and the data as JavaScript files.

Why JavaScript files and not JSON: a page opened from file:// may not fetch() a sibling
file, but it may load a <script>. Each data file is one `Site.put(key, {...})` call; pages
load the ones they need (a run's per-host results only when a host is opened), so no page
carries the whole store. Views beyond runs and hosts are given to `build`: each has a
`contribute(site)` function (an extension registers them, fleetops/extensions.py).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import html
import json
import os
import re
import shutil
import time
from importlib import resources
from pathlib import Path

from fleetops.report_site import campaigns, data

ASSETS = ("site.css", "site.js", "uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE")
EVIDENCE_MAX_BYTES = 4 * 1048576   # fetched files up to this size are copied into the site; larger ones linked


def _js(key: str, payload: str) -> str:
    return f"Site.put({json.dumps(key)}, {payload});\n"


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def safe_name(name: str) -> str:
    """A file name for a host or run id (the id itself when it is already safe)."""
    s = re.sub(r"[^A-Za-z0-9._@-]", "_", str(name)).lstrip(".") or "_"
    return s if s == name else f"{s}-{hashlib.sha256(str(name).encode()).hexdigest()[:8]}"


class Site:
    """One site being written into `out`: pages, data files, host sections, evidence copies."""

    def __init__(self, reader, out: str | os.PathLike, since: float | None = None):
        self.reader = reader
        self.out = Path(out)
        self.since = since
        self.pages: list[dict] = []          # {name, title, nav, scripts}
        self.host_extras: dict = {}          # host -> {section: value}
        self.host_summary: dict = {}         # host -> {column: value} for the hosts index
        self.scripts: list[str] = []         # extra assets every page loads (views' own JS)
        self.runs: list[dict] = []
        self.files = 0
        self.bytes = 0

    # -- writing --

    def write(self, rel: str, text: str) -> None:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = text.encode("utf-8")
        path.write_bytes(raw)
        self.files += 1
        self.bytes += len(raw)

    def put(self, key: str, obj=None, raw: str | None = None) -> None:
        """data/<key>.js holding `obj` (or `raw`, already JSON text)."""
        self.write(f"data/{key}.js", _js(key, raw if raw is not None else dumps(obj)))

    def add_page(self, name: str, title: str, payload, nav: bool = True) -> None:
        self.pages.append({"name": name, "title": title, "nav": nav})
        self.put(f"page/{name}", payload)

    def add_script(self, package: str, filename: str) -> None:
        """A view's own JS file (package data), copied to assets/ and loaded by every page."""
        src = resources.files(package).joinpath(filename)
        self.write(f"assets/{filename}", src.read_text(encoding="utf-8"))
        self.scripts.append(filename)

    def host_section(self, host: str, section: str, value) -> None:
        self.host_extras.setdefault(host, {})[section] = value

    def evidence(self, run_id: str, host: str, under: str = "") -> list[dict]:
        """The run's fetched files for a host (optionally one subfolder), copied beside the pages.

        Returns [{name, href, bytes}]; a file over EVIDENCE_MAX_BYTES is linked where it lies.
        """
        base = Path(self.reader.evidence_dir(run_id, host))
        root = base / under if under else base
        if not root.is_dir():
            return []
        out = []
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(base).as_posix()
            size = path.stat().st_size
            if size <= EVIDENCE_MAX_BYTES:
                dest = f"evidence/{safe_name(run_id)}/{safe_name(host)}/{rel}"
                target = self.out / dest
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
                    self.files += 1
                    self.bytes += size
                href = dest
            else:
                href = path.resolve().as_uri()
            out.append({"name": rel, "href": href, "bytes": size})
        return out

    # -- the shell --

    def _shell(self, page: dict, source: str) -> str:
        nav = "".join(f'<a href="{p["name"]}.html"{" class=here" if p["name"] == page["name"] else ""}>'
                      f'{html.escape(p["title"])}</a>' for p in self.pages if p["nav"])
        scripts = "".join(f'<script src="assets/{html.escape(s)}"></script>' for s in self.scripts)
        when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        from fleetops import __version__
        return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
                f'<title>fleetops · {html.escape(page["title"])}</title>'
                f'<link rel="stylesheet" href="assets/uPlot.min.css"><link rel="stylesheet" href="assets/site.css">'
                f'</head><body data-page="{html.escape(page["name"])}">'
                f'<header><span class="brand">fleetops</span><nav>{nav}</nav></header>'
                f'<main id="app"><p class="loading">loading…</p></main>'
                f'<footer>generated {when} from {html.escape(source)} · fleetops {html.escape(__version__)}'
                f' · charts: uPlot (MIT)</footer>'
                f'<script src="assets/uPlot.iife.min.js"></script><script src="assets/site.js"></script>{scripts}'
                f'<script src="data/page/{html.escape(page["name"])}.js"></script>'
                f'<script>Site.start({json.dumps(page["name"])});</script></body></html>\n')

    def finish(self, source: str) -> None:
        for name in ASSETS:
            raw = resources.files("fleetops.report_site").joinpath("assets", name).read_bytes()
            path = self.out / "assets" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)
            self.files += 1
            self.bytes += len(raw)
        if "index" not in [p["name"] for p in self.pages]:
            self.write("index.html", self._shell(next(p for p in self.pages if p["nav"]), source))
        for page in self.pages:
            self.write(f"{page['name']}.html", self._shell(page, source))


def build(reader, out: str | os.PathLike, since: float | None = None, source: str = "", views=()) -> dict:
    """Write the whole site into `out` (created; existing files there are replaced), with each
    of `views` contributing its pages. Returns figures."""
    t0 = time.perf_counter()
    site = Site(reader, out, since)
    site.out.mkdir(parents=True, exist_ok=True)
    site.runs = campaigns.fold(reader, data.runs(reader, since))
    for view in views:
        view.contribute(site)
    _runs_and_hosts(site)
    site.finish(source or str(reader.location))
    return {"out": str(site.out), "pages": len(site.pages), "runs": len(site.runs), "files": site.files,
            "bytes": site.bytes, "seconds": time.perf_counter() - t0}


def _runs_and_hosts(site: Site) -> None:
    runs = site.runs
    site.add_page("runs", "Runs", {"runs": runs})
    for run in runs:
        detail, shards = data.run_detail(site.reader, run)
        key = safe_name(run["id"])
        detail["key"] = key
        site.put(f"run/{key}", detail)
        for shard, hosts in shards.items():
            parts = []
            for host, results in hosts:
                items = ",".join(f"[{pi},{ti},{json.dumps(st)},{dumps(du)},{raw}]"
                                 for pi, ti, st, du, raw in results)
                parts.append(f"{dumps(host)}:[{items}]")
            site.put(f"run/{key}/{shard}", raw="{" + ",".join(parts) + "}")
    site.add_page("run", "Run", {"runs": [[r["id"], safe_name(r["id"])] for r in runs]}, nav=False)
    by_id = {r["id"]: r for r in runs}
    history = data.host_history(site.reader, set(by_id),
                                {m: r["id"] for r in runs for m in r.get("members", ())})
    hosts = sorted(set(history) | set(site.host_extras))
    index = []
    for host in hosts:
        key = safe_name(host)
        hist = [dict(h, started=by_id[h["run_id"]]["started"], playbook=by_id[h["run_id"]]["playbook"],
                     status=data.host_status(h["counters"]), run_key=safe_name(h["run_id"]))
                for h in history.get(host, [])]
        hist.sort(key=lambda h: (h["started"] or 0), reverse=True)
        site.put(f"host/{key}", {"host": host, "runs": hist, **site.host_extras.get(host, {})})
        last = hist[0] if hist else None
        index.append({"host": host, "key": key, "runs": len(hist), "last_run": last and last["run_id"],
                      "last_started": last and last["started"], "last_status": last and last["status"],
                      **site.host_summary.get(host, {})})
    site.add_page("hosts", "Hosts", {"hosts": index})
    site.add_page("host", "Host", {"hosts": [[h["host"], h["key"]] for h in index]}, nav=False)


def parse_since(text: str | None, now: float | None = None) -> float | None:
    """`--since`: an ISO date/time (UTC unless it says otherwise) or an age like 7d, 12h, 30m."""
    if not text:
        return None
    now = time.time() if now is None else now
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhm])\s*", text)
    if m:
        return now - float(m.group(1)) * {"d": 86400, "h": 3600, "m": 60}[m.group(2)]
    try:
        dt = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: expected a date/time like 2026-11-30 or 2026-11-30T08:00, "
                         f"or an age like 7d, 12h, 30m") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    return dt.timestamp()
