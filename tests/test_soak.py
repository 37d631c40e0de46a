"""The soak run (issues 12 and 42): agents, MCP clients over HTTP, a daemon and manual runs
on one store, all through a slow local model server, on a policy whose batched pass is not
idempotent, while faults come one after another: SIGKILLs of any of the processes (agents,
the daemon, manual runs, the MCP server), model outages (503s, connections dropped),
embedding faults (SQLite: the embedding server down, answering no vectors, zero vectors,
vectors of the wrong size) and, on PostgreSQL, two server restarts.

When the faults end, the daemon alone has one minute to judge what is left. Then: no
acknowledged write is lost, every pass was applied at most once per due time, no turn is
pending, failed or (PostgreSQL) claimed, no process logged a traceback, every status has
its event and (SQLite) `PRAGMA integrity_check` is ok.

Everything runs on the wall clock, as in production; leases last 3 s, so a killed
holder's lease runs out quickly (a holder killed on this host is even taken over at once).
`make soak` runs 5 minutes per backend; `make test` runs a 15 s version. Figures: pytest -s.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.helpers import POLICIES, ROOT, pg_server
from tests.helpers.mcp_client import free_port, wait_for_port
from tests.helpers.processes import PROCS, status_event_problems

EVERY = 3  # seconds between due times of the non-idempotent batched pass
AGENTS = 3
MCP_CLIENTS = 2
DRAIN = 60  # seconds the daemon may go without judging a turn, once the faults end
TOKEN = "soak-token-0123456789abcdef"
CHAT_FAULTS = ("chat-down", "chat-drop")
EMBED_FAULTS = ("embed-down", "embed-empty", "embed-zero", "embed-size")

POLICY = """name: soak
extends: {lifecycle}
models:
  cheap: {{provider: openai, model: m-cheap, base_url: "{url}", timeout: 20, max_retries: 0}}
  strong: {{provider: openai, model: m-strong, base_url: "{url}", timeout: 20, max_retries: 0}}
{embed}passes:
  expiry:
    every: 2s
    rules:
      - {{when: "status = 'active' and expires_at < now", set: {{status: expired}}, event: expired}}
  decay:
    every: 1h
    rules:
      - {{when: "status = 'active'", set: {{decay_score: freshness}}}}
  tick:
    every: {every}s
    batch: 40
    rules:
      - {{when: "status = 'active'", set: {{importance: "importance * 0.999"}}, event: ticked}}
  compression:
    every: 10s
    cluster:
      model: cheap
      prompt: cluster.j2
      candidates: {{where: "status = 'active'", order: "created_at asc", limit: 6, min: 4}}
    merge: {{model: strong, prompt: merge.j2}}
"""
EMBED = 'embed: {{provider: openai, model: e-small, base_url: "{url}", timeout: 5, max_retries: 0}}\n'


def lethe(*args) -> list[str]:
    return [sys.executable, "-m", "engine.cli", *map(str, args)]


class Database:
    """The soak's own connection for its checks, `?` placeholders on either backend."""

    def __init__(self, target: str, backend: str):
        self.postgres = backend == "postgres"
        if self.postgres:
            import psycopg

            self.conn = psycopg.connect(target, autocommit=True)
        else:
            self.conn = sqlite3.connect(target, timeout=30)

    def execute(self, sql: str, params=()):
        if self.postgres:
            sql = sql.replace("%", "%%").replace("?", "%s")
        return self.conn.execute(sql, params)

    def close(self) -> None:
        self.conn.close()


