"""As-of reads (docs/time.md): recall, ls and get at a past time T, rebuilt from the events
recorded by T, give what a store that recorded nothing after T gives."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import random
import sqlite3

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory
from engine.apps.scenario import Player, Script
from engine.apps.scenario import load as load_scenario
from engine.cli import main
from engine.store.transfer import copy_store
from tests.helpers import START, pg_server, shipped_scenarios, store_of

pytestmark = pytest.mark.both_backends


def test_as_of_reads_what_was_believed_then(memory, clock):
    mem = memory()
    [old] = mem.remember("I manage dependencies with poetry.")
    clock.advance(dt.timedelta(days=10))
    mem.run_due()
    [new] = mem.remember("I stopped using poetry, it's uv now.")
    clock.advance(dt.timedelta(days=10))
    mem.run_due()
    before, after = START + dt.timedelta(days=5), START + dt.timedelta(days=15)
    query = "which dependency manager, poetry or uv?"
    assert [m.id for m in mem.recall(query, as_of=before)] == [old]
    assert [m.id for m in mem.recall(query, as_of=after)] == [new]
    assert [m.id for m in mem.candidates(as_of=before)] == [old]
    assert mem.get(old, as_of=before).status == "active"
    assert (mem.get(old, as_of=after).status, mem.get(old, as_of=after).contradicted_by) == (
        "superseded",
        new,
    )
    assert mem.get(new, as_of=before) is None  # not recorded yet
    assert [m.id for m in mem.memories(as_of=before)] == [old]
    assert [(m.id, m.status) for m in mem.memories("all", as_of=after)] == [
        (new, "active"),
        (old, "superseded"),
    ]
    assert [m.id for m in mem.memories("superseded", as_of=after)] == [old]
    assert [m.id for m in mem.memories("all", limit=1, as_of=after)] == [new]
    assert mem.memories("all", as_of=START - dt.timedelta(days=1)) == []
    assert mem.get(old).access_count == 0  # an as-of recall records no access
    story = mem.history(old, as_of=before)
    assert [e["event_type"] for e in story.events] == ["created"] and story.superseded_by is None


def test_a_recall_judged_by_the_rules_renders_no_prompt(memory, clock, monkeypatch):
    """The rules read the variables, never the prompt: an offline recall, as of T or not,
    does not render the select prompt over its candidates (half its CPU at 1M)."""
    import engine.prompts

    mem = memory()
    [kept] = mem.remember("I manage dependencies with poetry.")
    rendered = []
    monkeypatch.setattr(engine.prompts, "render", lambda *a, **k: rendered.append(a[0]) or "")
    assert [m.id for m in mem.recall("which dependency manager?", as_of=START)] == [kept]
    assert [m.id for m in mem.recall("which dependency manager?")] == [kept]
    assert rendered == []


def test_the_cli_reads_as_of(tmp_path):
    db = str(tmp_path / "a.db")
    run = lambda *a: CliRunner().invoke(main, [*a, "--db", db], catch_exceptions=False)  # noqa: E731
    assert (
        run(
            "remember", "I manage dependencies with poetry.", "--offline", "--now", "2026-01-05T09:00:00"
        ).exit_code
        == 0
    )
    assert (
        run(
            "remember", "I stopped using poetry, it's uv now.", "--offline", "--now", "2026-02-05T09:00:00"
        ).exit_code
        == 0
    )
    then = run("recall", "dependency manager poetry uv", "--offline", "--as-of", "2026-01-10")
    assert "poetry" in then.output and "uv now" not in then.output, then.output
    assert (
        "uv now"
        in run("recall", "dependency manager poetry uv", "--offline", "--now", "2026-02-06T00:00:00").output
    )
    assert "#1" in run("ls", "--as-of", "2026-01-10").output
    why = run("why", "1", "--as-of", "2026-01-10")
    assert "[active]" in why.output and "superseded" not in why.output.split("event")[-1]


# Expiry runs hourly as shipped: a year is 8,760 runs of it, most of the time these tests
# took (on PostgreSQL above all). Daily, the year still makes every kind of change as-of
# reads rebuild (supersessions, expiries, archiving, merges).
DAILY = "name: lifecycle-daily\nextends: lifecycle\npasses:\n  expiry: {every: 1d}\n"


def daily(folder) -> str:
    """The shipped lifecycle with its expiry pass daily, as a policy file in `folder`."""
    path = os.path.join(str(folder), "lifecycle-daily.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(DAILY)
    return path


class Snapshots(Player):
    """Plays a scenario and keeps a copy of the store at each instant it sampled (the last
    state of that instant): the store as it stood had it stopped then."""

    def __init__(self, *args, folder):
        super().__init__(*args)
        self.folder, self.copies = folder, {}

    def _sample(self, force: bool = False) -> None:
        super()._sample(force)
        at = self.clock()
        path = os.path.join(self.folder, f"at-{len(self.copies)}.db")
        src, dst = sqlite3.connect(self.mem.database), sqlite3.connect(path)
        src.backup(dst)
        src.close(), dst.close()
        self.copies[at] = path  # a later sample of the same instant replaces it


@pytest.mark.sqlite_only
def test_as_of_equals_a_store_that_stopped_then(tmp_path):
    """Over the shipped scenarios played one after the other in one store (about a year:
    supersessions, expiries, archiving, merges), at 20 random instants T: recall and ls as
    of T on the final store equal them on the copy that stopped at T, for every shipped
    scenario's queries, and each memory's status and links as of T are those it holds."""
    db = str(tmp_path / "final.db")
    player, end = play_all(db, daily(tmp_path), str(tmp_path))
    queries = sorted(
        {s.arg for path in shipped_scenarios() for s in load_scenario(path).steps if s.action == "recall"}
    )
    instants = sorted(random.Random(41).sample(sorted(player.copies), min(20, len(player.copies))))
    assert len(instants) == 20 and instants[-1] - instants[0] > dt.timedelta(days=180)
    final = Memory(db, offline=True, clock=FixedClock(end), read_only=True)
    compared, seen = 0, set()
    for at in instants:
        with Memory(player.copies[at], offline=True, clock=FixedClock(at), read_only=True) as then:
            compared += same_as_the_copy(final, then, at, queries)
            seen.add(len(store_of(then).memories(then.namespace)))
    final.close()
    assert max(seen) > 20 and len(seen) > 5  # stores of many sizes were compared
    assert compared == 20 * len(queries)


def same_as_the_copy(final: Memory, then: Memory, at: dt.datetime, queries: list[str]) -> int:
    """Assert that the final store read as of `at` is the copy that stopped then: each
    memory's status and links, the list by status, and recall and candidates for every
    query. How many queries were compared."""
    for row in store_of(then).memories(then.namespace):  # what the copy holds at T
        was = final.get(row["id"], as_of=at)
        assert (was.status, was.contradicted_by, was.merged_into) == (
            row["status"],
            row["contradicted_by"],
            row["merged_into"],
        ), (at, row["id"])
    assert [m.id for m in final.candidates(as_of=at)] == [m.id for m in then.candidates(as_of=at)]
    assert [(m.id, m.status) for m in final.memories("all", None, as_of=at)] == [
        (m.id, m.status) for m in then.memories("all", None)
    ], at
    for q in queries:
        assert [m.id for m in final.recall(q, as_of=at)] == [m.id for m in then.recall(q, as_of=at)], (at, q)
        assert [m.id for m in final.candidates(q, as_of=at)] == [
            m.id for m in then.candidates(q, as_of=at)
        ], (
            at,
            q,
        )
    return len(queries)


class PgCopies(Player):
    """Plays a scenario on PostgreSQL and, before the chosen `advance` steps, copies the
    stopped store into a schema of its own with `lethe import`'s copy (nothing writes
    meanwhile, so the copy is the store as it stood at that instant)."""

    def __init__(self, *args, source: str, server: str, chosen: int):
        super().__init__(*args)
        steps = [i for i, s in enumerate(self.scenario.steps) if s.action == "advance"]
        self.chosen = set(random.Random(41).sample(steps, min(chosen, len(steps))))
        self.source, self.server, self.copies = source, server, {}

    def _advance(self, index: int, step) -> None:
        if index in self.chosen:
            copy = pg_server.fresh_schema(self.server)
            copy_store(self.source, copy)
            self.copies[self.clock()] = copy
        super()._advance(index, step)


def play_all(db: str, policy: str, folder: str | None = None, player=None):
    """The shipped scenarios played one after the other in one store (offline) under
    `policy`; with a
    `folder`, a copy of the store at each instant sampled (SQLite); `player(scenario, mem,
    clock, script)` makes a player of the caller's."""
    played = [load_scenario(path) for path in shipped_scenarios(top_level_only=True)]
    scenario = dataclasses.replace(played[0], steps=[s for p in played for s in p.steps])
    clock, script = FixedClock(scenario.start), Script()
    with Memory(db, policy=policy, offline=True, clock=clock, scripted=script) as mem:
        if player is not None:
            player = player(scenario, mem, clock, script)
        elif folder:
            player = Snapshots(scenario, mem, clock, script, folder=folder)
        else:
            player = Player(scenario, mem, clock, script)
        player.play()
    return player, clock()


