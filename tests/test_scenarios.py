"""Scenarios and experiments: loading with file:line errors, every step kind, passes at
their schedule on `advance`, judged replay, `lethe experiment` exit codes, JSON, report."""

import datetime as dt
import json
import os
import re
import textwrap

import pytest
from click.testing import CliRunner
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from engine.apps import scenario as S
from engine.apps.experiment import run_experiment
from engine.base.errors import PolicyError
from engine.cli import main
from engine.memory import Memory
from engine.store import SqliteStore
from tests.helpers import POLICIES, ROOT, shipped_scenarios

SHIPPED = shipped_scenarios(top_level_only=True)
ARCHIVE, LIFECYCLE = f"{POLICIES}/archive.yaml", f"{POLICIES}/lifecycle.yaml"


class JSONSnapshot(SingleFileSnapshotExtension):
    file_extension = "json"
    _write_mode = WriteMode.TEXT


@pytest.fixture
def write(tmp_path):
    def make(text, name="s.yaml"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return str(path)

    return make


def play(path, policy=LIFECYCLE):
    exp = run_experiment([path], [policy], offline=True)
    return exp.runs[0]


# ---- loading ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body,line,message",
    [
        (
            "name: x\nsteps:\n  - remember: {user: hi}\n  - forget: 3d\n",
            4,
            "steps[1]: a step needs exactly one of add, remember, advance, run, recall, expect_status",
        ),
        ("name: x\nsteps:\n  - advance: 3 days\n", 3, "steps[0].advance: not a duration"),
        ("name: x\nsteps:\n  - advance: 0d\n", 3, "must move the clock forward"),
        (
            "name: x\nsteps:\n  - add: hi\n  - expect_status: {hi: gone}\n",
            4,
            "steps[1].expect_status.hi: unknown status 'gone'",
        ),
        (
            "name: x\nsteps:\n  - add: hi\n    expect: {includes: [hi]}\n",
            4,
            "steps[0].expect: unknown key 'expect'",
        ),
        (
            "name: x\nsteps:\n  - add: hi\n    judged: {oracle: yes}\n",
            4,
            "steps[0].judged.oracle: unknown judge step 'oracle'",
        ),
        ("name: x\nstart: next tuesday\nsteps:\n  - add: hi\n", 2, "start: not an ISO-8601"),
        ("name: x\nsteps:\n  - recall: q\n    expect: {includes: [1]}\n", 4, "includes[0] must be"),
        ("name: x\nsteps:\n  - run: [decay, 7]\n", 3, "run takes 'due' or a list of pass names"),
        ("name: x\nsteps:\n  - add: {content: hi, importance: 11}\n", 3, "importance must be"),
        ("name: x\nsteps:\n  - remember: {user: hi, bot: yo}\n", 3, "unknown key 'bot'"),
        ("name: x\nname: y\nsteps: []\n", 2, "duplicate key 'name'"),
        ("name: x\nsteps: []\n", 2, "steps must be a non-empty list"),
        ("name: x\nsteps:\n  - add: [unclosed\n", 4, "YAML syntax error"),
        ("title: x\nsteps:\n  - add: hi\n", 1, "unknown key 'title'"),
    ],
)
def test_load_errors_say_file_and_line(write, body, line, message):
    path = write(body)
    with pytest.raises(PolicyError) as err:
        S.load(path)
    text = str(err.value)
    assert f"s.yaml:{line}:" in text.splitlines()[0], text
    assert message in text, text


def test_load_missing_file(tmp_path):
    with pytest.raises(PolicyError, match="scenario not found"):
        S.load(str(tmp_path / "nope.yaml"))


def test_every_shipped_scenario_loads():
    assert len(SHIPPED) >= 7
    for path in SHIPPED:
        s = S.load(path)
        assert s.steps and s.expectations() > 0, path


def test_load_the_issue_format(write):
    s = S.load(
        write("""
        name: every step kind
        start: 2026-01-05T09:00:00
        steps:
          - add: "text"
          - add: {content: "Deadline is March 15", importance: 8, confidence: 0.9, tags: [work],
                  expires_at: 2026-03-15}
          - remember: {user: "I use uv.", assistant: "Noted."}
          - advance: 30d
          - advance: 12h
          - advance: 90m
          - run: [decay, expiry]
          - run: due
          - recall: "query"
            expect: {includes: ["uv"], excludes: ["poetry"]}
          - expect_status: {"Deadline": expired}
            judged: {expiry: null}
        """)
    )
    assert [st.action for st in s.steps] == [
        "add",
        "add",
        "remember",
        "advance",
        "advance",
        "advance",
        "run",
        "run",
        "recall",
        "expect_status",
    ]
    assert s.start == dt.datetime(2026, 1, 5, 9)
    assert s.steps[1].arg["expires_at"] == "2026-03-15"  # add() keeps it through that day
    assert s.steps[4].arg["delta"] == dt.timedelta(hours=12)
    assert s.steps[6].arg == ["decay", "expiry"] and s.steps[7].arg == "due"
    assert s.steps[9].judged == {"expiry": "null"}
    assert s.steps[8].line == 13
    assert s.expectations() == 3


