"""Agents and daemons in separate processes (the scripts in tests/procs/), and the checks
that a store they shared lost nothing and kept every status with its event."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time

from engine.store import open_store
from tests.helpers import ROOT, run_sql

PROCS = os.path.join(ROOT, "tests", "procs")
STATUS_EVENTS = ("archived", "expired", "superseded", "compressed")


def spawn(script: str, *args, stdout=subprocess.PIPE) -> subprocess.Popen:
    """Start one of tests/procs/ with the repository on its path."""
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, os.path.join(PROCS, script), *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextlib.contextmanager
def connect(path):
    """A connection that is closed on leaving the block (sqlite3's own `with` only commits)."""
    db = sqlite3.connect(str(path), timeout=30)
    try:
        yield db
        db.commit()
    finally:
        db.close()


class _Portable:
    """`execute` with `?` placeholders on either backend's store (see tests.helpers.run_sql)."""

    def __init__(self, store):
        self.store = store

    def execute(self, sql: str, params=()):
        return run_sql(self.store, sql, params)


def status_event_problems(db) -> list:
    """Every non-active memory has the one event that made it so; every status-changing
    event belongs to a memory with that status; every memory has its 'created' or 'merged'."""
    problems = db.execute(
        "SELECT id, status, 'no event for its status' FROM memories m WHERE status != 'active' "
        "AND NOT EXISTS (SELECT 1 FROM memory_events e WHERE e.memory_id = m.id "
        "AND e.event_type = m.status)"
    ).fetchall()
    marks = ",".join("?" * len(STATUS_EVENTS))
    problems += db.execute(
        f"SELECT e.memory_id, m.status, 'event ' || e.event_type FROM memory_events e "
        f"JOIN memories m ON m.id = e.memory_id WHERE e.event_type IN ({marks}) "
        f"AND e.event_type != m.status",
        STATUS_EVENTS,
    ).fetchall()
    problems += db.execute(
        f"SELECT memory_id, event_type, 'twice: ' || count(*) FROM memory_events "
        f"WHERE event_type IN ({marks}) GROUP BY memory_id, event_type HAVING count(*) > 1",
        STATUS_EVENTS,
    ).fetchall()
    problems += db.execute(
        "SELECT id, status, 'no created/merged event' FROM memories m WHERE NOT EXISTS "
        "(SELECT 1 FROM memory_events e WHERE e.memory_id = m.id "
        "AND e.event_type IN ('created', 'merged'))"
    ).fetchall()
    problems += db.execute(
        "SELECT id, contradicted_by, 'superseded by a missing memory' FROM memories "
        "WHERE status = 'superseded' AND (contradicted_by IS NULL OR contradicted_by NOT IN "
        "(SELECT id FROM memories))"
    ).fetchall()
    return problems


def run_concurrency(
    tmp_path,
    workers: int,
    seconds: float,
    cli: bool = False,
    step: str = "2d",
    daemons: int = 1,
    db=None,
    lease: bool = False,
) -> dict:
    """`workers` agent processes and `daemons` pass daemons start together on a fresh file
    (so they also race to create and migrate it) and run for `seconds`. With `cli`, the
    first daemon runs every other round through `lethe run`. `db` may name a PostgreSQL
    schema instead; with `lease` the daemons run their rounds under the pass lease."""
    db = db or tmp_path / "shared.db"
    logs = [tmp_path / f"worker{i}.jsonl" for i in range(1, workers + 1)]
    daemon_logs = [tmp_path / f"daemon{i}.jsonl" for i in range(1, daemons + 1)]
    procs = [
        spawn("worker.py", db, log, "--worker", i, "--seconds", seconds) for i, log in enumerate(logs, 1)
    ]
    epoch = ["--epoch", time.time()] if lease and daemons > 1 else []
    procs += [
        spawn(
            "pass_loop.py",
            db,
            log,
            "--seconds",
            seconds,
            "--step",
            step,
            *(["--cli"] if cli and i == 0 else []),
            *(["--lease"] if lease else []),
            *epoch,
        )
        for i, log in enumerate(daemon_logs)
    ]
    for p in procs:
        _, err = p.communicate(timeout=seconds + 300)
        assert p.returncode == 0, err[-3000:]

    entries = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    daemon = [json.loads(line) for log in daemon_logs for line in log.read_text().splitlines()]
    assert sum(1 for e in entries if e.get("done")) == workers
    assert sum(1 for d in daemon if d.get("done")) == daemons
    errors = [e for e in entries + daemon if "error" in e]

    remembered = [e for e in entries if e.get("op") == "remember" and "error" not in e]
    added = [e for e in entries if e.get("op") == "add" and "error" not in e]
    recalls = [e for e in entries if e.get("op") == "recall"]
    lost = []
    with open_store(str(db)) as store:
        conn = _Portable(store)
        if store.dialect == "sqlite":
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ids = {r[0] for r in conn.execute("SELECT id FROM memories")}
        for e in added:
            row = conn.execute("SELECT content, namespace FROM memories WHERE id = ?", (e["id"],)).fetchone()
            if row is None or row["content"] != e["content"]:
                lost.append(e)
        for e in remembered:
            turn = conn.execute(
                "SELECT status, memory_ids FROM inbox WHERE user_text = ?", (e["user"],)
            ).fetchall()
            ok = len(turn) == 1 and turn[0]["status"] == ("done" if e["ids"] else "dropped")
            ok = ok and json.loads(turn[0]["memory_ids"] or "[]") == e["ids"]
            if not ok or not set(e["ids"]) <= ids:
                lost.append(e)
        pending = conn.execute("SELECT count(*) FROM inbox WHERE status = 'pending'").fetchone()[0]
        problems = status_event_problems(conn)
        statuses = dict(
            tuple(r) for r in conn.execute("SELECT status, count(*) FROM memories GROUP BY status").fetchall()
        )
        events = dict(
            tuple(r)
            for r in conn.execute(
                "SELECT event_type, count(*) FROM memory_events GROUP BY event_type"
            ).fetchall()
        )
    rounds = [d for d in daemon if "round" in d]
    # a daemon whose clock reads more than a day before a pass's last run runs it again, and
    # says the clock went back (docs/time.md). Daemons on a shared clock (epoch) never see
    # that; daemons stepping clocks of their own drift apart by days, and a run that says so
    # is the rule working, not a pass run twice
    ran = [
        (r["pass"], r["ran_at"])
        for d in rounds
        for r in (d["results"] or [])
        if r["pass"] != "pending"
        and (epoch or not any("the clock went back" in n for n in r.get("notes") or ()))
    ]
    figures = {
        "passes_run": len(ran),
        "passes_run_twice": len(ran) - len(set(ran)),
        "processes": workers + daemons,
        "seconds": seconds,
        "writes_acknowledged": sum(1 for e in remembered if e["ids"]) + len(added),
        "remember_calls": len(remembered),
        "dropped_by_gate": sum(1 for e in remembered if not e["ids"]),
        "adds": len(added),
        "recalls": len(recalls),
        "lost": len(lost),
        "lock_errors": sum(1 for e in errors if e["error"] == "lock"),
        "other_errors": sum(1 for e in errors if e["error"] == "other"),
        "pass_rounds": len(rounds),
        "cli_rounds": sum(1 for d in rounds if d.get("cli")),
        "pending_left": pending,
        "statuses": statuses,
        "events": events,
    }
    print("\nconcurrency figures:", json.dumps(figures, sort_keys=True))
    assert errors == [], errors[:5]
    assert lost == [], lost[:5]
    assert problems == [], problems[:10]
    assert pending == 0
    for e in recalls:  # one namespace here: every recalled memory is that namespace's
        assert e["namespaces"] in ([], ["default"])
    return figures