class Soak:
    """The processes of one soak run, the faults it makes, and what it takes to kill and
    restart them."""

    def __init__(self, tmp_path, seconds: float, backend: str, server=None, seed: int = 12):
        self.tmp, self.seconds, self.rng = tmp_path, seconds, random.Random(seed)
        self.n_logs = 0
        self.backend, self.server = backend, server
        self.db = pg_server.fresh_schema(server.dsn) if server else str(tmp_path / "soak.db")
        self.faults = tmp_path / "faults"
        self.stop_file = tmp_path / "stop"  # the agents and clients stop once it exists
        self.faults.write_text("")
        script = os.path.join(PROCS, "slow_model.py")
        self.model = self._spawn(
            "model",
            [sys.executable, script, "--delay", "0.15", "--faults", self.faults],
            stdout=subprocess.PIPE,
            text=True,
        )
        url = self.model.stdout.readline().strip()
        self.policy = str(tmp_path / "soak.yaml")
        embed = EMBED.format(url=url) if backend == "sqlite" else ""  # vectors: SQLite only
        with open(self.policy, "w") as fh:
            fh.write(POLICY.format(lifecycle=f"{POLICIES}/lifecycle.yaml", url=url, every=EVERY, embed=embed))
        self.store = ["--db", self.db, "--policy", self.policy]
        self.agents: dict[int, subprocess.Popen] = {}
        self.daemon: subprocess.Popen | None = None
        self.mcp: subprocess.Popen | None = None
        self.mcp_port = free_port()
        self.clients: list[subprocess.Popen] = []
        self.runs: list[subprocess.Popen] = []
        self.n_agents = 0
        self.deadline = time.monotonic() + seconds  # play() sets it again as it starts
        self.figures = {
            "kills": {"agent": 0, "daemon": 0, "run": 0, "mcp": 0},
            "faults": {},
            "fault_seconds": 0.0,
            "server_restarts": 0,
            "runs_started": 0,
            "runs_ok": 0,
            "runs_busy": 0,
            "runs_failed": [],
            "daemon_starts": 0,
            "daemon_exits": [],
        }

    def _spawn(self, name: str, args: list, **kw) -> subprocess.Popen:
        """Start a process whose stderr goes to a file of its own (every one is read for
        tracebacks at the end); `.err_path` names it."""
        self.n_logs += 1
        path = self.tmp / f"{name}-{self.n_logs}.err"
        kw.setdefault("stdout", subprocess.DEVNULL)
        # SIGABRT makes a stuck process print every thread's stack (see `stuck`)
        kw["env"] = {**kw.get("env", os.environ), "PYTHONFAULTHANDLER": "1"}
        with open(path, "w") as err:
            p = subprocess.Popen([str(a) for a in args], cwd=ROOT, stderr=err, **kw)
        p.err_path = path
        return p

    def _left(self) -> float:
        """Seconds until the run's end: an agent started (or restarted) now writes up to
        its end, not for a whole run more."""
        return max(0.0, self.deadline - time.monotonic())

    # -- the processes
    def start_agent(self) -> None:
        self.n_agents += 1
        log = self.tmp / f"agent{self.n_agents}.jsonl"
        script = os.path.join(PROCS, "worker.py")
        self.agents[self.n_agents] = self._spawn(
            "agent",
            [sys.executable, script, self.db, log, "--worker", self.n_agents, "--seconds", self._left()]
            + ["--policy", self.policy, "--online", "--real-clock", "--stop-file", self.stop_file],
            env={**os.environ, "PYTHONPATH": ROOT},
        )

    def start_daemon(self) -> None:
        self.figures["daemon_starts"] += 1
        self.daemon = self._spawn(
            "daemon", lethe("daemon", *self.store, "--interval", "0.5", "--lease-ttl", "3s", "--json")
        )

    def start_mcp(self) -> None:
        self.mcp_up: float | None = None  # when its port first answered (see `serving`)
        self.mcp = self._spawn(
            "mcp",
            lethe("mcp", *self.store, "--transport", "http", "--port", self.mcp_port, "--token", TOKEN),
        )

    def start_clients(self) -> None:
        url = f"http://127.0.0.1:{self.mcp_port}/mcp"
        script = os.path.join(PROCS, "mcp_client.py")
        for n in range(1, MCP_CLIENTS + 1):
            log = self.tmp / f"mcp{n}.jsonl"
            self.clients.append(
                self._spawn(
                    "client",
                    [sys.executable, script, url, TOKEN, log, "--client", n, "--seconds", self._left()]
                    + ["--stop-file", self.stop_file],
                )
            )

    def serving(self) -> float:
        """Seconds the MCP server has listened (0 while it starts: under load a killed
        server takes tens of seconds to serve again, and one killed before it listens
        served no client)."""
        if self.mcp_up is None:
            try:
                socket.create_connection(("127.0.0.1", self.mcp_port), timeout=0.05).close()
            except OSError:
                return 0.0
            self.mcp_up = time.monotonic()
        return time.monotonic() - self.mcp_up

    def start_run(self) -> None:
        self.figures["runs_started"] += 1
        self.runs.append(self._spawn("run", lethe("run", *self.store, "--lease-ttl", "3s", "--json")))

    def reap(self) -> None:
        """Count the manual runs that ended; start again an agent that ended early (one
        started while the server was down cannot open the store) and a daemon that exited."""
        for p in [r for r in self.runs if r.poll() is not None]:
            self.runs.remove(p)
            err = p.err_path.read_text()
            if p.returncode == -signal.SIGKILL:
                continue
            if p.returncode == 0:
                busy = "another runner holds the passes" in err
                self.figures["runs_busy" if busy else "runs_ok"] += 1
            else:
                self.figures["runs_failed"].append((p.returncode, err[-500:]))
        for n, p in list(self.agents.items()):
            if p.poll() is not None and self._left() > 1:
                self.agents.pop(n)
                self.start_agent()
        if self.daemon.poll() is not None:
            self.figures["daemon_exits"].append(self.daemon.returncode)
            self.start_daemon()

    # -- the faults
    def kill_one(self) -> None:
        """SIGKILL an agent, the daemon, a manual run or the MCP server; start another."""
        # an agent once it works (one still starting, under load, would never get to work),
        # the MCP server once it has served a while
        working = [n for n in self.agents if (self.tmp / f"agent{n}.jsonl").exists()]
        working = [n for n in working if (self.tmp / f"agent{n}.jsonl").stat().st_size]
        served = self.serving() > 45
        weights = {"agent": 4 * bool(working), "daemon": 2, "mcp": served, "run": 3 * bool(self.runs)}
        what = self.rng.choices(list(weights), weights=list(weights.values()))[0]
        self.figures["kills"][what] += 1
        if what == "agent":
            n = self.rng.choice(working)
            self.agents.pop(n).kill()
            self.start_agent()
        elif what == "daemon":
            self.daemon.kill()
            self.daemon.wait()
            self.start_daemon()
        elif what == "mcp":
            self.mcp.kill()
            self.mcp.wait()
            self.start_mcp()
        else:
            self.rng.choice(self.runs).kill()

    def set_fault(self, fault: str) -> None:
        self.faults.write_text(fault)
        if fault:
            self.figures["faults"][fault] = self.figures["faults"].get(fault, 0) + 1

    def restart_server(self) -> None:
        self.figures["server_restarts"] += 1
        self.server.restart()

    def play(self) -> None:
        # everything starts, and the run's time counts from when every agent works (under
        # load a Python process takes seconds to start); the agents stop at the stop file
        self.deadline = time.monotonic() + self.seconds + 600
        self.start_mcp()
        self.start_daemon()
        for _ in range(AGENTS):
            self.start_agent()
        wait_for_port(self.mcp_port, self.mcp, seconds=180)
        self.start_clients()
        started = time.monotonic()
        while time.monotonic() - started < 180 and not (
            all(at_work(self.tmp / f"agent{n}.jsonl") for n in self.agents)
            and all(at_work(self.tmp / f"mcp{n}.jsonl") for n in range(1, MCP_CLIENTS + 1))
        ):
            time.sleep(0.2)
        self.deadline = time.monotonic() + self.seconds
        kinds = CHAT_FAULTS + (EMBED_FAULTS if self.backend == "sqlite" else ())
        start = now = time.monotonic()
        next_kill, next_run, next_fault, fault_ends = now + 2, now, now + 5, None
        restarts = [start + self.seconds / 3, start + 2 * self.seconds / 3] if self.server else []
        while time.monotonic() < self.deadline:
            now = time.monotonic()
            if now >= next_run:
                self.start_run()
                next_run = now + self.rng.uniform(1.0, 4.0)
            if now >= next_kill:
                self.kill_one()
                next_kill = now + self.rng.uniform(1.5, 4.5)
            if fault_ends is None and now >= next_fault:
                self.set_fault(self.rng.choice(kinds))
                fault_ends = now + self.rng.uniform(3.0, 8.0)
            elif fault_ends is not None and now >= fault_ends:
                self.set_fault("")
                self.figures["fault_seconds"] += now - next_fault
                fault_ends, next_fault = None, now + self.rng.uniform(5.0, 20.0)
            if restarts and now >= restarts[0]:
                restarts.pop(0)
                self.restart_server()
            self.reap()
            time.sleep(0.05)
        self.set_fault("")
        self.stop_file.write_text("")

    def drain(self) -> float | None:
        """The faults are over: the agents and clients finish, and the daemon alone judges
        what is left. Seconds it took, or None when it stalled: DRAIN seconds with turns
        left and none judged (a backlog of fifty turns takes about a minute on two busy
        cores: how fast is not the guarantee, that it drains is)."""
        for p in [*self.agents.values(), *self.clients]:  # runs judging a backlog go on
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                raise AssertionError(stuck(p)) from None
        self.reap()
        self.figures["left_when_faults_ended"] = left_over(self.db, self.backend)
        began = progress = time.monotonic()
        fewest = None
        while time.monotonic() - progress < DRAIN:
            if self.daemon.poll() is not None:
                self.figures["daemon_exits"].append(self.daemon.returncode)
                self.start_daemon()
            self.reap()
            left = left_over(self.db, self.backend)
            if not left:
                return time.monotonic() - began
            if fewest is None or left.get("pending", 0) < fewest:
                fewest, progress = left.get("pending", 0), time.monotonic()  # a turn judged
            time.sleep(0.5)
        return None

    def stop(self) -> None:
        for p in [*self.agents.values(), *self.clients, *self.runs]:
            if p.poll() is None:
                p.kill()
        for p in (self.daemon, self.mcp, self.model):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (self.daemon, self.mcp, self.model):
            if p is not None:
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()


