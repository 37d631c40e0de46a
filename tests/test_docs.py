"""The docs keep up with the code (sqlite-utils' `test_docs.py` habit): every command of
`lethe`, every option of every command, and every public method of `engine.Memory` is
named in README.md or a file in docs/. A failure names what is missing."""

import inspect
import pathlib
import re

import click
import pytest

from engine import Memory
from engine.cli import every_command, main

ROOT = pathlib.Path(__file__).parent.parent
DOCS = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


def _subcommands(group):
    return (every_command() if group is main else group.commands).items()


def commands(group=main, prefix=()):
    for name, cmd in sorted(_subcommands(group)):
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, prefix + (name,))


def options():
    """Every flag of the group and of each command, as `lethe CMD --flag`; -h/--help once."""
    help_flags = main.get_help_option(click.Context(main)).opts
    yield from (pytest.param(flag, id=f"lethe {flag}") for flag in help_flags)
    for path, cmd in [((), main), *commands()]:
        for param in cmd.params:
            if isinstance(param, click.Option):
                yield from (
                    pytest.param(flag, id=" ".join(("lethe", *path, flag)))
                    for flag in param.opts + param.secondary_opts
                )


def public_methods():
    return sorted(name for name, value in inspect.getmembers(Memory, callable) if not name.startswith("_"))


def mentioned(pattern: str) -> bool:
    return re.search(pattern, DOCS) is not None


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=" ".join)
def test_every_command_is_documented(path):
    assert mentioned(r"\blethe " + re.escape(" ".join(path)) + r"\b"), (
        f"`lethe {' '.join(path)}` is in no doc"
    )


@pytest.mark.parametrize("flag", list(options()))
def test_every_option_is_documented(flag):
    assert mentioned(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])"), f"{flag} is in no doc"


@pytest.mark.parametrize("name", public_methods())
def test_every_memory_method_is_documented(name):
    assert mentioned(r"(?<![\w])" + re.escape(name) + r"\("), f"Memory.{name}() is in no doc"
