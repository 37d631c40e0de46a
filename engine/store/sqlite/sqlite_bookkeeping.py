"""The SQLite store's bookkeeping of model calls, scenes and a pass's progress, as
methods `SqliteStore` inherits (sqlite.py keeps the connection, transactions, schema,
compiled statements, memories, the inbox, pass runs and leases). The split is only for size, as
postgres_bookkeeping.py is for the PostgreSQL store; both read `self.db` and `self.now()`.
"""

from __future__ import annotations

import json
import sqlite3

from engine.store.sqlite.text_apart import ROWS


class Bookkeeping:
    def release_turns(self, ids: list[int]) -> None:
        """Nothing to give back: one file has one writer at a time, so no turn is claimed
        (`claim_turns`); PostgreSQL's store clears its claims."""

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
        server sent no usage), latency and outcome. Written soon: while a pass holds the
        write lock it waits for the next transaction (`write_soon`). A read-only store
        logs nothing (`lethe ui --read-only` explains recalls, which ask the judges)."""
        if self.read_only:
            return
        self.write_soon(
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
                detail,
                self.now(),
                attempt,
                int(estimated),
            ),
        )

    def learn_support(self, base_url: str, model: str, facts: dict) -> None:
        """Remember what a model refused (merged into what was known), written soon."""
        if getattr(self, "read_only", False):
            return
        known = {**self.model_support(base_url, model), **facts}
        self.write_soon(
            "INSERT INTO model_support (base_url, model, facts, learned_at) VALUES (?,?,?,?) "
            "ON CONFLICT (base_url, model) DO UPDATE SET facts = excluded.facts, "
            "learned_at = excluded.learned_at",
            (base_url, model, json.dumps(known, sort_keys=True), self.now()),
        )

    def costs(self, namespace: str) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, and
        outcomes: ok, repaired, retried (calls that were retries), refused (bad answers),
        fell_back (the rules judge answered), failed (nothing answered), unavailable, and
        estimated (calls whose token counts are estimates)."""
        return [
            dict(r)
            for r in self.db.execute(
                "SELECT step, model, count(*) AS calls, sum(prompt_tokens) AS prompt_tokens, "
                "sum(completion_tokens) AS completion_tokens, round(avg(latency_ms), 1) AS avg_latency_ms, "
                "sum(outcome = 'ok') AS ok, sum(outcome = 'repaired') AS repaired, "
                "sum(attempt > 0) AS retried, sum(outcome = 'bad_answer') AS refused, "
                "sum(outcome = 'fallback') AS fell_back, sum(outcome = 'failed') AS failed, "
                "sum(outcome = 'unavailable') AS unavailable, sum(tokens_estimated) AS estimated "
                "FROM model_calls WHERE namespace = ? GROUP BY step, model ORDER BY step, model",
                (namespace,),
            )
        ]

    def model_use(self, namespace: str) -> dict:
        """Model calls and tokens: totals, calls by step and by provider, and how many
        judgments the fallback answered because the model's answer was unusable."""
        total = self.db.execute(
            "SELECT count(*), coalesce(sum(prompt_tokens), 0), "
            "coalesce(sum(completion_tokens), 0) FROM model_calls "
            "WHERE namespace = ?",
            (namespace,),
        ).fetchone()
        by_step = {
            r[0]: r[1]
            for r in self.db.execute(
                "SELECT step, count(*) FROM model_calls WHERE namespace = ? GROUP BY step ORDER BY step",
                (namespace,),
            )
        }
        by_provider = {
            r[0] or "none": r[1]
            for r in self.db.execute(
                "SELECT provider, count(*) FROM model_calls WHERE namespace = ? GROUP BY provider "
                "ORDER BY provider",
                (namespace,),
            )
        }
        fallbacks = self.db.execute(
            "SELECT count(*) FROM model_calls WHERE namespace = ? AND outcome = 'fallback'", (namespace,)
        ).fetchone()[0]
        return {
            "calls": total[0],
            "prompt_tokens": total[1],
            "completion_tokens": total[2],
            "tokens": total[1] + total[2],
            "by_step": by_step,
            "by_provider": by_provider,
            "fallbacks": fallbacks,
        }

    # -- scenes (seed C) ------------------------------------------------------------------
    def scene_cells(self, namespace: str, scene: str, limit: int = 20) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT content, kind, importance FROM memories WHERE namespace = ? AND scene = ? "
            "AND status = 'active' ORDER BY importance DESC, id DESC LIMIT ?",
            (namespace, scene, limit),
        ).fetchall()

    def save_scene(self, namespace: str, scene: str, summary: str) -> None:
        self.db.execute(
            "INSERT INTO scenes (namespace, scene, summary, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (namespace, scene) DO UPDATE SET summary = excluded.summary, "
            "updated_at = excluded.updated_at",
            (namespace, scene, summary, self.now()),
        )

    # -- where a run in ranges is (pass_progress) --------------------------------------
    def unfinished(self, namespace: str) -> set[str]:
        return {
            r[0] for r in self.db.execute("SELECT pass FROM pass_progress WHERE namespace = ?", (namespace,))
        }

    def progress(self, namespace: str, name: str) -> sqlite3.Row | None:
        return self.db.execute(
            "SELECT cursor, run_now, changed, top_id FROM pass_progress WHERE namespace = ? AND pass = ?",
            (namespace, name),
        ).fetchone()

    def save_progress(
        self, namespace: str, name: str, cursor: int, now: str, changed: int, top: int | None = None
    ) -> None:
        self.db.execute(
            "INSERT INTO pass_progress (namespace, pass, cursor, run_now, changed, top_id) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
            "cursor = excluded.cursor, changed = excluded.changed, top_id = excluded.top_id",
            (namespace, name, cursor, now, changed, top),
        )

    def id_bounds(self, namespace: str) -> tuple[int, int]:
        lo, hi = self.db.execute(
            f"SELECT min(id), max(id) FROM {ROWS} WHERE namespace = ?", (namespace,)
        ).fetchone()
        return lo or 0, hi or 0