# ---- each step kind -----------------------------------------------------------------
def test_add_and_expect_status(write):
    run = play(
        write("""
        name: add
        steps:
          - add: "User prefers tabs over spaces."
          - add: {content: "Release freeze until the audit ends", importance: 9, tags: [release],
                  expires_at: 2026-01-10}
          - expect_status: {"tabs": active, "release freeze": active}
          - advance: 6d
          - expect_status: {"release freeze": expired, "tabs": archived}
        """)
    )
    assert [c.ok for c in run.playback.checks] == [True, True, True, False]
    assert "found: [active] User prefers tabs over spaces." in run.playback.checks[3].detail
    assert run.changes == [
        {
            "status": "expired",
            "content": "Release freeze until the audit ends",
            "at": "2026-01-11T00:00:00",
            "by": None,
        }
    ]  # true all of Jan 10


def test_remember_goes_through_the_gate(write):
    run = play(
        write("""
        name: remember
        steps:
          - remember: {user: "Hi there!", assistant: "Hello!"}
          - remember: {user: "I manage dependencies with poetry.", assistant: "Noted."}
          - expect_status: {"dependencies with poetry": active}
        """)
    )
    assert run.ok and run.counts["active"] == 1
    assert run.model["by_step"]["gate"] == 2


def test_recall_expectations_and_stale_recalls(write):
    run = play(
        write("""
        name: recall
        steps:
          - add: "User manages dependencies with poetry."
          - recall: "which dependency manager?"
            expect: {includes: ["poetry"]}
          - advance: 10d
          - add: "User switched to uv for dependencies."
          - recall: "which dependency manager?"
            expect: {includes: ["uv", "pip"], excludes: ["with poetry"]}
          - expect_status: {"with poetry": superseded}
          - recall: "dependencies"
        """),
        ARCHIVE,
    )
    checks = {c.what: c.ok for c in run.playback.checks}
    assert checks == {
        'recall "which dependency manager?" includes "poetry"': True,
        'recall "which dependency manager?" includes "uv"': True,
        'recall "which dependency manager?" includes "pip"': False,
        'recall "which dependency manager?" excludes "with poetry"': False,
        '"with poetry" is superseded': False,
    }
    # the first recall came before anything replaced poetry: not stale; the other two are
    assert [bool(r["stale"]) for r in run.playback.recalls] == [False, True, True]
    assert run.playback.recalls[2]["stale"] == ["User manages dependencies with poetry."]


def test_excludes_spare_the_new_fact_naming_the_old_one(write):
    """The design's own example: the replacement mentions poetry, but it is not the stale fact."""
    body = """
        name: switched from poetry to uv
        start: 2026-01-05T09:00:00
        steps:
          - remember: {{user: "I manage dependencies with poetry.", assistant: "Noted."}}
          - advance: 40d
          - remember: {{user: "I stopped using poetry, it's uv now.", assistant: "Got it."}}
          - recall: "which dependency manager should I use in the commands?"
            expect: {{includes: [{include}], excludes: ["poetry"]}}
        """
    life = play(write(body.format(include='"uv"'), "a.yaml"))
    assert life.ok and life.playback.stale_recalls == 0
    archive = play(write(body.format(include='"uv"'), "a.yaml"), ARCHIVE)
    assert archive.missed()[0]["detail"] == "got: I manage dependencies with poetry."
    assert archive.playback.recalls[0]["stale"] == ["I manage dependencies with poetry."]
    # an include the old fact holds too does not excuse the first memory that said poetry
    generic = play(write(body.format(include='"dependencies"'), "b.yaml"), ARCHIVE)
    assert not generic.ok


def test_run_named_passes_due_and_missing(write):
    run = play(
        write("""
        name: run
        steps:
          - add: {content: "Call Bob tomorrow morning", expires_at: "2026-01-06T08:00:00"}
          - run: [expiry]
          - expect_status: {"Bob": active}
          - advance: 23h                # nothing is due before 24h... except hourly expiry
          - advance: 1h
          - run: [expiry, telepathy]
          - expect_status: {"Bob": expired}
          - run: due
        """)
    )
    assert run.ok
    assert any("has no pass 'telepathy'; skipped" in n for n in run.playback.notes)
    assert run.playback.pass_runs["expiry"] >= 26


