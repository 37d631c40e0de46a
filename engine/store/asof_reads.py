"""Reads for the state of a few memories at a past time (engine.run.asof): the memories that
had been recorded by then (said by then, and their first event no later than it), matching
a query or not, newest first, and their events up to then, found through
`memory_events_time` (m021: memory, recording time). A read walks only where a memory
recorded by then can be (`recorded_pieces`, from the marks of engine.store.asof_marks):
what was recorded after it is not read, beyond the last segment's worth. The same SQL on
both backends, with the dialect's placeholder (`p`), as methods both stores inherit.
Nothing here reads more than the memories it returns and their events: never a replay of
the store."""

from __future__ import annotations

from engine.store.asof_marks import SEGMENT, AsOfMarks

# a piece of the ids to read, newest first: ids in (low, high] (None: unbounded), or a list
Piece = tuple[int | None, int | None] | list[int]


class AsOf(AsOfMarks):
    def recorded_by(
        self, namespace: str, at: str, text: str | None, limit: int, below: int | None = None
    ) -> list:
        """Up to `limit` memories of `namespace` recorded by `at` (any status now), newest
        first (with `below`, those whose id is under it: the next page); with `text`, only
        those matching any of its words in full text."""
        # the ids walked newest first, not the namespace's index (which would read all its
        # rows to sort them), unless it is a small part of the file
        by_id = self._by_id if self._most_of_the_file(namespace) else ""
        where = [
            f"{by_id}m.namespace = {self.p}",
            f"m.created_at <= {self.p}",  # said by then
            "coalesce((SELECT min(e.occurred_at) FROM memory_events e "
            f"WHERE e.memory_id = m.id), m.created_at) <= {self.p}",
        ]
        args: list = [namespace, at, at]
        if below is not None:
            where.append(f"m.id < {self.p}")
            args.append(below)
        found = None
        if text:
            found = self.fts_ids(text, every=False)
            if found is None:
                return []
        out: list = []
        for piece in self.recorded_pieces(at, below):
            if len(out) >= limit:
                break
            out += self._piece(where, args, found, limit - len(out), piece, below)
        return out

    def recorded_pieces(self, at: str, below: int | None = None) -> list[Piece]:
        """Where the memories recorded by `at` are, newest first: those written since the
        last mark, those of events since it recorded by then, and those up to the end of
        the last segment whose reach is at most `at` (none after it was recorded by then).
        With no mark, every id."""
        p = self.p
        if not self._marked():
            return [(None, None)]
        cover = self._x("SELECT memories_upto, events_upto FROM asof_cover WHERE one = 1").fetchone()
        if cover is None or not cover[0]:
            return [(None, None)]
        top, events_top = cover[0], cover[1]
        row = self._x(
            f"SELECT segment FROM asof_segments WHERE reach <= {p} ORDER BY reach DESC, segment DESC LIMIT 1",
            (at,),
        ).fetchone()
        end = 0 if row is None else min(row[0] * SEGMENT, top)
        if below is not None:
            end = min(end, below - 1)
        # the events since the mark, by their ids (`+memory_id`: not through the index of
        # every event of those memories)
        later = sorted(
            {
                r[0]
                for r in self._x(
                    f"SELECT memory_id FROM memory_events WHERE id > {p} AND occurred_at <= {p} "
                    f"AND +memory_id > {p} AND +memory_id <= {p}",
                    (events_top, at, end, top),
                )
            },
            reverse=True,
        )
        pieces: list[Piece] = [(top, None)]
        if later:
            pieces.append(later)
        if end > 0:
            pieces.append((None, end))
        return pieces

    _has_marks = False

    def _marked(self) -> bool:
        """Whether the database has the marks' tables (a store opened read-only on an older
        schema has not: every id is read)."""
        if not self._has_marks:
            self._has_marks = self._has_table("asof_cover")
        return self._has_marks

    def _piece(self, where: list, args: list, found, limit: int, piece: Piece, below: int | None) -> list:
        """The memories of one piece that `where` admits (matching `found` when given)."""
        where, args = list(where), list(args)
        if isinstance(piece, list):
            where.append(self._in("m.id"))
            args.append(self._many(piece))
        else:
            for bound, op in zip(piece, (">", "<=")):
                if bound is not None:
                    where.append(f"m.id {op} {self.p}")
                    args.append(bound)
        if found is not None:
            if self.fts_newest_first and not isinstance(piece, list):
                high = piece[1] if below is None else min(below - 1, piece[1] or below)
                return self._newest_matches(where, args, found, limit, piece[0], high)
            where.append(f"m.id IN ({found[0]})")
            args.append(found[1])
        return self._x(
            f"SELECT m.* FROM memories m WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT {self.p}",
            (*args, limit),
        ).fetchall()

    def _newest_matches(
        self, where: list, args: list, found: tuple[str, str], limit: int, low: int | None, high: int | None
    ) -> list:
        """The full-text matches (`found`, from `fts_ids`: SQLite's, whose rows are the
        memories' rowids) in (low, high] read newest first in batches (FTS5 walks its
        rowids backwards and stops at the batch: a query of common words matches most of
        the store, and reading every match first cost 70 ms at 100k), each batch kept to
        the rows `where` admits, until `limit` are found."""
        out: list = []
        under, batch = None if high is None else high + 1, max(4 * limit, 200)
        floor = "" if low is None else f" AND rowid > {self.p}"
        while len(out) < limit:
            ids = [
                r[0]
                for r in self._x(
                    found[0]
                    + floor
                    + ("" if under is None else f" AND rowid < {self.p}")
                    + f" ORDER BY rowid DESC LIMIT {self.p}",
                    (found[1], *(() if low is None else (low,)), *(() if under is None else (under,)), batch),
                )
            ]
            if not ids:
                break
            under = ids[-1]
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
