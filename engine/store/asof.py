"""Reads for the state of a few memories at a past time (engine.asof): the memories that
had been recorded by then (their first event no later than it), matching a query or not,
newest first, and their events up to then, found through `memory_events_time` (m021:
memory, recording time). The same SQL on both backends (`?` placeholders; PostgreSQL's
`_x` turns them into `%s`), as methods both stores inherit. Nothing here reads more than
the memories it returns and their events: never a replay of the store."""
from __future__ import annotations

import json

from ..text import fts_query, words


class AsOf:
    """Needs `_x(sql, params)` and `dialect` ("sqlite" or "postgres")."""

    def recorded_by(self, namespace: str, at: str, text: str | None, limit: int) -> list:
        """Up to `limit` memories of `namespace` recorded by `at` (any status now), newest
        first; with `text`, only those matching any of its words in full text."""
        where = ["m.namespace = ?", "m.created_at <= ?",  # said by then, a fortiori
                 "coalesce((SELECT min(e.occurred_at) FROM memory_events e "
                 "WHERE e.memory_id = m.id), m.created_at) <= ?"]
        args: list = [namespace, at, at]
        if text:
            if self.dialect == "sqlite":
                match = fts_query(text)
                if not match:
                    return []
                where.append("m.id IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)")
                args.append(match)
            else:
                found = words(text)
                if not found:
                    return []
                where.append("m.id IN (SELECT id FROM memories_fts WHERE tsv @@ "
                             "to_tsquery('lethe_english', ?))")
                args.append(" | ".join(found))
        return self._x(f"SELECT m.* FROM memories m WHERE {' AND '.join(where)} "
                       "ORDER BY m.id DESC LIMIT ?", (*args, limit)).fetchall()

    def events_by(self, ids: list[int], at: str) -> list:
        """The events of these memories recorded by `at`, by memory then in order."""
        if not ids:
            return []
        if self.dialect == "sqlite":
            inside, arg = "IN (SELECT value FROM json_each(?))", json.dumps(list(ids))
        else:
            inside, arg = "= ANY(?)", list(ids)
        return self._x("SELECT memory_id, event_type, detail, occurred_at, said_at FROM "
                       f"memory_events WHERE memory_id {inside} AND occurred_at <= ? "
                       "ORDER BY memory_id, id", (arg, at)).fetchall()
