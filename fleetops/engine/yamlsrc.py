"""YAML loading that remembers where every mapping, key and list came from.

Every later error (unknown key, wrong type, undefined variable) must name the
exact file:line:column, so positions are kept on the loaded data itself:
mappings are `Mapping` (a dict) and lists are `Sequence` (a list), both with
`.where`; scalars stay plain Python values. Duplicate keys are errors, not
silent overrides, and every YAML problem becomes one BadInput line.
"""
from __future__ import annotations

import yaml

from fleetops.engine.templating.unsafe import mark_unsafe
from fleetops.errors import BadInput

try:  # libyaml keeps correct marks (checked: line/column match the pure loader)
    _BaseLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _BaseLoader = yaml.SafeLoader

# Alias expansion is shared in memory but any walk over the data (validation,
# templating) would visit every expanded node: refuse "billion laughs" documents.
MAX_EXPANDED_NODES = 1_000_000

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _where(name: str, mark) -> str:
    return f"{name}:{mark.line + 1}:{mark.column + 1}"


class Mapping(dict):
    """A YAML mapping: a dict that knows where it and each of its keys/values are."""

    where: str | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.where = None
        self._key_where: dict = {}
        self._value_where: dict = {}

    def key_where(self, key) -> str | None:
        """file:line:col of `key` (falls back to the mapping's own position)."""
        return self._key_where.get(key, self.where)

    def value_where(self, key) -> str | None:
        """file:line:col of the value under `key` (falls back to the key's position)."""
        return self._value_where.get(key, self.key_where(key))

    def set_where(self, key, key_where: str | None, value_where: str | None = None) -> None:
        """Record positions for a key added after loading (e.g. merged task args)."""
        if key_where:
            self._key_where[key] = key_where
        if value_where:
            self._value_where[key] = value_where


class Sequence(list):
    """A YAML list that knows where it and each item are."""

    where: str | None = None

    def __init__(self, *args):
        super().__init__(*args)
        self.where = None
        self._item_where: list = []

    def item_where(self, index: int) -> str | None:
        """file:line:col of item `index` (falls back to the list's position)."""
        if 0 <= index < len(self._item_where):
            return self._item_where[index]
        return self.where


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]  # the C loader when PyYAML has it
    """SafeLoader variant building Mapping/Sequence with positions and rejecting duplicate keys."""

    def __init__(self, stream, name: str):
        super().__init__(stream)
        self.fo_name = name
        self.fo_own_keys: dict = {}     # id(mapping node) -> ids of its own (not merged) key nodes

    def flatten_mapping(self, node):
        """PyYAML's merge, which also flattens every merged source: each node's own keys are
        noted the first time, before merged ones join them."""
        self.fo_own_keys.setdefault(id(node), {id(k) for k, _ in node.value if k.tag != _MERGE_TAG})
        super().flatten_mapping(node)


def _construct_sequence(loader: _Loader, node):
    seq = Sequence()
    seq.where = _where(loader.fo_name, node.start_mark)
    yield seq
    for child in node.value:
        seq.append(loader.construct_object(child, deep=True))
        seq._item_where.append(_where(loader.fo_name, child.start_mark))


def _hashable(loader: _Loader, key, knode):
    try:
        hash(key)
    except TypeError:
        raise BadInput("a mapping key must be a plain value, not a list or mapping",
                       where=_where(loader.fo_name, knode.start_mark)) from None
    return key


def _construct_mapping(loader: _Loader, node):
    """A mapping with PyYAML's merge (`<<:`) rules, which ansible-core 2.19 uses: the same values
    in the same key order; only the mapping's own keys may not repeat."""
    mapping = Mapping()
    mapping.where = _where(loader.fo_name, node.start_mark)
    yield mapping
    loader.flatten_mapping(node)
    own = loader.fo_own_keys[id(node)]
    first_line: dict = {}
    for knode, vnode in node.value:
        key = _hashable(loader, loader.construct_object(knode, deep=True), knode)
        if id(knode) in own:
            if key in first_line:
                raise BadInput(f"duplicate key {key!r} (first at line {first_line[key]})",
                               where=_where(loader.fo_name, knode.start_mark))
            first_line[key] = knode.start_mark.line + 1
        mapping[key] = loader.construct_object(vnode, deep=True)
        mapping._key_where[key] = _where(loader.fo_name, knode.start_mark)
        mapping._value_where[key] = _where(loader.fo_name, vnode.start_mark)


def _refuse_vault(loader: _Loader, node):
    raise BadInput("Ansible Vault values (!vault) are not supported: decrypt them first",
                   where=_where(loader.fo_name, node.start_mark))


def _construct_unsafe(loader: _Loader, node):
    """Ansible's `!unsafe`: the value is data, never a template (every string in it)."""
    if isinstance(node, yaml.ScalarNode):
        return mark_unsafe(loader.construct_scalar(node))
    raise BadInput("!unsafe marks a string, not a list or mapping (mark each string)",
                   where=_where(loader.fo_name, node.start_mark))


_Loader.add_constructor(_MAP_TAG, _construct_mapping)
_Loader.add_constructor(_SEQ_TAG, _construct_sequence)
_Loader.add_constructor("!unsafe", _construct_unsafe)
_Loader.add_constructor("!vault", _refuse_vault)


def _expanded_size(node, memo: dict) -> int:
    """Number of nodes the document has once aliases are expanded (memoised per node)."""
    key = id(node)
    if key in memo:
        if memo[key] is None:
            raise BadInput("recursive alias (a node that contains itself) is not supported",
                           where=f"{memo['name']}:{node.start_mark.line + 1}:{node.start_mark.column + 1}")
        return memo[key]
    memo[key] = None  # in progress: meeting it again means the node contains itself
    if isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        total = 1
    memo[key] = total
    return total


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, col


def load_yaml_text(text: str, name: str = "<string>"):
    """Parse one YAML document; `name` is used as the file in every position."""
    if text.startswith("\ufeff"):
        text = text[1:]
    loader = _Loader(text, name)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {'name': name}) > MAX_EXPANDED_NODES:
            raise BadInput(f"document expands to more than {MAX_EXPANDED_NODES} nodes "
                           "through aliases (refused)", where=_where(name, node.start_mark))
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem and exc.context_mark is not None:
            problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
        where = _where(name, mark) if mark is not None else name
        raise BadInput("YAML syntax error: " + " ".join(problem.split()), where=where) from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise BadInput(f"YAML syntax error: {exc.reason}: character #x{char:04x}",
                       where=f"{name}:{line}:{col}") from None
    except yaml.YAMLError as exc:  # pragma: no cover - any other PyYAML error, still one line
        raise BadInput("YAML error: " + " ".join(str(exc).split()), where=name) from None
    except RecursionError:
        raise BadInput("YAML document is nested too deeply", where=name) from None
    finally:
        loader.dispose()


def read_text(path: str) -> str:
    """Read a UTF-8 text file, turning every OS/encoding problem into BadInput naming it."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise BadInput(f"file not found: {path}") from None
    except IsADirectoryError:
        raise BadInput(f"is a directory, not a file: {path}") from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise BadInput(f"not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                       where=f"{path}:{line}:{col}") from None


def load_yaml(path: str):
    """Load a YAML file with positions; missing/unreadable/invalid files raise BadInput."""
    return load_yaml_text(read_text(path), str(path))


def yaml_kind(value) -> str:
    """A loaded value named as its author wrote it, for "must be X, got Y" lines."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def plain(value):
    """Drop position bookkeeping: plain dicts and lists for variables handed to others."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
