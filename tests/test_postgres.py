"""PostgreSQL: the schema, errors that name the problem, every compiled statement on a real
server, the same recall as SQLite, the shared inbox, the fenced lease, `lethe import`, and
the article's rows (20,000; `make soak`: its 100,000) giving the article's own results
(skipped without a server; see conftest.py)."""

import datetime as dt
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from bench import seed_article
from engine import FixedClock, Memory
from engine.apps.testing import play
from engine.base.errors import LeaseLost, StoreError
from engine.cli import main
from engine.plan import compile_policy
from engine.policy import load
from engine.run.leasing import Held
from engine.store import MIGRATIONS, PostgresStore, open_store
from engine.store.postgres.postgres_schema import PG_MIGRATIONS
from engine.store.transfer import copy_store
from tests.helpers import (
    POLICIES,
    ROOT,
    SHIPPED_POLICIES,
    START,
    pg_server,
    run_sql,
    shipped_scenarios,
    store_of,
)
from tests.helpers.batched import batched_policy
from tests.helpers.odd_values import ODD
from tests.helpers.processes import run_concurrency
from tests.helpers.recall import QUERIES, seed_store, stable
from tests.helpers.scenarios import POLICIES_WITHOUT_LOCAL_MODEL, path_id, played_on_sqlite

T = START + dt.timedelta(days=1, hours=3)
# the shipped policies a server runs: one with `embed:` is refused there (vector search is
# sqlite-vec's), see test_a_policy_with_embeddings_is_refused_on_a_server_in_one_line
ON_A_SERVER = [n for n in sorted(SHIPPED_POLICIES) if not load(f"{POLICIES}/{n}.yaml").embed]


@pytest.fixture
def pg(pg_dsn):
    """A DSN to a fresh, empty schema."""
    return pg_server.fresh_schema(pg_dsn)


def test_the_migrations_list_is_the_same_by_name():
    assert [m.__name__ for m in PG_MIGRATIONS] == [m.__name__ for m in MIGRATIONS]


def test_a_policy_with_embeddings_is_refused_on_a_server_in_one_line(pg, clock):
    """Vectors are searched by sqlite-vec: on PostgreSQL such a policy is refused at open,
    naming the server without its password, before anything is written."""
    with pytest.raises(StoreError, match="needs a SQLite store") as err:
        Memory(pg, policy="lifecycle-local", clock=clock, offline=True)
    assert "embed:" in str(err.value) and "\n" not in str(err.value)


def test_a_new_database_gets_every_migration_once(pg, clock):
    store = PostgresStore(pg, clock)
    names = [r[0] for r in store.db.execute("SELECT name FROM lethe_migrations ORDER BY name")]
    assert names == sorted(m.__name__ for m in MIGRATIONS)
    store.close()
    again = PostgresStore(pg, clock)
    assert again.migrate() == []
    again.close()


def test_processes_opening_a_new_database_at_once_all_get_the_whole_schema(pg):
    code = "import sys; from engine.store import open_store; open_store(sys.argv[1]).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, pg], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    assert [(p.wait(60), p.stderr.read()) for p in procs] == [(0, "")] * 4
    with open_store(pg) as store:
        assert store.migrate() == []


def test_odd_numbers_left_by_an_older_store_are_normalised_with_an_event(memory, pg, clock):
    """m015 on a server: NULL, NaN, infinities and out-of-range numbers become the column's
    default or nearest bound, each with a `normalised` event; clean rows are left alone."""
    mem = memory(db=pg)
    ids = [mem.add(f"fact {i}", judged=False) for i in range(5)]
    odd = [
        ("importance", None),
        ("confidence", float("nan")),
        ("decay_score", float("inf")),
        ("importance", 42.0),
    ]
    for mid, (col, value) in zip(ids, odd):
        run_sql(store_of(mem), f"UPDATE memories SET {col} = ? WHERE id = ?", (value, mid))
    run_sql(store_of(mem), "DELETE FROM lethe_migrations WHERE name = 'm015_normalise_odd_rows'")
    mem.close()
    with PostgresStore(pg, clock) as store:
        rows = {r["id"]: r for r in store.memories("default")}
        assert [rows[i]["importance"] for i in ids] == [5.0, 5.0, 5.0, 10.0, 5.0]
        assert rows[ids[1]]["confidence"] == 1.0 and rows[ids[2]]["decay_score"] == 1.0
        events = [
            json.loads(e["detail"]) for i in ids for e in store.events(i) if e["event_type"] == "normalised"
        ]
        assert events == [
            {"importance": {"was": "NULL", "now": 5.0}},
            {"confidence": {"was": "nan", "now": 1.0}},
            {"decay_score": {"was": "inf", "now": 1.0}},
            {"importance": {"was": "42.0", "now": 10.0}},
        ]


