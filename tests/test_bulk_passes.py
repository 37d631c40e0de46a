"""A pass that rewrites most of the file rebuilds the indexes over what it writes once,
in its own transaction (engine.store.sqlite.bulk), and ends up exactly where moving each index
entry would have."""

import contextlib
import datetime as dt
import shutil
import sqlite3

import pytest

from bench import seed_article
from engine import Memory
from engine.plan import compile_policy
from engine.policy import load
from engine.store.sqlite import bulk
from tests.helpers import POLICIES, START, context_of, store_of
from tests.helpers.batched import batched_policy, state

T = START + dt.timedelta(days=1)
N = bulk.BULK_MIN_ROWS + 2_000  # enough rows for the decay pass to rebuild


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("bulk") / "article.db"
    seed_article.generate(path, N, START, seed=5)
    return path


def indexes(path):
    conn = sqlite3.connect(path)
    try:
        return sorted(
            conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                "AND tbl_name IN ('memories', 'memory_rows')"
            ).fetchall()
        )
    finally:
        conn.close()


def test_a_rebuilding_pass_equals_one_that_moves_each_entry(tmp_path, big):
    """batch: N never rebuilds (others use the indexes between its commits): the same rows,
    ranks and events either way, and the same indexes, intact, afterwards."""
    a, b = str(tmp_path / "bulk.db"), str(tmp_path / "moved.db")
    shutil.copy(big, a)
    shutil.copy(big, b)
    with Memory(a, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as one:
        before = indexes(a)
        results = one.run(["expiry", "decay"])
    with Memory(b, policy=batched_policy(tmp_path), clock=lambda: T, offline=True) as many:
        many.run(["expiry", "decay"])
    assert results[1].events["archived"] > 0
    assert state(a) == state(b)
    assert indexes(a) == before == indexes(b)
    assert sqlite3.connect(a).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_recall_after_a_rebuild_reads_the_new_ranks_through_the_index(tmp_path, big):
    path = str(tmp_path / "recall.db")
    shutil.copy(big, path)
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        mem.run(["decay"])
        st = context_of(mem).plan.recall
        plan = (
            store_of(mem)
            .db.execute("EXPLAIN QUERY PLAN " + st.sql, st.bind(store_of(mem).now(), "default", limit=60))
            .fetchall()
        )
        got = [r["id"] for r in store_of(mem).fetch(st, "default", limit=60)]
    assert any("memories_recall" in row[3] for row in plan)
    conn = sqlite3.connect(path)
    want = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories WHERE status = 'active' AND decay_score > 0.15 "
            "ORDER BY importance * confidence * decay_score DESC, id DESC LIMIT 60"
        )
    ]
    assert got == want


def test_a_failed_rebuilding_pass_rolls_back_with_its_indexes(tmp_path, big):
    path = str(tmp_path / "fail.db")
    shutil.copy(big, path)
    mem = Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True)
    before, rows = indexes(path), state(path)
    store_of(mem).db.execute("""CREATE TRIGGER boom BEFORE UPDATE OF status ON memory_rows
                            BEGIN SELECT RAISE(ABORT, 'power cut'); END""")
    with pytest.raises(sqlite3.IntegrityError):
        mem.run(["decay"])  # the archive rule fails after the decay rule ran
    store_of(mem).db.execute("DROP TRIGGER boom")
    mem.close()
    assert indexes(path) == before
    assert state(path) == rows


def test_only_a_pass_over_most_of_the_file_rebuilds(tmp_path):
    db = sqlite3.connect(":memory:")
    db.executescript(seed_article.ARTICLE_SCHEMA)
    db.execute("ALTER TABLE memories ADD COLUMN rank REAL")
    db.execute("CREATE INDEX by_rank ON memories(status, rank)")
    db.execute("CREATE INDEX by_expiry ON memories(status, expires_at)")
    db.execute("INSERT INTO memories (id, content) VALUES (30000, 'x')")
    assert [n for n, _ in bulk.indexes_over(db, ["rank"])] == ["by_rank"]
    assert [n for n, _ in bulk.indexes_over(db, ["status"])] == ["by_expiry", "by_rank"]
    assert bulk.indexes_over(db, ["content"]) == []
    for rows, rebuilt in ((20_000, ["by_rank"]), (14_000, []), (bulk.BULK_MIN_ROWS, [])):
        with bulk.rebuilding(db, ["rank"], rows, "2026-01-01T00:00:00") as names:
            assert names == rebuilt
            inside = [n for n, _ in bulk.indexes_over(db, ["rank"])]
        assert inside == ([] if rebuilt else ["by_rank"])
        assert [n for n, _ in bulk.indexes_over(db, ["rank"])] == ["by_rank"]