def at_work(log) -> bool:
    """Whether a log shows its agent or client at work: an answered call (an MCP client
    that starts before its server listens logs refused connections first)."""
    try:
        with open(log, encoding="utf-8") as fh:
            return any('"error"' not in line for line in fh)
    except FileNotFoundError:
        return False


def stuck(p: subprocess.Popen) -> str:
    """What a process that should have ended is doing: its threads' stacks (SIGABRT with
    PYTHONFAULTHANDLER), from its stderr."""
    p.send_signal(signal.SIGABRT)
    time.sleep(2)
    return f"{p.args[:6]} still running: {p.err_path.read_text()[-6000:]}"


def left_over(target: str, backend: str) -> dict:
    """Turns still pending or failed, and (PostgreSQL) still claimed."""
    db = Database(target, backend)
    try:
        left = dict(
            db.execute(
                "SELECT status, count(*) FROM inbox WHERE status IN ('pending', 'failed') GROUP BY status"
            ).fetchall()
        )
        if backend == "postgres":
            claimed = db.execute(
                "SELECT count(*) FROM inbox WHERE status = 'pending' AND claimed_by IS NOT NULL"
            ).fetchone()[0]
            if claimed:
                left["claimed"] = claimed
        return left
    finally:
        db.close()


def acknowledged(tmp_path) -> list[dict]:
    entries = []
    for log in sorted([*tmp_path.glob("agent*.jsonl"), *tmp_path.glob("mcp*.jsonl")]):
        for line in log.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:  # the last line of a killed agent may be cut short
                pass
    return entries