def test_events_are_append_only(memory, pg):
    mem = memory(db=pg)
    mid = mem.add("User prefers tabs")
    for sql in (
        "UPDATE memory_events SET event_type = 'x' WHERE memory_id = ?",
        "DELETE FROM memory_events WHERE memory_id = ?",
    ):
        with pytest.raises(Exception, match="append-only"):
            run_sql(store_of(mem), sql, (mid,))
    with pytest.raises(Exception, match="append-only"):
        run_sql(store_of(mem), "TRUNCATE memory_events")


def test_full_text_follows_content_changes_and_passes_leave_it_alone(memory, pg, clock):
    mem = memory(db=pg)
    mid = mem.add("User prefers tabs")
    run_sql(
        store_of(mem),
        "UPDATE memories SET content = 'User prefers spaces', summary = 'spaces' WHERE id = ?",
        (mid,),
    )
    assert [m.id for m in mem.candidates("spaces")] == [mid]
    assert mem.candidates("tabs") == []
    before = run_sql(store_of(mem), "SELECT xmin::text FROM memories_fts WHERE id = ?", (mid,)).fetchone()
    clock.advance(dt.timedelta(days=3))
    mem.run(["decay"])  # decay rewrites the row, not its full-text entry
    assert (
        run_sql(store_of(mem), "SELECT xmin::text FROM memories_fts WHERE id = ?", (mid,)).fetchone()
        == before
    )


def test_an_unreachable_server_is_one_line_without_the_password():
    dsn = "postgresql://agent:s3cret-pw@127.0.0.1:1/memories"
    result = CliRunner().invoke(main, ["ls", "--db", dsn])
    assert result.exit_code == 2
    assert result.output.startswith("error: cannot reach PostgreSQL at postgresql://agent:***@127.0.0.1:1")
    assert result.output.count("\n") == 1 and "s3cret" not in result.output


def test_a_reader_on_a_server_without_a_store_says_so(pg):
    """Not 'an older version of Lethe': there is no store there at all."""
    result = CliRunner().invoke(main, ["ls", "--db", pg])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: no Lethe store at ") and "older version" not in result.output
    assert "commands that write (remember, add, run) do" in result.output
    with PostgresStore(pg) as store:  # and nothing was created by the reader
        assert store._applied() and run_sql(store, "SELECT count(*) FROM memories").fetchone()[0] == 0


def test_a_search_path_naming_no_schema_says_to_create_it(pg_dsn):
    import psycopg

    name = "s_" + os.urandom(6).hex()
    dsn = f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}options=-csearch_path%3D{name}"
    result = CliRunner().invoke(main, ["add", "team a fact", "--offline", "--db", dsn])
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"error: {dsn}: no schema of its search_path ({name}) exists, so "
        "there is nowhere to create the store's tables; create it first "
        "(CREATE SCHEMA ...), or connect without the search_path option\n"
    )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    assert CliRunner().invoke(main, ["add", "team a fact", "--offline", "--db", dsn]).exit_code == 0


def test_without_psycopg_the_error_names_the_extra():
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from engine.store import open_store\n"
        "try:\n    open_store('postgresql://x@127.0.0.1:1/db')\n"
        "except Exception as exc:\n    print(exc)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert (
        out.stdout.strip() == "PostgreSQL needs the 'postgres' extra: pip install 'lethe-lifecycle[postgres]'"
    )


def test_nul_characters_are_refused_with_a_message(memory, pg):
    with pytest.raises(StoreError, match="NUL"):
        memory(db=pg).add("a\x00b", judged=False)