def test_recall_and_expiry_indexes_hold_only_the_rows_they_serve(tmp_path, big):
    """m017: recall's index holds the active memories, the expiry index those with a date;
    after a decay pass (which rebuilds recall's) both are still what serves their rule,
    and a listing of archived memories does not read recall's index."""
    path = str(tmp_path / "partial.db")
    shutil.copy(big, path)
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        db = store_of(mem).db
        mem.run(["decay"])
        expiry = next(st for st in context_of(mem).plan.passes["expiry"] if st.label.endswith("update"))

        def used(sql, params):
            return " ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))

        expiry_plan = used(expiry.sql, expiry.bind(store_of(mem).now(), "default"))
        recall_plan = used(
            context_of(mem).plan.recall.sql,
            context_of(mem).plan.recall.bind(store_of(mem).now(), "default", limit=60),
        )
        archived_plan = used(
            "SELECT id FROM memories WHERE namespace = ? AND status = ? ORDER BY rank DESC, id DESC LIMIT 60",
            ["default", "archived"],
        )
    assert "memories_expiry" in expiry_plan and "memories_recall" in recall_plan
    assert "memories_recall" not in archived_plan
    assert dict(indexes(path))["memories_recall"].endswith("WHERE status = 'active'")
    assert dict(indexes(path))["memories_expiry"].endswith("WHERE expires_at IS NOT NULL")


REACH = """name: reach
models:
  offline: {provider: rules}
passes:
  tidy:
    every: 1d
    rules:
      - {when: "status = 'active' and importance < 2", set: {status: archived}, event: archived}
      - {when: "status = 'active'", set: {decay_score: "decay_score * 0.9"}}
      - {when: "status = 'superseded'", set: {decay_score: 0}}
"""


def test_the_reach_count_is_the_union_of_the_rules_said_once(tmp_path):
    """A rule whose condition is a conjunct of every other's stands for their union (one
    count an index answers); rules with unrelated conditions are ORed."""
    policy = tmp_path / "reach.yaml"
    policy.write_text(REACH)
    nested = compile_policy(load(str(policy)), "sqlite").pass_reach["tidy"]
    policy.write_text(REACH.replace("      - {when: \"status = 'superseded'\", set: {decay_score: 0}}\n", ""))
    absorbed = compile_policy(load(str(policy)), "sqlite").pass_reach["tidy"]
    assert absorbed.sql.endswith('WHERE "namespace" = ? AND (("status" = ?))')
    assert absorbed.params[1:] == ["active"]
    assert nested.sql.count(" OR ") == 2 and nested.params[1:] == ["active", 2, "active", "superseded"]


def scatter_scenes(mem):
    """Scenes in an order of their own, so the (namespace, scene) index lists the rows out
    of id order."""
    with store_of(mem).transaction() as db:
        db.execute("UPDATE memories SET scene = 'scene-' || ((id * 7919) % 97)")


def traced(mem, ran):
    store_of(mem).db.set_trace_callback(ran.append)
    return mem


