"""The run's seam: the task loop, the task runner and dynamic includes reach a run only through
what `RunContext` names, and nothing of the engine types a run, a runner, a loop or a transport
as Any (or leaves it untyped)."""
from __future__ import annotations

import ast
from pathlib import Path

from fleetops.engine.runcontext import RunContext, TaskList

ENGINE = Path(__file__).resolve().parents[3] / "fleetops" / "engine"
USERS = ("tasklist.py", "taskrun.py", "includerun.py")
SEAM_NAMES = ("run", "runner", "loop", "transport")


def _declared(proto) -> set:
    return {n for n in proto.__annotations__} | {n for n, v in vars(proto).items()
                                                  if callable(v) and not n.startswith("_")}


def _reached(source: str, through: str) -> set:
    """Every attribute read off `run` / `self.run` (or `loop`, `runner`) in `source`."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == through:
                out.add(node.attr)
            elif isinstance(base, ast.Attribute) and base.attr == through and isinstance(base.value, ast.Name) \
                    and base.value.id == "self":
                out.add(node.attr)
    return out


def test_the_users_of_a_run_reach_exactly_what_run_context_names():
    reached = set()
    for name in USERS:
        reached |= _reached((ENGINE / name).read_text(encoding="utf-8"), "run")
    assert reached == _declared(RunContext)


def test_an_include_reaches_the_loop_only_through_task_list():
    reached = _reached((ENGINE / "includerun.py").read_text(encoding="utf-8"), "loop")
    assert reached == _declared(TaskList)


def test_no_private_reach_across_the_seam():
    found = []
    for name in USERS:
        for through in ("run", "runner", "loop"):
            found += [f"{name}: {through}.{a}" for a in _reached((ENGINE / name).read_text(encoding="utf-8"), through)
                      if a.startswith("_")]
    assert not found


def _loose(fn) -> list:
    out = []
    for arg in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        if arg.arg in SEAM_NAMES and (arg.annotation is None or ast.unparse(arg.annotation) in ("Any", "'Any'")):
            out.append(arg.arg)
    return out


def test_no_engine_signature_leaves_a_run_runner_loop_or_transport_untyped():
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{path.relative_to(ENGINE)}:{node.lineno}: {node.name}({a})" for a in _loose(node)]
    assert not found, "\n".join(found)


def test_the_signature_check_can_fail():
    tree = ast.parse("def f(run, transport: Any, loop: 'TaskList', x):\n    pass\n")
    assert _loose(tree.body[0]) == ["run", "transport"]


def _run_class() -> ast.ClassDef:
    tree = ast.parse((ENGINE / "executor.py").read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Run")


def _copied(cls: ast.ClassDef) -> list:
    """`self.x = self.part.y`: an attribute of one of the run's parts copied onto it."""
    out = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Attribute) and isinstance(node.value.value.value, ast.Name) \
                and node.value.value.value.id == "self":
            out += [f"{ast.unparse(t)} = {ast.unparse(node.value)}" for t in node.targets]
    return out


def test_the_run_provides_run_context_itself_copying_nothing_off_its_parts():
    cls = _run_class()
    assert _copied(cls) == []
    defined = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    methods = {n for n, v in vars(RunContext).items() if callable(v) and not n.startswith("_")}
    assert methods <= defined, sorted(methods - defined)


def test_the_copy_check_can_fail():
    cls = ast.parse("class _Run:\n    def __init__(self):\n        self.state = self.hostpool.state\n"
                    "        self.tasks = TaskLoop(self)\n").body[0]
    assert _copied(cls) == ["self.state = self.hostpool.state"]