def test_as_of_on_postgres_equals_a_copy_that_stopped_then(db_path, backend, pg_dsn, tmp_path):
    """The same year played on PostgreSQL, copied (as `lethe import` copies) into a schema
    of its own at 12 instants while nothing wrote: recall, ls and get as of each instant
    on the final store equal the copy that stopped then."""
    if backend != "postgres":
        pytest.skip("the SQLite store is compared with its copies above")

    def player(*args):
        return PgCopies(*args, source=db_path, server=pg_dsn, chosen=12)

    played, end = play_all(db_path, daily(tmp_path), player=player)
    queries = sorted(
        {s.arg for path in shipped_scenarios() for s in load_scenario(path).steps if s.action == "recall"}
    )
    assert len(played.copies) == 12
    instants = sorted(played.copies)
    assert instants[-1] - instants[0] > dt.timedelta(days=120), instants
    compared, seen = 0, set()
    with Memory(db_path, offline=True, clock=FixedClock(end)) as final:
        for at in instants:
            with Memory(played.copies[at], offline=True, clock=FixedClock(at)) as then:
                compared += same_as_the_copy(final, then, at, queries)
                seen.add(len(store_of(then).memories(then.namespace)))
    assert max(seen) > 20 and len(seen) > 5, seen  # stores of many sizes were compared
    assert compared == 12 * len(queries)