def lost_writes(db: Database, entries: list[dict]) -> list[dict]:
    memories = dict(db.execute("SELECT id, content FROM memories").fetchall())
    turns: dict[str, list] = {}
    for user, status, ids in db.execute("SELECT user_text, status, memory_ids FROM inbox").fetchall():
        turns.setdefault(user, []).append((status, json.loads(ids) if ids else None))
    lost = []
    for e in entries:
        if "error" in e:
            continue
        if e.get("op") == "add":
            if memories.get(e["id"]) != e["content"]:
                lost.append(e)
        elif e.get("op") == "remember" and e.get("via") == "mcp":
            if any(i not in memories for i in e["stored"]):
                lost.append(e)
        elif e.get("op") == "remember" and e["ids"]:
            ok = turns.get(e["user"]) == [("done", e["ids"])]
            if not ok or any(i not in memories for i in e["ids"]):
                lost.append(e)
    return lost


def double_ticks(db: Database) -> tuple[list, list[str]]:
    """Memories whose `ticked` events are not at least EVERY seconds apart (a due time
    applied twice), and the distinct times the tick pass ran at."""
    by_memory: dict[int, list[str]] = {}
    for mid, at in db.execute(
        "SELECT memory_id, occurred_at FROM memory_events WHERE "
        "event_type = 'ticked' ORDER BY memory_id, occurred_at"
    ).fetchall():
        by_memory.setdefault(mid, []).append(at)
    bad = []
    for mid, times in by_memory.items():
        parsed = [dt.datetime.fromisoformat(t) for t in times]
        if any((b - a).total_seconds() < EVERY for a, b in zip(parsed, parsed[1:])):
            bad.append((mid, times))
    runs = sorted({t for times in by_memory.values() for t in times})
    return bad, runs


