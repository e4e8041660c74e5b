"""One task on one host: when -> loop -> render args -> module -> until/retries ->
changed_when/failed_when -> register, facts, notify. Nothing here touches other hosts
or emits events; fact gathering is a task like any other (`facts_task`).

Kept apart from executor.py and tasklist.py (which own batches, blocks, handlers, counters
and events) so the Ansible task semantics can be read in one place.
"""
from __future__ import annotations

import time
import traceback
from typing import Any, cast

from fleetops.engine import secrets as _secrets
from fleetops.engine.asyncjob import AsyncFailed, AsyncJob, AsyncStarted
from fleetops.engine.connection.runlock import HostBusy
from fleetops.engine.boolean import parse_bool, truthy
from fleetops.engine.module import Arg, Module, Result, TaskContext, result
from fleetops.engine.playbook.keywords import DEFAULT_POLL
from fleetops.engine.playbook.model import Task
from fleetops.engine.loopcontrol import loop_extras, registered as _registered
from fleetops.engine.playbook.withloop import WithLoop
from fleetops.engine.playcontext import PlayContext
from fleetops.engine.runcontext import Frame, RunContext
from fleetops.engine.templating.lookup_calls import loop_items
from fleetops.engine.taskenv import EnvironmentError_, render_environment
from fleetops.engine.templating import Templar, TemplateError, mark_unsafe
from fleetops.errors import Unreachable

# A play or inventory variable: false runs this host's payloads at the priority of the login.
LOW_PRIORITY_VAR = "fleetops_low_priority"


def evaluate_condition(templar, cond: Any, variables: dict) -> bool:
    """One `when`/`until`/`failed_when`/`changed_when`/`assert` item -> bool. Raises TemplateError."""
    if isinstance(cond, bool):
        return cond
    if cond is None:
        return True
    return truthy(templar.evaluate(cond, variables))


def as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def contract(res: Any) -> dict:
    """Make any module return value a full contract dict (a module bug must not crash the run)."""
    if not isinstance(res, dict):
        return result(failed=True, msg=f"module returned {type(res).__name__}, not a dict")
    for key, value in result().items():
        res.setdefault(key, value)
    return res


def failed_result(msg: str, **extra) -> dict:
    return result(failed=True, msg=msg, **extra)


def skipped_result(msg: str = "", **extra) -> dict:
    return result(skipped=True, msg=msg, **extra)


def unreachable_result(msg: str) -> dict:
    return result(msg=msg, unreachable=True)


def effective_check(run: RunContext, task: Task) -> bool:
    if task.check_mode is not None:
        return bool(task.check_mode)
    return bool(run.options.check)


class GatherFacts(Module):
    """The play's fact gathering: the `facts` payload, as the login user (never through become)."""

    name = "gather_facts"
    uses_become = False

    def run(self, ctx: TaskContext, args: dict) -> dict:
        res = ctx.payload("facts", {})
        if not res.get("failed") and not isinstance(res.get("ansible_facts"), dict):
            return failed_result("the facts payload returned no ansible_facts")
        return dict(res)


FACT_MODULES = (GatherFacts.name, "setup")
NO_LOG = "_fleetops_no_log"
CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
_KEPT = ("changed", "failed", "skipped", "unreachable", "ignored", "rescued", "duration", "attempts", "retries")


def censored(res: dict) -> dict:
    """What a `no_log` task shows (live view, --json, the results store): its outcome and
    ansible-core's `censored` line, each loop item the same; `register` keeps the whole result."""
    out = {k: res[k] for k in _KEPT if k in res}
    out["censored"] = CENSORED
    if isinstance(res.get("results"), list):
        out["results"] = [censored(r) if isinstance(r, dict) else CENSORED for r in res["results"]]
    return out


def facts_task(play) -> Task:
    """The task a play with `gather_facts` runs first on every host of each batch."""
    return Task(where=play.where, name="Gathering Facts", module=GatherFacts.name, tags=["always"],
                remote_user=play.remote_user, connection=play.connection, environment=list(play.environment))


