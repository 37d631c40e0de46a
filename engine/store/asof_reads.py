"""Reads for the state of a few memories at a past time (engine.run.asof): the memories that
had been recorded by then (`recorded_at`, m025: their first event's time), matching a query
or not, newest first, and their events up to then, found through `memory_events_time`
(m021: memory, recording time). A read walks down from the largest id recorded by then,
found in the index of `recorded_floor` (the earliest recording time of a memory and of
every later one): what was recorded after it is never read. The same SQL on both backends,
with the dialect's placeholder (`p`), as methods both stores inherit. Nothing here reads
more than the memories it returns and their events: never a replay of the store."""

from __future__ import annotations

from engine.store.shared_sql import SharedQueries


class AsOf(SharedQueries):
    def recorded_by(
        self, namespace: str, at: str, text: str | None, limit: int, below: int | None = None
    ) -> list:
        """Up to `limit` memories of `namespace` recorded by `at` (any status now), newest
        first (with `below`, those whose id is under it: the next page); with `text`, only
        those matching any of its words in full text."""
        top = self.recorded_top(at)
        if top is None:
            return []  # nothing was recorded by then
        where = [
            f"m.namespace = {self.p}",
            f"m.created_at <= {self.p}",  # said by then, a fortiori
            f"m.recorded_at <= {self.p}",
            f"m.id < {self.p}",
        ]
        args: list = [namespace, at, at, top + 1 if below is None else min(below, top + 1)]
        if text:
            found = self.fts_ids(text, every=False)
            if found is None:
                return []
            if self.fts_newest_first:
                return self._newest_matches(where, args, found, limit, args[-1])
            where.append(f"m.id IN ({found[0]})")
            args.append(found[1])
        return self._x(
            f"SELECT m.* FROM memories m WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT {self.p}",
            (*args, limit),
        ).fetchall()

    def recorded_top(self, at: str) -> int | None:
        """The largest id of a memory recorded by `at`, of any namespace (None: none was):
        every memory above it was recorded later. One entry of the floor's index."""
        row = self._x(
            f"SELECT id FROM {self.rows} WHERE recorded_floor <= {self.p} "
            "ORDER BY recorded_floor DESC, id DESC LIMIT 1",
            (at,),
        ).fetchone()
        return None if row is None else row[0]

    def _newest_matches(
        self, where: list, args: list, found: tuple[str, str], limit: int, below: int
    ) -> list:
        """The full-text matches (`found`, from `fts_ids`: SQLite's, whose rows are the
        memories' rowids) read newest first in batches (FTS5 walks its
        rowids backwards and stops at the batch: a query of common words matches most of
        the store, and reading every match first cost 70 ms at 100k), each batch kept to
        the rows `where` admits, until `limit` are found."""
        out: list = []
        batch = max(4 * limit, 200)
        while len(out) < limit:
            ids = [
                r[0]
                for r in self._x(
                    found[0] + f" AND rowid < {self.p} ORDER BY rowid DESC LIMIT {self.p}",
                    (found[1], below, batch),
                )
            ]
            if not ids:
                break
            below = ids[-1]
            out += self._x(
                f"SELECT m.* FROM memories m WHERE {' AND '.join(where)} AND {self._in('m.id')} "
                f"ORDER BY m.id DESC LIMIT {self.p}",
                (*args, self._many(ids), limit - len(out)),
            ).fetchall()
        return out

    def events_by(self, ids: list[int], at: str) -> list:
        """The events of these memories recorded by `at`, by memory then in order."""
        if not ids:
            return []
        return self._x(
            "SELECT memory_id, event_type, detail, occurred_at, said_at FROM "
            f"memory_events WHERE {self._in('memory_id')} AND occurred_at <= {self.p} "
            "ORDER BY memory_id, id",
            (self._many(ids), at),
        ).fetchall()
