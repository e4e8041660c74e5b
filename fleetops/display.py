"""What the operator sees: the live rich view, and the `--json` collector.

Both are event listeners, so the terminal, `--json` and the results store are
fed by the same stream and cannot disagree. Every string shown goes through the
same scrub/mask as the store, so a secret never reaches the terminal.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from fleetops.engine.events import EventSink
from fleetops.engine.clean import clean, clean_options, clean_per_host, printable, scrub_text
from fleetops.engine.recap import COUNTERS, count, result_status, zero

STYLES = {
    "ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "bold magenta",
    "skipped": "cyan", "rescued": "blue", "ignored": "dim yellow",
}
RUN_STYLES = {"ok": "bold green", "failed": "bold red", "unreachable": "bold magenta",
              "interrupted": "bold yellow", "running": "yellow"}
MSG_EXCERPT = 160
FLUSH_INTERVAL = 0.1   # seconds between batched prints while the live panel is up
TASKS_VIEW_FROM = 50   # plays on more hosts than this show one progress line per task (view "auto")
VIEWS = ("auto", "hosts", "tasks")
RECAP_ROWS = 50        # in the tasks view, the recap lists at most this many hosts that did not go well


def excerpt(msg, limit: int = MSG_EXCERPT) -> str:
    """First non-empty line of a message, shortened: failures stay one line each."""
    if msg is None:
        return ""
    text = printable(str(msg)).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = lines[0].strip() if lines else ""
    more = len(lines) > 1
    if len(first) > limit:
        first, more = first[:limit - 1], True
    return first + (" …" if more else "")


WIDE = 120   # columns from which tables show every column with full headers and borders


@dataclasses.dataclass
class Col:
    """One column of a FittedTable.

    `cell(row)` gives the cell (rich markup string or Text); `narrow` an alternative for narrow
    terminals; `short` a narrow header. `ident` cells (host names, run ids) are never wrapped.
    `wide_only` columns are left out when narrow; with `detail` they come back as a line under
    the table for the rows where they say something (`cell` returns "" or "-" when not).
    """
    header: str
    cell: Callable
    short: str | None = None
    narrow: Callable | None = None
    ident: bool = False
    wide_only: bool = False
    detail: bool = False
    justify: str = "left"
    prose: bool = False      # free text (task names, messages): wraps at any width


class FittedTable:
    """A table that picks columns, headers and borders for the width it is printed at.

    At 80 columns (a CI log, a pager) it drops the wide-only columns, uses short headers and a
    borderless layout, and never wraps an id; from WIDE columns up it shows everything.
    """

    def __init__(self, columns: list, rows: list, title: str | None = None, key: Callable | None = None,
                 detail_when: Callable | None = None):
        self.columns, self.rows, self.title, self.key = columns, rows, title, key
        self.detail_when = detail_when or (lambda row: True)

    def _cell(self, c: Col, r, wide: bool):
        return (c.narrow if (c.narrow and not wide) else c.cell)(r)

    @staticmethod
    def _len(v) -> int:
        return (v if isinstance(v, Text) else Text.from_markup(str(v))).cell_len

    def shown(self, width: int) -> list:
        """The columns printed at this width. Narrow: without the wide-only ones, and then, while the
        ids and the rest would not fit whole, without the rightmost other columns (shown under the
        table instead): an id is never cut or wrapped to make room."""
        wide = width >= WIDE
        cols = [c for c in self.columns if wide or not c.wide_only]
        if wide:
            return cols

        def need(cs):
            return sum(max([self._len(c.short or c.header)] + [self._len(self._cell(c, r, False)) for r in self.rows])
                       for c in cs) + 2 * (len(cs) - 1)
        while need(cols) > width and any(not c.ident and not c.prose for c in cols):
            cols.remove([c for c in cols if not c.ident and not c.prose][-1])
        return cols

    def build(self, width: int) -> Table:
        wide = width >= WIDE
        cols = self.shown(width)
        t = Table(title=self.title, title_justify="left", show_lines=False,
                  **({} if wide else {"box": box.SIMPLE_HEAD, "padding": (0, 1, 0, 0), "pad_edge": False,
                                      "show_edge": False}))
        for c in cols:
            # narrow cells are short by design: wrapping "none" into "non/e" helps nobody
            short_cell = c.ident or not (wide or c.prose)
            min_width = max([self._len(self._cell(c, r, wide)) for r in self.rows] or [0]) if c.ident else None
            if wide and " " in c.header and not c.prose:
                # a header of words ("errors by object") is read whole; a long cell beside it wraps instead
                min_width = max(min_width or 0, self._len(c.header))
            t.add_column(c.header if wide or not c.short else c.short, justify=c.justify, min_width=min_width,
                         no_wrap=short_cell, overflow="ellipsis" if short_cell else "fold")
        for r in self.rows:
            t.add_row(*[self._cell(c, r, wide) for c in cols])
        return t

    def details(self, width: int) -> list:
        """Lines under a narrow table: the detail columns it left out, for the rows that have them."""
        if width >= WIDE or self.key is None:
            return []
        shown = self.shown(width)
        left_out = [c for c in self.columns if c not in shown and (c.detail or not c.wide_only)]
        out = []
        for r in filter(self.detail_when, self.rows):
            parts = []
            for c in left_out:
                v = c.cell(r)
                v = v.plain if isinstance(v, Text) else Text.from_markup(str(v)).plain
                if v not in ("", "-"):   # a cell that names itself ("holders unknown: …") is not named twice
                    parts.append(v if v.startswith(c.header + " ") else f"{c.header} {v}")
            if parts:
                out.append(Text.assemble((self.key(r), "bold"), " " + "; ".join(parts)))
        return out

    def __rich_console__(self, console, options):
        yield self.build(options.max_width)
        yield from self.details(options.max_width)


def recap_table(stats: dict, title: str = "Recap") -> FittedTable:
    """One row per host with the recap counters; non-zero failure columns coloured."""
    def counter(k):
        def cell(h):
            n = int((stats[h] or {}).get(k, 0) or 0)
            return Text(str(n), style=STYLES[k] if n and k != "ok" else ("green" if n else "dim"))
        return cell

    shorts = {"ok": "ok", "changed": "chg", "unreachable": "unr", "failed": "fail", "skipped": "skip",
              "rescued": "resc", "ignored": "ign"}
    cols = [Col("host", lambda h: Text(printable(str(h)), style="bold"), ident=True)]
    cols += [Col(k, counter(k), short=shorts[k], justify="right") for k in COUNTERS]
    return FittedTable(cols, sorted(stats), title=title)


def recap_summary(stats: dict, rows: int = RECAP_ROWS) -> list:
    """The recap of a big run: one line of totals, then only the hosts that failed, were
    unreachable or were rescued (at most `rows`; the rest are named by count)."""
    totals = {k: sum(int((c or {}).get(k, 0) or 0) for c in stats.values()) for k in COUNTERS}
    line = " · ".join(f"[{STYLES[k]}]{k} {v}[/]" if v and k != "ok" else f"{k} {v}" for k, v in totals.items())
    out = [Text.from_markup(f"[bold]Recap[/] {len(stats)} host(s): {line}")]
    bad = {h: c for h, c in stats.items() if any(int((c or {}).get(k, 0) or 0)
                                                  for k in ("failed", "unreachable", "rescued"))}
    if bad:
        shown = dict(sorted(bad.items())[:rows])
        out.append(recap_table(shown, title=f"hosts that did not go well ({len(bad)})"))
        if len(bad) > rows:
            out.append(Text(f"… and {len(bad) - rows} more (fleetops report --json has every host)"))
    return out


class LiveDisplay(EventSink):
    """Rich terminal view: live panel of hosts in flight, results as they land, recap at the end.

    When the console is not a terminal, the live panel is skipped and everything
    is printed as plain lines (no colour, no cursor movement), so logs stay readable.
    """

    def __init__(self, console: Console | None = None, secret_values: set | None = None,
                 results_dir: str | None = None, live: bool | None = None, refresh_per_second: float = 4,
                 view: str = "auto"):
        """view: "hosts" prints a line per host per task; "tasks" one progress line per task, with
        failed and unreachable hosts listed as they happen; "auto" picks "tasks" for plays on more
        than TASKS_VIEW_FROM hosts. The full per-host detail is in the results store either way."""
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}")
        self.view = view
        self.tasks_view = view == "tasks"
        self.progress: dict | None = None
        self.console = console or Console(highlight=False)
        self.secret_values = set(secret_values or ())
        self.results_dir = results_dir
        self.use_live = self.console.is_terminal if live is None else live
        self.refresh_per_second = refresh_per_second
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._pending: list = []
        self._dead = False
        self._flusher: threading.Thread | None = None
        self._flush_stop = threading.Event()
        self.run_id = None
        self.started = None
        self.in_flight: dict[str, tuple[str, float]] = {}
        self.stats: dict[str, dict] = {}
        self.totals = {k: 0 for k in ("ok", "changed", "failed", "unreachable", "skipped", "rescued", "ignored")}
        self.play_hosts: list = []
        self.final_stats = None

    def _t(self, s) -> str:
        return escape(printable(scrub_text("" if s is None else str(s), self.secret_values)))

    @staticmethod
    def _name(s) -> str:
        """A host name is shown as it is (made printable), never scrubbed: names are not values."""
        return escape(printable(str(s)))

    def _print(self, *renderables, **kw) -> None:
        """Print a line; while live, queue it: the flusher prints batches (one panel repaint each)."""
        kw.setdefault("soft_wrap", True)
        with self._lock:
            if self._live is not None:
                self._pending.extend(Text.from_markup(r) if isinstance(r, str) else r for r in renderables)
                return
        self._safe_print(self.console, *renderables, **kw)

    def _safe_print(self, console, *renderables, **kw) -> None:
        """A closed terminal (broken pipe) must not break the run: stop showing, keep running."""
        if self._dead:
            return
        try:
            console.print(*renderables, **kw)
        except (OSError, SystemExit):     # rich turns a broken pipe into SystemExit(1)
            self._dead = True

    def _flush(self) -> None:
        # Never print while holding self._lock: Live's refresh thread takes its own lock and
        # then ours (get_renderable), and printing takes Live's lock: holding both deadlocks.
        with self._lock:
            pending, self._pending = self._pending, []
            live = self._live
        if pending:
            self._safe_print(live.console if live else self.console, Group(*pending), soft_wrap=True)

    def _flush_loop(self) -> None:
        while not self._flush_stop.wait(FLUSH_INTERVAL):
            self._flush()

    def _render_live(self):
        with self._lock:
            now = time.monotonic()
            table = Table(box=None, show_header=True, expand=False, pad_edge=False)
            table.add_column("host", style="bold")
            table.add_column("task")
            table.add_column("elapsed", justify="right")
            flights = sorted(self.in_flight.items(), key=lambda kv: kv[1][1])
            for host, (task, since) in flights[:20]:
                table.add_row(self._name(host), self._t(task), f"{now - since:5.1f}s")
            if len(flights) > 20:
                table.add_row(f"… {len(flights) - 20} more", "", "")
            counts = "  ".join(f"[{STYLES[k]}]{k}={v}[/]" for k, v in self.totals.items() if v or k == "ok")
            elapsed = now - self.started if self.started else 0.0
            task = f" · {self._progress_text(self.progress, now)}" if self.progress else ""
            head = Text.from_markup(f"{len(self.in_flight)} host(s) in flight · {counts} · {elapsed:.1f}s{task}")
            return Panel(Group(head, table), title=f"fleetops {self.run_id or ''}", title_align="left")

    def stop_live(self) -> None:
        """Print what is queued and leave the terminal clean (also called before a hard exit)."""
        self._flush_stop.set()
        flusher, self._flusher = self._flusher, None
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join(5)
        self._flush()
        with self._lock:
            live, self._live = self._live, None
        if live is not None:
            try:
                live.stop()
            except Exception:
                pass
        self._flush()

    # -- events --

    def run_start(self, run_id, playbook, inventory, options):
        self.run_id = run_id
        self.started = time.monotonic()
        self._print(f"[bold]fleetops run {self._t(run_id)}[/]: {self._t(playbook)} on {self._t(inventory)}"
                    + (" [yellow](check mode)[/]" if options.get("check") else ""))
        if self.use_live:
            self._live = Live(console=self.console, get_renderable=self._render_live,
                              refresh_per_second=self.refresh_per_second,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
            self._flush_stop.clear()
            self._flusher = threading.Thread(target=self._flush_loop, name="fleetops-display", daemon=True)
            self._flusher.start()

    @staticmethod
    def _progress_text(p: dict, now: float) -> str:
        """`done/total · ok … · elapsed · rate` of a task's progress record (markup)."""
        done = sum(p["counts"].values())
        took = max(now - p["started"], 1e-6)
        counts = " · ".join(f"[{STYLES[k]}]{k} {p['counts'][k]}[/]" if p["counts"][k] else f"{k} 0"
                            for k in ("ok", "changed", "failed", "unreachable", "skipped"))
        return f"{done}/{p['total']} done · {counts} · {took:.1f}s · {done / took:.1f} hosts/s"

    def _end_task(self) -> None:
        """In the tasks view, the finished task's one line."""
        with self._lock:
            p, self.progress = self.progress, None
        if p is not None and self.tasks_view:
            self._print(f"  [dim]{self._t(p['name'])}:[/] {self._progress_text(p, time.monotonic())}")

    def play_start(self, play_index, play_name, hosts):
        self._end_task()
        if self.view == "auto":
            self.tasks_view = len(hosts) > TASKS_VIEW_FROM
        with self._lock:
            self.play_hosts = list(hosts)
            for h in hosts:
                self.stats.setdefault(h, zero())
        self._print(Text(""))
        self._print(f"[bold blue]PLAY[/] [bold]{self._t(play_name)}[/] [dim]({len(hosts)} host(s))[/]")

    def batch_start(self, play_index, batch_index, hosts):
        self._end_task()
        if batch_index or len(hosts) != len(self.play_hosts):
            self._print(f"[dim]batch {batch_index + 1}: {len(hosts)} host(s)[/]")

    def task_start(self, play_index, task_index, task_name, module, hosts):
        self._end_task()
        with self._lock:
            self.progress = {"name": task_name, "total": len(hosts), "started": time.monotonic(),
                             "counts": {k: 0 for k in ("ok", "changed", "failed", "unreachable", "skipped",
                                                       "rescued", "ignored")}}
        self._print(f"[bold]TASK[/] {self._t(task_name)} [dim]({self._t(module)})[/]")

    def host_task_start(self, host, task_name):
        with self._lock:
            self.in_flight[host] = (task_name, time.monotonic())

    def host_result(self, host, play_index, task_index, task_name, module, result, started, ended):
        result = result or {}
        status = result_status(result)
        with self._lock:
            self.in_flight.pop(host, None)
            self.totals[status] += 1
            count(self.stats.setdefault(host, zero()), result)
            if self.progress is not None:
                self.progress["counts"][status] += 1
        if self.tasks_view and status in ("ok", "changed", "skipped") and module != "debug":
            return
        line = f"  [{STYLES[status]}]{status:<11}[/] {self._name(host)}"
        dur = result.get("duration")
        if dur is None and started is not None and ended is not None:
            dur = ended - started
        if dur is not None:
            line += f" [dim]{dur:.2f}s[/]"
        if status in ("failed", "unreachable", "ignored", "rescued") or module == "debug":
            msg = excerpt(scrub_text(str(result.get("msg") or ""), self.secret_values))
            if msg:
                line += f": {escape(msg)}"
        self._print(line)

    def play_end(self, play_index, stopped_reason):
        self._end_task()
        if stopped_reason:
            self._print(f"[bold red]play stopped:[/] {self._t(stopped_reason)}")

    def run_end(self, status, stats, exit_code):
        self._end_task()
        self.stop_live()
        with self._lock:
            self.final_stats = clean_per_host(stats, self.secret_values) if stats else dict(self.stats)
        self._print(Text(""))
        if self.tasks_view:
            for renderable in recap_summary(self.final_stats):
                self._print(renderable)
        else:
            self._print(recap_table(self.final_stats))
        style = RUN_STYLES.get(status, "bold")
        where = str(self.results_dir) if self.results_dir else "the results store"
        self._print(f"[{style}]{self._t(status)}[/] (exit {exit_code}) · run [bold]{self._t(self.run_id)}[/]"
                    f" · results in {self._t(where)} · [dim]fleetops report {self._t(self.run_id)}[/]")


