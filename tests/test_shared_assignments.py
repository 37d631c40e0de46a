"""A pass's rule computes each new value once per row (`SET (decay_score, rank) = (SELECT
...)`, engine.plan.rules): no guard in its WHERE evaluates the formula again; a row where a
value comes out unusable keeps all its values and is counted by the store's `lethe_kept`.
It writes exactly what the guarded form (a guard in the WHERE and a count first, as on
PostgreSQL) writes: the same scores, ranks, skipped rows and events."""

import datetime as dt
import shutil
import sqlite3

import pytest

from bench import seed_article
from engine import Memory
from engine.plan.dialect import Dialect
from engine.plan.rules import rule_statements
from tests.helpers import POLICIES, START, context_of, store_of

T = START + dt.timedelta(days=1)
ROWS = "SELECT id, status, decay_score, rank FROM memories ORDER BY id"


class Guarded(Dialect):
    kept = None  # the form every statement had before, and PostgreSQL's


def decay_statements(mem, dialect):
    rule = mem.policy.passes["decay"].rules[0]
    return rule_statements(mem.policy, rule, dialect, "decay.rules[0]")


def update(statements):
    return next(s for s in statements if s.label.endswith("update"))


def unscorable(path, ids=(7, 8)):
    """Two active rows the decay formula cannot score: no time to decay from."""
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE memories SET created_at = NULL, last_accessed = NULL "
        f"WHERE id IN ({', '.join('?' * len(ids))}) AND status = 'active'",
        ids,
    )
    conn.commit()
    conn.close()


def test_the_decay_formula_is_computed_once_a_row(tmp_path):
    path = str(tmp_path / "plan.db")
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        kept, guarded = decay_statements(mem, Dialect()), decay_statements(mem, Guarded())
    assert [s.counts_kept for s in kept] == [True]  # no count first
    assert update(kept).sql.count("julianday(coalesce") == 1  # in SET, none in the WHERE
    assert "lethe_kept(" in update(kept).sql
    assert [s.counts_skipped for s in guarded] == [True, False]
    assert update(guarded).sql.count("julianday(coalesce") == 3  # score, rank, guard
    # the same rows are the rule's: its WHERE, without the guard
    assert update(kept).sql.split("\nWHERE ")[1] == guarded[0].sql.split("\nWHERE ")[1]


def test_both_forms_write_the_same_rows_and_count_the_same_skipped(tmp_path):
    a, b = str(tmp_path / "kept.db"), str(tmp_path / "guarded.db")
    seed_article.generate(a, 3000, START, seed=11)
    unscorable(a)
    shutil.copy(a, b)
    with Memory(a, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        changed, kept = store_of(mem).run_rule(
            update(decay_statements(mem, Dialect())), "default", T.isoformat()
        )
    with Memory(b, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        count, st = decay_statements(mem, Guarded())
        meant = store_of(mem).fetch_one(count, "default", T.isoformat())[0]
        guarded = store_of(mem).run(st, "default", T.isoformat())
    assert sqlite3.connect(a).execute(ROWS).fetchall() == sqlite3.connect(b).execute(ROWS).fetchall()
    assert (changed, kept) == (guarded, meant - guarded)
    assert kept == 2 and changed > 0
    row = sqlite3.connect(a).execute("SELECT decay_score, rank FROM memories WHERE id = 7")
    assert (
        row.fetchone()
        == sqlite3.connect(b).execute("SELECT decay_score, rank FROM memories WHERE id = 7").fetchone()
    )  # as they were


def test_a_pass_reports_the_rows_it_kept_as_skipped(tmp_path):
    path = str(tmp_path / "pass.db")
    seed_article.generate(path, 3000, START, seed=11)
    conn = sqlite3.connect(path)
    ids = tuple(
        r[0]
        for r in conn.execute(  # rows the archive rule leaves alone
            "SELECT id FROM memories WHERE status = 'active' AND decay_score > 0.5 LIMIT 3"
        )
    )
    active = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
    conn.close()
    unscorable(path, ids)
    read = f"SELECT id, status, decay_score FROM memories WHERE id IN {ids!r}"
    before = sqlite3.connect(path).execute(read).fetchall()
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        decay = mem.run(["decay"])[0]
    assert decay.skipped == 3
    assert any("kept their values" in n for n in decay.notes)
    assert sqlite3.connect(path).execute(read).fetchall() == before
    assert decay.changed == active - 3 + decay.events["archived"]


RANKED = """name: ranked
extends: lifecycle
scores:
  rank: "{rank}"
"""


@pytest.mark.parametrize(
    "rank",
    [
        "0.5 * importance * confidence * decay_score",
        "importance * confidence * decay_score + 0.25",
        "min(3, importance) * pow(decay_score, 2)",
    ],
)
def test_a_rank_with_numbers_of_its_own_is_stored_as_it_reads(tmp_path, rank):
    """The rank's own constants are parameters too: each must meet its own placeholder
    (they once took the decay formula's, so the stored rank was another formula's)."""
    policy = tmp_path / "ranked.yaml"
    policy.write_text(RANKED.format(rank=rank))
    path = str(tmp_path / "ranked.db")
    seed_article.generate(path, 2000, START, seed=4)
    with Memory(path, policy=str(policy), clock=lambda: T, offline=True) as mem:
        mem.run(["decay"])
        st = context_of(mem).plan.rank_refresh
    fresh = str(tmp_path / "refreshed.db")
    shutil.copy(path, fresh)
    with Memory(fresh, policy=str(policy), clock=lambda: T, offline=True) as mem:
        store_of(mem).run(st, "default", T.isoformat())  # the rank formula alone, over every row
        store_of(mem).db.commit()
    stored = (
        sqlite3.connect(path)
        .execute("SELECT id, rank FROM memories WHERE status = 'active' ORDER BY id")
        .fetchall()
    )
    refreshed = dict(
        sqlite3.connect(fresh).execute("SELECT id, rank FROM memories WHERE status = 'active'").fetchall()
    )
    assert stored and all(r == pytest.approx(refreshed[i], abs=1e-9) for i, r in stored)


NOT_UTF8 = """name: not-utf8
extends: lifecycle
passes:
  decay:
    rules:
      - when: "status = 'active' and decay_score >= archive_below"
        set: {kind: fact, decay_score: "confidence / access_count"}
"""


def test_a_kept_row_whose_old_text_is_not_utf8_stays_as_it_was(tmp_path):
    """The kept row's old values stay in SQL: one Python could not decode (text that is not
    UTF-8, in the first column the rule sets) used to fail the whole UPDATE."""
    policy = tmp_path / "not-utf8.yaml"
    policy.write_text(NOT_UTF8)
    path = str(tmp_path / "odd.db")
    with Memory(path, policy=str(policy), clock=lambda: START, offline=True) as mem:
        mem.add("a fact")  # access_count 0: confidence / 0 is NULL
    conn = sqlite3.connect(path)
    conn.execute("UPDATE memories SET kind = CAST(x'6e6f7465ff' AS TEXT)")
    conn.commit()
    conn.close()
    with Memory(path, policy=str(policy), clock=lambda: T, offline=True) as mem:
        decay = mem.run(["decay"])[0]
    assert (decay.changed, decay.skipped) == (0, 1)
    conn = sqlite3.connect(path)
    conn.text_factory = bytes
    assert conn.execute("SELECT kind FROM memories").fetchone()[0] == b"note\xff"