def test_scenario_clock_stays_simulated(write):
    run = play(
        write("""
        name: clock
        start: 2030-06-01T12:00:00
        steps:
          - add: "User lives in Oslo."
          - advance: 1d12h
          - add: "User likes skiing."
        """)
    )
    assert run.playback.timeline[0]["at"] == "2030-06-01T12:00:00"
    assert run.playback.timeline[-1]["at"] == "2030-06-03T00:00:00"
    assert run.playback.timeline[-1]["day"] == 1.5


# ---- passes at their schedule -------------------------------------------------------
def test_advance_runs_each_pass_at_its_schedule(write, tmp_path):
    path = write("""
        name: schedule
        start: 2026-01-05T09:00:00
        steps:
          - add: "User prefers dark mode."
          - advance: 30d
        """)
    exp = run_experiment(
        [path], [f"{POLICIES}/scheduled-sql.yaml", LIFECYCLE], offline=True, keep=str(tmp_path / "dbs")
    )
    sql, life = exp.runs
    assert sql.playback.pass_runs == {"decay": 30, "expiry": 30}  # daily: 30 times in 30d
    assert life.playback.pass_runs == {"expiry": 720, "decay": 31, "compression": 5}
    import sqlite3

    db = sqlite3.connect(str(tmp_path / "dbs" / "schedule--scheduled-sql.db"))
    assert dict(db.execute("SELECT pass, last_run_at FROM pass_runs")) == {
        "decay": "2026-02-04T09:00:00",
        "expiry": "2026-02-04T09:00:00",
    }


def test_decay_archives_on_the_day_it_falls_below(write):
    run = play(
        write("""
        name: fade
        start: 2026-01-05T09:00:00
        steps:
          - add: "User is curious about Elm."
          - advance: 150d
          - expect_status: {"Elm": archived}
        """)
    )
    assert run.ok
    (change,) = run.changes
    archived_on = dt.datetime.fromisoformat(change["at"]) - dt.datetime(2026, 1, 5, 9)
    # 30-day half-life, archive below 0.1: whole idle days reach 100 on day 100, and the
    # 23-hourly decay notices within the day - not at the end of the 150-day advance
    assert 100 <= archived_on.total_seconds() / 86400 < 101


def test_long_advance_is_cheap(write, monkeypatch):
    """180 days run each pass at its own times and no more, and each run is a handful of
    statements: counted, not timed (a test never asserts a wall-clock time)."""
    statements = []
    connect = SqliteStore._connect

    def traced(self, *args, **kwargs):
        db = connect(self, *args, **kwargs)
        db.set_trace_callback(statements.append)
        return db

    idle, run_due = [], Memory.run_due

    def counted(self, *args, **kwargs):
        ran = run_due(self, *args, **kwargs)
        idle.extend([] if ran else [self.clock()])
        return ran

    monkeypatch.setattr(SqliteStore, "_connect", traced)
    monkeypatch.setattr(Memory, "run_due", counted)
    path = write("name: long\nsteps:\n  - add: hi there\n  - advance: 180d\n")
    run = play(path)
    runs = run.playback.pass_runs
    assert runs["expiry"] == 180 * 24  # hourly: one run an hour, not one a tick
    assert idle == []  # the clock jumps from one due time to the next: no tick finds nothing
    assert len(statements) < 15 * sum(runs.values())  # today about 12 a run, opening included


# ---- judged replay ------------------------------------------------------------------
def test_judged_answers_replay_through_the_script(write):
    body = """
        name: judged
        steps:
          - add: "User likes Python."
          - add: "User also uses JavaScript."
            {judged}
          - remember: {{user: "I enjoy hiking on weekends.", assistant: "Nice!"}}
            judged: {{gate: {{save: false}}}}
          - expect_status: {{"likes Python": superseded}}
          - recall: "hiking"
            expect: {{excludes: ["hiking"]}}
        """
    replayed = play(write(body.format(judged='judged: {contradiction: "[1]"}'), "a.yaml"))
    assert replayed.ok, replayed.missed()
    assert replayed.model["by_provider"]["scripted"] == 2
    plain = play(write(body.format(judged=""), "b.yaml"))
    assert [c.ok for c in plain.playback.checks] == [False, True]  # rules: additive, no supersede


def test_judged_answer_is_used_once_per_step(write):
    script = S.Script()
    script.load({"merge": {"content": "x"}})
    assert script.take("merge") == {"content": "x"} and script.take("merge") is None
    assert script.take("cluster") is None


# ---- experiment: CLI ----------------------------------------------------------------
@pytest.fixture(scope="module")
def both(tmp_path_factory):
    report = str(tmp_path_factory.mktemp("report") / "exp.html")
    result = CliRunner().invoke(
        main,
        [
            "experiment",
            *SHIPPED,
            "--policy",
            ARCHIVE,
            "--policy",
            LIFECYCLE,
            "--offline",
            "--json",
            "--report",
            report,
        ],
    )
    return result, report