@pytest.mark.parametrize("name", ON_A_SERVER)
def test_every_compiled_statement_runs_on_the_server(name, pg, clock):
    """EXPLAIN each statement of the postgres plan with its parameters bound: types,
    functions and syntax are checked by the server itself, not by reading the text."""
    plan = compile_policy(load(f"{POLICIES}/{name}.yaml"), "postgres")
    statements = [s for sts in plan.passes.values() for s in sts] + [
        *plan.pass_reach.values(),
        plan.recall,
        plan.recall_query,
        plan.recall_scored,
        plan.rank_refresh,
        plan.rank_refresh_ids,
        *([plan.access] if plan.access else []),
        *plan.write_candidates.values(),
        *plan.cluster_candidates.values(),
        plan.supersede,
        plan.forget,
        plan.reinforce,
        *plan.merge_values.values(),
        plan.merge_absorb_events,
        plan.merge_absorb,
        *plan.explain_reasons.values(),
        *plan.explain_order_keys.values(),
    ]
    with PostgresStore(pg, clock) as store:
        for st in statements:
            params = st.bind("2026-01-05T09:00:00", "default", '"tabs"', 5, [1, 2], (0, 100), 1, "x")
            store.db.execute("EXPLAIN " + st.sql, params)


@pytest.mark.parametrize("name", ON_A_SERVER)
def test_recall_is_the_same_as_on_sqlite(name, memory, clock, tmp_path, pg_dsn):
    """The recall snapshots' scenario on both backends: the same candidates, picks and
    counts (relevance values aside: bm25 and ts_rank are different scales)."""
    seen = {}
    for backend, db in (("sqlite", str(tmp_path / "a.db")), ("postgres", pg_server.fresh_schema(pg_dsn))):
        mem = Memory(db, policy=f"{POLICIES}/{name}.yaml", offline=True, clock=FixedClock(START))
        seed_store(mem, mem.clock)
        seen[backend] = {q: _without_relevance(stable(mem.explain(q).as_dict())) for q in QUERIES}
        mem.close()
    assert seen["postgres"] == seen["sqlite"]


def _without_relevance(ex: dict) -> dict:
    return {
        **ex,
        "candidates": [
            {k: v for k, v in c.items() if k not in ("relevance", "order_keys")} for c in ex["candidates"]
        ],
    }


def test_workers_sharing_the_inbox_claim_each_turn_once(pg, clock):
    a, b = PostgresStore(pg, clock), PostgresStore(pg, clock)
    turns = [a.add_turn("default", f"turn {i}", "ok") for i in range(6)]
    a.turn_failed(turns[0], "model down", 0, None)  # given back: claimable again
    clock.advance(dt.timedelta(minutes=6))  # the writers' own claims ran out
    first, second = a.claim_turns("default", 4), b.claim_turns("default", 4)
    assert len(first) == 4 and set(first).isdisjoint(second) and set(first) | set(second) == set(turns)
    assert b.claim_turns("default", 4) == second  # a worker may re-claim what it holds
    a.close()
    b.close()


def test_a_lease_taken_over_fences_its_old_holder(pg, clock):
    mine, theirs = PostgresStore(pg, clock), PostgresStore(pg, clock)
    lease = mine.lease("default", dt.timedelta(minutes=15), "me")
    assert lease.acquire()
    held = Held(lease, clock)
    with mine.transaction(fence=held):  # ours: the commit renews it
        mine.record_run("default", "expiry", mine.now(), 1)
    clock.advance(dt.timedelta(minutes=16))  # we stalled past the expiry
    other = theirs.lease("default", dt.timedelta(minutes=15), "them")
    assert other.acquire()
    assert lease.renew() is False  # the heartbeat finds it lost
    with pytest.raises(LeaseLost):
        with mine.transaction(fence=held):
            mine.record_run("default", "decay", mine.now(), 1)
    assert set(mine.last_runs("default")) == {"expiry"}  # the fenced decay rolled back
    lease.release()
    assert other.current()["holder"] == "them"  # our release took nothing from them
    for x in (lease, other, mine, theirs):
        x.close()


