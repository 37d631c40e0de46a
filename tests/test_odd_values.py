"""NULL, NaN and infinity never get into a lifecycle column, and never out as JSON
(issue 12, findings 5 and 13): a rule whose formula is not usable on some rows leaves
them as they were and says so; values are checked before anything commits; an adopted
database's odd rows are normalised with an event, and recall keeps working."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from click.testing import CliRunner

from bench.seed_article import ARTICLE_SCHEMA
from engine import FixedClock, LetheError, Memory
from engine.cli import main
from tests.helpers import POLICIES, START, run_sql, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

LIFECYCLE = f"{POLICIES}/lifecycle.yaml"

ODD_RULES = """name: odd-rules
models: {offline: {provider: rules}}
passes:
  share:
    rules:
      - {when: "status = 'active'", set: {confidence: "confidence / access_count"}, event: shared}
  blowup:
    rules:
      - {when: "status = 'active'", set: {importance: "exp(importance * 1000)"}}
"""


@pytest.fixture
def odd(tmp_path, db_path):
    policy = tmp_path / "odd.yaml"
    policy.write_text(ODD_RULES)
    mem = Memory(db_path, policy=str(policy), offline=True, clock=FixedClock(START))
    for i, uses in enumerate([0, 2, 0, 4]):
        new = mem.add(f"fact {i}", confidence=0.8, importance=5 + i, judged=False)
        run_sql(store_of(mem), "UPDATE memories SET access_count = ? WHERE id = ?", (uses, new))
    yield mem
    mem.close()


def column(mem, name) -> list:
    return [r[0] for r in run_sql(store_of(mem), f"SELECT {name} FROM memories ORDER BY id")]


def test_a_rule_never_writes_null_over_a_value(odd):
    """`confidence / access_count` is NULL where access_count is 0. Before: the pass wrote
    NULL over those confidences, with no event, and recall died on them."""
    [result] = odd.run(["share"])
    assert column(odd, "confidence") == [0.8, 0.4, 0.8, 0.2]
    assert (result.changed, result.skipped, result.events) == (2, 2, {"shared": 2})
    assert result.notes == ["share.rules[0]: rows whose new value was NULL or not finite kept their values"]
    assert result.as_dict()["skipped"] == 2
    assert [m.content for m in odd.recall("fact")]  # recall still works


def test_a_rule_never_writes_infinity(odd):
    [result] = odd.run(["blowup"])
    assert all(math.isfinite(v) for v in column(odd, "importance"))
    if store_of(odd).dialect == "sqlite":  # PostgreSQL's exp saturates at exp(709) instead
        assert column(odd, "importance") == [5.0, 6.0, 7.0, 8.0]  # exp(5000) and up: inf
        assert (result.changed, result.skipped) == (0, 4)


def test_lethe_ls_json_never_prints_nan_or_infinity(odd, db_path, tmp_path):
    run_sql(store_of(odd), "UPDATE memories SET decay_score = ? WHERE id = 1", (math.inf,))  # an old row
    out = CliRunner().invoke(main, ["ls", "--db", db_path, "--policy", str(tmp_path / "odd.yaml"), "--json"])
    assert out.exit_code == 0, out.output
    assert "Infinity" not in out.output and "NaN" not in out.output
    assert json.loads(out.output)  # strict JSON


@pytest.mark.parametrize(
    "field,value",
    [
        ("confidence", math.nan),
        ("confidence", math.inf),
        ("importance", math.nan),
        ("importance", -math.inf),
        ("confidence", 1.5),
    ],
)
def test_add_refuses_a_value_that_is_not_a_finite_number_before_writing(memory, field, value):
    mem = memory("lifecycle")
    with pytest.raises(LetheError, match=field):
        mem.add("User prefers tabs", **{field: value})
    assert mem.counts() == {}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_lethe_add_confidence_nan_is_a_usage_error_and_stores_nothing(db_path, value):
    """Before: an internal error, after the row was committed; then every recall failed."""
    args = ["--db", db_path, "--policy", LIFECYCLE, "--offline"]
    out = CliRunner().invoke(main, ["add", "User prefers tabs", *args, "--confidence", value])
    assert out.exit_code == 2, out.output
    assert "internal error" not in out.output and value in out.output
    with Memory(db_path, policy=LIFECYCLE, offline=True) as mem:
        assert mem.counts() == {}


# ---- adopting an article database with odd rows --------------------------------------
ODD_ROWS = [  # (content, importance, confidence, decay_score, access_count)
    ("User prefers PostgreSQL", None, 0.9, 1.0, 0),
    ("User prefers Vim", "high", 0.9, 1.0, 0),
    ("User prefers uv", 5, None, 0.8, 1),
    ("User prefers pytest", 5, "sure", "fresh", "often"),
    (b"User prefers \xff Docker", 5, 0.9, 1.0, 0),
    ("User prefers Redis", 5, 9e999, -9e999, -3),
    ("User prefers Emacs", 42, 7, 3, 0),
]


def test_an_adopted_database_with_odd_rows_is_normalised_and_recall_works(tmp_path):
    """Before: NULL, text or blobs in these columns made every recall fail (and `ls
    --json` crash) for the whole namespace."""
    path = str(tmp_path / "agent_memory.db")
    db = sqlite3.connect(path)
    db.executescript(ARTICLE_SCHEMA)
    db.executemany(
        "INSERT INTO memories (content, importance, confidence, decay_score, "
        "access_count, status, created_at) VALUES (?, ?, ?, ?, ?, 'active', "
        "'2026-01-01T00:00:00')",
        ODD_ROWS,
    )
    db.commit()
    db.close()
    with Memory(path, policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        rows = mem.memories("all", limit=100)
        for m in rows:
            for v in (m.importance, m.confidence, m.decay_score):
                assert isinstance(v, float) and math.isfinite(v)
            assert 0 <= m.confidence <= 1 and 0 <= m.importance <= 10
            assert isinstance(m.access_count, int) and m.access_count >= 0
            assert isinstance(m.content, str)
        events = {
            e["memory_id"]: json.loads(e["detail"])
            for e in store_of(mem).db.execute(
                "SELECT memory_id, detail FROM memory_events WHERE event_type = 'normalised'"
            )
        }
        assert sorted(events) == [1, 2, 3, 4, 5, 6, 7]
        assert events[2]["importance"] == {"was": "'high'", "now": 5.0}
        assert events[5]["content"]["was"] == "a blob of 21 bytes"
        assert events[7]["importance"] == {"was": "42.0", "now": 10.0}
        recalled = [m.content for m in mem.recall("what does the user prefer?")]
        assert recalled and "User prefers Vim" in [m.content for m in mem.candidates(limit=100)]
        mem.run_due()
    out = CliRunner().invoke(main, ["ls", "--db", path, "--policy", LIFECYCLE, "--json"])
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.output)) == 7
