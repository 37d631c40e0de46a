"""Policies whose passes run in batches, and the rows a pass may change."""

from __future__ import annotations

import sqlite3

from tests.helpers import POLICIES


def batched_policy(tmp_path, base="lifecycle", size=700):
    path = tmp_path / f"{base}-batched.yaml"
    path.write_text(
        f"name: {base}-batched\nextends: {POLICIES}/{base}.yaml\n"
        f"passes:\n  decay:\n    batch: {size}\n  expiry:\n    batch: {size}\n"
    )
    return str(path)


def state(path):
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT id, status, decay_score, rank FROM memories ORDER BY id").fetchall()
    events = conn.execute(
        "SELECT memory_id, event_type, occurred_at FROM memory_events ORDER BY memory_id, event_type"
    ).fetchall()
    conn.close()
    return rows, events