@pytest.mark.parametrize(
    "held,session",
    [
        ("SELECT * FROM leases FOR UPDATE", 0),  # the lease row: the statement's own wait
        ("LOCK TABLE leases IN ACCESS EXCLUSIVE MODE", 1.0),
    ],
)  # the table: the connection's
@pytest.mark.parametrize("step", ["acquire", "take_over", "renew"])
def test_a_lease_statement_waits_for_a_locked_lease_a_bounded_time(pg, clock, step, held, session):
    """A lease statement is one round trip that sets its own lock_timeout: it gives up on
    a lease row another transaction holds after `wait`, whatever the connection's own
    setting (0: for ever). A lock on the whole table is taken while the statement is
    parsed: the connection's lock_timeout (the store's `timeout`) bounds that wait."""
    mine = PostgresStore(pg, clock, timeout=session)
    lease = mine.lease("default", dt.timedelta(minutes=15), "me", wait=0.2)
    assert lease.acquire()
    blocker = PostgresStore(pg, clock)
    out = {}
    with blocker.db.transaction():
        blocker.db.execute(held)
        worker = threading.Thread(
            target=lambda: out.setdefault(
                "got", lease.take_over("me") if step == "take_over" else getattr(lease, step)()
            )
        )
        worker.start()
        worker.join(30)  # without a wait of its own it would still be waiting
        finished = not worker.is_alive()
    worker.join()
    assert finished and out["got"] in (False, None)  # None: renew says "try again later"
    assert lease.renew() is True  # the row is free again, and still ours
    for x in (lease, mine, blocker):
        x.close()


def _server_connections(store) -> int:
    return store.db.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'lethe'"
    ).fetchone()[0]


def test_run_due_every_tick_keeps_one_lease_connection(pg, clock):
    """A scheduler takes the pass lease at every tick: it reuses the store's lease
    connection instead of opening a server backend each time, and closing the store
    closes it."""
    mem = Memory(pg, policy=f"{POLICIES}/lifecycle.yaml", clock=clock, offline=True)
    mem.add("the staging server is called zeus", importance=6)
    mem.run_due()
    after_first = _server_connections(store_of(mem))
    for _ in range(20):
        clock.advance(dt.timedelta(hours=2))
        mem.run_due()
    assert _server_connections(store_of(mem)) == after_first
    watcher = PostgresStore(pg, clock)
    before = _server_connections(watcher)
    mem.close()
    deadline = time.monotonic() + 10  # a closed connection's backend exits on its own time
    while _server_connections(watcher) > before - 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _server_connections(watcher) == before - 2  # the store's and its lease's
    watcher.close()


# ---- lethe import -------------------------------------------------------------------
def test_import_keeps_ids_events_inbox_and_pass_runs_and_resumes(memory, tmp_path, pg, clock):
    src = str(tmp_path / "lethe.db")
    mem = memory(db=src)
    ids = [mem.add(f"fact number {i}", importance=i % 10) for i in range(30)]
    clock.advance(dt.timedelta(days=2))
    mem.run_due()
    store_of(mem).add_turn("default", "a pending turn", "ok")
    first = copy_store(src, pg, batch=7)
    assert first.copied["memories"] == 30 and first.copied["inbox"] == 1
    again = copy_store(src, pg, batch=7)
    assert again.copied["memories"] == 0 and again.resumed["memories"] == 30
    with open_store(pg) as dst:
        assert [r[0] for r in run_sql(dst, "SELECT id FROM memories ORDER BY id")] == ids
        assert _rows(dst, "memory_events") == _rows(store_of(mem), "memory_events")
        assert dst.last_runs("default") == store_of(mem).last_runs("default")
        assert dst.pending_count("default") == 1
    moved = memory(db=pg)
    assert moved.add("a new fact after the import") == ids[-1] + 1  # sequences moved on
    back = str(tmp_path / "back.db")
    copy_store(pg, back)  # and from a server into a file
    with open_store(back) as file:
        assert _rows(file, "memory_events") == _rows(store_of(moved), "memory_events")
        claims = ("claimed_by", "claimed_until")  # a server's claims stay on the server
        assert _named(file, "inbox") == [
            {k: v for k, v in r.items() if k not in claims} for r in _named(store_of(moved), "inbox")
        ]


def _newest_deleted(dsn: str, memory) -> int:
    """Five memories on a server, the newest deleted by another program (its events kept):
    returns the deleted id."""
    mem = memory(db=dsn)
    top = [mem.add(f"fact {i}", importance=5) for i in range(5)][-1]
    with PostgresStore(dsn) as store:
        run_sql(store, "DELETE FROM memories WHERE id = ?", (top,))
    return top


def test_a_server_source_set_but_not_called_gives_no_id_again(memory, tmp_path, pg):
    """A sequence set and not called since (as imports before this fix left them) gives one
    less than it holds: the copy still goes on after the deleted memory's id."""
    top = _newest_deleted(pg, memory)
    with PostgresStore(pg) as store:
        run_sql(store, "SELECT setval(pg_get_serial_sequence('memories', 'id'), ?, false)", (top + 1,))
    copy = str(tmp_path / "copy.db")
    copy_store(pg, copy)
    assert memory(db=copy).add("a fact of its own") == top + 1


