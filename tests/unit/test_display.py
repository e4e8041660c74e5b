"""The terminal view and the --json collector, fed by a fake event stream."""
from __future__ import annotations

import json
import re

from rich.console import Console

from fleetops.display import JsonCollector, LiveDisplay, excerpt
from fleetops.engine.events import Fanout

from tests.unit.engine.test_results import SECRET, feed


def recap_rows(text: str) -> dict:
    """host -> [ok, changed, unreachable, failed, skipped, rescued, ignored] parsed from the recap table."""
    rows = {}
    after = text[text.index("Recap"):]
    for line in after.splitlines():
        cells = [c.strip() for c in re.split(r"[│|┃]", line) if c.strip()]
        if len(cells) == 8 and all(c.isdigit() for c in cells[1:]):
            rows[cells[0]] = [int(c) for c in cells[1:]]
    return rows


def render(live: bool, secret=None, stats=True):
    console = Console(record=True, width=120, force_terminal=live, color_system=None if not live else "standard")
    view = LiveDisplay(console=console, secret_values={secret} if secret else None, results_dir="/tmp/res/runs.db")
    feed(view, "20250101T000000Z-abcdef", secret=secret, end=stats)
    if not stats:
        view.run_end("failed", {}, 2)
    return console.export_text()


def test_plain_stream_and_recap():
    text = render(live=False)
    assert "PLAY configure" in text and "TASK task 0 (command)" in text
    assert re.search(r"changed\s+web1", text)
    assert re.search(r"failed\s+db1 0\.50s: boom", text)
    # Executor's final stats win: web1 3 ok / 1 changed, db1 2 ok / 1 failed.
    assert recap_rows(text) == {"db1": [2, 0, 0, 1, 0, 0, 0], "web1": [3, 1, 0, 0, 0, 0, 0],
                                "web2": [3, 0, 0, 0, 0, 0, 0]}
    assert "20250101T000000Z-abcdef" in text.splitlines()[-1]
    assert "/tmp/res/runs.db" in text
    assert "\x1b[" not in text


def test_recap_from_results_when_no_stats():
    text = render(live=False, stats=False)
    assert recap_rows(text) == {"db1": [2, 0, 0, 1, 0, 0, 0], "web1": [3, 1, 0, 0, 0, 0, 0],
                                "web2": [3, 0, 0, 0, 0, 0, 0]}


def test_live_mode_renders_and_stops():
    console = Console(record=True, width=120, force_terminal=True)
    view = LiveDisplay(console=console)
    view.run_start("rid", "pb.yml", "inv.yml", {})
    view.play_start(0, "p", ["a", "b"])
    view.host_task_start("a", "slow task")
    rendered = Console(width=120, record=True)
    rendered.print(view._render_live())
    live_text = rendered.export_text()
    assert "slow task" in live_text and "1 host(s) in flight" in live_text
    view.host_result("a", 0, 0, "slow task", "command", {"changed": True}, 1.0, 2.0)
    view.run_end("ok", {"a": {"ok": 1, "changed": 1}}, 0)
    assert view._live is None
    assert recap_rows(console.export_text())["a"] == [1, 1, 0, 0, 0, 0, 0]


def test_secret_never_shown():
    text = render(live=False, secret=SECRET)
    assert "command failed: token" in text
    assert SECRET not in text


def test_failure_excerpt_is_one_line():
    assert excerpt("first\nsecond") == "first …"
    assert excerpt("x" * 500, 20) == "x" * 19 + " …"
    assert excerpt(None) == ""


def test_json_collector_document():
    col = JsonCollector(secret_values={SECRET})
    feed(col, "rid", secret=SECRET)
    doc = col.document()
    text = json.dumps(doc)
    assert SECRET not in text and "unlisted-token-value" not in text
    assert doc["run_id"] == "rid" and doc["status"] == "failed" and doc["exit_code"] == 2
    assert [p["name"] for p in doc["plays"]] == ["configure"]
    tasks = doc["plays"][0]["tasks"]
    assert [t["index"] for t in tasks] == [0, 1, 2]
    assert tasks[2]["results"]["db1"]["status"] == "failed"
    assert tasks[0]["results"]["web1"]["status"] == "changed"
    assert tasks[0]["results"]["web1"]["result"]["rc"] == 0
    assert doc["stats"]["db1"]["failed"] == 1 and doc["stats"]["web1"]["changed"] == 1
    assert doc["facts"]["web1"]["arch"] == "x86_64"


def test_fanout_feeds_both():
    col_a, col_b = JsonCollector(), JsonCollector()
    feed(Fanout(col_a, col_b), "rid")
    a, b = col_a.document(), col_b.document()
    assert (a["plays"], a["stats"], a["status"]) == (b["plays"], b["stats"], b["status"])
    assert col_a.document()["stats"]["web1"]["ok"] == 3


