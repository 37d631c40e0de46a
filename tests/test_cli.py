"""The command line: help everywhere, JSON output, exit codes, the data commands, and the
package's shape (command modules import only `base` and the engine)."""

import ast
import json
import pathlib
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from engine.cli import every_command, main
from tests.helpers import POLICIES, store_of

LIFECYCLE = f"{POLICIES}/lifecycle.yaml"


def _subcommands(group):
    return (every_command() if group is main else group.commands).items()


def all_commands(group=main, prefix=()):
    for name, cmd in _subcommands(group):
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from all_commands(cmd, prefix + (name,))


@pytest.mark.parametrize(
    "path,cmd", list(all_commands()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_command_has_help(path, cmd):
    assert cmd.help and len(cmd.help.strip()) > 20, f"{' '.join(path)} has no help text"
    for flag in ("--help", "-h"):
        result = CliRunner().invoke(main, [*path, flag])
        assert result.exit_code == 0 and "Usage:" in result.output
    for param in cmd.params:
        if isinstance(param, click.Option) and param.name not in ("help",):
            assert param.help, f"{' '.join(path)} {param.opts[0]} has no help"


def test_data_commands_take_json():
    for name in ("validate", "compile", "run", "ls", "why", "add"):
        assert "json_" in [p.name for p in every_command()[name].params], name


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def test_add_run_ls_why_round_trip(db_path):
    base = ("--db", db_path, "--policy", LIFECYCLE)
    out = run(
        "add",
        "User prefers tabs over spaces",
        *base,
        "--importance",
        "8",
        "--now",
        "2026-01-05T09:00:00",
        "--json",
    )
    assert out.exit_code == 0, out.output
    assert "no API key: the built-in rules judged instead" in out.stderr  # no key, no --offline
    mid = json.loads(out.stdout)["id"]
    run("add", "Deadline is March 15", *base, "--expires-at", "2026-03-15", "--now", "2026-01-05T09:00:00")

    ls = json.loads(run("ls", *base, "--json", "--now", "2026-01-06T09:00:00").output)
    assert [m["content"] for m in ls][0] == "User prefers tabs over spaces"

    ran = run("run", *base, "--now", "2026-05-01T00:00:00")
    assert ran.exit_code == 0
    assert "expiry: 1 changed, 1 expired" in ran.output
    assert "decay: 2 changed, 1 archived" in ran.output

    why = run("why", str(mid), *base)
    assert why.exit_code == 0
    assert "[archived] User prefers tabs over spaces" in why.output
    decay = why.output.splitlines()[1].split("decay ")[1].split()[0]  # issue 43: 0.4062039...
    assert len(decay.split(".")[1]) <= 3, why.output
    assert "archived" in why.output.splitlines()[-1]
    again = run("run", *base, "--now", "2026-05-01T00:10:00")
    assert again.output.strip() == "nothing due"


def test_exit_codes(db_path, tmp_path):
    assert run("validate", LIFECYCLE).exit_code == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\npasses:\n  decay:\n    rules:\n"
        '      - when: "recency > 1"\n        set: {decay_score: 0}\n'
    )
    out = run("validate", str(bad))
    assert out.exit_code == 1
    assert "bad.yaml:5:" in out.output and "unknown name 'recency'" in out.output
    assert "Traceback" not in out.output
    assert run("why", "99", "--db", db_path, "--policy", LIFECYCLE).exit_code == 2
    assert run("run", "--db", db_path, "--policy", LIFECYCLE, "--pass", "nope").exit_code == 2
    assert run("ls", "--limit", "zero", "--db", db_path).exit_code == 2
    assert run("ls").exit_code == 2  # no database given
    assert run("frobnicate").exit_code == 2


def test_db_from_environment(db_path, monkeypatch):
    monkeypatch.setenv("LETHE_DB", db_path)
    assert run("add", "from the environment", "--policy", LIFECYCLE).exit_code == 0
    assert "from the environment" in run("ls", "--policy", LIFECYCLE).output


def test_compile_prints_sql_and_params():
    out = run("compile", LIFECYCLE)
    assert out.exit_code == 0
    assert "UPDATE memory_rows AS memories" in out.output and "-- params:" in out.output
    data = json.loads(run("compile", LIFECYCLE, "--json").output)
    assert set(data) == {"expiry", "decay", "compression", "recall"}


CLI_DIR = pathlib.Path(__file__).parent.parent / "engine" / "cli"
COMMAND_MODULES = sorted(p.stem for p in CLI_DIR.glob("*.py") if not p.stem.startswith("__"))


def imports(tree, inside_functions: bool):
    """(level, module) of every `from ... import` at the top of a module, or inside its functions."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nodes = [n for f in funcs for n in ast.walk(f)] if inside_functions else tree.body
    return [(n.level, n.module or "") for n in nodes if isinstance(n, ast.ImportFrom)] + [
        (0, a.name) for n in nodes if isinstance(n, ast.Import) for a in n.names
    ]


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_command_modules_never_import_the_group(name):
    tree = ast.parse((CLI_DIR / f"{name}.py").read_text())
    for level, module in imports(tree, inside_functions=False):
        assert level == 0, f"{name}.py: a relative import (the engine imports by absolute names)"
        if module == "engine.cli" or module.startswith("engine.cli."):
            # a sibling in engine/cli: only base, and base none at all
            assert module == "engine.cli.base" and name != "base", f"{name}.py imports {module}"
    ours = [(lv, m) for lv, m in imports(tree, inside_functions=True) if lv or m.startswith("engine")]
    assert not ours, f"{name}.py imports our modules inside a function: {ours}"


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_each_cli_module_imports_on_its_own(name):
    """In a fresh interpreter, so an import cycle cannot hide behind modules already loaded."""
    out = subprocess.run([sys.executable, "-c", f"import engine.cli.{name}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_python_m_engine_cli_is_lethe():
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "validate", LIFECYCLE], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"ok    {LIFECYCLE}")
    help_ = subprocess.run(
        [sys.executable, "-m", "engine.cli", "daemon", "-h"], capture_output=True, text=True
    )
    assert help_.returncode == 0 and "--interval" in help_.stdout


# ---- a user audit of the installed wheel ----------------------------------------------
def test_remember_says_why_turns_are_pending_not_always_an_unreachable_model(tmp_path):
    """`remember` printed "a model was unreachable" for any pending turn: one another
    process is judging, one with no recorded answer in a --replay file."""
    db = str(tmp_path / "a.db")
    from engine import Memory

    with Memory(db, offline=True) as mem:  # another process's turn, not judged yet
        store_of(mem).add_turn(mem.namespace, "I use make for builds.", "")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = run("remember", "I use uv.", "--db", db, "--replay", str(empty))
    assert out.exit_code == 0, out.output
    assert "a model was unreachable" not in out.output
    assert "2 turn(s) pending; `lethe run` retries them; `lethe pending` lists them:" in out.output
    assert "  1 turn(s): not judged yet: another process may be judging it now" in out.output
    assert "  1 turn(s): no recorded answer for step 'gate' (prompt " in out.output
    assert f"in {empty}" in out.output
    data = json.loads(run("remember", "I use pip.", "--db", db, "--replay", str(empty), "--json").output)
    assert data["pending"] == 3 and sum(data["pending_reasons"].values()) == 3


def test_a_bad_replay_file_is_an_error_that_names_it(tmp_path):
    """A --replay file that is not JSON lines failed each turn with a bare JSONDecodeError
    (naming no file) and left it pending; now nothing is stored and the error says where."""
    db, bad = str(tmp_path / "a.db"), tmp_path / "answers.jsonl"
    bad.write_text('{"step": "gate", "prompt_sha": "x", "answer": "{}"}\ngarbage\n')
    out = run("remember", "I use uv.", "--db", db, "--replay", str(bad))
    assert out.exit_code == 2
    assert f"error: replay file {bad}:2 is not an answer recorded by --record" in out.output
    assert "JSONDecodeError" not in out.output
    bad.write_text('["no", "fields"]\n')
    out = run("run", "--db", db, "--replay", str(bad))
    assert out.exit_code == 2 and f"replay file {bad}:1 " in out.output


def test_render_without_example_says_what_the_template_needs(tmp_path):
    """`lethe render lifecycle gate` failed with `'user' is undefined` and no way on."""
    out = run("render", "lifecycle", "gate")
    assert out.exit_code == 1, out.output  # a template error, as with --vars lacking one
    assert "gate.j2 uses user, assistant, today; not given: user, assistant." in out.output
    assert "Add --example" in out.output and "--vars FILE.json" in out.output
    given = tmp_path / "vars.json"
    given.write_text('{"user": "I use uv.", "assistant": "ok"}')
    out = run("render", "lifecycle", "gate", "--vars", str(given))
    assert out.exit_code == 0 and "I use uv." in out.output
    assert run("render", "lifecycle", "gate", "--example").exit_code == 0


def test_why_says_what_superseded_a_memory_once(tmp_path):
    """The `superseded` event names the new memory and its text; a summary line after the
    events printed the same words again."""
    db = str(tmp_path / "a.db")
    for turn in ("I manage dependencies with poetry.", "I stopped using poetry, it's uv now."):
        assert run("remember", turn, "--db", db, "--offline").exit_code == 0
    out = run("why", "1", "--db", db)
    assert out.exit_code == 0, out.output
    assert out.output.count("superseded by #2: User stopped using poetry, it's uv now.") == 1
    assert json.loads(run("why", "1", "--db", db, "--json").output)["superseded_by"]["id"] == 2