def test_importing_again_into_a_server_never_moves_its_ids_back(memory, tmp_path, pg):
    """A rerun into a server whose own sequence is past the source's (a memory added there,
    then deleted) keeps the server's."""
    src = str(tmp_path / "src.db")
    mem = memory(db=src)
    for i in range(5):
        mem.add(f"fact {i}", importance=5)
    copy_store(src, pg)
    added = memory(db=pg).add("added on the server")
    with PostgresStore(pg) as store:
        run_sql(store, "DELETE FROM memories WHERE id = ?", (added,))
    copy_store(src, pg)
    assert memory(db=pg).add("another") == added + 1


def test_a_role_that_may_only_read_the_tables_still_imports(memory, tmp_path, pg, pg_dsn):
    """A source read by a role without rights on its sequences: the copy goes on after the
    largest id it holds (what is known), as before sequences were read."""
    import psycopg

    _newest_deleted(pg, memory)
    schema = pg.rsplit("csearch_path%3D", 1)[1]
    role = "reader_" + schema[2:]
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip("the test server's user may not create roles")
    reader = pg.replace("://lethe@", f"://{role}@", 1)
    assert reader != pg
    copy = str(tmp_path / "copy.db")
    copy_store(reader, copy)
    with open_store(copy, read_only=True) as store:
        assert run_sql(store, "SELECT count(*) FROM memories").fetchone()[0] == 4


def test_import_refuses_a_destination_holding_other_memories(memory, tmp_path, pg):
    memory(db=pg).add("someone else's memory")
    src = str(tmp_path / "lethe.db")
    memory(db=src).add("mine")
    with pytest.raises(StoreError, match="already holds other memories"):
        copy_store(src, pg)


def test_import_refuses_a_server_source_older_than_this_lethe(memory, tmp_path, pg):
    """A server is upgraded by opening it, not in a copy: an older one is refused with
    what to do, rather than copied with values a migration would have fixed."""
    memory(db=pg).add("a fact on an older server")
    last = PG_MIGRATIONS[-1].__name__
    with PostgresStore(pg) as store:
        run_sql(store, "DELETE FROM lethe_migrations WHERE name = ?", (last,))
    with pytest.raises(StoreError, match=f"older version of Lethe \\(it lacks {last}\\).*lethe run"):
        copy_store(pg, str(tmp_path / "copy.db"))
    assert not os.path.exists(tmp_path / "copy.db")


def _rows(store, table):
    return [tuple(r) for r in run_sql(store, f"SELECT * FROM {table} ORDER BY id")]


def _named(store, table):
    return [dict(zip(r.keys(), r)) for r in run_sql(store, f"SELECT * FROM {table} ORDER BY id")]


