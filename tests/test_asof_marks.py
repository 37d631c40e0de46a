"""The marks that bound an as-of read (engine.store.asof_marks): written by a runner, they
change no answer (each read equals the same question asked the long way, whatever the
clock did and whenever the marks were written), and a read as of T does not pass over what
was recorded after T."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from engine.store import asof_marks
from tests.helpers import START, run_sql, store_of

pytestmark = pytest.mark.both_backends

# what "recorded by T" means (docs/time.md), read the long way: said by then, and its first
# event (when it has one) recorded by then
RECORDED_BY = (
    "SELECT m.id FROM memories m WHERE m.namespace = ? AND m.created_at <= ? AND coalesce("
    "(SELECT min(e.occurred_at) FROM memory_events e WHERE e.memory_id = m.id), m.created_at) <= ? "
    "ORDER BY m.id DESC"
)


def iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="seconds")


@pytest.mark.parametrize("most", [2, asof_marks.MOST_SEGMENTS])
def test_as_of_reads_what_was_recorded_by_then_whatever_the_clock_did(memory, clock, monkeypatch, most):
    """Memories over two namespaces and several segments, written mostly in time order but
    with the clock running ahead and going back, some said long before they were recorded,
    some forgotten after the clock went back (which makes them count as recorded earlier);
    marks written at random points. As of each instant, before and after each mark, the
    memories read are those recorded by then, newest first, with or without a query; also
    when each mark covers only a few new segments (a big store's first marks)."""
    monkeypatch.setattr(asof_marks, "MOST_SEGMENTS", most)
    rng = random.Random(41)
    mems = [memory(), memory(namespace="other")]
    store = store_of(mems[0])
    late: list[int] = []
    for i in range(900):
        jump = rng.choice([0, 0, 0, 0, 0, 0, -200, 300])  # ahead of time, or behind it
        hours = i + (jump if i < 250 or i > 700 else 0)  # the second segment in time order
        hours = 100 if i == 850 else hours  # before all the second and third segments hold
        clock.set(START + dt.timedelta(hours=hours))
        mem = mems[i % 2]
        if i % 50 == 7:  # said long before it was recorded: it counts from its recording
            with store_of(mem).saying(iso(START + dt.timedelta(hours=i - 400))):
                late.append(mem.add(f"Tool number {i} is in use", judged=False))
        else:
            mid = mem.add(f"Tool number {i} is in use", judged=False)
            if i % 37 == 3:
                clock.set(START + dt.timedelta(hours=hours + 30))
                mem.forget(mid, "gone")
        if i in (300, 301, 650, 651):  # PostgreSQL's marks cover what the previous one saw
            store.mark_recorded()
        if i == 700:  # the clock goes back: forgetting them makes them count from then,
            # before anything else their segment holds (the marks must learn it)
            for mid in [m for m in late if 256 < m < 420]:
                clock.set(START + dt.timedelta(hours=mid - 150))
                mems[(mid - 1) % 2].forget(mid, "gone")
            check(mems, store)
    check(mems, store)
    for _ in range(6):
        store.mark_recorded()
    assert run_sql(store, "SELECT count(*) FROM asof_segments").fetchone()[0] == 4  # 900 ids
    check(mems, store)


def check(mems, store) -> None:
    for hours in range(-380, 1300, 61):
        at = START + dt.timedelta(hours=hours, minutes=30)
        for mem in mems:
            want = [r[0] for r in run_sql(store, RECORDED_BY, (mem.namespace, iso(at), iso(at)))]
            assert [m.id for m in mem.memories("all", None, as_of=at)] == want, at
            found = store.recorded_by(mem.namespace, iso(at), "number", 1000)
            assert [r["id"] for r in found] == want, at
            assert [r["id"] for r in store.recorded_by(mem.namespace, iso(at), "number", 3)] == want[:3]
            for mid in want[:2] + want[-1:]:
                assert mem.get(mid, as_of=at).id == mid
            mine = [
                r[0] for r in run_sql(store, "SELECT id FROM memories WHERE namespace = ?", (mem.namespace,))
            ]
            later = [m for m in mine if m not in want]
            assert all(mem.get(m, as_of=at) is None for m in later[:3] + later[-3:]), at


@pytest.mark.sqlite_only  # counts the work of a read (SQLite's progress handler)
def test_an_as_of_read_does_not_pass_over_what_was_recorded_after_then(memory, clock):
    """A store in time order, as a live one is, after a runner's run: a read as of a time
    early in its life costs the same after 2,000 more memories were recorded later, with or
    without a query (it walked them newest first, every one, before the marks)."""
    mem, at = memory(), START + dt.timedelta(hours=40, minutes=30)

    def grow(first: int, last: int) -> None:
        for i in range(first, last):
            clock.set(START + dt.timedelta(hours=i))
            mem.add(f"Tool number {i} is in use", judged=False)
        clock.advance(dt.timedelta(hours=2))
        mem.run_due()  # expiry is due: the runner writes the marks after it

    def work() -> tuple[int, list[int], list[int]]:
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        store_of(mem).db.set_progress_handler(count, 100)
        try:
            listed = [m.id for m in mem.memories("all", 5, as_of=at)]
            recalled = [m.id for m in mem.candidates("tool number", as_of=at)][:5]
        finally:
            store_of(mem).db.set_progress_handler(None, 0)
        return steps[0], listed, recalled

    grow(0, 300)
    before, listed, recalled = work()
    assert listed == [41, 40, 39, 38, 37] and sorted(recalled, reverse=True)[:1] == [41]
    grow(300, 2300)
    after, *same = work()
    assert same == [listed, recalled]
    assert after < 1.5 * before, (before, after)


def test_a_mark_waits_for_a_transaction_that_holds_a_lower_id(memory, clock, backend):
    """PostgreSQL: a memory inserted by a transaction that commits after later ids were
    committed and marked is still read as of its time (the mark covers only what the
    previous one saw once every transaction running then has ended)."""
    if backend != "postgres":
        pytest.skip("SQLite's writers take turns: a mark sees every id below the largest")
    a, b = memory(), memory()
    held, early = store_of(a), iso(START - dt.timedelta(days=30))
    with held.transaction():
        run_sql(
            held,
            "INSERT INTO memories (content, created_at, namespace) VALUES (?, ?, 'default')",
            ("User likes green tea", early),
        )
        first = run_sql(held, "SELECT max(id) FROM memories").fetchone()[0]
        for i in range(300):
            clock.set(START + dt.timedelta(hours=i))
            b.add(f"Tool number {i} is in use", judged=False)
        for _ in range(3):
            store_of(b).mark_recorded()
    for _ in range(3):
        store_of(b).mark_recorded()
    covered = run_sql(store_of(b), "SELECT memories_upto FROM asof_cover").fetchone()[0]
    assert covered > first  # the marks cover it: the read below goes by them
    at = START - dt.timedelta(days=29)
    assert [m.id for m in b.memories("all", None, as_of=at)] == [first]
    assert [m.id for m in b.candidates("green tea", as_of=at)] == [first]