def test_a_pass_over_most_of_the_file_reads_its_rows_in_id_order(tmp_path, big):
    """Without statistics SQLite takes `namespace = ?` as selective, and walked the
    (namespace, scene) index: the rows fetched in scene order, 3.3x slower at a million
    memories (bench/RESULTS.md, eleventh round). Over most of the file the rules run over
    every id instead, so the rows (and the events they write) come in id order, and the
    rows and events are those of the same pass in batches."""
    a, b = str(tmp_path / "scan.db"), str(tmp_path / "batched.db")
    shutil.copy(big, a)
    shutil.copy(big, b)
    ran = []
    with Memory(a, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as one:
        scatter_scenes(one)
        first = store_of(one).db.execute("SELECT coalesce(max(id), 0) FROM memory_events").fetchone()[0]
        traced(one, ran).run(["expiry", "decay"])
        decay = [st for st in context_of(one).plan.pass_ranges["decay"] if st.label.endswith("update")]
        plans = [
            " ".join(
                r[3]
                for r in store_of(one).db.execute(
                    "EXPLAIN QUERY PLAN " + st.sql,
                    st.bind(store_of(one).now(), "default", id_range=(0, N + 1)),
                )
            )
            for st in decay
        ]
    with Memory(b, policy=batched_policy(tmp_path), clock=lambda: T, offline=True) as many:
        scatter_scenes(many)
        many.run(["expiry", "decay"])
    rules = [s for s in ran if s.startswith("UPDATE memory_rows AS memories") and "decay_score" in s]
    assert len(rules) == 2 and all('+"namespace"' in s and '"id" >= 0' in s for s in rules)
    assert plans and all("INTEGER PRIMARY KEY" in p and "memories_scene" not in p for p in plans)
    conn = sqlite3.connect(a)
    archived = [
        r[0]
        for r in conn.execute(
            "SELECT memory_id FROM memory_events WHERE id > ? AND event_type = 'archived' ORDER BY id",
            (first,),
        )
    ]
    assert len(archived) > 100 and archived == sorted(archived)
    assert state(a) == state(b)


def test_a_pass_over_a_small_namespace_keeps_to_its_index(tmp_path, big):
    """A namespace that is a small part of the file is read through its index, not by a
    scan of every id."""
    path = str(tmp_path / "few.db")
    shutil.copy(big, path)
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        with store_of(mem).transaction() as db:
            db.execute("UPDATE memories SET namespace = 'few' WHERE id % 10 = 0")
    ran = []
    with Memory(
        path, policy=f"{POLICIES}/lifecycle.yaml", namespace="few", clock=lambda: T, offline=True
    ) as few:
        results = traced(few, ran).run(["decay"])
    rules = [s for s in ran if s.startswith("UPDATE memory_rows AS memories") and "decay_score" in s]
    assert results[0].changed > 100
    assert len(rules) == 2 and not any('"id" >=' in s for s in rules)


def test_a_rank_refresh_over_most_of_the_file_reads_it_in_id_order(tmp_path, big):
    """A new rank formula recomputes the namespace's ranks; over most of the file, in id
    order (the statement over an id range), with the ranks of the formula."""
    path = str(tmp_path / "rank.db")
    shutil.copy(big, path)
    from engine.run.context import sync_rank

    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        scatter_scenes(mem)
        with store_of(mem).transaction() as db:
            db.execute("UPDATE memories SET rank = -1")
            db.execute("UPDATE policy_state SET rank_formula = 'an older formula'")
        ran = []
        traced(mem, ran)
        sync_rank(context_of(mem))
    refresh = [s for s in ran if s.startswith('UPDATE memory_rows AS memories SET "rank"')]
    assert len(refresh) == 1 and '+"namespace"' in refresh[0] and '"id" >= 0' in refresh[0]
    conn = sqlite3.connect(path)
    assert (
        conn.execute(
            "SELECT count(*) FROM memories WHERE rank IS NOT importance * confidence * decay_score"
        ).fetchone()[0]
        == 0
    )


def test_a_pass_that_archives_most_of_the_file_makes_the_active_index_again(tmp_path, big, monkeypatch):
    """A year on, lifecycle's archive takes most memories out of the active ones: the index
    of the active memories is dropped before that UPDATE and made again after it
    (bulk.leaving_active), and the pass ends where one moving each entry ends (batch: N,
    whose ranges are too small for it): the same rows, ranks, events and indexes."""
    a_year_on = START + dt.timedelta(days=365)
    seen = []
    real = bulk.leaving_active

    @contextlib.contextmanager
    def spy(db, rows):
        with real(db, rows) as did:
            inside = [n for n, _ in indexes_of(db)]
            yield did
        seen.append((rows, did, bulk.ACTIVE_INDEX in inside))

    monkeypatch.setattr(bulk, "leaving_active", spy)
    a, b = str(tmp_path / "remade.db"), str(tmp_path / "moved.db")
    shutil.copy(big, a)
    shutil.copy(big, b)
    with Memory(a, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: a_year_on, offline=True) as one:
        before = indexes(a)
        results = one.run(["expiry", "decay"])
    remade = [(rows, held) for rows, did, held in seen if did]
    assert remade and all(rows * bulk.LEAVING_SHARE > N and not held for rows, held in remade)
    assert results[1].events["archived"] == remade[0][0]
    seen.clear()
    with Memory(b, policy=batched_policy(tmp_path), clock=lambda: a_year_on, offline=True) as many:
        many.run(["expiry", "decay"])
    assert seen and not any(did for _, did, _ in seen)
    assert state(a) == state(b)
    assert indexes(a) == before == indexes(b)
    assert sqlite3.connect(a).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def indexes_of(db):
    return db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall()


def test_the_active_index_is_made_again_only_for_a_large_share_of_the_file():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE memory_rows (id INTEGER PRIMARY KEY, namespace TEXT, status TEXT)")
    db.execute("CREATE INDEX memories_active ON memory_rows(namespace, status) WHERE status = 'active'")
    db.execute("INSERT INTO memory_rows (id, namespace, status) VALUES (40000, 'default', 'active')")
    share = 40_000 // bulk.LEAVING_SHARE
    for rows, remade in ((share + 1, True), (share, False), (bulk.BULK_MIN_ROWS, False), (0, False)):
        with bulk.leaving_active(db, rows) as did:
            assert did is remade
            assert (bulk.ACTIVE_INDEX not in [n for n, _ in indexes_of(db)]) is remade
        assert dict(indexes_of(db))[bulk.ACTIVE_INDEX].endswith("WHERE status = 'active'")