def tracebacks(tmp_path) -> list[str]:
    """Every process's stderr that holds a traceback (a bug, never a fault's effect)."""
    return [
        f"{p.name}: {p.read_text()[-1500:]}"
        for p in sorted(tmp_path.glob("*.err"))
        if "Traceback" in p.read_text()
    ]


def run_soak(tmp_path, seconds: float, backend: str) -> dict:
    server = None
    if backend == "postgres":
        if os.environ.get(pg_server.ENV_DSN):
            pytest.skip("restarts need a server of the test's own")
        server = pg_server.LocalServer()
    soak = Soak(tmp_path, seconds, backend, server)
    try:
        try:
            soak.play()
            drained = soak.drain()
        finally:
            soak.stop()
        entries = acknowledged(tmp_path)
        db = Database(soak.db, backend)
        try:
            integrity = "ok" if server else db.execute("PRAGMA integrity_check").fetchone()[0]
            lost = lost_writes(db, entries)
            bad_ticks, tick_runs = double_ticks(db)
            problems = status_event_problems(db)
            statuses = dict(db.execute("SELECT status, count(*) FROM memories GROUP BY status").fetchall())
            turns = dict(db.execute("SELECT status, count(*) FROM inbox GROUP BY status").fetchall())
            calls = dict(db.execute("SELECT outcome, count(*) FROM model_calls GROUP BY outcome").fetchall())
        finally:
            db.close()
        left = left_over(soak.db, backend)
    finally:
        if server:
            server.stop()
    errors = [e for e in entries if "error" in e]
    f = soak.figures
    figures = {
        "backend": backend,
        "seconds": seconds,
        "agents_started": soak.n_agents,
        **f,
        "fault_seconds": round(f["fault_seconds"], 1),
        "runs_failed": len(f["runs_failed"]),
        "writes_acknowledged": sum(
            1
            for e in entries
            if "error" not in e
            and (e.get("op") == "add" or (e.get("op") == "remember" and (e.get("ids") or e.get("stored"))))
        ),
        "remembers": sum(1 for e in entries if e.get("op") == "remember"),
        "adds": sum(1 for e in entries if e.get("op") == "add"),
        "reads": sum(1 for e in entries if e.get("op") in ("recall", "list")),
        "mcp_calls": sum(1 for e in entries if e.get("via") == "mcp"),
        "errors_to_callers": {
            k: sum(1 for e in errors if e["error"] == k) for k in sorted({e["error"] for e in errors})
        },
        "lost": len(lost),
        "tick_due_times_run": len(tick_runs),
        "double_applied": len(bad_ticks),
        "drained_in_s": None if drained is None else round(drained, 1),
        "left_after_drain": left,
        "model_calls": calls,
        "turns": turns,
        "statuses": statuses,
    }
    print("\nsoak figures:", json.dumps(figures, sort_keys=True))
    assert integrity == "ok"
    assert lost == [], lost[:5]
    assert bad_ticks == [], bad_ticks[:5]
    assert left == {} and drained is not None, left
    assert problems == [], problems[:10]
    assert tracebacks(tmp_path) == []
    # What a caller may meet: on PostgreSQL, the call that met a restart gets a one-line
    # StoreError; an MCP client whose server was killed opens a new session. Nothing else.
    for e in errors:
        if e["error"] == "connection":
            continue
        assert backend == "postgres" and "\n" not in e["msg"], e
        said = e["error"] == "tool" or e["msg"].startswith("the database failed: ")
        assert said or e["type"] in ("StoreError", "ServerGone"), e
    for code, err in f["runs_failed"]:  # one line: a run that met a restart, or one whose
        said = [line for line in err.splitlines() if line.startswith("error: ")]  # lease ran out
        assert code in (1, 2) and len(said) == 1, err  # (3 s leases: then its work rolls back)
        assert backend == "postgres" or "another runner took over" in said[0], err
    assert all(code == 2 for code in f["daemon_exits"]), f["daemon_exits"]
    # the pass kept running, killed or not: at least once a minute (with the machine's 2
    # cores shared, a daemon killed every 10 s spends most of its life starting up)
    assert len(tick_runs) >= seconds / 60
    return figures


