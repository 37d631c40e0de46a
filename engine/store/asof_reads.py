"""Reads for the state of a few memories at a past time (engine.run.asof): the memories that
had been recorded by then (their first event no later than it), matching a query or not,
newest first, and their events up to then, found through `memory_events_time` (m021:
memory, recording time). The same SQL on both backends, with the dialect's placeholder
(`p`), as methods both stores inherit. Nothing here reads more than the memories it
returns and their events: never a replay of the store."""

from __future__ import annotations

from engine.store.shared_sql import SharedQueries


class AsOf(SharedQueries):
    def recorded_by(
        self, namespace: str, at: str, text: str | None, limit: int, below: int | None = None
    ) -> list:
        """Up to `limit` memories of `namespace` recorded by `at` (any status now), newest
        first (with `below`, those whose id is under it: the next page); with `text`, only
        those matching any of its words in full text."""
        where = [
            f"m.namespace = {self.p}",
            f"m.created_at <= {self.p}",  # said by then, a fortiori
            "coalesce((SELECT min(e.occurred_at) FROM memory_events e "
            f"WHERE e.memory_id = m.id), m.created_at) <= {self.p}",
        ]
        args: list = [namespace, at, at]
        if below is not None:
            where.append(f"m.id < {self.p}")
            args.append(below)
        if text:
            found = self.fts_ids(text, every=False)
            if found is None:
                return []
            if self.fts_newest_first:
                return self._newest_matches(where, args, found, limit)
            where.append(f"m.id IN ({found[0]})")
            args.append(found[1])
        return self._x(
            f"SELECT m.* FROM memories m WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT {self.p}",
            (*args, limit),
        ).fetchall()

    def _newest_matches(self, where: list, args: list, found: tuple[str, str], limit: int) -> list:
        """The full-text matches (`found`, from `fts_ids`: SQLite's, whose rows are the
        memories' rowids) read newest first in batches (FTS5 walks its
        rowids backwards and stops at the batch: a query of common words matches most of
        the store, and reading every match first cost 70 ms at 100k), each batch kept to
        the rows `where` admits, until `limit` are found."""
        out: list = []
        below, batch = None, max(4 * limit, 200)
        while len(out) < limit:
            ids = [
                r[0]
                for r in self._x(
                    found[0]
                    + ("" if below is None else f" AND rowid < {self.p}")
                    + f" ORDER BY rowid DESC LIMIT {self.p}",
                    (found[1], *(() if below is None else (below,)), batch),
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
