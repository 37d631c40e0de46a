"""Recall's index over the head of the ranking only (engine.store.sqlite.recall_head): on a large store
the index holds the active memories ranked at or above a floor the store chooses, passes
leave it in place, and recall gives exactly what the statement without the head gives,
whatever the floor, for every namespace."""

import dataclasses
import datetime as dt
import shutil
import sqlite3

import pytest

from bench import seed_article
from engine import Memory
from engine.base.text import fts_query
from engine.plan import compile_policy
from engine.policy import load
from engine.run.recall import candidates
from engine.store.sqlite import recall_head as head
from tests.helpers import POLICIES, START, context_of, store_of

T = START + dt.timedelta(days=1)
N = head.FULL_BELOW + 20_000  # enough active memories for a head


@pytest.fixture(scope="module")
def adopted(tmp_path_factory):
    """The article's file at N memories, adopted by a store (its ranks computed)."""
    path = tmp_path_factory.mktemp("head") / "article.db"
    seed_article.generate(path, N, START, seed=11)
    Memory(str(path), policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: START, offline=True).close()
    return path


def opened(tmp_path, adopted, clock=lambda: T):
    path = str(tmp_path / "copy.db")
    shutil.copy(adopted, path)
    return Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=clock, offline=True)


def recall_sql(db) -> str:
    return db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (head.INDEX,)).fetchone()[0]


def whole(ctx, st, limit, query=None):
    """The statement without its head form: every row it could return, no floor."""
    plain = dataclasses.replace(st, head=None)
    return [r["id"] for r in ctx.store.fetch(plain, ctx.namespace, query=query, limit=limit)]


def agree(mem, limits=(1, 6, 60, 500)):
    """Recall's candidates (head first) are the whole statement's, at several limits, with
    and without a query."""
    ctx = context_of(mem)
    # how many the statement can return, counted up to past the largest limit (not every
    # row of the store: that fetch cost more than the rest of the check)
    every = len(whole(ctx, ctx.plan.recall, max(limits) + 1))
    for limit in limits:
        got = [r.id for r in candidates(ctx, None, limit)]
        assert got == whole(ctx, ctx.plan.recall, limit), (ctx.namespace, limit)
        assert len(got) == min(limit, every)
        st, q = ctx.plan.recall_scored, fts_query("project deadline")
        scored = [r["id"] for r in ctx.store.fetch(st, ctx.namespace, query=q, limit=limit)]
        assert st.head is not None and scored == whole(ctx, st, limit, query=q)


def plan_of(db, st, binds):
    return " ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + st.sql, binds))


def test_a_large_store_keeps_only_the_head(tmp_path, adopted):
    with opened(tmp_path, adopted) as mem:
        db, ctx = store_of(mem).db, context_of(mem)
        value, rows = db.execute("SELECT floor, rows FROM recall_head").fetchone()
        assert value is not None and recall_sql(db).endswith(f"rank >= {value!r}")
        assert head.HEAD_ROWS <= rows < 2 * head.HEAD_ROWS
        assert (
            rows
            == db.execute(
                "SELECT count(*) FROM memories WHERE status = 'active' AND rank >= ?", (value,)
            ).fetchone()[0]
        )
        st = ctx.plan.recall
        binds = st.head.bind(T.isoformat(), ctx.namespace, limit=60, floor=value)
        assert "memories_recall (namespace=? AND status=? AND rank>?)" in plan_of(db, st.head, binds)
        assert "TEMP B-TREE" not in plan_of(db, st.head, binds)
        agree(mem)


def test_recall_is_exact_whatever_the_floor(tmp_path, adopted):
    """The floor only decides which index recall walks: recorded too high (no row above
    it), too low, or not the index's at all (another process chose again), the answer is
    the whole statement's."""
    with opened(tmp_path, adopted) as mem:
        db = store_of(mem).db
        value = head.floor(db)
        top = db.execute("SELECT max(rank) FROM memories").fetchone()[0]
        for recorded in (top + 1.0, top, value * 1.5, value, value / 3, -1e300):
            db.execute("UPDATE recall_head SET floor = ?", (recorded,))
            agree(mem, limits=(6, 60))