def record(run: RunContext, host: str, task: Task, frame: Frame, res: dict, started: float, ended: float,
           secret_values: set) -> str:
    """Finish one host's result: the executor's keys (unreachable, ignored, rescued, duration),
    then what it leaves on the host for later tasks: registered result, facts, the failed task
    a rescue sees, notified handlers, included vars, groups added. Returns the host's outcome.
    Called with the run's lock held."""
    st = run.state(host)
    unreachable = bool(res.get("unreachable"))
    failed = bool(res.get("failed")) and not unreachable
    ignored = failed and bool(task.ignore_errors)
    rescued = failed and not ignored and frame.rescuable
    res["unreachable"] = unreachable
    res["ignored"] = ignored
    res["rescued"] = rescued
    res["duration"] = round(max(0.0, ended - started), 4)
    for key, default in result().items():
        res.setdefault(key, default)

    if secret_values:
        st.secrets |= secret_values   # a later task may show a fact templated from one
    if not failed and not unreachable and "run_once_host" not in res:
        added = [r for r in [res] + list(res.get("results", ())) if isinstance(r, dict) and "add_host" in r]
        if added:                      # before register: `changed` says whether the inventory did
            _add_hosts(run, added)
            res["changed"] = any(r.get("changed") for r in added)
    if task.register:
        st.persistent[task.register] = mark_unsafe(res)
    if not failed and not unreachable:
        items = [res] + [r for r in res.get("results", ()) if isinstance(r, dict)]
        facts: dict = {}               # host -> facts (delegate_facts: the delegate's, per item)
        for r in items:
            if isinstance(r.get("ansible_facts"), dict) and not r.get("failed"):
                to = r.get("delegated_host") if task.delegate_facts else None
                facts.setdefault(to if to in run.inventory.hosts else host, {}).update(r["ansible_facts"])
        if task.module in FACT_MODULES:    # a task's setup adds to the facts gathered before it
            before = {k: v for k, v in st.facts.items() if k != "ansible_facts"} if task.module == "setup" else {}
            own = {**before, **facts.get(host, {})}
            # ansible_facts also names each fact without its prefix (ansible_facts.os_family)
            bare = {k[len("ansible_"):]: v for k, v in own.items() if k.startswith("ansible_")}
            st.facts = mark_unsafe({**own, "ansible_facts": {**own, **bare}})
        else:
            for name, got in facts.items():
                run.state(name).persistent.update(mark_unsafe(got))
        for r in items:
            if isinstance(r.get("ansible_included_vars"), dict) and not r.get("failed"):
                st.persistent.update(r["ansible_included_vars"])   # project files: templates, rendered when used
        for r in items:
            if r.get("add_group") and not r.get("failed") and not r.get("skipped"):
                run.inventory.add_to_group(host, r["add_group"], r.get("parent_groups") or ["all"])
                run.groups_changed(host)
    if rescued:
        st.persistent["ansible_failed_task"] = {"name": task.name or task.module, "module": task.module}
        st.persistent["ansible_failed_result"] = mark_unsafe(res)
    if res.get("changed") and (not failed or ignored) and task.notify:
        st.notified.update(task.notify)
    if unreachable:
        st.unreachable = True
        return "unreachable"
    if failed and not ignored:
        return "rescued" if rescued else "failed"
    return "skipped" if res.get("skipped") else "ok"


def _add_hosts(run: RunContext, items: list) -> None:
    """add_host's results (each loop item's) join the inventory, as ansible-core's strategy adds
    them: `changed` says whether the host, its variables or its groups are new."""
    for r in items:
        info = r.get("add_host")
        if isinstance(info, dict) and not r.get("failed") and not r.get("skipped"):
            name = str(info["host_name"])
            r["changed"] = run.inventory.add_host_at_run_time(name, list(info.get("groups") or []),
                                                              dict(info.get("host_vars") or {}))
            run.groups_changed(name)


def _coerce(value, spec: Arg):
    """Rendered strings for typed arguments ("8080" for an int port) become the declared type."""
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    if not isinstance(value, str) or str in types:
        return value
    text = value.strip()
    if bool in types and parse_bool(text) is not None:
        return parse_bool(text)
    if int in types:
        try:
            return int(text)
        except ValueError:
            pass
    if float in types:
        try:
            return float(text)
        except ValueError:
            pass
    return value


def prepare_args(module_cls, rendered: dict, omit: str | None) -> dict:
    """Drop `omit`ted arguments, fill declared defaults, coerce rendered scalars."""
    args = {k: v for k, v in (rendered or {}).items() if not (isinstance(v, str) and v == omit)}
    for name, spec in (module_cls.args or {}).items():
        if name not in args and spec.default is not None:
            args[name] = spec.default
        elif name in args and args[name] is not None:
            args[name] = _coerce(args[name], spec)
    return args