def test_as_of_on_either_backend_is_the_same(db_path, backend, tmp_path):
    """The same year played on PostgreSQL reads, as of 20 instants, what SQLite reads (whose
    as-of reads equal the copies that stopped then: the test above)."""
    if backend != "postgres":
        pytest.skip("compares PostgreSQL with SQLite")
    here, end = play_all(db_path, daily(tmp_path))
    lite, _ = play_all(str(tmp_path / "lite.db"), daily(tmp_path))
    rng = random.Random(7)
    start = here.scenario.start
    instants = sorted(
        start + dt.timedelta(seconds=rng.randrange(int((end - start).total_seconds()))) for _ in range(20)
    )
    queries = sorted(
        {s.arg for path in shipped_scenarios() for s in load_scenario(path).steps if s.action == "recall"}
    )
    with (
        Memory(db_path, offline=True, clock=FixedClock(end)) as pg,
        Memory(str(tmp_path / "lite.db"), offline=True, clock=FixedClock(end)) as sq,
    ):
        listed = 0
        for at in instants:
            assert [(m.id, m.status) for m in pg.candidates(as_of=at)] == [
                (m.id, m.status) for m in sq.candidates(as_of=at)
            ], at
            listed += len(sq.candidates(as_of=at))
            for mid in range(1, 40):
                a, b = pg.get(mid, as_of=at), sq.get(mid, as_of=at)
                assert (a and (a.status, a.contradicted_by, a.merged_into)) == (
                    b and (b.status, b.contradicted_by, b.merged_into)
                ), (at, mid)
            for q in queries:
                assert [m.id for m in pg.recall(q, as_of=at)] == [m.id for m in sq.recall(q, as_of=at)], (
                    at,
                    q,
                )
        assert listed > 40  # the instants saw stores with memories in them (84 listed)
