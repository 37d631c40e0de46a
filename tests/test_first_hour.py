"""The first hour of a new user (issue 17): what the README says works as pasted.

The README's quick start runs exactly as written, from README.md, in an empty folder
with no API key, and prints what the README says; its shell lines, and the longer session
of docs/cli.md, run line by line and print what the page shows. Then one test (or a few)
per finding of the issue: each says what a new user met, and checks it is fixed by running it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import pathlib
import pty
import re
import shutil
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory
from engine.apps import report
from engine.apps.experiment import run_experiment, text_lines
from engine.base.errors import LetheError, PolicyError
from engine.cli import main
from engine.judges import rules
from engine.judges.keys import NoApiKeyWarning, PassesUndoneWarning, RulesJudgedWarning
from engine.policy import Model, reference, schema, variables
from engine.policy import expr as X
from engine.policy import load as load_policy
from engine.policy.formula_compiler import compile_formula
from tests.helpers import POLICIES, ROOT, SHIPPED_POLICIES, SHIPPED_SCENARIOS, context_of
from tests.helpers.fake_openai import FakeOpenAI

README = pathlib.Path(ROOT, "README.md").read_text(encoding="utf-8")
# the pages a new user reads: the README, then docs/ (reference text moved there)
DOCS = README + "".join(
    p.read_text(encoding="utf-8") for p in sorted(pathlib.Path(ROOT, "docs").glob("*.md"))
)
BIN = os.path.dirname(sys.executable)  # the venv running the tests: lethe is beside it
POETRY = os.path.join(ROOT, "scenarios", "poetry-to-uv.yaml")


def clean_env(**extra) -> dict:
    """The environment of a new user: no key, no endpoint, no LETHE_* settings. PYTHONPATH
    names this checkout only: the venv's editable install may be another checkout's (a git
    worktree's tests run with the main checkout's venv), and its engine is not under test."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "LETHE_")) and k not in ("PYTHONPATH",)
    }
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def section_of(heading: str, page: str = "README.md") -> str:
    """The text of the section `## heading` of `page` (README.md or docs/NAME.md)."""
    text = pathlib.Path(ROOT, page).read_text(encoding="utf-8")
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def block_after(heading: str, lang: str, nth: int = 0, page: str = "README.md") -> str:
    """The `nth` fenced block of language `lang` in the section `heading` of `page`."""
    section = section_of(heading, page)
    blocks = re.findall(rf"```{lang}\n(.*?)```", section, re.S)
    return blocks[nth]


def matches(expected: str, actual: str) -> bool:
    """`actual` reads as `expected`, where a line `...` stands for any lines and `...`
    inside a line for any text (times, long SQL)."""
    pattern = ""
    for line in expected.splitlines():
        if line.strip() == "...":
            pattern += r"(?:.*\n)*?"
        else:
            pattern += ".*?".join(re.escape(part) for part in line.rstrip().split("...")) + r"\n"
    actual = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, actual) is not None


def session(text: str) -> list[tuple[str, str, int]]:
    """(command, what it prints, exit status) for each `$ ` line of a console block."""
    steps = []
    for line in text.splitlines():
        if line.startswith("$ "):
            m = re.search(r"#\s*exits (\d+)\s*$", line)
            steps.append([line[2:], "", int(m[1]) if m else 0])
        else:
            steps[-1][1] += line + "\n"
    return [tuple(s) for s in steps]


def checkout(tmp_path) -> pathlib.Path:
    """A folder laid out like the repository, without its databases: the shell session runs
    in it as the README's reader would run it in theirs."""
    for name in ("scenarios", "policies", "prompts"):
        (tmp_path / name).symlink_to(os.path.join(ROOT, name))
    return tmp_path


def shell(command: str, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=clean_env(**env), capture_output=True, text=True, timeout=300
    )