def secret_arg_values(module_cls, args: dict) -> set:
    out: set = set()
    for name, spec in (module_cls.args or {}).items():
        if spec.secret:
            _secrets.scalar_texts(args.get(name), out)
    return out


def payload_args(pargs: dict, check: bool, diff: bool) -> dict:
    """The arguments a payload sees: check and diff mode are the run's (a module may ask for a
    read-only call, never turn either off), and no other `_`-prefixed key gets through."""
    out = {k: v for k, v in (pargs or {}).items() if not (isinstance(k, str) and k.startswith("_"))}
    out["_check"] = bool(check) or truthy(pargs.get("_check", False))
    out["_diff"] = bool(diff) or truthy(pargs.get("_diff", False))
    return out


class TaskRunner:
    """Computes one task's result for one host; `run` is the executor's _Run."""

    def __init__(self, run: RunContext, pctx: PlayContext, host: str, task: Task, frame: Frame):
        self.run = run
        self.pctx = pctx
        self.host = host
        self.task = task
        self.frame = frame
        self.templar = run.templar
        self.check = effective_check(run, task)
        self.secrets: set = set()
        self.variables: dict | None = None

    # -- the whole task
    def execute(self) -> dict:
        """compute(), with an engine bug failing this host only; a `no_log` task's result says
        so (NO_LOG), for the run to censor what it shows."""
        try:
            res = self.compute()
            if self._no_log():
                res[NO_LOG] = True
            return res
        except Unreachable as e:
            return unreachable_result(str(e))
        except Exception as e:  # noqa: BLE001 - an engine bug fails one host, not the whole run
            return failed_result(f"internal error: {type(e).__name__}: {e}",
                                 exception=traceback.format_exc(limit=8))

    def _no_log(self) -> bool:
        flag = self.task.no_log
        if Templar.is_template(flag):
            try:
                flag = self.templar.evaluate(flag, self.variables or {})
            except TemplateError:
                return True                   # when in doubt, hide
        return bool(flag)

    def compute(self) -> dict:
        task = self.task
        variables = self.run.task_vars(self.pctx, self.host, task, self.frame, self.check)
        self.variables = variables
        self.secrets |= self.run.secret_values(variables)
        self.secrets |= self.run.state(self.host).secrets
        conditions = as_list(task.when)
        if task.loop is None:
            res = self.when(conditions, variables)
            return res if res is not None else self._run_once(variables)
        try:
            items = self.loop_items(variables)
        except TemplateError as e:
            return failed_result(f"loop: {e}")
        loop_var = task.loop_var or "item"
        if not items:
            return skipped_result("No items in the list", results=[], skip_reason="No items in the list")
        results = []
        control = task.own.get("loop_control", {})
        for index, item in enumerate(items):
            if index and control.get("pause"):
                time.sleep(float(self._number(control["pause"], 0, variables)))
            iv = dict(variables)
            iv[loop_var] = item
            iv["ansible_loop_var"] = loop_var
            shown = loop_extras(control, items, index, self.templar, variables)
            iv.update(shown)
            res = self.when(conditions, iv)
            if res is None:
                res = self._run_once(iv)
            res[loop_var] = item
            res["ansible_loop_var"] = loop_var
            res.update(shown)
            results.append(res)
            if control.get("break_when") and self.templar.evaluate(control["break_when"], {**iv, **_registered(task, res)}):
                break
            if res.get("unreachable"):
                out = unreachable_result(res.get("msg", ""))
                out["results"] = results
                return out
            if self.run.stop.is_set():
                break
        failed = any(r.get("failed") for r in results)
        return {
            "results": results,
            "changed": any(r.get("changed") for r in results),
            "failed": failed,
            "skipped": all(r.get("skipped") for r in results),
            "msg": "One or more items failed" if failed else "All items completed",
        }

    def loop_items(self, variables: dict) -> list:
        loop = self.task.loop
        if isinstance(loop, WithLoop):
            value = loop_items(self.templar, loop.lookup, loop.terms, variables)
        elif isinstance(loop, str):
            value = self.templar.evaluate(loop, variables) if "{{" not in loop else self.templar.render(loop, variables)
        else:
            value = self.templar.render(loop, variables)
        if isinstance(value, dict):
            raise TemplateError("loop needs a list, got a mapping (use dict2items)")
        if isinstance(value, str) or not hasattr(value, "__iter__"):
            raise TemplateError(f"loop needs a list, got {type(value).__name__}")
        if self.task.own.get("loop_with") == "items":
            return [y for x in value for y in (x if isinstance(x, (list, tuple)) else [x])]
        return list(value)

    def when(self, conditions: list, variables: dict) -> dict | None:
        """None when every condition holds, else the task's skipped (or failed) result."""
        for cond in conditions:
            try:
                if not evaluate_condition(self.templar, cond, variables):
                    return skipped_result("Conditional result was False",
                                          skip_reason="Conditional result was False",
                                          false_condition=cond if isinstance(cond, (str, bool)) else str(cond))
            except TemplateError as e:
                return failed_result(f"error evaluating when ({cond}): {e}")
        return None

    # -- one execution (one item)
    def _run_once(self, variables: dict) -> dict:
        task = self.task
        module_cls = self.run.modules.get(task.module or "")
        if module_cls is None:
            return failed_result(f"unknown module {task.module!r}")
        self.secrets |= _secrets.derived_values(self.templar, task.args, variables, self.secrets)
        try:
            rendered = self.templar.render(task.args or {}, variables)
        except TemplateError as e:
            return failed_result(str(e))
        if not isinstance(rendered, dict):
            return failed_result(f"arguments rendered to {type(rendered).__name__}, not a mapping")
        args = prepare_args(module_cls, rendered, variables.get("omit"))
        self.secrets |= secret_arg_values(module_cls, args)
        environment: dict = {}
        if task.environment and not module_cls.runs_on_controller:
            self.secrets |= _secrets.derived_values(self.templar, task.environment, variables, self.secrets)
            try:
                environment = render_environment(task.environment, self.templar, variables, variables.get("omit"))
            except TemplateError as e:
                return failed_result(f"environment: {e}")
            except EnvironmentError_ as e:
                return failed_result(str(e))
            self.secrets |= _secrets.collect_secret_values(environment)
        try:
            ctx = self._context(module_cls, variables, environment)
        except TemplateError as e:
            return failed_result(f"delegate_to or become_user: {e}")
        except Unreachable as e:
            return unreachable_result(str(e))
        except HostBusy as e:
            return failed_result(str(e), host_busy=True)

        register = task.register
        until = as_list(task.until)
        try:
            retries = self._number(task.retries, 3, variables)
            delay = float(self._number(task.delay, 5, variables))
        except (TemplateError, TypeError, ValueError) as e:
            return failed_result(f"retries/delay: {e}")
        attempts_max = max(1, int(retries) + 1) if until else 1

        attempt = 0
        while True:
            attempt += 1
            res = self._call(module_cls, ctx, args)
            if ctx.delegate_to and isinstance(res, dict):
                res.setdefault("delegated_host", ctx.delegate_to)
            if res.get("unreachable"):
                return res
            cond_vars = variables
            if register:
                cond_vars = dict(variables)
                cond_vars[register] = mark_unsafe(res)
            if not res.get("skipped"):
                res = self._apply_conditions(res, cond_vars)
            if not until:
                return res
            res["attempts"] = attempt
            if register:
                cond_vars = dict(variables)
                cond_vars[register] = mark_unsafe(res)
            try:
                done = all(evaluate_condition(self.templar, c, cond_vars) for c in until)
            except TemplateError as e:
                res["failed"] = True
                res["msg"] = f"error evaluating until: {e}"
                return res
            if done:
                return res
            if attempt >= attempts_max:
                res["failed"] = True
                res["retries_exhausted"] = True
                res["msg"] = (res.get("msg") or "") + f" (until condition not met after {attempt} attempts)"
                return res
            if self.run.stop.wait(delay) if delay > 0 else self.run.stop.is_set():
                res["failed"] = True
                res["msg"] = (res.get("msg") or "") + " (interrupted while retrying)"
                return res

    def _number(self, value, default, variables):
        """retries/delay: an int or a template giving one."""
        if value is None:
            return default
        if isinstance(value, str):
            value = self.templar.render(value, variables)
        return float(value) if not isinstance(value, (int, float)) else value

    def _call(self, module_cls, ctx: TaskContext, args: dict) -> dict:
        try:
            res = contract(module_cls().run(ctx, dict(args)))
            if ctx.async_job is not None and ctx.async_job.info:
                res.update(ctx.async_job.info)       # the job's id, started, finished, results_file
            return res
        except (AsyncStarted, AsyncFailed) as e:
            return e.result
        except Unreachable as e:
            return unreachable_result(str(e))
        except HostBusy as e:             # the run lock, taken with the host's first command
            return failed_result(str(e), host_busy=True)
        except TemplateError as e:
            return failed_result(str(e))
        except Exception as e:  # noqa: BLE001 - a module bug fails this host, not the run
            return failed_result(f"module {module_cls.name} crashed: {type(e).__name__}: {e}",
                                 exception=traceback.format_exc(limit=8))

    def _apply_conditions(self, res: dict, cond_vars: dict) -> dict:
        task = self.task
        changed_when = task.changed_when
        failed_when = task.failed_when
        try:
            if changed_when:
                res["changed"] = all(evaluate_condition(self.templar, c, cond_vars) for c in changed_when)
            if failed_when:
                fw = all(evaluate_condition(self.templar, c, cond_vars) for c in failed_when)
                res["failed_when_result"] = fw
                res["failed"] = fw
        except TemplateError as e:
            res["failed"] = True
            res["msg"] = f"error evaluating changed_when/failed_when: {e}"
        return res

    def _delegate_target(self, variables: dict) -> str | None:
        """delegate_to rendered for this host and item: None, localhost, or an inventory host."""
        raw = getattr(self.task, "delegate_to", None)
        if raw is None:
            return None
        target = str(self.templar.render(raw, variables) if Templar.is_template(raw) else raw).strip()
        if target in ("localhost", "127.0.0.1") or target in self.run.inventory.hosts:
            return target
        raise Unreachable(f"delegate_to {target!r} is not a host of the inventory")

    def _context(self, module_cls, variables: dict, environment: dict | None = None) -> TaskContext:
        run, task = self.run, self.task
        target = self._delegate_target(variables)
        delegated = target in ("localhost", "127.0.0.1") and target not in run.inventory.hosts
        conn_host = target if target and not delegated else self.host   # whose connection the task uses
        if module_cls.runs_on_controller:
            transport = None
        else:
            own = conn_host == self.host
            transport = run.transport_for(conn_host, delegated, task.remote_user if own else None,
                                          task.connection if own else None)
        become_user = None
        if module_cls.uses_become and (task.become or run.inventory_become(conn_host)):  # play, blocks, own; or the host's
            become_user = task.become_user or run.inventory_become_user(conn_host) or "root"
            if Templar.is_template(become_user):        # `become_user: "{{ hermes_user }}"`
                become_user = str(self.templar.render(become_user, variables)).strip() or "root"
        python = None
        if transport is not None and not delegated:
            python = transport.params.python
        check, diff = self.check, bool(run.options.diff)
        low = variables.get(LOW_PRIORITY_VAR, True)
        if isinstance(low, str) and ("{{" in low or "{%" in low):
            low = self.templar.render(low, variables)
        low = parse_bool(low) if low not in (None, "") else True
        async_job = None
        if task.async_val and transport is not None and not check:
            seconds = float(self._number(task.async_val, 0, variables))
            poll = float(self._number(task.poll, DEFAULT_POLL, variables))
            if seconds > 0:
                async_job = AsyncJob(seconds, poll, stop=run.stop, call=lambda name, args: run.payload(
                    transport, name, payload_args(args, False, False), python=python, low_priority=False))

        def payload(name: str, args: dict, timeout: float | None = None) -> Result:
            if transport is None:
                raise RuntimeError(f"module {module_cls.name} runs on the controller and has no host connection")
            if low is None:
                return cast(Result, failed_result(f"variable '{LOW_PRIORITY_VAR}' must be true or false, got "
                                                  f"{variables.get(LOW_PRIORITY_VAR)!r}"))
            return run.payload(transport, name, payload_args(args, check, diff), python=python,
                               become_user=become_user, timeout=timeout, low_priority=low,
                               environment=environment)

        return TaskContext(
            host=self.host, transport=transport, variables=variables, check=check, diff=diff,
            host_dir=run.host_dir(self.host), payload=payload,
            project_dir=self.pctx.play.base_dir or run.playbook_dir,
            templar=self.templar, run_id=run.run_id, become_user=become_user, delegate_to=target,
            task=task, stop=run.stop, role_path=task.role_path,
            scrub=lambda text: _secrets.scrub(text, self.secrets), async_job=async_job,
            environment=dict(environment or {}),
        )

