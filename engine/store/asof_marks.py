"""The marks that bound an as-of read (engine.store.asof_reads), written by a runner after
its passes (engine.run.runner): no insert reads or writes them, so they cost a write nothing
and take no lock a writer waits on.

A memory counts as recorded by T when it was said by then (`created_at`) and its first
event (when it has one) was recorded by then: its recording key is the later of the two,
and it never grows (an event recorded earlier, after the clock went back, lowers it).
The ids are cut into segments of SEGMENT ids; `asof_segments` keeps, for each segment
holding a memory that can ever count, its `floor` (the least key of its memories) and its
`reach` (the least floor of it and of every later segment), which never decreases with the
segment. `asof_cover` says what the segments cover: every memory up to `memories_upto` and
every event up to `events_upto`. A read as of T reads the memories above `memories_upto`,
those with a later event recorded by T, and the memories below the end of the last segment
whose reach is at most T: every memory after it was recorded after T.

What a mark covers must not gain a row later. SQLite's writers take turns, so a mark covers
what is there. On PostgreSQL a transaction may still hold an id below the largest one
seen; a mark there covers what the previous mark saw, once every transaction running then
has ended (its snapshot's `xmax` below the oldest running now), and marks are written by one
runner at a time (a try of an advisory lock, which never waits)."""

from __future__ import annotations

from engine.store.shared_sql import SharedQueries

SEGMENT = 256  # ids a segment holds: an as-of read passes over at most this many after T
MOST_SEGMENTS = 400  # new segments a mark writes at a time (100k memories: 0.4 s on SQLite)


def segment_of(memory_id: int) -> int:
    return (memory_id - 1) // SEGMENT + 1