def cli(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


# ---- done means: the README, as pasted ----------------------------------------------
def test_the_readme_python_example_runs_as_pasted_in_an_empty_folder(tmp_path):
    code = block_after("Quick start", "python")
    expected = block_after("Quick start", "text")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert done.stderr == ""  # no warning, no traceback


@pytest.mark.parametrize(
    "page, heading, least", [("README.md", "Quick start", 4), ("docs/cli.md", "A first session", 15)]
)
def test_the_shell_sessions_run_line_by_line_as_shown(tmp_path, page, heading, least):
    steps = session(block_after(heading, "console", page=page))
    assert len(steps) >= least and steps[0][0].startswith("lethe ")
    folder = checkout(tmp_path)
    for command, expected, status in steps:
        done = shell(command, folder)
        assert done.returncode == status, f"$ {command}\n{done.stdout}{done.stderr}"
        seen = done.stdout + done.stderr  # a terminal shows both: a hint after the output
        assert matches(expected, seen), (
            f"$ {command}\n--- the README shows:\n{expected}--- it printed:\n{seen}"
        )
        assert all(line in expected.splitlines() for line in done.stderr.splitlines()), (
            f"$ {command}\n{done.stderr}"
        )  # no warning, no traceback the page leaves out
    if any(command.startswith("lethe experiment") for command, _, _ in steps):
        assert (folder / "out.html").exists()


def test_the_matcher_is_strict_where_the_readme_is_literal():
    assert matches("a\n...\nd\n", "a\nb\nc\nd\n") and matches("x ... z\n", "x y z\n")
    assert not matches("a\nd\n", "a\nb\nd\n") and not matches("x y\n", "x z\n")


# ---- 1: the Python example, and a turn pending for want of a key --------------------
def test_1_remember_without_a_key_warns_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Memory("agent.db") as mem:  # the shipped lifecycle, found from an empty folder
        with pytest.warns(NoApiKeyWarning) as caught:
            written = mem.remember("We migrated the app's database to MySQL.", "Got it.")
        assert written == [] and "no API key" in written.pending
        assert str(caught[0].message) == (
            "no API key: the turn is pending; pass offline=True or set OPENAI_API_KEY"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second pending turn: said once is enough
            assert mem.remember("We deploy on Fridays.", "Ok.") == []
        assert len(mem.pending()) == 2


def test_1_a_local_endpoint_needs_no_key_and_gets_no_key_warning(tmp_path, monkeypatch):
    policy = tmp_path / "local.yaml"
    policy.write_text(
        "name: local\nextends: lifecycle\nmodels:\n"
        "  cheap: {provider: openai, model: gpt-4o-mini, base_url: "
        "'http://127.0.0.1:9/v1', max_retries: 0, timeout: 0.5}\n"
    )
    with Memory(str(tmp_path / "m.db"), policy=str(policy)) as mem, warnings.catch_warnings():
        warnings.simplefilter("error", NoApiKeyWarning)
        assert mem.remember("We use Postgres.", "Ok.").pending  # unreachable, not keyless


def test_1_the_cli_says_it_in_one_line(tmp_path):
    done = shell(
        'lethe remember "We use Postgres." "Ok." --db m.db; lethe remember "We use Redis." "Ok." --db m.db',
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stderr.splitlines()
        == ["warning: no API key: the turn is pending; pass --offline or set OPENAI_API_KEY"] * 2
    )
    assert "turn(s) pending" in done.stdout


# ---- 2: the Makefile trusts no Python it has not checked ----------------------------
FAKE_PYTHON = r"""#!/bin/sh
# a stand-in interpreter: reports FAKE_VERSION, makes venvs of itself, logs what it does
v="${FAKE_VERSION:-3.11}"
case "$1" in
  -c) minor=${v#*.}; if [ "$minor" -ge 11 ]; then echo "$v True"; else echo "$v False"; fi ;;
  -m) if [ "$2" = venv ]; then mkdir -p "$3/bin"
        printf '#!/bin/sh\nFAKE_VERSION=%s exec %s "$@"\n' "$v" "$0" > "$3/bin/python"
        chmod +x "$3/bin/python"; echo "venv $v" >> log
      elif [ "$2" = pip ]; then echo "pip $v" >> log; fi ;;
esac
"""


@pytest.fixture
def makefile(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("no make")
    shutil.copy(os.path.join(ROOT, "Makefile"), tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("")
    fake = tmp_path / "fakepy"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)

    def make(target, version="3.11"):
        # run as a user would, not as a sub-make of `make test` (which would say make[1])
        env = {k: v for k, v in clean_env().items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        return subprocess.run(
            ["make", target, f"PYTHON={fake}"],
            cwd=tmp_path,
            text=True,
            capture_output=True,
            env={**env, "FAKE_VERSION": version},
        )

    return make, tmp_path


def test_2_an_old_python_is_refused_in_one_line_before_anything_is_installed(makefile):
    make, folder = makefile
    done = make("test", version="3.10")
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert "Lethe needs Python 3.11 or newer" in line and "is 3.10" in line, line
    assert not (folder / ".venv").exists() and not (folder / "log").exists()


def test_2_a_venv_made_by_another_python_is_rebuilt(makefile):
    make, folder = makefile
    assert make("install", "3.11").returncode == 0
    assert make("install", "3.11").stdout.strip() == "make: Nothing to be done for 'install'."
    done = make("install", "3.12")
    assert done.returncode == 0 and "rebuilding it" in done.stdout
    assert (folder / "log").read_text().split("\n")[:-1] == ["venv 3.11", "pip 3.11", "venv 3.12", "pip 3.12"]


def test_2_make_clean_removes_the_bench_data(makefile):
    make, folder = makefile
    for d in (".venv", "demo-out", "bench/data"):
        (folder / d).mkdir(parents=True)
        (folder / d / "x").write_text("x")
    (folder / "bench" / "run.py").write_text("")
    assert make("clean", version="3.9").returncode == 0  # clean needs no good Python
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["bench"]
    assert [p.name for p in (folder / "bench").iterdir()] == ["run.py"]


# ---- 3: what was forgotten can be listed --------------------------------------------
@pytest.fixture
def lived(tmp_path, clock):
    """A store where something was superseded, forgotten, expired and kept."""
    path = str(tmp_path / "m.db")
    with Memory(path, offline=True, clock=clock) as mem:
        mem.remember("I manage dependencies with poetry.", "Noted.")  # 1, superseded
        mem.remember("I stopped using poetry, it's uv now.", "Noted.")  # 2, active
        mem.add("Ask Ana about the logo.")  # 3, forgotten
        mem.forget(3, "done")
        mem.add("The venue is booked until Friday.", expires_at="2026-01-06")  # 4, expired
        clock.advance(dt.timedelta(days=3))
        mem.run(["expiry"])
    return path


def test_3_memories_by_status_in_the_api(lived, clock):
    with Memory(lived, offline=True, clock=clock) as mem:
        assert [m.id for m in mem.memories("archived")] == [3]
        assert [m.id for m in mem.memories("superseded")] == [1]
        assert [m.id for m in mem.memories("expired")] == [4]
        assert [m.id for m in mem.memories("all")] == [4, 3, 2, 1]
        assert [m.id for m in mem.memories()] == [2]


@pytest.mark.parametrize(
    "status, ids",
    [("archived", [3]), ("superseded", [1]), ("expired", [4]), ("compressed", []), ("all", [4, 3, 2, 1])],
)
def test_3_lethe_ls_status(lived, status, ids):
    data = cli("ls", "--status", status, "--db", lived, "--json")
    assert data.exit_code == 0, data.output
    assert [m["id"] for m in json.loads(data.output)] == ids
    text = cli("ls", "--status", status, "--db", lived).output
    assert text.splitlines()[0].startswith(f"#{ids[0]} ") if ids else f"(no {status} memories)" in text
    if status == "superseded":
        assert "[superseded]  User manages dependencies with poetry.  (superseded by #2)" in text


def test_3_ls_status_refuses_a_query_and_an_unknown_status(lived):
    assert cli("ls", "--status", "archived", "-q", "poetry", "--db", lived).exit_code == 2
    assert cli("ls", "--status", "deleted", "--db", lived).exit_code == 2


# ---- 4: the lifecycle's actions show where they happen ------------------------------
def test_4_remember_prints_what_it_superseded_reinforced_and_gave_an_expiry(tmp_path):
    db = tmp_path / "m.db"
    assert cli("remember", "Our CI runs on Jenkins.", "--db", db, "--offline").exit_code == 0
    moved = cli("remember", "We moved CI from Jenkins to GitHub Actions.", "--db", db, "--offline")
    assert moved.output.splitlines() == [
        "#2 [active] We moved CI from Jenkins to GitHub Actions.",
        "  supersedes #1: Our CI runs on Jenkins.",
    ]
    again = cli("remember", "We moved CI from Jenkins to GitHub Actions.", "--db", db, "--offline")
    assert "(reinforced: confidence now" in again.output and "supersedes" not in again.output
    dated = cli("remember", "The demo is on 2031-05-04.", "--db", db, "--offline")
    assert dated.output.splitlines()[1] == "  expires 2031-05-04T23:59:59"


def test_4_remember_json_and_the_api_return_the_same(tmp_path):
    db = tmp_path / "m.db"
    cli("remember", "Our CI runs on Jenkins.", "--db", db, "--offline")
    data = json.loads(
        cli(
            "remember", "We moved CI from Jenkins to GitHub Actions.", "--db", db, "--offline", "--json"
        ).output
    )
    assert data["stored"] == [2] and data["reinforced"] == [] and data["expiring"] == []
    assert data["superseded"] == [{"id": 1, "by": 2, "content": "Our CI runs on Jenkins."}]
    with Memory(str(db), offline=True) as mem:
        w = mem.remember("The demo is on 2031-05-04.", "Ok.")
        assert w.expiring == [(3, "2031-05-04T23:59:59")] and w.as_dict()["expiring"]


def test_4_chat_shows_what_each_turn_superseded(tmp_path):
    db = tmp_path / "m.db"
    cli("remember", "Our CI runs on Jenkins.", "--db", db, "--offline")
    out = cli("chat", "--db", db, "--offline", input="We moved CI from Jenkins to GitHub Actions.\n")
    assert "  stored #2 [active]: We moved CI from Jenkins to GitHub Actions." in out.output
    assert "    supersedes #1: Our CI runs on Jenkins." in out.output
    line = cli("chat", "--db", db, "--offline", "--json", input="We use Jira for tickets.\n").output
    assert set(json.loads(line)) >= {"stored", "superseded", "reinforced", "expiring"}


def test_4_recall_relevance_is_the_real_one_or_none(tmp_path):
    db = str(tmp_path / "m.db")
    with Memory(db, offline=True) as mem:
        for text in (
            "We use PostgreSQL for the app database.",
            "Redis caches sessions.",
            "The frontend is React.",
            "Deploys go through Argo.",
        ):
            mem.add(text)
        explained = {c.memory.id: c.memory.relevance for c in mem.explain("which database?").candidates}
        assert explained[1] > 0.5
        recalled = mem.recall("which database?")
    assert recalled and all(m.relevance in (None, explained[m.id]) for m in recalled)
    data = json.loads(cli("recall", "which database?", "--db", db, "--offline", "--json").output)
    assert all(m["relevance"] in (None, explained[m["id"]]) for m in data)


# ---- 5: a policy reference generated from the validator's schema --------------------
def test_5_docs_policy_md_is_what_the_schema_generates():
    page = pathlib.Path(ROOT, "docs", "policy.md").read_text(encoding="utf-8")
    assert page == reference.markdown(), (
        "docs/policy.md is stale: python -m engine.policy.reference > docs/policy.md"
    )
    for word in (
        "idle_days",
        "age_days",
        "days_to_expiry",
        "`now`",
        "relevance",
        "extends",
        "Lists replace the parent's whole list",
        "half_life_days: 90",
    ):
        assert word in page, word


@pytest.mark.parametrize(
    "section, where, body",
    [
        ("policy", "", "bogus: 1\n"),
        ("model", "models.m", "models:\n  m: {provider: rules, bogus: 1}\n"),
        ("pass", "passes.p", "passes:\n  p: {bogus: 1, rules: [{when: 'true', event: x}]}\n"),
        ("rule", "passes.p.rules[0]", "passes:\n  p: {rules: [{when: 'true', event: x, bogus: 1}]}\n"),
        ("recall", "recall", "recall: {bogus: 1}\n"),
        (
            "candidates",
            "recall.select.candidates",
            "recall: {select: {model: rules, prompt: select.j2, candidates: {bogus: 1}}}\n",
        ),
    ],
)
def test_5_the_validator_refuses_exactly_what_the_schema_does_not_list(tmp_path, section, where, body):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\n" + body)
    with pytest.raises(PolicyError) as err:
        load_policy(str(path))
    known = ", ".join(sorted(schema.allowed(section)))
    assert f"unknown key 'bogus'; known: {known}" in err.value.message
    assert err.value.path == (f"{where}.bogus" if where else "bogus")


def test_5_the_schema_defaults_are_the_ones_the_engine_uses():
    pol = load_policy(os.path.join(POLICIES, "archive.yaml"))  # says little: defaults rule
    assert pol.recall.top_n == schema.default("recall", "top_n")
    assert pol.recall.match == schema.default("recall", "match")
    assert pol.recall.candidates.limit == schema.default("candidates", "limit")
    assert set(reference.TIME_WORD_DOCS) == set(X.TIME_WORDS)
    # a model entry's defaults, as documented, are the ones a Model gets
    given = {f.name: f.default for f in dataclasses.fields(Model) if f.name != "name"}
    documented = {k.name: k.default for k in schema.section("model").keys}
    assert documented.pop("provider") is schema.REQUIRED and documented == {
        k: v for k, v in given.items() if k != "provider"
    }


# ---- 6: validation catches what authors mistype -------------------------------------
def test_6_an_unknown_param_is_an_error_with_did_you_mean(tmp_path):
    """Issue 43: a misspelled param only warned (exit 0) and the intended value silently
    stayed in force; with another error in the file the warning disappeared."""
    (tmp_path / "policies").mkdir()
    child = tmp_path / "policies" / "mine.yaml"
    child.write_text("name: mine\nextends: lifecycle\nparams:\n  half_life_dayz: 7\n")
    out = cli("validate", child)
    assert out.exit_code == 1
    assert out.output.splitlines()[0] == (
        f"FAIL  {child}:4:3: params.half_life_dayz: unknown param 'half_life_dayz': no formula "
        "reads it (did you mean 'half_life_days'?)"
    )
    with pytest.raises(PolicyError, match="half_life_dayz"):
        Memory(str(tmp_path / "m.db"), policy=str(child), offline=True)
    child.write_text(
        'name: mine\nextends: lifecycle\nparams:\n  half_life_dayz: 7\nscores:\n  rank: "improtance"\n'
    )
    shown = [line for line in cli("validate", child).output.splitlines() if line.startswith("FAIL")]
    assert [line.split(": ")[1] for line in shown] == ["scores.rank", "params.half_life_dayz"]
    for name in SHIPPED_POLICIES:
        assert load_policy(os.path.join(POLICIES, name + ".yaml")).warnings == [], name


def test_6_a_param_an_extended_file_writes_and_nothing_reads_warns(tmp_path):
    (tmp_path / "policies").mkdir()
    base = tmp_path / "policies" / "base.yaml"
    base.write_text(
        'name: base\nextends: lifecycle\nparams:\n  weight: 2\nscores:\n  rank: "importance * weight"\n'
    )
    child = tmp_path / "policies" / "child.yaml"
    child.write_text('name: child\nextends: base.yaml\nscores:\n  rank: "importance"\n')
    out = cli("validate", child)
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[1].startswith(f"warn  {base}:4:3: params.weight: unknown param")
    child.write_text('name: child\nextends: base.yaml\nscores:\n  rank: "importanse"\n')
    out = cli("validate", child)  # an error beside it: the warning is still shown
    assert out.exit_code == 1 and "warn  " in out.output and "FAIL  " in out.output


def test_6_validate_fails_a_policy_whose_extra_is_not_installed(tmp_path, monkeypatch):
    from engine.judges import embeddings

    monkeypatch.setattr(embeddings, "_installed", lambda module: module != "sentence_transformers")
    out = cli("validate", os.path.join(POLICIES, "lifecycle-local.yaml"), "lifecycle")
    assert out.exit_code == 1
    assert out.output.splitlines()[0] == (
        f"FAIL  {POLICIES}/lifecycle-local.yaml: embed needs the 'local' extra "
        "(sentence_transformers not installed): pip install 'lethe-lifecycle[local]'"
    )
    assert out.output.splitlines()[1].startswith("ok    lifecycle  (lifecycle: ")


def test_6_a_path_to_a_shipped_policy_outside_the_repository_hints_the_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = cli("validate", "policies/lifecycle.yaml")
    assert out.exit_code == 1
    assert "the shipped policy of that name is 'lifecycle', without a path" in out.output


BROKEN = """\
name: broken
extends: lifecycle
params:
  half_life_days: [7]
scores:
  freshness: "min(1.0, exp(-0.693 * floor(idle_days) / 30)"
  rank: "improtance * confidence"
passes:
  decay:
    evry: 1d
"""


def test_6_every_mistake_in_a_file_is_reported(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    out = cli("validate", path)
    assert out.exit_code == 1
    fails = [line for line in out.output.splitlines() if line.startswith("FAIL")]
    assert [f.split(": ")[1] for f in fails] == [
        "params.half_life_days",
        "scores.freshness",
        "scores.rank",
        "passes.decay.evry",
    ]
    assert "unclosed '(' at character 4" in fails[1] and "EOF" not in out.output
    assert "unknown name 'improtance' (did you mean 'importance'?)" in fails[2]
    assert "did you mean 'every'?" in fails[3]


def test_6_validate_json_errors_carry_file_line_col_and_key_path(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    [report] = json.loads(cli("validate", path, "--json").output)
    assert report["ok"] is False
    assert report["errors"][2] == {
        "file": str(path),
        "line": 7,
        "col": 9,
        "path": "scores.rank",
        "message": "unknown name 'improtance' (did you mean 'importance'?)",
    }
    assert len(report["errors"]) == 4


def test_6_did_you_mean_for_functions_too():
    with pytest.raises(Exception, match=r"unknown function 'expo' \(did you mean 'exp'\?\)"):
        compile_formula("expo(1)", X.Scope())


# ---- 8: a mistyped --db is refused by commands that only read -----------------------
@pytest.mark.parametrize(
    "command",
    [["ls"], ["why", "1"], ["recall", "x", "--offline"], ["pending"], ["costs"], ["ls", "--status", "all"]],
)
def test_8_read_only_commands_refuse_a_missing_database(tmp_path, command):
    (tmp_path / "agent.db").write_bytes(b"")
    out = cli(*command, "--db", tmp_path / "agnet.db")
    assert out.exit_code == 2
    assert f"no database at {tmp_path / 'agnet.db'} (did you mean {tmp_path / 'agent.db'}?)" in out.output
    assert not (tmp_path / "agnet.db").exists()


@pytest.mark.parametrize(
    "command", [["remember", "We use uv.", "--offline"], ["add", "We use uv.", "--offline"], ["run"]]
)
def test_8_write_commands_create_it(tmp_path, command):
    assert cli(*command, "--db", tmp_path / "new.db").exit_code == 0
    assert (tmp_path / "new.db").exists()


def test_8_a_file_uri_names_the_same_file_for_every_command(tmp_path):
    """Before: `add` wrote through `file:agent.db` and `why` then said there was no
    database at it."""
    uri = f"file:{tmp_path / 'agent.db'}"
    assert cli("add", "We use uv.", "--db", uri, "--offline").exit_code == 0
    assert (tmp_path / "agent.db").exists()
    for command in (["why", "1"], ["ls"], ["ls", "--status", "all"]):
        out = cli(*command, "--db", uri)
        assert out.exit_code == 0 and "We use uv." in out.output, (command, out.output)
    assert cli("ls", "--db", f"{uri}?cache=private").exit_code == 0  # parameters of its own
    missing = cli("ls", "--db", f"file:{tmp_path / 'nope.db'}")
    assert missing.exit_code == 2 and "no database at file:" in missing.output


@pytest.mark.parametrize("name", ["", " ", "\t"])
def test_8_a_blank_namespace_is_refused(tmp_path, name):
    """Before: `-n " "` was a namespace of its own, its memories out of sight of `default`."""
    out = cli("add", "We use uv.", "--db", tmp_path / "m.db", "--offline", "-n", name)
    assert out.exit_code != 0 and "namespace must be a name" in out.output
    with pytest.raises(LetheError, match="namespace must be a name"):
        Memory(str(tmp_path / "m.db"), namespace=name, offline=True)


def test_8_a_date_too_near_the_year_9999_says_so(tmp_path):
    """Before: '9999-12-31 is not a usable ISO-8601 date', which it is."""
    out = cli("add", "x", "--db", tmp_path / "m.db", "--offline", "--expires-at", "9999-12-31")
    assert out.exit_code == 2 and "too near the year 9999" in out.output
    assert (
        "not a usable ISO-8601"
        in cli("add", "x", "--db", tmp_path / "m.db", "--offline", "--expires-at", "soon").output
    )


def test_8_importing_a_missing_source_says_there_is_no_database(tmp_path):
    out = cli("import", tmp_path / "nope.db", "--db", tmp_path / "copy.db")
    assert out.exit_code == 2 and f"no database at {tmp_path / 'nope.db'}" in out.output
    assert not (tmp_path / "copy.db").exists()


def test_8_a_policys_db_may_not_name_a_server(tmp_path, monkeypatch):
    """Before: `db: postgresql://their-host/x` in a policy made libpq send PGPASSWORD,
    PGUSER and ~/.pgpass's password to the server the policy chose."""
    monkeypatch.setenv("PGPASSWORD", "s3cret")
    monkeypatch.delenv("LETHE_DB", raising=False)
    policy = tmp_path / "p.yaml"
    policy.write_text('name: p\nextends: archive\ndb: "postgresql://127.0.0.1:9/lethe"\n')
    out = cli("add", "hi", "--policy", policy, "--offline")
    assert out.exit_code == 2 and "not trusted with your PostgreSQL credentials" in out.output
    policy.write_text("name: p\nextends: archive\ndb: here.db\n")  # a file: as before
    assert cli("add", "hi", "--policy", policy, "--offline").exit_code == 0
    assert (tmp_path / "here.db").exists()


def test_8_why_names_the_namespace_it_searched(tmp_path):
    db = tmp_path / "m.db"
    cli("add", "We use uv.", "--db", db, "--offline", "-n", "my-agent")
    missing = cli("why", "4", "--db", db)
    assert "no memory #4 in namespace 'default' (it holds 0 memories)" in missing.output
    elsewhere = cli("why", "1", "--db", db)
    assert "no memory #1 in namespace 'default': #1 belongs to namespace 'my-agent'" in elsewhere.output
    assert cli("why", "1", "--db", db, "-n", "my-agent").exit_code == 0
    assert "`--namespace/-n`" in DOCS


# ---- 9: a template's variables, shown and checked -----------------------------------
STEPS = [
    ("lifecycle", "gate"),
    ("lifecycle", "confidence"),
    ("lifecycle", "contradiction"),
    ("lifecycle", "expiry"),
    ("lifecycle", "compression.cluster"),
    ("lifecycle", "compression.merge"),
    ("lifecycle", "select"),
    ("fused", "fused"),
    ("scenes", "extract"),
    ("scenes", "summarise"),
]


@pytest.mark.parametrize("policy, step", STEPS)
def test_9_render_example_renders_every_shipped_step(policy, step):
    out = cli("render", policy, step, "--example")
    assert out.exit_code == 0, out.output
    assert len(out.output) > 100


def test_9_render_help_lists_each_steps_variables():
    text = cli("render", "--help").output
    for step in ("gate", "select", "cluster", "merge", "summarise"):
        line = next(line for line in text.splitlines() if re.match(rf"\s+.*\b{step}\b.*:", line))
        assert all(name in line for name in variables.names(step)), line


@pytest.mark.parametrize(
    "template, fragment",
    [
        ("Save? {{ usr }}\n", "template uses an undefined name: 'usr' is undefined (step 'gate' gives:"),
        ("Save?\n{{ memory.contnt }}\n", "'dict object' has no attribute 'contnt'"),
    ],
)
def test_9_validate_catches_a_template_using_what_its_step_does_not_give(tmp_path, template, fragment):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "gate.j2").write_text(template)
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nextends: lifecycle\nprompts: mine\n")
    out = cli("validate", path)
    assert out.exit_code == 1
    assert fragment in out.output and "gate.j2:" in out.output and "(used by write[0])" in out.output


def test_9_the_table_names_what_the_engine_really_gives(tmp_path, clock):
    """Every judgment the engine asks for, in the write pipeline, recall, compression and
    the scene steps, is given exactly the variables the table lists."""
    seen = {}
    for policy in ("lifecycle", "scenes"):
        with Memory(str(tmp_path / f"{policy}.db"), policy=policy, offline=True, clock=clock) as mem:
            ask = context_of(mem).judges.ask

            def recording(step, judgment, given, ask=ask):
                seen[step] = set(given)
                return ask(step, judgment, given)

            context_of(mem).judges.ask = recording
            for text in (
                "I prefer readable code.",
                "I like readable code.",
                "Readable code matters.",
                "Keep code readable.",
                "I value readable code.",
                "Code should be readable.",
            ):
                mem.remember(text, "Noted.")
            mem.recall("what code do I like?")
            if policy == "lifecycle":  # five alike, so the cluster and merge judges are asked
                for text in (
                    "User likes readable code.",
                    "User prefers readable code.",
                    "User wants readable code.",
                    "User values readable code.",
                    "User asks for readable code.",
                ):
                    mem.add(text, judged=False)
                mem.run(["compression"])
    assert set(seen) >= {
        "gate",
        "confidence",
        "contradiction",
        "expiry",
        "select",
        "cluster",
        "merge",
        "extract",
        "summarise",
    }
    for step, given in seen.items():
        assert given == set(variables.names(step)), step


# ---- 10: pinning a policy with the plugin -------------------------------------------
def test_10_the_readme_plugin_snippet_pins_a_policy_and_names_a_missed_check(tmp_path):
    (tmp_path / "scenarios").mkdir()
    shutil.copy(POETRY, tmp_path / "scenarios" / "poetry-to-uv.yaml")
    (tmp_path / "policies").mkdir()
    policy = tmp_path / "policies" / "my-agent.yaml"
    policy.write_text("name: my-agent\nextends: lifecycle\nparams: {half_life_days: 60}\n")
    (tmp_path / "test_mine.py").write_text(
        block_after("Pinning your own with a snapshot", "python", page="docs/policies.md")
    )
    # without the plugins of this suite's own test extras (hypothesis, langgraph's
    # langsmith), which a project pinning its policy would not load: 1.7 s per run
    pytest_ = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:langsmith_plugin",
        "test_mine.py",
    ]
    first = subprocess.run(
        pytest_ + ["--snapshot-update"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    again = subprocess.run(
        pytest_, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stdout
    policy.write_text("name: my-agent\nextends: archive\n")  # remembers all, forgets nothing
    broken = subprocess.run(
        pytest_, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300
    )
    assert broken.returncode == 1
    assert (
        'MISS recall "which dependency manager should I use in the commands?" excludes '
        '"poetry": got: I manage dependencies with poetry.'
    ) in broken.stdout


def test_10_files_beside_the_test_are_found_when_pytest_runs_from_the_project_root(tmp_path):
    tests = tmp_path / "tests"
    (tests / "scenarios").mkdir(parents=True)
    shutil.copy(POETRY, tests / "scenarios" / "poetry-to-uv.yaml")
    (tests / "policies").mkdir()
    (tests / "policies" / "my-agent.yaml").write_text("name: my-agent\nextends: lifecycle\n")
    (tests / "test_mine.py").write_text(
        block_after("Pinning your own with a snapshot", "python", page="docs/policies.md")
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "-p",
            "no:langsmith_plugin",
            "--snapshot-update",
            "tests/test_mine.py",
        ],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tests / "__snapshots__" / "test_mine.ambr").exists()


def test_10_each_memory_of_the_dump_starts_with_its_content(lethe_scenario):
    dump = lethe_scenario(POETRY, os.path.join(POLICIES, "lifecycle.yaml"))
    contents = [m[0] for m in dump["memories"]]
    assert contents[0] == "User manages dependencies with poetry."
    assert all(isinstance(c, str) and set(f) >= {"status", "events"} for c, f in dump["memories"])
    text = json.dumps(dump, indent=2, sort_keys=True)  # as a JSON snapshot stores it
    assert text.index('"User manages dependencies with poetry."') < text.index('"status"')


# ---- 11: experiments that report as they go -----------------------------------------
def test_11_progress_per_run_on_a_terminal(tmp_path):
    master, slave = pty.openpty()
    done = subprocess.run(
        [os.path.join(BIN, "lethe"), "experiment", POETRY, "-p", "archive", "-p", "lifecycle", "--offline"],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        timeout=300,
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    lines = seen.decode().replace("\r", "").splitlines()
    assert [re.sub(r"\(.*\)", "()", line) for line in lines] == [
        "[1/2] switched from poetry to uv under archive: 2/4 ()",
        "[2/2] switched from poetry to uv under lifecycle: 4/4 ()",
    ]
    assert done.returncode == 1 and "progress" not in done.stdout


def test_11_no_progress_lines_off_a_terminal():
    out = CliRunner().invoke(main, ["experiment", POETRY, "-p", "lifecycle", "--offline"])
    assert out.exit_code == 0 and "[1/1]" not in out.output


def test_11_a_bad_report_path_fails_before_the_run(tmp_path):
    out = cli(
        "experiment", POETRY, "-p", "lifecycle", "--offline", "--report", tmp_path / "missing" / "r.html"
    )
    assert out.exit_code == 2
    assert "does not exist" in out.output and "expectations met" not in out.output
    assert (
        cli("experiment", POETRY, "-p", "lifecycle", "--offline", "--report", tmp_path).exit_code == 2
    )  # a folder


def test_11_judge_fallbacks_are_counted_per_policy(tmp_path):
    with FakeOpenAI(responder=lambda request: "not json at all") as fake:
        policy = tmp_path / "garbled.yaml"
        policy.write_text(
            "name: garbled\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, "
            f"model: gpt-4o-mini, base_url: '{fake.base_url}'}}\n"
            "  strong: {provider: openai, model: gpt-4o, "
            f"base_url: '{fake.base_url}'}}\n"
        )
        exp = run_experiment([POETRY], [str(policy)], offline=False)
    assert exp.summary()["garbled"]["fallbacks"] > 0
    head = next(line for line in text_lines(exp) if line.startswith("policy "))
    assert "fallbacks" in head.split()


def test_11_the_report_opens_with_the_comparison(tmp_path):
    path = tmp_path / "r.html"
    cli("experiment", POETRY, "-p", "archive", "-p", "lifecycle", "--offline", "--report", path)
    page = path.read_text(encoding="utf-8")
    body = page[page.index("<body>") :]
    assert body.index("What each policy did") < body.index("Expectations met")
    assert "Where a policy recalled something stale" in body
    assert "I manage dependencies with poetry. (stale)" in body
    assert "Some expectations were missed" not in page
    # the policies side by side: one chart per measure, a line per policy, named in the legend
    side = body[body.index("The policies side by side") :].split("</svg>", 1)[0]
    for title in [*(f"{s} memories" for s in report.STATUSES), "stale recalls"]:
        assert f">{title}</text>" in side
    assert ">archive</text>" in side and ">lifecycle</text>" in side
    assert side.count(">days since the scenario started</text>") == len(report.MEASURES)
    # small charts: whole titles (wrapped, never cut) and named axes
    assert "\u2026" not in page and ">switched from poetry to uv</text>" in body
    assert body.count(">days</text>") == 2 and body.count(">memories</text>") >= 4


def test_11_stale_recalls_so_far_add_up_to_the_summary():
    exp = run_experiment([POETRY], ["archive", "lifecycle"], offline=True)
    for p in exp.policies:
        days, stale = report.stale_so_far([r for r in exp.runs if r.policy is p])
        assert days == sorted(days) and stale == sorted(stale)
        assert stale[-1] == exp.summary()[p.name]["stale_recalls"]
    assert exp.summary()["archive"]["stale_recalls"] > 0


def test_11_chart_lines_with_equal_values_stay_visible():
    widths = [report.WIDTHS[s] for s in report.STATUSES]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)
    assert len({str(report.DASHES[s]) for s in report.STATUSES}) >= 4


# ---- 12: the offline judges keep plain facts and know a repeat ----------------------
@pytest.mark.parametrize(
    "user",
    [
        "The code freeze starts on March 13.",
        "The API rate limit is 100 requests per second.",
        "My order 4417 hasn't arrived yet.",
        # the same class, worded otherwise
        "The conference talk is 25 minutes long.",
        "Our staging database has 40 GB of data.",
        "The license expires on 2026-09-30.",
        "The refund hasn't come through yet.",
        "My flight lands at 6:40 pm.",
        "The budget for Q3 is 12000 euros.",
    ],
)
def test_12_plain_facts_are_kept(user):
    assert rules.gate(user, "Noted.")["save"] is True


@pytest.mark.parametrize(
    "user",
    [
        "The weather is lovely today.",
        "It is 5 pm.",
        "What is 15% of 80?",
        "Convert 30 celsius to fahrenheit.",
    ],
)
def test_12_but_not_small_talk_or_lookups_with_numbers(user):
    assert rules.gate(user, "Sure.")["save"] is False


def test_12_a_semicolon_ends_a_sentence():
    content = rules.gate("Priya moved to the search team; Tom owns billing now.", "Ok.")["content"]
    assert content == "Priya moved to the search team. Tom owns billing now."


@pytest.mark.parametrize(
    "old, new",
    [
        ("Priya owns the billing service.", "Priya moved to the search team. Tom owns billing now."),
        ("Jon maintains the payments API.", "Marta took over the payments API."),
        ("User owns the release process.", "Dana runs the release process now."),
        ("Priya is on the billing team.", "Priya moved to the search team."),
        ("User's order 4417 hasn't arrived yet.", "User's order 4417 arrived."),
        ("The API rate limit is 100 requests per second.", "The API rate limit is 200 requests per second."),
    ],
)
def test_12_a_new_holder_a_new_team_or_a_wait_that_ended_supersedes(old, new):
    assert rules.contradiction(new, [(1, old)]) == {"supersedes": [1], "confirms": []}


@pytest.mark.parametrize(
    "old, new",
    [
        ("Jon maintains the search API.", "Marta took over the payments API."),  # other work
        ("Priya owns billing.", "Tom also owns billing."),  # additive
        ("Priya is on the billing team.", "Priya likes the search team."),  # not a move
    ],
)
def test_12_other_work_and_additions_supersede_nothing(old, new):
    assert rules.contradiction(new, [(1, old)])["supersedes"] == []


@pytest.mark.parametrize(
    "old, new",
    [
        ("We switched from poetry to uv.", "We switched from poetry to uv."),
        ("We switched from poetry to uv.", "We have switched from poetry to uv!"),
        ("I stopped using poetry, it's uv now.", "I stopped using poetry, it's uv now"),
        ("The deadline moved to April 1.", "The deadline moved to April 1st."),
    ],
)
def test_12_a_near_verbatim_repeat_is_a_confirmation(old, new):
    assert rules.contradiction(new, [(1, old)]) == {"supersedes": [], "confirms": [1]}


@pytest.mark.parametrize(
    "old, new",
    [
        ("We moved CI from Jenkins to GitHub Actions.", "We moved CI from GitHub Actions to Jenkins."),
        ("The deadline is March 15.", "The deadline is March 20."),
        ("We use MySQL for the app.", "We use PostgreSQL for the app."),
    ],
)
def test_12_but_a_near_repeat_that_changes_something_is_no_confirmation(old, new):
    assert rules.contradiction(new, [(1, old)])["confirms"] == []


def test_12_end_to_end_a_repeat_reinforces_and_a_handover_supersedes(tmp_path):
    with Memory(str(tmp_path / "m.db"), offline=True) as mem:
        assert mem.remember("We switched from poetry to uv.", "Noted.").stored == [1]
        again = mem.remember("We switched from poetry to uv.", "Noted.")
        assert again.reinforced == [1] and again.superseded == [] and again.stored == []
        mem.remember("Priya owns the billing service.", "Ok.")
        moved = mem.remember("Priya moved to the search team; Tom owns billing now.", "Ok.")
        assert moved.superseded == [(2, 3)]
        assert [mem.get(i).content for i in moved.stored] == [  # two facts, two memories
            "Priya moved to the search team.",
            "Tom owns billing now.",
        ]


def test_12_the_readme_says_what_the_offline_judges_cannot_do():
    section = section_of("The offline rules", "docs/models.md")
    assert "match words" in section and "dates" in section and "They cannot" in section


# ---- 13: the suite pins the shipped scenarios by name -------------------------------
def test_13_a_users_own_scenario_and_policy_do_not_enter_the_suite(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(os.path.join(ROOT, "tests"), copy / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("scenarios", "policies", "prompts"):
        shutil.copytree(os.path.join(ROOT, name), copy / name)
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), copy)
    (copy / "scenarios" / "my-own.yaml").write_text(
        textwrap.dedent("""\
        name: my own
        steps:
          - add: We use Bazel.
          - recall: build tool?
            expect: {includes: [Make]}
        """)
    )
    (copy / "policies" / "my-agent.yaml").write_text("name: my-agent\nextends: lifecycle\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-o",
            "addopts=",
            "-q",
            "-p",
            "no:cacheprovider",
            "--snapshot-warn-unused",
            "tests/test_policy_scenarios.py",
            "tests/test_scenarios.py",
            "tests/test_compiled_sql.py",
            "tests/test_policy.py",
        ],
        cwd=copy,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "my-own" not in done.stdout and "my-agent" not in done.stdout
    assert "poetry-to-uv" in done.stdout


def test_13_the_named_scenarios_and_policies_are_the_shipped_ones():
    for name in SHIPPED_SCENARIOS:
        assert os.path.isfile(os.path.join(ROOT, "scenarios", name + ".yaml")), name
    for name in SHIPPED_POLICIES:
        assert os.path.isfile(os.path.join(POLICIES, name + ".yaml")), name


# ---- a user audit of the installed wheel: what works outside a checkout ----------------
def test_the_start_point_of_lethe_help_works_from_an_empty_folder(tmp_path):
    """`lethe --help` said "Start with `lethe validate policies/*.yaml`": with the wheel
    installed there is no policies/ folder, and it failed."""
    first = re.search(r"Start with `(lethe [^`]+)`", main.help)[1]
    done = shell(first, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok    lifecycle")


def test_a_missing_scenario_is_a_usage_error_that_says_where_scenarios_are(tmp_path, monkeypatch):
    """Exit 1 said "an expectation failed"; the README's exit codes make it a usage error."""
    monkeypatch.chdir(tmp_path)  # no checkout here: no scenarios/
    out = cli("experiment", "scenarios/poetry-to-uv.yaml", "-p", "lifecycle", "--offline")
    assert out.exit_code == 2, out.output
    assert "scenario not found: scenarios/poetry-to-uv.yaml" in out.output
    assert "scenarios/ folder of Lethe's repository" in out.output
    assert "2 usage or internal error" in DOCS


def test_the_readme_says_what_comes_from_the_repository_and_what_report_needs():
    shell_section = section_of("A first session", "docs/cli.md")
    intro, after = shell_section.split("```console", 1)[0], shell_section.rsplit("```", 1)[1]
    assert "`scenarios/` comes with the repository, not\nwith the package" in intro
    assert "`lethe validate\nlifecycle archive`" in intro
    assert "pip install\n'lethe-lifecycle[report]'" in after
    pin = section_of("Pinning your own with a snapshot", "docs/policies.md")
    assert "one of the repository's `scenarios/` (the package does not install\nthem)" in pin


# ---- a second first hour: what went unsaid -------------------------------------------
RULES_JUDGED = "no API key: the built-in rules judged instead; pass offline=True or set OPENAI_API_KEY"
RULES_JUDGED_CLI = (
    "warning: no API key: the built-in rules judged instead; pass --offline or set OPENAI_API_KEY"
)
FACTS = [
    "We use Postgres for billing.",
    "Deploys happen on Fridays.",
    "Alice owns the API.",
    "The CI runs on GitHub Actions.",
    "Logs go to Loki.",
    "The CLI is written in Go.",
]


def keyless(mem, call) -> list:
    """The NoApiKeyWarnings `call(mem)` gave, every one (Python's own once-per-place
    filter off: what is counted is the Memory's own once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(mem)
    return [w.message for w in caught if isinstance(w.message, NoApiKeyWarning)]


def test_keyless_add_says_once_that_the_rules_judged(tmp_path, clock):
    """`add` without a key fell back to the rules silently: a `judge_fallback` event said
    "model unreachable" much later, and the user thought the model had judged."""
    with Memory(str(tmp_path / "m.db"), clock=clock) as mem:
        said = keyless(mem, lambda m: [m.add("We use Postgres."), m.add("We deploy on Fridays.")])
        assert [str(w) for w in said] == [RULES_JUDGED] and type(said[0]) is RulesJudgedWarning
        assert said[0].for_cli() == RULES_JUDGED_CLI[len("warning: ") :]
        assert mem.counts() == {"active": 2}  # stored all the same, by the rules
        assert keyless(mem, lambda m: m.recall("postgres")) == []  # once per Memory


def test_keyless_recall_and_explain_say_once_that_the_rules_picked(tmp_path, clock):
    path = str(tmp_path / "m.db")
    with Memory(path, offline=True, clock=clock) as mem:
        for fact in FACTS:
            mem.add(fact)
        offline = [r.id for r in mem.recall("which database for billing?")]
    with Memory(path, clock=clock) as mem:
        got = []
        said = keyless(
            mem,
            lambda m: [
                got.append([r.id for r in m.recall("which database for billing?")]),
                m.recall("who owns the API?"),
                m.explain("Loki"),
            ],
        )
        assert [str(w) for w in said] == [RULES_JUDGED]
        assert got == [offline]  # what the rules pick, as offline


def test_keyless_passes_say_what_they_left_undone(tmp_path, clock):
    with Memory(str(tmp_path / "m.db"), clock=clock) as mem:
        for fact in FACTS:
            mem.add(fact, judged=False)
        results = []
        said = keyless(mem, lambda m: [results.extend(m.run(["compression"])), m.run(["compression"])])
        assert [type(w) for w in said] == [PassesUndoneWarning]
        assert str(said[0]) == (
            "no API key: the passes left the model's part undone (pending "
            "turns, merges); pass offline=True or set OPENAI_API_KEY"
        )
        assert "cluster model unreachable, nothing merged" in results[0].notes[0]


def test_the_warning_names_the_models_own_key_variable(tmp_path, clock):
    policy = tmp_path / "own.yaml"
    policy.write_text(
        "name: own\nextends: lifecycle\nmodels:\n"
        "  cheap: {provider: openai, model: gpt-4o-mini, api_key_env: TEAM_KEY}\n"
    )
    with Memory(str(tmp_path / "m.db"), policy=str(policy), clock=clock) as mem:
        said = keyless(mem, lambda m: m.add("We use Postgres."))
    assert [str(w) for w in said] == [RULES_JUDGED.replace("OPENAI_API_KEY", "TEAM_KEY")]


def test_no_keyless_warning_offline_replaying_or_on_a_server_of_its_own(tmp_path, clock):
    local = tmp_path / "local.yaml"
    local.write_text(
        "name: local\nextends: lifecycle\nmodels:\n"
        "  cheap: {provider: openai, model: gpt-4o-mini, base_url: "
        "'http://127.0.0.1:9/v1', max_retries: 0, timeout: 0.5}\n"
    )
    (tmp_path / "answers.jsonl").write_text("")
    for kw in ({"offline": True}, {"replay": str(tmp_path / "answers.jsonl")}, {"policy": str(local)}):
        with Memory(str(tmp_path / "m.db"), clock=clock, **kw) as mem:
            assert keyless(mem, lambda m: [m.add("We use Postgres."), m.recall("postgres")]) == [], kw


def test_keyless_lethe_add_and_recall_say_it_on_stderr_only(tmp_path):
    offline = shell(
        'lethe add "We use Postgres." --db o.db --offline; lethe recall postgres --db o.db --offline',
        tmp_path,
    )
    done = shell('lethe add "We use Postgres." --db m.db; lethe recall postgres --db m.db', tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [RULES_JUDGED_CLI] * 2
    assert done.stdout == offline.stdout and offline.stderr == ""
    assert RULES_JUDGED_CLI[len("warning: ") :] in DOCS.replace("\n", " ")


def test_an_empty_namespace_says_what_the_database_holds(tmp_path):
    """`lethe ls -n agnet` printed "(no candidates)" and exit 0: nothing said the memories
    were under `agent`."""
    done = shell(
        'lethe add "We use uv." --db m.db --offline -n agent >/dev/null; '
        'lethe add "We use Go." --db m.db --offline >/dev/null; '
        "lethe ls --db m.db -n agnet; lethe ls --db m.db -n agnet --status all --json; "
        "lethe recall uv --db m.db -n agnet --offline; "
        "lethe recall uv --db m.db -n agnet --offline --explain",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stderr.splitlines()
        == ["namespace 'agnet' holds nothing; this database holds: agent (1 memory), default (1)"] * 4
    )
    assert done.stdout.startswith("(no candidates)\n[]\n(nothing recalled)\nrecall 'uv'")
    # nothing of a status in a namespace that holds others, or a store with nothing: quiet
    quiet = shell(
        "lethe ls --db m.db -n agent --status archived; lethe run --db n.db; "
        "lethe ls --db n.db; lethe recall uv --db n.db --offline",
        tmp_path,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_an_expiry_in_the_past_is_refused_against_the_clock(tmp_path):
    """`--expires-at 2025-03-01` (meant: 2026) stored an active memory that the next
    expiry pass expired."""
    clock = FixedClock("2026-01-05T09:00:00")
    with Memory(str(tmp_path / "m.db"), offline=True, clock=clock) as mem:
        for past in ("2025-03-01", "2026-01-05T08:59:59", dt.datetime(2026, 1, 4, 12)):
            with pytest.raises(LetheError) as refused:
                mem.add("The beta launches on March 1.", expires_at=past)
            assert "is before now (2026-01-05T09:00:00)" in str(refused.value)
        assert "expires_at 2025-03-01T23:59:59 is before now" in str(
            pytest.raises(LetheError, mem.add, "x", expires_at="2025-03-01", judged=False).value
        )
        assert mem.counts() == {}
        kept = mem.add("The venue is booked today.", expires_at="2026-01-05")  # through its end
        assert mem.get(kept).expires_at == "2026-01-05T23:59:59"
    done = shell(
        'lethe add "The beta launches on March 1." --expires-at 2025-03-01 --db c.db '
        '--offline --now 2026-01-05T09:00:00; echo "exit $?"; lethe ls --db c.db',
        tmp_path,
    )
    assert done.stdout == "exit 2\n(no candidates)\n"
    assert done.stderr == (
        "error: expires_at 2025-03-01T23:59:59 is before now "
        "(2026-01-05T09:00:00): the memory would be stored already expired; "
        "give a later date, or none\n"
    )


def test_the_wall_clock_is_utc_whatever_the_machine_zone(tmp_path):
    """The README says every time is UTC; the wall clock was the local time, so east of
    UTC an expiry given as an aware time an hour ahead was refused as already past."""
    script = (
        "import datetime as dt\n"
        "from engine.base.clock import system_clock\n"
        "from engine.memory import Memory\n"
        "utc = dt.datetime.now(dt.timezone.utc)\n"
        "assert abs((system_clock() - utc.replace(tzinfo=None)).total_seconds()) < 60\n"
        f"with Memory({str(tmp_path / 'm.db')!r}, offline=True) as mem:\n"
        "    i = mem.add('The call is in an hour.', expires_at=utc + dt.timedelta(hours=1))\n"
        "    print(mem.get(i).expires_at)\n"
    )
    for zone in ("Europe/Berlin", "America/New_York", "Asia/Kolkata"):
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=clean_env(TZ=zone),
            cwd=tmp_path,
        )
        assert done.returncode == 0, (zone, done.stderr)
        stored = dt.datetime.fromisoformat(done.stdout.strip())
        ahead = stored - dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        assert dt.timedelta(minutes=55) < ahead <= dt.timedelta(hours=1), (zone, stored)


def test_a_keyless_scheduler_says_once_what_its_passes_left_undone(tmp_path, clock):
    """The scheduler (and `lethe daemon`) runs passes on a context of its own, so the
    Memory's once-only warning never fired there: a keyless daemon merged nothing, quietly."""
    from engine import Scheduler

    with Memory(str(tmp_path / "m.db"), clock=clock) as mem:
        for fact in FACTS:
            mem.add(fact, judged=False)
        sched = Scheduler(mem, interval=3600)
        try:
            results = []
            said = keyless(
                mem,
                lambda m: [
                    results.extend(sched.force_run(["compression"])),
                    sched.tick(),
                    sched.force_run(["compression"]),
                ],
            )
        finally:
            sched.close()
        assert [type(w) for w in said] == [PassesUndoneWarning]
        assert "cluster model unreachable, nothing merged" in results[0].notes[0]
    with Memory(str(tmp_path / "m.db"), clock=clock, offline=True) as mem:
        sched = Scheduler(mem, interval=3600)
        try:
            assert keyless(mem, lambda m: sched.force_run(["compression"])) == []
        finally:
            sched.close()


def test_a_keyless_lethe_daemon_says_it_on_stderr(tmp_path):
    setup = shell("; ".join(f'lethe add "{f}" --db m.db --offline >/dev/null' for f in FACTS[:5]), tmp_path)
    assert setup.returncode == 0, setup.stderr
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as o, open(err, "w") as e:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "daemon", "--db", "m.db", "--interval", "0.2"],
            cwd=tmp_path,
            env=clean_env(),
            stdout=o,
            stderr=e,
        )
    try:
        for _ in range(600):  # its first tick runs every pass; wait for it, at most a minute
            if "compression" in out.read_text() or daemon.poll() is not None:
                break
            time.sleep(0.1)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    warned = [line for line in err.read_text().splitlines() if line.startswith("warning:")]
    assert warned == [
        "warning: no API key: the passes left the model's part undone (pending "
        "turns, merges); pass --offline or set OPENAI_API_KEY"
    ], err.read_text()
    assert "nothing merged" in out.read_text(), out.read_text()
