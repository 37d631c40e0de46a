"""The PostgreSQL store's bookkeeping: the inbox, pass runs and batched progress, model
calls and scenes, as methods `PostgresStore` inherits (postgres.py keeps the connection,
transactions, schema, compiled statements and memories). The split is only for size: each
method mirrors `SqliteStore`'s of the same name, in the same order, with its semantics.

Bookkeeping SQL is written as in `sqlite.py`, with `?` placeholders, and turned into
psycopg's `%s` by `q` (so most methods are the SQLite text verbatim). What differs:
- a turn is claimed before it is judged (`claim_turns`: `FOR UPDATE SKIP LOCKED`), and
  `turn()` locks its row, so several workers share one inbox and apply each turn once;
- ids are bound as arrays (`= ANY(?)`) where SQLite reads a JSON array with json_each.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json

from engine.base.clock import iso
from engine.base.errors import StoreError

CLAIM = dt.timedelta(minutes=5)  # how long a worker may judge a claimed turn
_PLACEHOLDERS: dict[str, str] = {}


# costs(): how many calls of a step and model ended each way (the names SqliteStore gives)
_OUTCOMES = ", ".join(
    f"count(*) FILTER (WHERE {cond}) AS {name}"
    for name, cond in (
        ("ok", "outcome = 'ok'"),
        ("repaired", "outcome = 'repaired'"),
        ("retried", "attempt > 0"),
        ("refused", "outcome = 'bad_answer'"),
        ("fell_back", "outcome = 'fallback'"),
        ("failed", "outcome = 'failed'"),
        ("unavailable", "outcome = 'unavailable'"),
    )
)


def q(sql: str) -> str:
    """SQLite-style `?` placeholders as psycopg's `%s` (and a literal % as %%)."""
    out = _PLACEHOLDERS.get(sql)
    if out is None:
        out = _PLACEHOLDERS[sql] = sql.replace("%", "%%").replace("?", "%s")
    return out


def refuse_nul(values) -> None:
    if any(isinstance(v, str) and "\x00" in v for v in values):
        raise StoreError("PostgreSQL text cannot hold NUL characters (\\x00); remove them first")


