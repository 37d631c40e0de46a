"""Reads for the inspector (`lethe ui`): a page of memories under filters in any order, a
memory's neighbours (what it replaced, what merged into it, the turn it came from, the
model calls around its events), model calls over time and pass runs. Read-only SQL, the
same text on both backends, with the dialect's placeholder (`p`), as methods both stores
inherit.

A page is read by keyset (`after`: the last row's sort value and id), never by OFFSET, so
the thousandth page costs what the first does when the order has an index (id; rank over
active memories).
"""

from __future__ import annotations

from engine.store.shared_sql import SharedQueries

# the columns a page may be ordered by: a column name is never taken from the caller
SORTS = (
    "id",
    "created_at",
    "importance",
    "confidence",
    "decay_score",
    "access_count",
    "rank",
    "last_accessed",
    "expires_at",
)
# nullable text columns are ordered with NULL as '' (a keyset needs a value to compare)
_NULL_AS_TEXT = ("created_at", "last_accessed", "expires_at")
LISTED = (
    "id, status, kind, scene, importance, confidence, decay_score, access_count, rank, "
    "created_at, last_accessed, expires_at, contradicted_by, merged_into, summary, "
    "substr(content, 1, 400) AS content, tags"
)


def _dicts(rows) -> list[dict]:
    return [{k: r[k] for k in r.keys()} for r in rows]