# Open (issue 42): the five-minute PostgreSQL run, until it is measured passing with every
# runner judging pending turns (before: 45 turns still pending a minute after the faults,
# with only the lease holder judging them). docs/guarantees.md, "The soak run".
PG = pytest.mark.skipif(not pg_server.available(), reason=pg_server.HOW_TO_ENABLE)
LONG_BACKENDS = ["sqlite", pytest.param("postgres", marks=[PG])]


# On PostgreSQL the 12 s take a minute and a half (a server of its own, restarted twice,
# and the backlog drained after it): a long run, `make soak`'s and CI's (.ci/run), not make test's
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=[PG, pytest.mark.soak])])
def test_soak_briefly(tmp_path, backend):
    # 12 s: kills start at 2 s and come every 1.5-4.5 s, so at least three land in it
    f = run_soak(tmp_path, 12, backend)
    assert f["writes_acknowledged"] > 5 and sum(f["kills"].values()) >= 3 and f["mcp_calls"] > 0


@pytest.mark.soak
@pytest.mark.parametrize("backend", LONG_BACKENDS)
def test_soak_for_five_minutes(tmp_path, backend):
    f = run_soak(tmp_path, 300, backend)
    assert f["writes_acknowledged"] > 200 and sum(f["kills"].values()) >= 75 and f["mcp_calls"] > 20
    assert f["server_restarts"] == (2 if backend == "postgres" else 0)
    assert len(f["faults"]) >= (2 if backend == "postgres" else 4)
