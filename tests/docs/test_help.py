"""Each command's --help ends with two or three real examples, and each example parses with
the very parser it documents (a renamed flag or a dropped option fails here)."""
from __future__ import annotations

import shlex

import pytest
from fleetops.cli import build_parser


def _commands():
    import argparse
    top = build_parser()
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _examples(parser) -> list[str]:
    epilog = parser.epilog or ""
    assert epilog.startswith("examples:\n"), f"{parser.prog}: --help has no examples"
    return [ln.strip() for ln in epilog.splitlines()[1:] if ln.strip()]


@pytest.mark.parametrize("name,parser", list(_commands()), ids=[n for n, _ in _commands()])
def test_help_ends_with_examples_that_parse(name, parser, capsys):
    examples = _examples(parser)
    assert 2 <= len(examples) <= 4
    assert "examples:" in parser.format_help().rsplit("\n\n", 1)[-1]
    for line in examples:
        words = shlex.split(line.split("|", 1)[0], comments=True)
        assert words[:2] == ["fleetops", name], line
        args = build_parser().parse_args(words[1:])
        assert args.command == name