# ---- the article's rows, on a server -----------------------------------------------------
# What is compared does not depend on the size: each row's status and decay, one event per
# change, the top 60 of recall; 20,000 rows still make four import batches and hundreds of
# expiries and archivals. `make test` plays the 20,000 rows, `make soak` also the article's
# 100,000 (test_passes.py checks the 100,000 on SQLite in `make test`).
@pytest.fixture(
    scope="module", params=[20_000, pytest.param(100_000, marks=pytest.mark.soak)], ids=lambda n: f"{n}-rows"
)
def article_on_pg(request, tmp_path_factory, pg_dsn):
    rows = request.param
    path = str(tmp_path_factory.mktemp("article-pg") / "agent_memory.db")
    if rows == 20_000:  # the SIGKILL tests' file, copied: the article's passes change it
        shutil.copyfile(request.getfixturevalue("article_20k"), path)
    else:
        seed_article.generate(path, rows, START, seed=11)
    dsn = pg_server.fresh_schema(pg_dsn)
    runner = CliRunner()
    imported = runner.invoke(main, ["import", path, "--db", dsn, "--json"])
    assert imported.exit_code == 0, imported.output
    article = sqlite3.connect(path)
    expired = seed_article.article_expiry(article, T)
    _, archived = seed_article.article_decay(article, T)
    ran = runner.invoke(
        main,
        [
            "run",
            "--db",
            dsn,
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
    assert ran.exit_code == 0, ran.output
    yield article, open_store(dsn), expired, archived, dsn, rows
    article.close()


def test_article_statuses_and_decay_equal_on_postgres(article_on_pg):
    article, store, expired, archived, _, rows = article_on_pg
    q = "SELECT id, status, decay_score FROM memories ORDER BY id"
    theirs, ours = article.execute(q).fetchall(), [tuple(r) for r in run_sql(store, q)]
    assert len(ours) == len(theirs) == rows and expired > 100 and archived > 100
    assert [
        (a, b) for a, b in zip(theirs, ours) if a[0] != b[0] or a[1] != b[1] or abs(a[2] - b[2]) > 1e-9
    ] == []


def test_article_one_event_per_archived_or_expired_memory_on_postgres(article_on_pg):
    _, store, expired, archived, _, _ = article_on_pg
    rows = [
        tuple(r)
        for r in run_sql(
            store,
            "SELECT event_type, count(*), count(DISTINCT memory_id) FROM memory_events "
            "WHERE occurred_at = ? GROUP BY event_type ORDER BY event_type",
            (T.isoformat(),),
        )
    ]
    assert rows == [("archived", archived, archived), ("expired", expired, expired)]


def test_article_recall_order_from_lethe_ls_on_postgres(article_on_pg):
    article, _, _, _, dsn, _ = article_on_pg
    out = CliRunner().invoke(
        main,
        [
            "ls",
            "--db",
            dsn,
            "--policy",
            f"{POLICIES}/lifecycle.yaml",
            "--now",
            T.isoformat(),
            "--limit",
            "60",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    assert [m["id"] for m in json.loads(out.output)] == seed_article.article_recall_candidates(article)


# ---- many processes, one server ------------------------------------------------------
def test_agents_and_two_daemons_share_one_server(tmp_path, pg):
    f = run_concurrency(tmp_path, workers=2, seconds=6, step="4d", daemons=2, db=pg, lease=True)
    assert f["writes_acknowledged"] > 30 and f["pass_rounds"] > 10 and f["passes_run"] > 5
    assert f["passes_run_twice"] == 0 and f["lost"] == 0 and f["other_errors"] == 0
    assert f["statuses"].get("superseded", 0) > 0


@pytest.mark.soak
def test_four_agents_and_two_daemons_for_a_minute_on_one_server(tmp_path, pg):
    f = run_concurrency(tmp_path, workers=4, seconds=60, step="1d", daemons=2, db=pg, lease=True)
    assert f["writes_acknowledged"] > 500 and f["passes_run_twice"] == 0 and f["lost"] == 0


# ---- SIGKILL, then a rerun: the same rows as a run never interrupted --------------------
def _lethe(*args, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else {**os.environ, **env},
    )


def _kill_when(proc: subprocess.Popen, store, sql: str, timeout: float = 60) -> bool:
    """SIGKILL `proc` as soon as `sql` (run on another connection) finds something; False
    when the process finished first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if run_sql(store, sql).fetchone()[0]:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.005)
    proc.wait()
    return False


def _everything(store) -> dict:
    return {
        t: [tuple(r) for r in run_sql(store, f"SELECT * FROM {t} ORDER BY id")]
        for t in ("memories", "memory_events", "inbox")
    } | {"pass_runs": [tuple(r) for r in run_sql(store, "SELECT * FROM pass_runs ORDER BY pass")]}


@pytest.fixture(scope="module")
def article_20k(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("article-20k") / "agent_memory.db")
    seed_article.generate(path, 20_000, START, seed=5)
    return path


@pytest.fixture(scope="module")
def article_20k_on_pg(article_20k, pg_dsn):
    """Copies of the file imported once (as the SIGKILL import test's reference imports it)."""
    return pg_server.Template(pg_dsn, lambda dsn: copy_store(article_20k, dsn, batch=1000))


def test_sigkill_during_import_then_a_rerun_gives_the_same_rows(article_20k, article_20k_on_pg, pg_dsn):
    reference, killed = article_20k_on_pg.copy(), pg_server.fresh_schema(pg_dsn)
    with open_store(killed) as watch:
        proc = _lethe("import", article_20k, "--db", killed, "--batch", "1000")
        assert _kill_when(proc, watch, "SELECT count(*) > 0 FROM memories"), "import finished first"
        partial = run_sql(watch, "SELECT count(*) FROM memories").fetchone()[0]
        assert 0 < partial < 20_000 and partial % 1000 == 0  # whole batches only
    again = _lethe("import", article_20k, "--db", killed, "--json")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out)["already_there"]["memories"] == partial
    with open_store(reference) as a, open_store(killed) as b:
        assert _everything(b) == _everything(a)


def test_sigkill_during_import_of_odd_rows_then_a_rerun_gives_the_same_rows(article_20k, pg_dsn, tmp_path):
    """An article file with odd values is read from an adopted copy (before: COPY failed
    on 'high' in a REAL column). The copy is gone from the temp folder once adopted, so a
    kill during the copy leaves nothing there, and the rerun adopts a fresh one."""
    source, scratch = str(tmp_path / "agent_memory.db"), tmp_path / "tmp"
    shutil.copyfile(article_20k, source)
    scratch.mkdir()
    with sqlite3.connect(source) as db:
        for mid, col, value in ODD:
            db.execute(f"UPDATE memories SET {col} = ? WHERE id = ?", (value, mid))
    db.close()
    with open(source, "rb") as f:
        before = f.read()
    reference, killed = pg_server.fresh_schema(pg_dsn), pg_server.fresh_schema(pg_dsn)
    copy_store(source, reference, clock=FixedClock(T), batch=1000)
    cli = ["import", source, "--db", killed, "--now", T.isoformat()]
    with open_store(killed) as watch:
        proc = _lethe(*cli, "--batch", "1000", env={"TMPDIR": str(scratch)})
        assert _kill_when(proc, watch, "SELECT count(*) > 0 FROM memories"), "import finished first"
        partial = run_sql(watch, "SELECT count(*) FROM memories").fetchone()[0]
        assert 0 < partial < 20_000 and partial % 1000 == 0
    assert os.listdir(scratch) == []
    again = _lethe(*cli, "--json", env={"TMPDIR": str(scratch)})
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out)["already_there"]["memories"] == partial
    with open_store(reference) as a, open_store(killed) as b:
        ours = _everything(b)
        assert ours == _everything(a)
        assert len([e for e in ours["memory_events"] if e[2] == "normalised"]) == len(ODD)
    assert os.listdir(scratch) == []
    with open(source, "rb") as f:
        assert f.read() == before


def test_sigkill_during_a_pass_then_a_rerun_gives_the_same_rows(article_20k_on_pg):
    reference, killed = article_20k_on_pg.copy(), article_20k_on_pg.copy()
    run = [
        "run",
        "--policy",
        f"{POLICIES}/lifecycle.yaml",
        "--pass",
        "expiry",
        "--pass",
        "decay",
        "--now",
        T.isoformat(),
        "--json",
    ]
    for db in (reference, killed):
        Memory(db, policy=f"{POLICIES}/lifecycle.yaml", clock=FixedClock(T)).close()  # ranks
    assert (
        subprocess.run(
            [sys.executable, "-m", "engine.cli", *run, "--db", reference], cwd=ROOT, capture_output=True
        ).returncode
        == 0
    )
    with open_store(killed) as watch:
        proc = _lethe(*run, "--db", killed)
        assert _kill_when(
            proc,
            watch,
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'UPDATE memories%'",
        ), "the pass finished first"
    rerun = subprocess.run(
        [sys.executable, "-m", "engine.cli", *run, "--db", killed], cwd=ROOT, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    with open_store(reference) as a, open_store(killed) as b:
        ours, theirs = _everything(b), _everything(a)
        # a sequence is not rolled back (the killed transaction used up event ids), and the
        # ids of one INSERT ... SELECT follow the scan order: events compared without them
        for snap in (ours, theirs):
            snap["memory_events"] = sorted(e[1:] for e in snap["memory_events"])
        assert ours == theirs


# ---- batched passes: the exactly-once cursor on a server ---------------------------------
def _state(store):
    rows = [
        tuple(r) for r in run_sql(store, "SELECT id, status, decay_score, rank FROM memories ORDER BY id")
    ]
    events = [
        tuple(r)
        for r in run_sql(
            store,
            "SELECT memory_id, event_type, occurred_at FROM memory_events ORDER BY memory_id, event_type",
        )
    ]
    return rows, events


@pytest.fixture(scope="module")
def article_5k_on_pg(tmp_path_factory, pg_dsn):
    path = str(tmp_path_factory.mktemp("article-5k") / "agent_memory.db")
    seed_article.generate(path, 5000, START, seed=3)
    return pg_server.Template(pg_dsn, lambda dsn: copy_store(path, dsn))


@pytest.fixture
def article_pair_pg(article_5k_on_pg):
    return article_5k_on_pg.copy(), article_5k_on_pg.copy()


def test_batched_equals_one_transaction_on_postgres(tmp_path, article_pair_pg):
    a, b = article_pair_pg
    day = START + dt.timedelta(days=1)
    with Memory(a, policy=f"{POLICIES}/scheduled-sql.yaml", clock=lambda: day, offline=True) as one:
        one.run(["expiry", "decay"])
        ref = _state(store_of(one))
    with Memory(b, policy=batched_policy(tmp_path, "scheduled-sql"), clock=lambda: day, offline=True) as many:
        many.run(["expiry", "decay"])
        assert _state(store_of(many)) == ref


def test_an_interrupted_batched_pass_resumes_with_its_own_now_on_postgres(tmp_path, article_pair_pg):
    a, b = article_pair_pg
    day, later = START + dt.timedelta(days=1), START + dt.timedelta(days=1, hours=5)
    with Memory(a, policy=f"{POLICIES}/scheduled-sql.yaml", clock=lambda: day, offline=True) as one:
        one.run(["decay"])
        ref = _state(store_of(one))
    clock = {"now": day}
    mem = Memory(
        b, policy=batched_policy(tmp_path, "scheduled-sql"), clock=lambda: clock["now"], offline=True
    )
    run_sql(
        store_of(mem),
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'power cut'; END $$",
    )
    run_sql(
        store_of(mem),
        "CREATE TRIGGER boom BEFORE UPDATE OF decay_score ON memories FOR EACH ROW "
        "WHEN (old.id > 2500) EXECUTE FUNCTION boom()",
    )
    with pytest.raises(Exception, match="power cut"):
        mem.run(["decay"])
    cursor = run_sql(store_of(mem), "SELECT cursor FROM pass_progress").fetchone()[0]
    assert 1 < cursor <= 2501 and "decay" in mem.due()
    run_sql(store_of(mem), "DROP TRIGGER boom ON memories")
    clock["now"] = later
    (result,) = mem.run(["decay"])
    assert result.ran_at == day.isoformat() and result.notes == ["resumed an interrupted run"]
    assert _state(store_of(mem)) == ref  # no batch applied twice, every row once, at `day`
    mem.close()


# ---- every shipped policy under every shipped scenario: the same store as on SQLite ------
# A server round trip costs what a SQLite call does not (a simulated day is 24 expiry runs
# of ~20 statements each), so `make test` plays lifecycle on one scenario per path it takes:
# the gate's refusal, additive facts, decay to archive, a supersession by
# a new value and by a tool of the same family, an end date and "for now" expiring, and
# compression; and the fused and scene write paths on the scenarios that exercise them (a
# replacement, a tool change, an expiry; scene cells). The other lifecycle pairs take the
# same paths as one of these (editor-switch, poetry-to-uv: a tool replaced; python-upgrade,
# standup-moved: a value; waiting-on-alice: a wait ending, under fused here; agent-build:
# scenes' scenario) and `make soak` plays every pair. The access bonus (preference-in-use:
# half a year of hourly passes, 20 s on a server) is `make soak`'s and CI's (.ci/run).
QUICK = {
    "lifecycle": {
        "small-talk",
        "additive-and-progression",
        "bun-curiosity",
        "deadline-moved",
        "postgres-to-mysql",
        "temporary-workaround",
        "readability-merge",
    },
    "fused": {"deadline-moved", "postgres-to-mysql", "waiting-on-alice"},
    "scenes": {"scenes/agent-build", "additive-and-progression"},
}


def _pair(scenario, policy):
    chosen = QUICK.get(os.path.basename(policy)[:-5], set())
    quick = chosen is None or path_id(scenario).removeprefix("scenarios/") in chosen
    return pytest.param(
        scenario,
        policy,
        id=f"{path_id(scenario)}-{path_id(policy)}",
        marks=() if quick else pytest.mark.soak,
    )


PAIRS = [_pair(s, p) for s in shipped_scenarios() for p in POLICIES_WITHOUT_LOCAL_MODEL]


@pytest.mark.parametrize("scenario,policy", PAIRS)
def test_scenarios_end_with_the_same_store_as_on_sqlite(scenario, policy, tmp_path, pg):
    assert play(scenario, policy, pg) == played_on_sqlite(scenario, policy, str(tmp_path / "s.db"))
