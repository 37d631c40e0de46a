"""The suite's own layout: fixtures come from tests/conftest.py, shared helpers from
tests/helpers/; a test module imports neither another test module nor conftest.py (an
imported fixture is a second definition, and a helper moved with a test breaks another)."""

from __future__ import annotations

import ast
import pathlib

import pytest

TESTS = pathlib.Path(__file__).parent
SOURCES = sorted(p for p in TESTS.rglob("*.py") if "__snapshots__" not in p.parts)


def imported(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def forbidden(module: str) -> bool:
    last = module.rpartition(".")[2]
    return module.startswith("tests.") and (last.startswith("test_") or last == "conftest")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_module_imports_a_test_module_or_conftest(path):
    wrong = [f"line {n}: {m}" for n, m in imported(path) if forbidden(m)]
    assert wrong == [], f"{path.name} imports {wrong}: move what it needs to tests/helpers/ or conftest.py"


def test_the_check_sees_a_test_module_import():
    assert forbidden("tests.test_judges") and forbidden("tests.conftest")
    assert not forbidden("tests.helpers.judge") and not forbidden("tests.helpers")