class AsOfMarks(SharedQueries):
    # a mark must wait for the transactions running when its rows were seen (PostgreSQL)
    marks_wait_for_transactions = False

    def mark_recorded(self) -> int:
        """Bring the marks up to date with what is committed, at most MOST_SEGMENTS new
        segments at a time (a first run over a big store goes on at the next), in one
        transaction of its own; the number of segments whose floor was written (0: nothing
        new, or another process marks now)."""
        if self._marks_current():
            return 0
        with self.transaction():
            if not self._marking():
                return 0
            row = self._x(
                "SELECT memories_upto, events_upto, next_memories, next_events, next_after "
                "FROM asof_cover WHERE one = 1"
            ).fetchone()
            lo, e_lo = (row[0], row[1]) if row else (0, 0)
            top = tuple(
                self._x(
                    f"SELECT (SELECT coalesce(max(id), 0) FROM {self.rows}), "
                    "(SELECT coalesce(max(id), 0) FROM memory_events)"
                ).fetchone()
            )
            target, following, settled = self._aim(row, top)
            hi, e_hi = min(target[0], lo + MOST_SEGMENTS * SEGMENT), max(e_lo, target[1])
            if settled and hi == target[0]:  # all the previous mark saw is marked: look again
                following = (*top, self._running_after())
            written = self._close(lo, max(lo, hi), e_lo, e_hi)
            p = self.p
            self._x(
                "INSERT INTO asof_cover (one, memories_upto, events_upto, next_memories, "
                f"next_events, next_after) VALUES (1, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (one) "
                "DO UPDATE SET memories_upto = excluded.memories_upto, events_upto = "
                "excluded.events_upto, next_memories = excluded.next_memories, next_events = "
                "excluded.next_events, next_after = excluded.next_after",
                (max(lo, hi), e_hi, *following),
            )
        return written

    def _marks_current(self) -> bool:
        """Whether the marks cover every memory and event there is, and the next mark would
        too (read in one statement, with no transaction: most runs of a runner write
        nothing new to mark, and a scenario runs its passes hourly for months)."""
        row = self._x(
            "SELECT memories_upto, events_upto, next_memories, next_events, (SELECT "
            f"coalesce(max(id), 0) FROM {self.rows}), (SELECT coalesce(max(id), 0) FROM "
            "memory_events) FROM asof_cover WHERE one = 1"
        ).fetchone()
        if row is None or (row[0], row[1]) != (row[4], row[5]):
            return False
        return not self.marks_wait_for_transactions or (row[2], row[3]) == (row[4], row[5])

    def _aim(self, row, top: tuple) -> tuple[tuple, tuple, bool]:
        """What this mark may cover (memories, events up to), what the next one may (and
        what identifies the transactions running when it was seen), and whether this one
        covers what the previous one saw (PostgreSQL: once they have all ended)."""
        if not self.marks_wait_for_transactions:
            return top, (None, None, None), False
        now = (0, 0) if row is None else (row[0], row[1])
        if row is None or row[2] is None:
            return now, (*top, self._running_after()), False
        seen = (row[2], row[3])
        if not self._ended(row[4]):
            return now, (*seen, row[4]), False  # waits for those still running
        return seen, (*seen, row[4]), True

    def _close(self, lo: int, hi: int, e_lo: int, e_hi: int) -> int:
        """The floors of the segments holding memories in (lo, hi], and of those whose
        memories an event in (e_lo, e_hi] made count earlier; then the reaches they lower."""
        p, changed = self.p, set[int]()
        if hi > lo:
            changed.update(range(segment_of(lo + 1), segment_of(hi) + 1))
        if e_hi > e_lo and lo > 0:  # events of memories already marked
            changed.update(
                segment_of(r[0])
                for r in self._x(
                    "SELECT DISTINCT e.memory_id FROM memory_events e JOIN asof_segments s ON "
                    f"s.segment = (e.memory_id - 1) / {SEGMENT} + 1 WHERE e.id > {p} AND e.id <= {p} "
                    f"AND e.memory_id <= {p} AND e.occurred_at < s.floor",
                    (e_lo, e_hi, lo),
                )
            )
        floors: list[tuple[int, str]] = []
        for first, last in _runs(sorted(changed)):
            floors += self._floors(first, last, min(max(lo, hi), last * SEGMENT))
        # in order: a segment's reach counts the later ones, which lower it as they come
        for segment, floor in sorted(floors):
            self._x(
                f"INSERT INTO asof_segments (segment, floor, reach) VALUES ({p}, {p}, {p}) "
                "ON CONFLICT (segment) DO UPDATE SET floor = excluded.floor, reach = CASE WHEN "
                "asof_segments.reach < excluded.floor THEN asof_segments.reach ELSE excluded.floor END",
                (segment, floor, floor),
            )
            self._x(
                f"UPDATE asof_segments SET reach = {p} WHERE reach > {p} AND segment < {p}",
                (floor, floor, segment),
            )
        return len(floors)

    def _floors(self, first: int, last: int, upto: int) -> list[tuple[int, str]]:
        """(segment, floor) of the segments first..last, their memories up to `upto`: the
        least recording key of each (a segment none of whose memories can count: none)."""
        p = self.p
        return [
            (r[0], r[1])
            for r in self._x(
                f"SELECT (m.id - 1) / {SEGMENT} + 1 AS segment, min(CASE WHEN m.created_at IS NULL "
                "THEN NULL ELSE (SELECT CASE WHEN min(e.occurred_at) > m.created_at THEN "
                "min(e.occurred_at) ELSE m.created_at END FROM memory_events e WHERE e.memory_id = "
                f"m.id) END) FROM {self.rows} m WHERE m.id > {p} AND m.id <= {p} "
                f"GROUP BY (m.id - 1) / {SEGMENT} + 1",
                ((first - 1) * SEGMENT, upto),
            )
            if r[1] is not None
        ]

    # -- what a backend says for itself (PostgreSQL overrides them) ---------------------
    def _marking(self) -> bool:
        """Whether this process is the one marking now (SQLite: its write lock says so)."""
        return True

    def _running_after(self) -> int | None:
        """What identifies the transactions running now, for `_ended` to ask later."""
        return None

    def _ended(self, after: int | None) -> bool:
        """Whether every transaction running when `_running_after` answered `after` has ended."""
        return True


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted numbers as runs of consecutive ones: (first, last) each."""
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out
