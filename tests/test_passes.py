"""Passes: set-based SQL that reproduces the seed article's own passes, in one transaction."""

import datetime as dt
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from bench import seed_article
from engine import Memory
from engine.cli import main
from tests.helpers import POLICIES, START, run_sql, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

T = START + dt.timedelta(days=1, hours=3)


@pytest.fixture(scope="module")
def article_pair(tmp_path_factory):
    """Two copies of one 100,000-row article database: one for the article's own passes,
    one for `lethe run`, both at time T."""
    d = tmp_path_factory.mktemp("article")
    a, b = str(d / "article.db"), str(d / "lethe.db")
    seed_article.generate(a, 100_000, START, seed=11)
    shutil.copy(a, b)
    conn = sqlite3.connect(a)
    expired = seed_article.article_expiry(conn, T)
    _, archived = seed_article.article_decay(conn, T)
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--db",
            b,
            "--policy",
            f"{POLICIES}/lifecycle.yaml",
            "--pass",
            "expiry",
            "--pass",
            "decay",
            "--now",
            T.isoformat(),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    yield conn, sqlite3.connect(b), expired, archived, result.output
    conn.close()


def test_statuses_and_decay_equal_the_articles(article_pair):
    article, lethe, expired, archived, _ = article_pair
    q = "SELECT id, status, decay_score FROM memories ORDER BY id"
    theirs, ours = article.execute(q).fetchall(), lethe.execute(q).fetchall()
    assert len(ours) == len(theirs) == 100_000
    assert expired > 100 and archived > 100  # the data really exercises both rules
    diffs = [(a, b) for a, b in zip(theirs, ours) if a[0] != b[0] or a[1] != b[1] or abs(a[2] - b[2]) > 1e-9]
    assert diffs == []


def test_one_event_per_archived_or_expired_memory(article_pair):
    _, lethe, expired, archived, output = article_pair
    q = (
        "SELECT event_type, count(*), count(DISTINCT memory_id) FROM memory_events "
        "WHERE occurred_at = ? GROUP BY event_type ORDER BY event_type"
    )
    rows = lethe.execute(q, (T.isoformat(),)).fetchall()
    assert rows == [("archived", archived, archived), ("expired", expired, expired)]
    assert f'"archived": {archived}' in output and f'"expired": {expired}' in output


def test_candidates_follow_the_articles_recall_order(article_pair):
    article, lethe, *_ = article_pair
    path = lethe.execute("PRAGMA database_list").fetchone()[2]
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T) as mem:
        ours = [m.id for m in mem.candidates()]
    assert ours == seed_article.article_recall_candidates(article)
    assert len(ours) == 60


def test_decay_keeps_the_stored_rank_current(memory, clock):
    mem = memory()
    mid = mem.add("User prefers tabs", importance=8, confidence=0.7)
    clock.advance(dt.timedelta(days=30))
    mem.run(["decay"])
    row = mem.get(mid)
    assert row.decay_score == pytest.approx(0.50007, abs=1e-5)
    assert row.rank == pytest.approx(8 * 0.7 * row.decay_score, rel=1e-12)


@pytest.mark.sqlite_only
def test_a_failing_pass_changes_nothing(memory, clock):
    mem = memory()
    ids = [mem.add(f"fact {i}") for i in range(5)]
    clock.advance(dt.timedelta(days=200))
    # make the archive rule's UPDATE fail after the decay rule has already run
    run_sql(
        store_of(mem),
        """CREATE TRIGGER boom BEFORE UPDATE OF status ON memory_rows
                            BEGIN SELECT RAISE(ABORT, 'disk on fire'); END""",
    )
    with pytest.raises(sqlite3.IntegrityError):
        mem.run(["decay"])
    assert {mem.get(i).decay_score for i in ids} == {1.0}
    assert (
        run_sql(store_of(mem), "SELECT count(*) FROM memory_events WHERE event_type = 'archived'").fetchone()[
            0
        ]
        == 0
    )
    assert mem.due() == ["expiry", "decay", "compression"]  # not recorded as run either