def test_live_view_with_many_worker_threads():
    """Results printed from worker threads while the live panel refreshes: no deadlock, all counted."""
    import io
    import threading

    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    view = LiveDisplay(console=console, refresh_per_second=100)
    hosts = [f"h{i:02d}" for i in range(8)]
    view.run_start("rid", "pb.yml", "inv.yml", {})
    view.play_start(0, "p", hosts)

    def worker(h):
        for t in range(20):
            view.host_task_start(h, f"t{t}")
            view.host_result(h, 0, t, f"t{t}", "command", {"changed": t % 2 == 0}, 0.0, 0.1)

    threads = [threading.Thread(target=worker, args=(h,), daemon=True) for h in hosts]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads)
    view.run_end("ok", None, 0)
    assert view.totals["changed"] == 8 * 10 and view.totals["ok"] == 8 * 10
    assert view.stats["h03"]["ok"] == 20 and view.stats["h03"]["changed"] == 10


def _big_run(view, hosts: int, tasks: int = 3):
    names = [f"h{i:04d}" for i in range(hosts)]
    view.run_start("rid-big", "pb.yml", "inv.yml", {})
    view.play_start(0, "fleet", names)
    stats = {h: {"ok": 0, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 0, "rescued": 0, "ignored": 0}
             for h in names}
    alive = list(names)
    for t in range(tasks):
        view.task_start(0, t, f"step {t}", "command", alive)
        for i, h in enumerate(alive):
            if t == 1 and i % 250 == 7:
                res, key = {"failed": True, "msg": f"boom on {h}"}, "failed"
            elif t == 0 and i == 3:
                res, key = {"unreachable": True, "msg": "connection refused"}, "unreachable"
            else:
                res, key = {"changed": t == 2}, "changed" if t == 2 else "ok"
            stats[h][key] += 1
            view.host_result(h, 0, t, f"step {t}", "command", res, 0.0, 0.1)
        alive = [h for h in alive if stats[h]["failed"] == 0 and stats[h]["unreachable"] == 0]
    view.play_end(0, None)
    view.run_end("failed", stats, 2)
    return stats


def test_a_big_play_shows_one_line_per_task_and_only_the_hosts_that_went_wrong():
    console = Console(record=True, width=200, force_terminal=False)
    view = LiveDisplay(console=console)
    _big_run(view, 1000)
    text = console.export_text()
    lines = text.splitlines()
    assert len(lines) < 40, len(lines)
    progress = [ln for ln in lines if "done ·" in ln]
    assert [ln.split(":")[0].strip() for ln in progress] == ["step 0", "step 1", "step 2"]
    assert "1000/1000 done · ok 999 · changed 0 · failed 0 · unreachable 1" in progress[0]
    assert "999/999 done · ok 995 · changed 0 · failed 4" in progress[1]
    assert "995/995 done · ok 0 · changed 995" in progress[2]
    assert "hosts/s" in progress[0]
    # failures and unreachable hosts are listed as they happen, each once, with the reason
    assert re.search(r"unreachable\s+h0003 0\.10s: connection refused", text)
    assert len(re.findall(r"failed\s+h\d{4} 0\.10s: boom on", text)) == 4
    assert "Recap 1000 host(s): ok 1994 · changed 995 · unreachable 1 · failed 4" in text
    assert set(recap_rows(text)) == {"h0003", "h0008", "h0258", "h0508", "h0758"}


def test_the_view_can_be_chosen():
    small = Console(record=True, width=200)
    _big_run(LiveDisplay(console=small, view="tasks"), 5, tasks=1)
    text = small.export_text()
    assert "5/5 done" in text and "TASK step 0" in text and not re.search(r"ok\s+h0000", text)
    big = Console(record=True, width=200)
    _big_run(LiveDisplay(console=big, view="hosts"), 60, tasks=1)
    text = big.export_text()
    assert len(re.findall(r"\bok\s+h\d{4} 0\.10s", text)) == 59 and "done ·" not in text


def test_a_detail_line_does_not_name_a_column_its_cell_already_names():
    from fleetops.display import Col, FittedTable
    cols = [Col("host", lambda r: r["host"], ident=True),
            Col("holders", lambda r: r["holders"], wide_only=True, detail=True),
            Col("journal", lambda r: r["journal"], wide_only=True, detail=True)]
    rows = [{"host": "lab06", "holders": "holders unknown: maybe tui 9836", "journal": "wal"}]
    lines = [str(x) for x in FittedTable(cols, rows, key=lambda r: r["host"] + ":").details(80)]
    assert lines == ["lab06: holders unknown: maybe tui 9836; journal wal"], lines
