"""The queries both stores spell alike, written once: each names its placeholder with the
dialect's (`p`: SQLite's `?`, psycopg's `%s`), reads a memory's columns from `rows`, and
takes a list of values through `_in(column)` and `_many(values)` (SQLite: a JSON array
read with json_each; PostgreSQL: an array, `= ANY`). What a backend says otherwise is a
hook here: `_unclaim` (PostgreSQL's inbox claims), `_for_update`, `_clean`, `write_soon`.
"""

from __future__ import annotations

import json
from typing import Any

from engine.base.clock import system_clock
from engine.store.shared import Schedule, StoreCommon

Row = Any  # sqlite3.Row, or shared.NamedRow: read by position or name


class SharedQueries(StoreCommon):
    # what closing or failing a turn also clears (PostgreSQL: the worker's claim)
    _unclaim = ""
    # what reading a turn inside a transaction also does (PostgreSQL: lock its row)
    _for_update = ""

    def _in(self, column: str) -> str:
        """`column` is one of a list bound as one parameter (`_many`)."""
        raise NotImplementedError

    def _many(self, values) -> Any:
        raise NotImplementedError

    def _clean(self, text: str | None) -> str | None:
        """Text as the database can hold it (PostgreSQL's text holds no NUL)."""
        return text

    # -- compiled statements (engine.plan, in the store's dialect) ----------------------
    def _bound(self, st, namespace: str, now: str | None, binds: dict) -> tuple:
        """A compiled statement's parameters, bound."""
        return st.bind(now or self.now(), namespace, **binds)

    def run(self, st, namespace: str, now: str | None = None, **binds) -> int:
        """Execute one compiled statement; the number of rows it changed."""
        return max(self.db.execute(st.sql, self._bound(st, namespace, now, binds)).rowcount, 0)

    def fetch(self, st, namespace: str, now: str | None = None, **binds) -> list[Row]:
        return self.db.execute(st.sql, self._bound(st, namespace, now, binds)).fetchall()

    def fetch_one(self, st, namespace: str, now: str | None = None, **binds) -> Row | None:
        return self.db.execute(st.sql, self._bound(st, namespace, now, binds)).fetchone()

    def update_memory(self, namespace: str, memory_id: int, fields: dict) -> int:
        """Set some fields of one active memory (named from the engine's own list, never
        from input), in the caller's transaction; how many rows changed (0 or 1)."""
        chosen = {c: v for c, v in fields.items() if c in self.UPDATABLE}
        return self._update_fields(namespace, memory_id, chosen) if chosen else 0

    def _update_fields(self, namespace: str, memory_id: int, fields: dict) -> int:
        raise NotImplementedError

    def _update_row(self, table: str, namespace: str, memory_id: int, fields: dict) -> int:
        """Set `fields` (column -> value) of one active memory's row in `table`."""
        p = self.p
        return self._x(
            f"UPDATE {table} SET {', '.join(f'{c} = {p}' for c in fields)} "
            f"WHERE namespace = {p} AND id = {p} AND status = 'active'",
            [*fields.values(), namespace, memory_id],
        ).rowcount

    # -- memories and their events ------------------------------------------------------
    def event(self, memory_id: int | None, event_type: str, detail=None, said_at: str | None = None) -> None:
        if detail is not None and not isinstance(detail, str):
            detail = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        p = self.p
        self._x(
            "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at, said_at) "
            f"VALUES ({p}, {p}, {p}, {p}, {p})",
            (memory_id, event_type, detail, self.now(), said_at or self.said_at),
        )

    def events(self, memory_id: int) -> list[Row]:
        return self._x(
            f"SELECT * FROM memory_events WHERE memory_id = {self.p} ORDER BY id", (memory_id,)
        ).fetchall()

    def statuses(self, namespace: str, ids: list[int]) -> dict[int, tuple[str, int | None]]:
        """id -> (status, merged_into) of some memories of a namespace."""
        # +namespace (SQLite): look the ids up by primary key, not through the namespace's index
        rows = self._x(
            f"SELECT id, status, merged_into FROM {self.rows} WHERE {self._by_id}namespace = {self.p} "
            f"AND {self._in('id')}",
            (namespace, self._many(ids)),
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    _by_id = ""  # SQLite's `+`: a column no index is chosen for

    def _most_of_the_file(self, namespace: str) -> bool:
        """Whether `namespace` holds over half the memories (counted once per store): then
        a page in id order walks the ids, reading about as many rows as it shows, where
        the namespace's index ((namespace, scene), the only one that holds every row) would
        read all its rows to sort them. A small namespace in a big file is read through it."""
        shares = self.__dict__.setdefault("_shares", {})
        if namespace not in shares:
            held = self.namespace_counts()
            shares.update({ns: n * 2 > sum(held.values()) for ns, n in held.items()})
        return shares.get(namespace, False)

    def counts(self, namespace: str) -> dict[str, int]:
        rows = self._x(
            f"SELECT status, count(*) FROM {self.rows} WHERE namespace = {self.p} GROUP BY status",
            (namespace,),
        )
        return {r[0]: r[1] for r in rows}

    def memories(self, namespace: str) -> list[Row]:
        """Every memory of a namespace, oldest first (scenario checks, dumps)."""
        return self._x(
            f"SELECT * FROM memories WHERE namespace = {self.p} ORDER BY id", (namespace,)
        ).fetchall()

    def list_memories(self, namespace: str, statuses: tuple[str, ...] | None, limit: int) -> list[Row]:
        """Memories of a namespace with one of `statuses` (None: any), newest first."""
        p = self.p
        which, args = (
            ("", [namespace])
            if statuses is None
            else (f" AND {self._in('status')}", [namespace, self._many(statuses)])
        )
        return self._x(
            f"SELECT * FROM memories WHERE namespace = {p}{which} ORDER BY id DESC LIMIT {p}", (*args, limit)
        ).fetchall()

    def namespaces(self) -> list[str]:
        """Every namespace that holds a memory, in order (the memories_recall index)."""
        return [r[0] for r in self._x(f"SELECT DISTINCT namespace FROM {self.rows} ORDER BY namespace")]

    def get(self, memory_id: int, namespace: str | None = None) -> Row | None:
        """One memory, with its scene's summary; None when absent (or in another namespace)."""
        p = self.p
        sql = (
            "SELECT memories.*, scenes.summary AS scene_summary FROM memories LEFT JOIN scenes "
            "ON scenes.namespace = memories.namespace AND scenes.scene = memories.scene "
            f"WHERE memories.id = {p}"
        )
        if namespace is None:
            return self._x(sql, (memory_id,)).fetchone()
        return self._x(sql + f" AND memories.namespace = {p}", (memory_id, namespace)).fetchone()

    def changes(self, namespace: str) -> list[Row]:
        """Every memory no longer active, with what replaced or absorbed it and when."""
        return self._x(
            "SELECT m.id, m.content, m.status, coalesce(r.content, g.content) AS replaced_by, "
            "coalesce(m.contradicted_by, m.merged_into) AS replaced_by_id, "
            "(SELECT occurred_at FROM memory_events e WHERE e.memory_id = m.id "
            " ORDER BY e.id DESC LIMIT 1) AS at "
            "FROM memories m LEFT JOIN memories r ON r.id = m.contradicted_by "
            "LEFT JOIN memories g ON g.id = m.merged_into "
            f"WHERE m.namespace = {self.p} AND m.status != 'active' ORDER BY m.id",
            (namespace,),
        ).fetchall()

    def keyed_events(self, namespace: str) -> list[Row]:
        """Every `keyed` event of a namespace's memories, oldest first, with the memory's
        status: what key-value callers put, refreshed and deleted (Memory.key_events)."""
        return self._x(
            "SELECT e.memory_id, e.detail, e.occurred_at, m.status FROM memory_events e "
            f"JOIN memories m ON m.id = e.memory_id WHERE m.namespace = {self.p} AND "
            "e.event_type = 'keyed' ORDER BY e.id",
            (namespace,),
        ).fetchall()

    def holds(self, namespace: str) -> bool:
        """Whether the namespace holds any memory, of any status (one index probe)."""
        sql = f"SELECT 1 FROM {self.rows} WHERE namespace = {self.p} LIMIT 1"
        return self._x(sql, (namespace,)).fetchone() is not None

    def namespace_counts(self) -> dict[str, int]:
        """How many memories (of any status) each namespace holds, by name."""
        sql = f"SELECT namespace, count(*) FROM {self.rows} GROUP BY namespace ORDER BY namespace"
        return {r[0]: r[1] for r in self._x(sql)}

    # -- scenes (seed C) ------------------------------------------------------------------
    def scenes(self, namespace: str) -> dict[str, str]:
        sql = f"SELECT scene, summary FROM scenes WHERE namespace = {self.p} ORDER BY scene"
        return {r[0]: r[1] for r in self._x(sql, (namespace,))}

    def scene_cells(self, namespace: str, scene: str, limit: int = 20) -> list[Row]:
        p = self.p
        return self._x(
            f"SELECT content, kind, importance FROM memories WHERE namespace = {p} AND scene = {p} "
            f"AND status = 'active' ORDER BY importance DESC, id DESC LIMIT {p}",
            (namespace, scene, limit),
        ).fetchall()

    def save_scene(self, namespace: str, scene: str, summary: str) -> None:
        p = self.p
        self._x(
            f"INSERT INTO scenes (namespace, scene, summary, updated_at) VALUES ({p}, {p}, {p}, {p}) "
            "ON CONFLICT (namespace, scene) DO UPDATE SET summary = excluded.summary, "
            "updated_at = excluded.updated_at",
            (namespace, scene, self._checked(summary), self.now()),
        )

    def _checked(self, text: str) -> str:
        """Text to store as it is (PostgreSQL refuses one with a NUL)."""
        return text

    # -- the stored rank ----------------------------------------------------------------
    def rank_signature(self, namespace: str) -> str | None:
        row = self._x(
            f"SELECT rank_formula FROM policy_state WHERE namespace = {self.p}", (namespace,)
        ).fetchone()
        return row[0] if row else None

    def _rank_computed(self, namespace: str, policy: str, signature: str) -> None:
        """Remember the formula a namespace's stored ranks came from."""
        p = self.p
        self._x(
            "INSERT INTO policy_state (namespace, policy, rank_formula, updated_at) "
            f"VALUES ({p}, {p}, {p}, {p}) "
            "ON CONFLICT (namespace) DO UPDATE SET policy = excluded.policy, "
            "rank_formula = excluded.rank_formula, updated_at = excluded.updated_at",
            (namespace, policy, signature, self.now()),
        )

    # -- the inbox: turns saved before any model is asked -------------------------------
    def turn(self, turn_id: int) -> Row | None:
        """The inbox row (on a server locked until the commit, inside a transaction: a turn
        two workers finish at once is applied by the first and only read by the second)."""
        return self._x(f"SELECT * FROM inbox WHERE id = {self.p}{self._for_update}", (turn_id,)).fetchone()

    def turn_failed(
        self,
        turn_id: int,
        error: str,
        failures: int,
        retry_at: str | None,
        status: str = "pending",
        judged: str | None = None,
    ) -> None:
        """Record a failed attempt on a turn still pending: its error, how many failures
        count towards parking it, when to try again, `failed` once it is parked, and the
        judgments already paid for (JSON), which the next attempt reuses. A claim on it is
        given back: any worker may try it again once `retry_at` has passed."""
        p = self.p
        with self.transaction():
            self._x(
                f"UPDATE inbox SET attempts = attempts + 1, last_error = {p}, failures = {p}, "
                f"next_retry_at = {p}, status = {p}, updated_at = {p}, judged = coalesce({p}, judged)"
                f"{self._unclaim} WHERE id = {p} AND status = 'pending'",
                (self._clean(error[:500]), failures, retry_at, status, self.now(), judged, turn_id),
            )

    def requeue_turns(self, namespace: str, ids: list[int] | None) -> int:
        """Turns parked as failed or waiting out a backoff (all, or those of `ids`) go back
        to the queue, to be tried at the next run; how many did."""
        p = self.p
        sql = (
            f"UPDATE inbox SET status = 'pending', failures = 0, next_retry_at = NULL, "
            f"updated_at = {p} WHERE namespace = {p} AND status IN ('pending', 'failed')"
        )
        args: list = [self.now(), namespace]
        if ids is not None:
            sql += f" AND {self._in('id')}"
            args.append(self._many(ids))
        with self.transaction():
            return self._x(sql, args).rowcount

    def close_turn(self, turn_id: int, status: str, memory_ids: list[int]) -> None:
        """Mark a judged turn done (or dropped), in the caller's transaction."""
        p = self.p
        self._x(
            f"UPDATE inbox SET status = {p}, memory_ids = {p}, attempts = attempts + 1, "
            f"updated_at = {p}{self._unclaim} WHERE id = {p}",
            (status, json.dumps(memory_ids), self.now(), turn_id),
        )

    def pending(self, namespace: str) -> list[dict]:
        """Turns not judged yet: pending (maybe waiting until `next_retry_at`) or parked
        as `failed`, oldest first."""
        rows = self._x(
            "SELECT id, status, user_text, assistant_text, attempts, failures, "
            "last_error, next_retry_at, created_at FROM inbox WHERE "
            f"namespace = {self.p} AND status IN ('pending', 'failed') ORDER BY id",
            (namespace,),
        )
        return [dict(r) for r in rows]

    def pending_ids(self, namespace: str, limit: int) -> list[int]:
        """Pending turns that may be tried now (no backoff, or it has run out), in the order
        they were said (docs/time.md)."""
        p = self.p
        sql = (
            f"SELECT id FROM inbox WHERE namespace = {p} AND status = 'pending' AND "
            f"(next_retry_at IS NULL OR next_retry_at <= {p}) ORDER BY created_at, id LIMIT {p}"
        )
        return [r[0] for r in self._x(sql, (namespace, self.now(), limit))]

    def pending_count(self, namespace: str) -> int:
        sql = f"SELECT count(*) FROM inbox WHERE namespace = {self.p} AND status = 'pending'"
        return self._x(sql, (namespace,)).fetchone()[0]

    # -- pass runs and batched progress -------------------------------------------------
    def record_run(self, namespace: str, name: str, now: str, changed: int) -> None:
        """A pass ran at `now`; on the wall clock (no clock injected) that is kept apart as
        `wall_run_at`, which a run at a given time never clears (docs/time.md)."""
        p = self.p
        self._x(
            "INSERT INTO pass_runs (namespace, pass, last_run_at, rows_changed, wall_run_at) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (namespace, pass) DO UPDATE SET "
            "last_run_at = excluded.last_run_at, rows_changed = excluded.rows_changed, "
            "wall_run_at = coalesce(excluded.wall_run_at, pass_runs.wall_run_at)",
            (namespace, name, now, changed, now if self.clock is system_clock else None),
        )

    def last_runs(self, namespace: str) -> dict[str, str]:
        sql = f"SELECT pass, last_run_at FROM pass_runs WHERE namespace = {self.p}"
        return {r[0]: r[1] for r in self._x(sql, (namespace,))}

    def wall_run(self) -> str | None:
        """The latest pass run of any namespace made on the wall clock, or None: a store
        a daemon or a plain `lethe run` works on, not a scenario's simulated time."""
        return self._x("SELECT max(wall_run_at) FROM pass_runs").fetchone()[0]

    def schedule(self, namespace: str) -> Schedule:
        """Pending turns, last runs and unfinished passes in one statement: a scheduler
        asks at every tick, and on a server each statement is a round trip."""
        p = self.p
        pending, last, unfinished = 0, {}, set()
        for kind, name, at, n in self._x(
            "SELECT 'pending', NULL, NULL, count(*) FROM inbox "
            f"WHERE namespace = {p} AND status = 'pending' "
            f"UNION ALL SELECT 'ran', pass, last_run_at, 0 FROM pass_runs WHERE namespace = {p} "
            f"UNION ALL SELECT 'unfinished', pass, NULL, 0 FROM pass_progress WHERE namespace = {p}",
            (namespace,) * 3,
        ):
            if kind == "pending":
                pending = n
            elif kind == "ran":
                last[name] = at
            else:
                unfinished.add(name)
        return Schedule(pending, last, frozenset(unfinished))

    def unfinished(self, namespace: str) -> set[str]:
        return {
            r[0] for r in self._x(f"SELECT pass FROM pass_progress WHERE namespace = {self.p}", (namespace,))
        }

    def progress(self, namespace: str, name: str) -> Row | None:
        p = self.p
        sql = (
            f"SELECT cursor, run_now, changed, top_id FROM pass_progress WHERE namespace = {p} AND pass = {p}"
        )
        return self._x(sql, (namespace, name)).fetchone()

    def save_progress(
        self, namespace: str, name: str, cursor: int, now: str, changed: int, top: int | None = None
    ) -> None:
        p = self.p
        self._x(
            "INSERT INTO pass_progress (namespace, pass, cursor, run_now, changed, top_id) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (namespace, pass) DO UPDATE SET "
            "cursor = excluded.cursor, changed = excluded.changed, top_id = excluded.top_id",
            (namespace, name, cursor, now, changed, top),
        )

    def clear_progress(self, namespace: str, name: str) -> None:
        p = self.p
        self._x(f"DELETE FROM pass_progress WHERE namespace = {p} AND pass = {p}", (namespace, name))

    def id_bounds(self, namespace: str) -> tuple[int, int]:
        sql = f"SELECT min(id), max(id) FROM {self.rows} WHERE namespace = {self.p}"
        lo, hi = self._x(sql, (namespace,)).fetchone()
        return lo or 0, hi or 0

    # -- model calls ----------------------------------------------------------------------
    def log_call(
        self,
        namespace: str,
        step: str,
        model: str,
        provider: str | None,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float,
        outcome: str,
        detail: str | None,
        attempt: int = 0,
        estimated: bool = False,
    ) -> None:
        """One model call: which step, model and attempt, its tokens (`estimated` when the
        server sent no usage), latency and outcome; written soon (`write_soon`). A
        read-only store logs nothing (`lethe ui --read-only` explains recalls, which ask
        the judges)."""
        if self.read_only:
            return
        self.write_soon(
            "INSERT INTO model_calls (namespace, step, model, provider, prompt_tokens, "
            "completion_tokens, latency_ms, outcome, detail, occurred_at, attempt, "
            f"tokens_estimated) VALUES ({', '.join([self.p] * 12)})",
            (namespace, step, model, provider, prompt_tokens, completion_tokens, latency_ms, outcome)
            + (self._clean(detail), self.now(), attempt, int(estimated)),
        )

    def model_support(self, base_url: str, model: str) -> dict:
        """What this model at this endpoint was found not to accept ({} when nothing, or
        when the stored value is unreadable)."""
        p = self.p
        sql = f"SELECT facts FROM model_support WHERE base_url = {p} AND model = {p}"
        row = self._x(sql, (base_url, model)).fetchone()
        try:
            facts = json.loads(row[0]) if row and row[0] else {}
        except ValueError:
            return {}
        return facts if isinstance(facts, dict) else {}

    def learn_support(self, base_url: str, model: str, facts: dict) -> None:
        """Remember what a model refused (merged into what was known), written soon."""
        if self.read_only:
            return
        known = {**self.model_support(base_url, model), **facts}
        p = self.p
        self.write_soon(
            "INSERT INTO model_support (base_url, model, facts, learned_at) "
            f"VALUES ({p}, {p}, {p}, {p}) "
            "ON CONFLICT (base_url, model) DO UPDATE SET facts = excluded.facts, "
            "learned_at = excluded.learned_at",
            (base_url, model, json.dumps(known, sort_keys=True), self.now()),
        )

    def costs(self, namespace: str) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, and
        outcomes: ok, repaired, retried (calls that were retries), refused (bad answers),
        fell_back (the rules judge answered), failed (nothing answered), unavailable, and
        estimated (calls whose token counts are estimates)."""
        counted = ", ".join(f"count(*) FILTER (WHERE {cond}) AS {name}" for name, cond in _OUTCOMES)
        sql = (
            "SELECT step, model, count(*) AS calls, CAST(sum(prompt_tokens) AS BIGINT) AS prompt_tokens, "
            "CAST(sum(completion_tokens) AS BIGINT) AS completion_tokens, "
            f"round(CAST(avg(latency_ms) AS NUMERIC), 1) AS avg_latency_ms, {counted}, "
            "CAST(sum(tokens_estimated) AS BIGINT) AS estimated FROM model_calls "
            f"WHERE namespace = {self.p} GROUP BY step, model ORDER BY step, model"
        )
        return [dict(r) for r in self._x(sql, (namespace,))]

    def model_use(self, namespace: str) -> dict:
        """Model calls and tokens: totals, calls by step and by provider, and how many
        judgments the fallback answered because the model's answer was unusable."""
        by = f"FROM model_calls WHERE namespace = {self.p} GROUP BY "
        total = self._x(
            "SELECT count(*), CAST(coalesce(sum(prompt_tokens), 0) AS BIGINT), "
            "CAST(coalesce(sum(completion_tokens), 0) AS BIGINT), "
            f"count(*) FILTER (WHERE outcome = 'fallback') FROM model_calls WHERE namespace = {self.p}",
            (namespace,),
        ).fetchone()
        by_step, by_provider = (
            {r[0]: r[1] for r in self._x(f"SELECT {c}, count(*) {by}{c} ORDER BY {c}", (namespace,))}
            for c in ("step", "provider")
        )
        by_provider = {provider or "none": n for provider, n in by_provider.items()}
        return {
            "calls": total[0],
            "prompt_tokens": total[1],
            "completion_tokens": total[2],
            "tokens": total[1] + total[2],
            "by_step": by_step,
            "by_provider": by_provider,
            "fallbacks": total[3],
        }

    # -- leases ---------------------------------------------------------------------------
    def renew_lease(self, held) -> None:
        """Extend a held lease from this connection, inside the transaction running now;
        raises the holder's LeaseLost when the lease is no longer its own."""
        if self.db.execute(*held.renew_sql()).rowcount != 1:
            raise held.lost()


# costs(): how many calls of a step and model ended each way
_OUTCOMES = (
    ("ok", "outcome = 'ok'"),
    ("repaired", "outcome = 'repaired'"),
    ("retried", "attempt > 0"),
    ("refused", "outcome = 'bad_answer'"),
    ("fell_back", "outcome = 'fallback'"),
    ("failed", "outcome = 'failed'"),
    ("unavailable", "outcome = 'unavailable'"),
)