def test_run_due_follows_every_and_survives_a_restart(memory, clock, db_path):
    mem = memory()
    assert mem.due() == ["expiry", "decay", "compression"]
    assert [r.name for r in mem.run_due()] == ["expiry", "decay", "compression"]
    assert mem.due() == []
    clock.advance(dt.timedelta(hours=1))
    assert mem.due() == ["expiry"]
    mem.close()
    again = memory()  # a new process, same file: the schedule is in the database
    assert again.due() == ["expiry"]
    clock.advance(dt.timedelta(hours=22))
    assert again.due() == ["expiry", "decay"]
    clock.advance(dt.timedelta(days=6))
    assert again.due() == ["expiry", "decay", "compression"]


def test_namespaces_do_not_touch_each_other(memory, clock, db_path):
    a = memory("lifecycle", namespace="agent-a")
    b = memory("coding-agent", namespace="agent-b")
    ia, ib = a.add("old fact for a"), b.add("old fact for b")
    clock.advance(dt.timedelta(days=120))
    a.run(["decay"])
    assert a.get(ia).status == "archived"
    assert b.get(ib).status == "active" and b.get(ib).decay_score == 1.0
    assert [m.id for m in b.candidates()] == [ib]
    b.run(["decay"])  # 120 idle days at a 90-day half-life: 0.397, still active
    assert b.get(ib).decay_score == pytest.approx(0.3969, abs=1e-4)


def test_candidates_with_a_query_match_full_text(memory):
    mem = memory()
    pg = mem.add("Project database is PostgreSQL", importance=5)
    mem.add("User prefers tabs", importance=9)
    assert [m.id for m in mem.candidates("which database?")] == [pg]
    assert mem.candidates("kubernetes") == []
    assert mem.candidates('"; DROP TABLE memories; --') == []


def test_expiry_marks_past_dates_only(memory, clock):
    mem = memory()
    past = mem.add("Waiting for Alice", expires_at=START + dt.timedelta(days=2))
    future = mem.add("Sprint ends", expires_at=START + dt.timedelta(days=20))
    clock.advance(dt.timedelta(days=3))
    (result,) = mem.run(["expiry"])
    assert result.events == {"expired": 1}
    assert mem.get(past).status == "expired" and mem.get(future).status == "active"
    assert [e["event_type"] for e in mem.history(past).events] == ["created", "expired"]


def test_a_pass_with_no_row_due_runs_none_of_its_rules(memory, clock, monkeypatch):
    """An hourly expiry on a store where nothing is due asks once (the plan's `due`
    statement) and writes nothing; its run is recorded and its result is what running
    its rules would have reported. Once a row is due, the rules run as before."""
    mem = memory()
    kept = mem.add("Sprint ends", expires_at=START + dt.timedelta(days=2))
    mem.add("User prefers tabs")
    ran = []
    for name in ("run", "run_rule"):
        real = getattr(store_of(mem), name)
        monkeypatch.setattr(
            store_of(mem), name, lambda st, *a, _real=real, **k: ran.append(st.kind) or _real(st, *a, **k)
        )
    clock.advance(dt.timedelta(days=1))
    (idle,) = mem.run(["expiry"])
    assert (idle.changed, idle.events, idle.skipped) == (0, {"expired": 0}, 0)
    assert ran == [] and "expiry" not in mem.due()  # recorded as run, no rule statement ran
    assert mem.history(kept).events[-1]["event_type"] == "created"
    clock.advance(dt.timedelta(days=2))
    (busy,) = mem.run(["expiry"])
    assert (busy.changed, busy.events) == (1, {"expired": 1}) and ran  # the rules ran
    assert [e["event_type"] for e in mem.history(kept).events] == ["created", "expired"]