def test_experiment_exits_1_when_an_expectation_fails(both):
    result, _ = both
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert data["missed"] and {m["policy"] for m in data["missed"]} == {"archive"}


def test_experiment_exits_0_for_the_lifecycle_and_lists_misses_otherwise():
    # two scenarios: that the lifecycle meets every shipped one is `both`'s (exits_1, json_shape)
    two = [os.path.join(ROOT, "scenarios", n + ".yaml") for n in ("poetry-to-uv", "waiting-on-alice")]
    ok = CliRunner().invoke(main, ["experiment", *two, "-p", LIFECYCLE, "--offline"])
    assert ok.exit_code == 0, ok.output
    assert "ok: every expectation holds" in ok.output
    bad = CliRunner().invoke(
        main, ["experiment", os.path.join(ROOT, "scenarios", "poetry-to-uv.yaml"), "-p", ARCHIVE, "--offline"]
    )
    assert bad.exit_code == 1
    assert (
        'poetry-to-uv.yaml:11: [archive] recall "which dependency manager should I use in the '
        'commands?" excludes "poetry"' in bad.output
    )
    assert bad.output.rstrip().endswith("FAILED: 2 expectation(s) missed")
    assert "error:" not in bad.output  # said once, not again by the CLI's error handler


def test_experiment_json_shape(both):
    data = json.loads(both[0].stdout)
    assert set(data) == {"ok", "offline", "scenarios", "policies", "matrix", "summary", "missed", "runs"}
    assert len(data["runs"]) == 2 * len(SHIPPED)
    for row in data["matrix"].values():
        assert set(row) == {"archive", "lifecycle"}
        assert all(set(cell) == {"met", "total"} for cell in row.values())
    life = data["summary"]["lifecycle"]
    assert life["met"] == life["total"] and life["stale_recalls"] == 0
    assert set(life["counts"]) == {"active", "archived", "superseded", "expired", "compressed"}
    assert all(life["counts"][s] > 0 for s in ("archived", "superseded", "expired", "compressed"))
    assert data["summary"]["archive"]["stale_recalls"] > 0
    run = data["runs"][0]
    for key in (
        "scenario",
        "policy",
        "ok",
        "met",
        "total",
        "counts",
        "stale_recalls",
        "recalls",
        "checks",
        "changes",
        "pass_runs",
        "model",
        "timeline",
        "notes",
        "error",
    ):
        assert key in run
    assert {"calls", "tokens", "prompt_tokens", "completion_tokens"} <= set(run["model"])


def test_report_is_self_contained_with_charts(both):
    _, report = both
    page = open(report, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 5  # side by side, then 2 per policy
    assert "three code-readability preferences merge" in page and "superseded" in page
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import", page, re.I)
    # the only URLs left are SVG namespace names, which nothing fetches
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }


def test_experiment_without_offline_needs_a_key():
    result = CliRunner().invoke(main, ["experiment", SHIPPED[0], "-p", LIFECYCLE])
    assert result.exit_code == 2
    assert "OPENAI_API_KEY is not set" in result.output and "--offline" in result.output


def test_experiment_rejects_a_broken_scenario(write):
    result = CliRunner().invoke(
        main, ["experiment", write("name: x\nsteps:\n  - advance: soon\n"), "-p", LIFECYCLE, "--offline"]
    )
    assert result.exit_code == 1
    assert "s.yaml:3:" in result.output and "not a duration" in result.output


# ---- the matrix, pinned -------------------------------------------------------------
def test_shipped_matrix_snapshot(both, snapshot):
    """The matrix, counts and what each policy changed, per run (no ids, times or paths)."""
    data = json.loads(both[0].stdout)
    runs = {}
    for r in data["runs"]:
        runs.setdefault(r["scenario"], {})[r["policy"]] = {
            "met": f"{r['met']}/{r['total']}",
            "stale_recalls": r["stale_recalls"],
            "counts": {k: v for k, v in r["counts"].items() if v},
            "pass_runs": r["pass_runs"],
            "model_calls": r["model"]["calls"],
            "changes": [
                f"{c['status']}: {c['content']}" + (f" -> {c['by']}" if c["by"] else "") for c in r["changes"]
            ],
            "missed": [c["what"] for c in r["checks"] if not c["ok"]],
        }
    pinned = {"summary": data["summary"], "runs": runs}
    text = json.dumps(pinned, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    assert text == snapshot(extension_class=JSONSnapshot)


def test_offline_the_rules_calls_are_not_model_calls(both):
    """Issue 43: `experiment --offline` reported "model calls 149" for the rules' judgments."""
    summary = json.loads(both[0].stdout)["summary"]
    for s in summary.values():
        assert s["model_calls"] <= 2  # the scenarios' scripted answers, standing in for one
    assert sum(s["rules_calls"] for s in summary.values()) > 100