class JsonCollector(EventSink):
    """Collects the whole run for `--json`: `document()` is the one document printed on stdout."""

    def __init__(self, secret_values: set | None = None, results_dir: str | None = None):
        self.secret_values = set(secret_values or ())
        self._lock = threading.RLock()
        self.doc = {
            "run_id": None, "status": "running", "exit_code": None, "playbook": None, "inventory": None,
            "options": {}, "results_dir": results_dir, "started": None, "ended": None,
            "plays": [], "stats": {}, "facts": {},
        }
        self._plays: dict[int, dict] = {}

    def _play(self, play_index) -> dict:
        play = self._plays.get(play_index)
        if play is None:
            play = {"index": play_index, "name": None, "hosts": [], "batches": [], "stopped_reason": None,
                    "tasks": []}
            self._plays[play_index] = play
            self.doc["plays"].append(play)
        return play

    def _task(self, play, task_index, task_name, module) -> dict:
        for t in play["tasks"]:
            if t["index"] == task_index:
                return t
        task = {"index": task_index, "name": task_name, "module": module, "results": {}}
        play["tasks"].append(task)
        return task

    def _c(self, obj):
        return clean(obj, self.secret_values)

    def run_start(self, run_id, playbook, inventory, options):
        with self._lock:
            self.doc.update(run_id=run_id, playbook=self._c(str(playbook)), inventory=self._c(str(inventory)),
                            options=clean_options(options, self.secret_values), started=time.time())

    def play_start(self, play_index, play_name, hosts):
        with self._lock:
            play = self._play(play_index)
            play["name"] = self._c(play_name)
            play["hosts"] = list(hosts)

    def batch_start(self, play_index, batch_index, hosts):
        with self._lock:
            self._play(play_index)["batches"].append(list(hosts))

    def task_start(self, play_index, task_index, task_name, module, hosts):
        with self._lock:
            self._task(self._play(play_index), task_index, self._c(task_name), module)

    def host_result(self, host, play_index, task_index, task_name, module, result, started, ended):
        result = result or {}
        status = result_status(result)
        with self._lock:
            task = self._task(self._play(play_index), task_index, self._c(task_name), module)
            entry = {"status": status, "started": started, "ended": ended,
                     "duration": result.get("duration", (ended - started) if started is not None
                                            and ended is not None else None),
                     "result": self._c(result)}
            task["results"][self._c(host)] = entry
            count(self.doc["stats"].setdefault(self._c(host), zero()), result)

    def host_facts(self, host, facts):
        with self._lock:
            self.doc["facts"][self._c(host)] = self._c(facts or {})

    def play_end(self, play_index, stopped_reason):
        with self._lock:
            self._play(play_index)["stopped_reason"] = self._c(stopped_reason)

    def run_end(self, status, stats, exit_code):
        with self._lock:
            self.doc.update(status=status, exit_code=exit_code, ended=time.time())
            if stats:
                self.doc["stats"] = self._c(stats)

    def document(self) -> dict:
        with self._lock:
            return self.doc