@pytest.fixture
def scaled(monkeypatch):
    """The head's sizes a tenth of the shipped ones, for a file of months in seconds."""
    monkeypatch.setattr(head, "HEAD_ROWS", head.HEAD_ROWS // 10)
    monkeypatch.setattr(head, "PER_NAMESPACE", head.PER_NAMESPACE // 10)
    monkeypatch.setattr(head, "FULL_BELOW", head.FULL_BELOW // 10)


def test_passes_keep_the_head_in_place_and_choose_again_when_it_drifts(tmp_path, scaled):
    """Day after day of decay: no pass rebuilds recall's index from every row; the head
    shrinks as ranks fall; when it is under half of what it was chosen for, the floor is
    chosen again in the pass's transaction (over every active memory again if they are
    under FULL_BELOW by then); recall agrees with the whole statement on every day."""
    path = tmp_path / "months.db"
    seed_article.generate(path, 3 * head.FULL_BELOW, START, seed=11)
    day, seen, floors = [T], [], []
    with Memory(str(path), policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: day[0], offline=True) as mem:
        db = store_of(mem).db
        db.set_trace_callback(seen.append)
        for n in range(60):
            day[0] = T + dt.timedelta(days=n)
            mem.run(["expiry", "decay"])
            floors.append(head.floor(db))
            active = db.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
            if floors[-1] is None:  # the file has shrunk under what a head is for
                assert active < head.FULL_BELOW and recall_sql(db).endswith("'active'")
            else:
                rows = db.execute("SELECT rows FROM recall_head").fetchone()[0]
                inside = db.execute(
                    "SELECT count(*) FROM memories WHERE status = 'active' AND rank >= ?", (floors[-1],)
                ).fetchone()[0]
                assert rows // 2 <= inside <= 4 * rows, n
            agree(mem, limits=(60,))
    chosen = [f for f in floors if f is not None]
    assert len(set(chosen)) >= 3, floors
    assert all(a > b for a, b in zip(chosen, chosen[1:]) if a != b)  # ranks fall, the floor too
    made = [s for s in seen if s.startswith(f"CREATE INDEX {head.INDEX}")]
    changes = sum(a != b for a, b in zip(floors, floors[1:]))
    assert len(made) == changes, (made, floors)  # made only when chosen again, not per pass


def test_namespaces_that_the_floor_leaves_out(tmp_path, adopted):
    """One floor serves every namespace. A namespace of many memories keeps
    PER_NAMESPACE of its own above it when it is chosen, however low it ranks; one of a
    few memories, all ranked under it, is read whole. Both agree with the whole
    statement."""
    with opened(tmp_path, adopted) as mem:
        db = store_of(mem).db
        before = head.floor(db)
        for ns, count, under in (("quiet", 2 * head.PER_NAMESPACE + 300, before), ("tiny", 40, 0.01)):
            # ranked just under the floor: a namespace the head as chosen leaves out
            db.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                "WHERE i < ?) INSERT INTO memories (namespace, content, importance, "
                "confidence, decay_score, rank, status, created_at) SELECT ?, "
                "'a quiet fact about the project deadline ' || i, ? * (0.999 - i * 1e-6), "
                "1.0, 1.0, ? * (0.999 - i * 1e-6), 'active', ? FROM n",
                (count, ns, under, under, START.isoformat()),
            )
        assert head.check(db, "quiet", T.isoformat())  # too few of quiet's in the head
        value = head.floor(db)
        assert value < before
        assert (
            db.execute(
                "SELECT count(*) FROM memories WHERE namespace = 'quiet' AND status = 'active' AND rank >= ?",
                (value,),
            ).fetchone()[0]
            >= head.PER_NAMESPACE
        )
        assert (
            db.execute(
                "SELECT count(*) FROM memories WHERE namespace = 'tiny' AND rank >= ?", (value,)
            ).fetchone()[0]
            == 0
        )
        assert not head.check(db, "quiet", T.isoformat())  # settled: nothing to do now
    for ns in ("quiet", "tiny", "default"):
        with Memory(
            str(tmp_path / "copy.db"),
            policy=f"{POLICIES}/lifecycle.yaml",
            namespace=ns,
            clock=lambda: T,
            offline=True,
        ) as mem:
            assert head.floor(store_of(mem).db) == value  # its ranks, computed, are as written
            agree(mem, limits=(6, 60))


def test_a_small_store_keeps_every_active_memory(tmp_path):
    path = tmp_path / "small.db"
    seed_article.generate(path, 3_000, START, seed=3)
    with Memory(str(path), policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        mem.run(["expiry", "decay"])
        db = store_of(mem).db
        assert head.floor(db) is None
        assert recall_sql(db).endswith("WHERE status = 'active'")
        agree(mem, limits=(6, 60))


def test_a_floor_in_the_index_is_only_ever_a_finite_number():
    assert head.index_sql(0.25).endswith("WHERE status = 'active' AND rank >= 0.25")
    assert head.index_sql(None).endswith("WHERE status = 'active'")
    for bad in (float("nan"), float("inf"), "0); DROP TABLE memories; --", 1):
        with pytest.raises(ValueError):
            head.index_sql(bad)


def test_only_rank_ordered_recall_of_active_memories_has_a_head_form(tmp_path):
    """The head form exists where the head can answer: candidates of active memories in
    rank order, on SQLite. PostgreSQL, another order, or other statuses: none."""
    lifecycle = load(f"{POLICIES}/lifecycle.yaml")
    assert compile_policy(lifecycle).recall.head is not None
    assert compile_policy(lifecycle, "postgres").recall.head is None
    text = open(f"{POLICIES}/lifecycle.yaml").read()
    for old, new in (
        ("order: rank", "order: importance"),
        (
            "where: \"status = 'active' and decay_score > recall_floor\"",
            "where: \"status != 'superseded' and decay_score > recall_floor\"",
        ),
    ):
        assert old in text
        path = tmp_path / "other.yaml"
        path.write_text(text.replace(old, new))
        assert compile_policy(load(str(path))).recall.head is None


def test_a_failed_pass_leaves_the_head_as_it_was(tmp_path, adopted):
    """A pass that fails after its rules ran rolls back: ranks, the index and its floor."""
    with opened(tmp_path, adopted) as mem:
        db = store_of(mem).db
        before = (recall_sql(db), tuple(db.execute("SELECT * FROM recall_head").fetchone()))
        db.execute("""CREATE TRIGGER boom BEFORE UPDATE OF status ON memory_rows
                      BEGIN SELECT RAISE(ABORT, 'power cut'); END""")
        with pytest.raises(sqlite3.IntegrityError):
            mem.run(["decay"])
        db.execute("DROP TRIGGER boom")
        assert (recall_sql(db), tuple(db.execute("SELECT * FROM recall_head").fetchone())) == before
        agree(mem, limits=(60,))


def test_a_new_rank_formula_chooses_the_head_again(tmp_path, adopted):
    """A policy whose rank is another formula recomputes every rank on open: the head is
    chosen again from the new ranks (not moved entry by entry), and recall follows the
    new order."""
    text = open(f"{POLICIES}/lifecycle.yaml").read()
    old = 'rank: "importance * confidence * decay_score"'
    assert old in text
    policy = tmp_path / "by-importance.yaml"
    policy.write_text(text.replace(old, 'rank: "importance * importance * confidence"'))
    path = str(tmp_path / "copy.db")
    shutil.copy(adopted, path)
    with Memory(path, policy=str(policy), clock=lambda: T, offline=True) as mem:
        db = store_of(mem).db
        value, rows = db.execute("SELECT floor, rows FROM recall_head").fetchone()
        assert value > 10  # importance squared: the old floor was under 10
        assert head.HEAD_ROWS <= rows < 2 * head.HEAD_ROWS
        assert recall_sql(db).endswith(f"rank >= {value!r}")
        agree(mem, limits=(6, 60))