def _like(text: str) -> str:
    """`text` as a LIKE pattern matching itself literally (escape character: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Inspecting(SharedQueries):
    def browse(
        self,
        namespace: str,
        filters: dict,
        sort: str = "id",
        descending: bool = True,
        after: tuple | None = None,
        limit: int = 50,
    ) -> list:
        """Up to `limit` memories of a namespace matching `filters` (status, kind, scene,
        tag: equal; text: every word in full text), ordered by `sort` (one of SORTS) then
        id, starting after the keyset `after` = (sort value, id)."""
        if sort not in SORTS:
            raise ValueError(f"unknown sort column {sort!r}")
        where, args = self._browse_where(namespace, filters)
        key = f"coalesce({sort}, '')" if sort in _NULL_AS_TEXT else sort
        op, way = ("<", "DESC") if descending else (">", "ASC")
        if after is not None:
            value, last_id = after
            value = "" if value is None and sort in _NULL_AS_TEXT else value
            if sort == "id":
                where.append(f"id {op} {self.p}")
                args.append(last_id)
            else:
                where.append(f"({key} {op} {self.p} OR ({key} = {self.p} AND id {op} {self.p}))")
                args += [value, value, last_id]
        if sort == "id" and self._by_id and self._most_of_the_file(namespace):
            # walk the ids, not an index that leads with namespace (SQLite's `+namespace`)
            where[0] = f"{self._by_id}namespace = {self.p}"
        order = f"ORDER BY {key + ' ' + way + ', ' if sort != 'id' else ''}id {way} LIMIT {self.p}"
        if self._in_the_head(sort, descending, filters):  # best-ranked first: recall's index
            rows = self._x(
                f"SELECT {LISTED} FROM memories WHERE {' AND '.join(where)} AND rank >= {self.p} {order}",
                (*args, self._floor, limit),
            ).fetchall()
            if len(rows) == limit:
                return rows  # else the rest ranks under the floor: the whole statement
        return self._x(
            f"SELECT {LISTED} FROM memories WHERE {' AND '.join(where)} {order}", (*args, limit)
        ).fetchall()

    def _in_the_head(self, sort: str, descending: bool, filters: dict) -> bool:
        """Whether a page of active memories by rank, best first, can be read from recall's
        index while it holds only the head of the ranking (`head_floor`)."""
        if sort != "rank" or not descending or filters.get("status") != "active":
            return False
        self._floor = self.head_floor()
        return self._floor is not None

    def _browse_where(self, namespace: str, filters: dict) -> tuple[list[str], list]:
        where, args = [f"namespace = {self.p}"], [namespace]
        for column in ("status", "kind", "scene"):
            if filters.get(column):
                where.append(f"{column} = {self.p}")
                args.append(filters[column])
        if filters.get("tag"):  # tags are a JSON array of strings: match one element
            where.append(f"tags LIKE {self.p} ESCAPE '\\'")
            args.append(f'%"{_like(filters["tag"])}"%')
        text = filters.get("text")
        if text:
            found = self.fts_ids(text, every=True)
            if found is None:
                where.append("1 = 0")  # no word to look for: nothing matches
            else:
                where.append(f"id IN ({found[0]})")
                args.append(found[1])
        return where, args

    def facets(self, namespace: str, column: str, limit: int = 200) -> list[str]:
        """The distinct values of `kind` or `scene` in a namespace (for the filter lists)."""
        if column not in ("kind", "scene"):
            raise ValueError(f"no facet {column!r}")
        return [
            r[0]
            for r in self._x(
                f"SELECT DISTINCT {column} FROM {self.rows} WHERE namespace = {self.p} AND {column} IS "
                f"NOT NULL ORDER BY {column} LIMIT {self.p}",
                (namespace, limit),
            )
        ]

    def replaced(self, namespace: str, memory_id: int) -> list[dict]:
        """The memories `memory_id` superseded (their contradicted_by names it) and those
        merged into it, oldest first, each with `how` ('superseded' or 'merged')."""
        # two SELECTs, not an OR: each reads its own partial index (m022)
        cols = "id, status, summary, substr(content, 1, 200) AS content, created_at"
        return _dicts(
            self._x(
                f"SELECT * FROM (SELECT {cols}, 'superseded' AS how FROM memories WHERE "
                f"contradicted_by = {self.p} AND namespace = {self.p} UNION ALL SELECT "
                f"{cols}, 'merged' AS how FROM memories WHERE merged_into = {self.p} "
                f"AND namespace = {self.p}) "
                "AS r ORDER BY id LIMIT 200",
                (memory_id, namespace, memory_id, namespace),
            ).fetchall()
        )

    def inbox_turn(self, namespace: str, turn_id: int) -> dict | None:
        """One inbox turn of a namespace, read without a lock (`turn` locks it on a server)."""
        row = self._x(
            "SELECT id, status, user_text, assistant_text, attempts, last_error, "
            f"created_at, updated_at, memory_ids FROM inbox WHERE id = {self.p} AND "
            f"namespace = {self.p}",
            (turn_id, namespace),
        ).fetchone()
        return None if row is None else _dicts([row])[0]

    def calls_between(self, namespace: str, start: str, end: str, limit: int = 50) -> list[dict]:
        """The model calls logged from `start` to `end` (ISO text, both included)."""
        return _dicts(
            self._x(
                "SELECT id, step, model, provider, prompt_tokens, completion_tokens, latency_ms, "
                f"outcome, detail, occurred_at, attempt FROM model_calls WHERE namespace = {self.p} AND "
                f"occurred_at >= {self.p} AND occurred_at <= {self.p} ORDER BY id LIMIT {self.p}",
                (namespace, start, end, limit),
            ).fetchall()
        )

    def calls_by_day(self, namespace: str) -> list[dict]:
        """Model calls per day, step, model and outcome: calls and tokens."""
        return _dicts(
            self._x(
                "SELECT substr(occurred_at, 1, 10) AS day, step, model, outcome, count(*) AS calls, "
                "coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0) AS tokens "
                f"FROM model_calls WHERE namespace = {self.p} GROUP BY substr(occurred_at, 1, 10), step, "
                "model, outcome ORDER BY day, step, model, outcome",
                (namespace,),
            ).fetchall()
        )

    def pass_runs(self, namespace: str) -> list[dict]:
        """Each pass's last run and how many rows it changed."""
        return _dicts(
            self._x(
                "SELECT pass, last_run_at, rows_changed FROM pass_runs "
                f"WHERE namespace = {self.p} ORDER BY pass",
                (namespace,),
            ).fetchall()
        )

    def events_by_day(self, namespace: str, types: tuple[str, ...]) -> list[dict]:
        """How many events of each of `types` a namespace's memories had, per day."""
        marks = ", ".join([self.p] * len(types))
        return _dicts(
            self._x(
                "SELECT substr(e.occurred_at, 1, 10) AS day, e.event_type, count(*) AS n FROM "
                f"memory_events e JOIN {self.rows} m ON m.id = e.memory_id WHERE m.namespace = {self.p} "
                f"AND e.event_type IN ({marks}) GROUP BY substr(e.occurred_at, 1, 10), e.event_type "
                "ORDER BY day",
                (namespace, *types),
            ).fetchall()
        )

    def restore_memory(self, namespace: str, memory_id: int, status: str) -> int:
        """In the caller's transaction: an archived or expired memory (`status`, as read)
        becomes active, decay 1, accessed now, with no expiry; rows changed (0 or 1)."""
        if status not in ("archived", "expired"):
            return 0
        return self._x(
            f"UPDATE {self.rows} SET status = 'active', decay_score = 1.0, "
            f"last_accessed = {self.p}, expires_at = NULL WHERE namespace = {self.p} AND id = {self.p} "
            f"AND status = {self.p}",
            (self.now(), namespace, memory_id, status),
        ).rowcount