class Bookkeeping:
    """Needs `db` (a psycopg connection), `clock`, `holder`, `now()` and `transaction()`."""

    def _x(self, sql: str, params=()):
        return self.db.execute(q(sql), params)

    # -- the inbox: turns saved before any model is asked -------------------------------
    def add_turn(self, namespace: str, user: str, assistant: str, said_at=None) -> int:
        """Save a turn, claimed by us: the writer judging it now is not raced by a retry.
        `said_at`: when it was said, if not now (its memories' created_at)."""
        refuse_nul((user, assistant))
        return self._x(
            "INSERT INTO inbox (namespace, user_text, assistant_text, created_at, "
            "updated_at, claimed_by, claimed_until) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            (
                namespace,
                user,
                assistant,
                said_at or self.now(),
                self.now(),
                self.holder,
                iso(self.clock() + CLAIM),
            ),
        ).fetchone()[0]

    def turn(self, turn_id: int):
        """The inbox row; inside a transaction it stays locked until the commit, so a turn
        two workers finish at once is applied by the first and only read by the second."""
        return self._x("SELECT * FROM inbox WHERE id = ? FOR UPDATE", (turn_id,)).fetchone()

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
        judgments already paid for (JSON), which the next attempt reuses. The claim is
        given back: any worker may try it again once `retry_at` has passed."""
        with self.transaction():
            self._x(
                "UPDATE inbox SET attempts = attempts + 1, last_error = ?, failures = ?, "
                "next_retry_at = ?, status = ?, updated_at = ?, judged = coalesce(?, judged), "
                "claimed_by = NULL, claimed_until = NULL WHERE id = ? AND status = 'pending'",
                (error[:500].replace("\x00", ""), failures, retry_at, status, self.now(), judged, turn_id),
            )

    def requeue_turns(self, namespace: str, ids: list[int] | None) -> int:
        """Turns parked as failed or waiting out a backoff (all, or those of `ids`) go back
        to the queue, to be tried at the next run; how many did."""
        sql = (
            "UPDATE inbox SET status = 'pending', failures = 0, next_retry_at = NULL, "
            "updated_at = ? WHERE namespace = ? AND status IN ('pending', 'failed')"
        )
        args = [self.now(), namespace]
        if ids is not None:
            sql += " AND id = ANY(?)"
            args.append(list(ids))
        with self.transaction():
            return self._x(sql, args).rowcount

    def close_turn(self, turn_id: int, status: str, memory_ids: list[int]) -> None:
        """Mark a judged turn done (or dropped), in the caller's transaction."""
        self._x(
            "UPDATE inbox SET status = ?, memory_ids = ?, attempts = attempts + 1, "
            "updated_at = ?, claimed_by = NULL, claimed_until = NULL WHERE id = ?",
            (status, json.dumps(memory_ids), self.now(), turn_id),
        )

    def pending(self, namespace: str) -> list[dict]:
        """Turns not judged yet: pending (maybe waiting until `next_retry_at`) or parked
        as `failed`, oldest first."""
        rows = self._x(
            "SELECT id, status, user_text, assistant_text, attempts, failures, "
            "last_error, next_retry_at, created_at FROM inbox WHERE namespace = ? "
            "AND status IN ('pending', 'failed') ORDER BY id",
            (namespace,),
        )
        return [dict(r) for r in rows]

    def claim_turns(self, namespace: str, limit: int) -> list[int]:
        """Pending turns that may be tried now and nobody is judging, oldest first, claimed
        for CLAIM: workers sharing the inbox skip each other's rows (SKIP LOCKED) and each
        other's claims."""
        now = self.now()
        rows = self._x(
            "UPDATE inbox SET claimed_by = ?, claimed_until = ? WHERE id IN (SELECT id FROM inbox "
            "WHERE namespace = ? AND status = 'pending' AND (next_retry_at IS NULL OR "
            "next_retry_at <= ?) AND (claimed_until IS NULL OR claimed_until <= ? OR "
            "claimed_by = ?) ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED) "
            "RETURNING id, created_at",
            (self.holder, iso(self.clock() + CLAIM), namespace, now, now, self.holder, limit),
        ).fetchall()
        return [r[0] for r in sorted(rows, key=lambda r: (r[1] or "", r[0]))]  # as said

    def release_turns(self, ids: list[int]) -> None:
        """Give back this store's claims on these turns (those it did not judge)."""
        with contextlib.suppress(*self.busy_errors, StoreError):  # a lost server drops them
            self._x(
                "UPDATE inbox SET claimed_by = NULL, claimed_until = NULL WHERE "
                "claimed_by = ? AND id = ANY(?)",
                (self.holder, list(ids)),
            )

    # -- pass runs and batched progress -------------------------------------------------
    def unfinished(self, namespace: str) -> set[str]:
        return {r[0] for r in self._x("SELECT pass FROM pass_progress WHERE namespace = ?", (namespace,))}

    def progress(self, namespace: str, name: str):
        return self._x(
            "SELECT cursor, run_now, changed, top_id FROM pass_progress WHERE namespace = ? AND pass = ?",
            (namespace, name),
        ).fetchone()

    def save_progress(
        self, namespace: str, name: str, cursor: int, now: str, changed: int, top: int | None = None
    ) -> None:
        self._x(
            "INSERT INTO pass_progress (namespace, pass, cursor, run_now, changed, top_id) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
            "cursor = excluded.cursor, changed = excluded.changed, top_id = excluded.top_id",
            (namespace, name, cursor, now, changed, top),
        )

    def id_bounds(self, namespace: str) -> tuple[int, int]:
        lo, hi = self._x("SELECT min(id), max(id) FROM memories WHERE namespace = ?", (namespace,)).fetchone()
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
        server sent no usage), latency and outcome. When writes are kept (a recall's
        access, while a pass held memories), it is written in a transaction that tries them
        too (briefly: `StoreCommon._run_deferred`). A read-only store logs nothing."""
        if self.read_only:  # explaining a recall in `lethe ui --read-only` asks the judges
            return
        insert = functools.partial(
            self._x,
            "INSERT INTO model_calls (namespace, step, model, provider, prompt_tokens, "
            "completion_tokens, latency_ms, outcome, detail, occurred_at, attempt, "
            "tokens_estimated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                namespace,
                step,
                model,
                provider,
                prompt_tokens,
                completion_tokens,
                latency_ms,
                outcome,
                detail.replace("\x00", "") if detail else detail,
                self.now(),
                attempt,
                int(estimated),
            ),
        )
        if not self.deferred or self.db.info.transaction_status:
            insert()
            return
        with self.transaction(kept_at_most=self.KEPT_AT_ONCE):
            insert()  # a log line is never kept here: made now, whatever is still kept

    def learn_support(self, base_url: str, model: str, facts: dict) -> None:
        """Remember what a model refused, merged into what was known."""
        known = {**self.model_support(base_url, model), **facts}
        upsert = functools.partial(
            self._x,
            "INSERT INTO model_support (base_url, model, facts, learned_at) "
            "VALUES (?,?,?,?) ON CONFLICT (base_url, model) DO UPDATE SET "
            "facts = excluded.facts, learned_at = excluded.learned_at",
            (base_url, model, json.dumps(known, sort_keys=True), self.now()),
        )
        if not self.deferred or self.db.info.transaction_status:
            upsert()
            return
        with self.transaction(kept_at_most=self.KEPT_AT_ONCE):
            upsert()

    def costs(self, namespace: str) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, and
        outcomes: ok, repaired, retried, refused, fell_back, failed, unavailable, estimated
        (as SqliteStore.costs)."""
        return [
            dict(r)
            for r in self._x(
                "SELECT step, model, count(*) AS calls, sum(prompt_tokens)::bigint AS prompt_tokens, "
                "sum(completion_tokens)::bigint AS completion_tokens, "
                "round(avg(latency_ms)::numeric, 1) AS avg_latency_ms, "
                + _OUTCOMES
                + ", sum(tokens_estimated)::bigint AS estimated FROM model_calls "
                "WHERE namespace = ? GROUP BY step, model ORDER BY step, model",
                (namespace,),
            )
        ]

    def model_use(self, namespace: str) -> dict:
        """Model calls and tokens: totals, calls by step and by provider, and how many
        judgments the fallback answered because the model's answer was unusable."""
        total = self._x(
            "SELECT count(*), coalesce(sum(prompt_tokens), 0)::bigint, "
            "coalesce(sum(completion_tokens), 0)::bigint, "
            "count(*) FILTER (WHERE outcome = 'fallback') FROM model_calls "
            "WHERE namespace = ?",
            (namespace,),
        ).fetchone()
        by_step = {
            r[0]: r[1]
            for r in self._x(
                "SELECT step, count(*) FROM model_calls WHERE namespace = ? GROUP BY step ORDER BY step",
                (namespace,),
            )
        }
        by_provider = {
            r[0] or "none": r[1]
            for r in self._x(
                "SELECT provider, count(*) FROM model_calls WHERE namespace = ? GROUP BY provider "
                "ORDER BY provider",
                (namespace,),
            )
        }
        return {
            "calls": total[0],
            "prompt_tokens": total[1],
            "completion_tokens": total[2],
            "tokens": total[1] + total[2],
            "by_step": by_step,
            "by_provider": by_provider,
            "fallbacks": total[3],
        }

    # -- scenes (seed C) ------------------------------------------------------------------
    def scene_cells(self, namespace: str, scene: str, limit: int = 20):
        return self._x(
            "SELECT content, kind, importance FROM memories WHERE namespace = ? AND scene = ? "
            "AND status = 'active' ORDER BY importance DESC, id DESC LIMIT ?",
            (namespace, scene, limit),
        ).fetchall()

    def save_scene(self, namespace: str, scene: str, summary: str) -> None:
        refuse_nul((summary,))
        self._x(
            "INSERT INTO scenes (namespace, scene, summary, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (namespace, scene) DO UPDATE SET summary = excluded.summary, "
            "updated_at = excluded.updated_at",
            (namespace, scene, summary, self.now()),
        )
