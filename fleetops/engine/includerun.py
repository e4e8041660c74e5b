"""A dynamic include_tasks / include_role (engine/playbook/dynamic.py) as ansible-core's linear
strategy runs it: per host its `when`, its loop and its rendered name decide which files it
includes, once per item; hosts that include the same file with the same item run its tasks
together, each included file in the order it was first reached, the item visible to its tasks.
"""
from __future__ import annotations

import copy
import threading
import time

from fleetops.engine.module import result
from fleetops.engine.playbook.dynamic import read_at_run_time
from fleetops.engine.playbook.model import Task
from fleetops.engine.playcontext import PlayContext, task_label, walk
from fleetops.engine.runcontext import Frame, RunContext, TaskList
from fleetops.engine.taskrun import TaskRunner, failed_result, skipped_result
from fleetops.engine.templating import TemplateError, mark_unsafe
from fleetops.errors import BadInput

_READ_LOCK = threading.Lock()


def bind(tasks: list, extra: dict) -> list:
    """Copies of a task tree whose every task also has `extra` as task vars (a loop item)."""
    out = []
    for t in tasks or ():
        c = copy.copy(t)
        c.vars = {**t.vars, **extra}
        for part in ("block", "rescue", "always"):
            if getattr(t, part) is not None:
                setattr(c, part, bind(getattr(t, part), extra))
        out.append(c)
    return out


def _number_like(pctx: PlayContext, copies: list, originals: list) -> None:
    """Give copies the event index of the task they copy (new tasks get the next free ones)."""
    for c, o in zip(walk(copies), walk(originals)):
        pctx.index_of[id(c)] = pctx.index_of.get(id(o), _next_index(pctx))


def _next_index(pctx: PlayContext) -> int:
    return max(list(pctx.index_of.values()) + [pctx.facts_index]) + 1


def _tasks_for(run: RunContext, pctx: PlayContext, task: Task, name: str, froms: dict) -> list:
    """The include's tasks for one rendered name: read before the run, or now (once per name)."""
    dyn = task.dynamic
    if not dyn.templated:
        return task.block or []
    cache = pctx.included
    key = (id(task), name, repr(sorted(froms.items())))
    with _READ_LOCK:
        if key not in cache:
            load = dyn.inherit.load
            known = {id(h) for h in pctx.play.handlers}
            tasks = read_at_run_time(dyn, name, froms)
            for t in walk(tasks):
                pctx.index_of[id(t)] = _next_index(pctx)
            for h in load.handlers:          # a role's handlers join the play's when it is included
                if id(h) not in known:
                    pctx.play.handlers.append(h)
                    pctx.index_of[id(h)] = _next_index(pctx)
            cache[key] = tasks
        return cache[key]


def host_includes(run: RunContext, pctx: PlayContext, task: Task, host: str, frame: Frame) -> tuple:
    """(a result to show for the include on this host or None, [(key, name, froms, item vars)])."""
    runner = TaskRunner(run, pctx, host, task, frame)
    variables = run.task_vars(pctx, host, task, frame, runner.check)
    conditions = list(task.when or [])
    dyn = task.dynamic
    if task.loop is None:
        passes = [None]
    else:
        try:
            passes = runner.loop_items(variables)
        except TemplateError as e:          # as ansible-core: a false `when` skips before the loop fails
            return runner.when(conditions, variables) or failed_result(f"loop: {e}"), []
        if not passes:
            return skipped_result("No items in the list", skip_reason="No items in the list"), []
    loop_var = task.loop_var or "item"
    entries = []
    skipped = None
    for item in passes:
        iv = dict(variables)
        extra = {} if task.loop is None else {loop_var: item, "ansible_loop_var": loop_var}
        iv.update(extra)
        res = runner.when(conditions, iv)
        if res is not None:
            if res.get("failed"):
                return res, []
            skipped = res
            continue
        try:
            name = run.templar.render(dyn.name, iv)
            froms = {k: run.templar.render(v, iv) for k, v in dyn.froms.items()}
        except TemplateError as e:
            return failed_result(f"{dyn.kind}: {e}"), []
        froms = {k: v for k, v in froms.items() if v != iv.get("omit")}
        entries.append(((str(name), repr(sorted(froms.items())), repr(extra)), str(name), froms, extra))
    return (skipped if not entries else None), entries


def _register(run: RunContext, task: Task, shown: dict, whole: set) -> None:
    """`register` on an include: its result, a loop's as `results` (one per file included)."""
    for host, results in shown.items():
        got = [r for r, _, _ in results]
        if host in whole or task.loop is None:
            value = got[0]
        else:
            value = result(msg="All items completed", results=got)
        with run.lock:
            run.state(host).persistent[task.register] = mark_unsafe(value)


def run_include(loop: TaskList, pctx: PlayContext, task: Task, live: list, frame: Frame) -> list:
    """Run a dynamic include over `live` (loop: the TaskLoop); returns the hosts still running."""
    run = loop.run
    order: dict = {}                    # key -> (tasks, [hosts]) in the order first reached
    shown: dict = {}
    whole: set = set()                  # hosts whose include was skipped or failed as a whole
    for host in live:
        started = time.time()
        res, entries = host_includes(run, pctx, task, host, frame)
        for key, name, froms, extra in entries:
            if key not in order:
                try:
                    tasks = _tasks_for(run, pctx, task, name, froms)
                except BadInput as e:
                    res = failed_result(f"{e.where}: {e.msg}" if e.where else e.msg)
                    break
                # an enclosing include's item (bound into this task's vars) reaches a file read now
                if task.dynamic.templated:
                    extra = {**{k: v for k, v in task.vars.items() if k not in task.dynamic.inherit.vars}, **extra}
                if extra:
                    copies = bind(tasks, extra)
                    _number_like(pctx, copies, tasks)
                    tasks = copies
                order[key] = (tasks, [])
            order[key][1].append(host)
            included = {"changed": False, "include": name, "include_args": froms, **extra}
            shown.setdefault(host, []).append((included, started, time.time()))
        if res is not None:
            shown[host] = [(res, started, time.time())]
            whole.add(host)
    failed = set()
    if shown:      # as ansible-core: each file a host includes is an ok result of the include
        run.events.task_start(pctx.index, pctx.index_of.get(id(task), -1), task_label(task), None, list(shown))
        for host, results in shown.items():
            for res, started, ended in results:
                if loop.finish(pctx, host, task, frame, res, started, ended, set()) in ("failed", "rescued",
                                                                                         "unreachable"):
                    failed.add(host)
    if task.register:
        _register(run, task, shown, whole)
    live = [h for h in live if h not in failed]
    for tasks, hosts in order.values():
        if not live or pctx.abort or run.stopped():
            break
        targets = [h for h in hosts if h in live and h not in failed]
        if not targets:
            continue
        ok = set(loop.run_list(pctx, tasks, targets, frame))
        live = [h for h in live if h in ok or h not in targets]
    return live
