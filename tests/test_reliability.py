"""Reliability: agents in separate processes sharing one file while a daemon runs passes,
and SIGKILL in the middle of a pass or of `remember`.

The processes are the scripts in tests/procs/. The short versions run in `make test`; the
long ones (60 s, four agents; 200k memories, more kill points) are `@pytest.mark.soak`
and run with `make soak`. Each test prints its figures (run pytest with -s to see them).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from bench import seed_article
from engine import FixedClock, Memory
from tests.helpers import POLICIES, ROOT, START
from tests.helpers.processes import (
    connect,
    run_concurrency,
    spawn,
    status_event_problems,
)

LIFECYCLE = os.path.join(POLICIES, "lifecycle.yaml")
NOW = START + dt.timedelta(days=1, hours=3)  # a day after the article data was made


def run_proc(script: str, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    p = spawn(script, *args)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def integrity(path) -> str:
    with connect(path) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def settle(path) -> None:
    """Fold the WAL into the main file, so a plain file copy is the whole database."""
    with connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


_copies = itertools.count()


def copy_db(src, dst) -> str:
    """A copy under a new name each time: a file this process had open is never rewritten
    under SQLite's feet (it shares its lock and WAL-index state per file within a process)."""
    settle(src)
    root, ext = os.path.splitext(str(dst))
    dst = f"{root}-{next(_copies)}{ext}"
    shutil.copyfile(src, dst)
    return dst


def snapshot(path) -> dict:
    """Everything a pass may change: every memory row, every event, the pass runs."""
    with connect(path) as db:
        return {
            "memories": db.execute("SELECT * FROM memories ORDER BY id").fetchall(),
            "events": db.execute("SELECT * FROM memory_events ORDER BY id").fetchall(),
            "pass_runs": db.execute("SELECT * FROM pass_runs ORDER BY namespace, pass").fetchall(),
        }


def which_state(snap: dict, states: dict) -> str | None:
    for name, ref in states.items():
        if snap == ref:
            return name
    return None


def test_agents_and_a_pass_daemon_share_one_file(tmp_path):
    f = run_concurrency(tmp_path, workers=2, seconds=5, step="4d")
    assert f["writes_acknowledged"] > 50 and f["recalls"] > 5 and f["pass_rounds"] > 10
    # the run exercised the lifecycle, not only inserts
    assert f["statuses"].get("superseded", 0) > 0
    assert f["statuses"].get("archived", 0) + f["statuses"].get("expired", 0) > 0


@pytest.mark.soak
def test_four_agents_for_a_minute_with_two_daemons(tmp_path):
    """Four agents for 60 s; one daemon through the API and `lethe run` in turn, a second
    one through the API, both running due passes on the same namespace."""
    f = run_concurrency(tmp_path, workers=4, seconds=60, cli=True, step="1d", daemons=2)
    assert f["writes_acknowledged"] > 500 and f["cli_rounds"] > 5


def test_processes_opening_a_new_file_at_once_all_get_the_whole_schema(tmp_path):
    """Four processes create and migrate the same new file at the same moment."""
    db = tmp_path / "new.db"
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); from engine.store import Store; "
        "s = Store(sys.argv[1]); print(len(s.db.execute('SELECT * FROM lethe_migrations')"
        ".fetchall()))"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(db), ROOT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    from engine.store import MIGRATIONS

    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert int(out) == len(MIGRATIONS)
    with connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM lethe_migrations ORDER BY rowid")]
    assert names == [fn.__name__ for fn in MIGRATIONS]


# ---- crash in the middle of a pass ------------------------------------------------------
class PassCrashBench:
    """An article database of n memories adopted by Lethe at START, and the states a
    run_due() at NOW goes through: before (S0), after expiry and decay (S2: they commit
    together, so expiry alone, S1, is never seen on disk), and after the whole run_due
    (S3). Any crash must leave one of these."""

    def __init__(self, base_dir, n: int):
        self.dir = base_dir
        self.base = str(base_dir / "base.db")
        seed_article.generate(self.base, n, START, seed=3)
        Memory(self.base, policy=LIFECYCLE, offline=True, clock=FixedClock(START)).close()
        settle(self.base)
        self.states = {"S0 before": snapshot(self.base)}
        for label, passes in (
            ("S1 expiry applied", ["expiry"]),
            ("S2 expiry+decay applied", ["expiry", "decay"]),
        ):
            path = copy_db(self.base, base_dir / "partial.db")
            with Memory(path, policy=LIFECYCLE, offline=True, clock=FixedClock(NOW)) as mem:
                mem.run(passes)
            self.states[label] = snapshot(path)
        ref = copy_db(self.base, base_dir / "reference.db")
        done = run_proc("pass_kill.py", ref, "--now", NOW.isoformat(), "--count")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        self.counts, self.results = report["counts"], report["results"]
        self.states["S3 run_due complete"] = snapshot(ref)
        self.final = self.states["S3 run_due complete"]
        assert self.states["S1 expiry applied"] != self.states["S0 before"]
        assert self.states["S2 expiry+decay applied"] != self.states["S1 expiry applied"]
        self.kills = []

    def kill_at(self, label: str, fraction: float | None, expect: set[str]) -> str:
        """SIGKILL (by the process itself) at `fraction` of the statement `label`, or just
        before the COMMIT after it (fraction None); check, then recover with run_due()."""
        path = copy_db(self.base, self.dir / "victim.db")
        if fraction is None:
            args = ["--label", label, "--at-commit"]
        else:
            args = ["--label", label, "--at", max(1, int(self.counts[label] * fraction))]
        proc = run_proc("pass_kill.py", path, "--now", NOW.isoformat(), *args)
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
        return self._check(path, f"{label} @ {fraction if fraction is not None else 'commit'}", expect)

    def kill_after_delay(self, label: str, delay: float, expect: set[str]) -> str:
        """SIGKILL from outside, `delay` seconds after the process reports `label` began."""
        path = copy_db(self.base, self.dir / "victim.db")
        proc = spawn("pass_kill.py", path, "--now", NOW.isoformat(), "--announce")
        for line in proc.stdout:
            if line.strip() == f"LABEL {label}":
                break
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=120)
        killed = proc.returncode == -signal.SIGKILL
        return self._check(
            path, f"{label} + {delay * 1000:.0f} ms" + ("" if killed else " (finished first)"), expect
        )

    def _check(self, path: str, where: str, expect: set[str]) -> str:
        assert integrity(path) == "ok"
        state = which_state(snapshot(path), self.states)
        assert state in expect, f"killed at {where}: the database is in none of {sorted(expect)}"
        with Memory(path, policy=LIFECYCLE, offline=True, clock=FixedClock(NOW)) as mem:
            mem.run_due()
        assert integrity(path) == "ok"
        assert snapshot(path) == self.final, f"run_due() after a kill at {where} did not complete it"
        self.kills.append((where, state))
        return state


S0, S1, S2, S3 = "S0 before", "S1 expiry applied", "S2 expiry+decay applied", "S3 run_due complete"


def test_sigkill_mid_pass_leaves_it_all_or_nothing_and_run_due_completes_it(tmp_path):
    bench = PassCrashBench(tmp_path, 20_000)
    assert bench.kill_at("expiry.rules[0] update", 0.5, {S0}) == S0
    assert bench.kill_at("decay.rules[0] update", 0.5, {S0}) == S0
    assert bench.kill_at("decay.rules[1] update", None, {S0}) == S0
    bench.kill_after_delay("decay.rules[0] update", random.uniform(0.0, 0.05), {S0, S2, S3})
    print("\nkills survived (20k):", json.dumps(bench.kills))


@pytest.mark.soak
def test_sigkill_mid_pass_over_200k_memories(tmp_path):
    bench = PassCrashBench(tmp_path, 200_000)
    assert bench.kill_at("expiry.rules[0] event expired", 0.5, {S0}) == S0
    assert bench.kill_at("expiry.rules[0] update", 0.98, {S0}) == S0  # it commits with decay
    for fraction in (0.02, 0.25, 0.5, 0.75, 0.98):
        assert bench.kill_at("decay.rules[0] update", fraction, {S0}) == S0
    assert bench.kill_at("decay.rules[1] event archived", 0.5, {S0}) == S0
    assert bench.kill_at("decay.rules[1] update", 0.5, {S0}) == S0
    assert bench.kill_at("decay.rules[1] update", None, {S0}) == S0
    rng = random.Random(8)
    for _ in range(4):
        bench.kill_after_delay("decay.rules[0] update", rng.uniform(0.0, 1.5), {S0, S2, S3})
    print("\nkills survived (200k):", json.dumps(bench.kills))


def _events(snap: dict) -> list:
    """Events without their ids: a batched pass writes them range by range."""
    return sorted(tuple(e)[1:] for e in snap["events"])


def test_sigkill_mid_batched_pass_resumes_with_the_same_now(tmp_path):
    """`batch: N` commits a pass range by range with a cursor: after a SIGKILL the ranges
    before the cursor are done and the rest untouched, and the next run_due() (later, on
    another clock) finishes the pass with the `now` it started with, so the rows equal an
    uninterrupted run's, each touched once, and equal the one-transaction pass's."""
    policy = tmp_path / "batched.yaml"
    policy.write_text(f"name: lifecycle-batched\nextends: {LIFECYCLE}\npasses:\n  decay:\n    batch: 1000\n")
    base = str(tmp_path / "base.db")
    seed_article.generate(base, 8_000, START, seed=4)
    Memory(base, policy=str(policy), offline=True, clock=FixedClock(START)).close()
    states = {}
    for label, passes in (("S1", ["expiry"]), ("S2", ["expiry", "decay"])):
        path = copy_db(base, tmp_path / "partial.db")
        with Memory(path, policy=str(policy), offline=True, clock=FixedClock(NOW)) as mem:
            mem.run(passes)
        states[label] = snapshot(path)
    one_tx = copy_db(base, tmp_path / "one-transaction.db")
    with Memory(one_tx, policy=LIFECYCLE, offline=True, clock=FixedClock(NOW)) as mem:
        mem.run(["expiry", "decay"])
    assert snapshot(one_tx)["memories"] == states["S2"]["memories"]
    assert _events(snapshot(one_tx)) == _events(states["S2"])

    ref = copy_db(base, tmp_path / "reference.db")
    done = run_proc("pass_kill.py", ref, "--policy", policy, "--now", NOW.isoformat(), "--count")
    assert done.returncode == 0, done.stderr
    counts, final = json.loads(done.stdout)["counts"], snapshot(ref)
    later = FixedClock(NOW + dt.timedelta(minutes=30))  # expiry (every 1h) is not due again
    outcomes = []
    for args in (
        ["--label", "decay.rules[0] update", "--at", int(counts["decay.rules[0] update"] * 0.55)],
        ["--label", "decay.rules[1] update", "--at-commit", "--at", 3],
    ):
        victim = copy_db(base, tmp_path / "victim.db")
        proc = run_proc("pass_kill.py", victim, "--policy", policy, "--now", NOW.isoformat(), *args)
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
        assert integrity(victim) == "ok"
        with connect(victim) as db:
            cursor, run_now = db.execute("SELECT cursor, run_now FROM pass_progress").fetchone()
        assert run_now == NOW.isoformat()
        got, s1, s2 = snapshot(victim), states["S1"]["memories"], states["S2"]["memories"]
        assert got["memories"] == [a if a[0] < cursor else b for a, b in zip(s2, s1)]
        assert _events(got) == sorted(
            _events(states["S1"])
            + [e for e in _events(states["S2"]) if e not in _events(states["S1"]) and e[0] < cursor]
        )
        with Memory(victim, policy=str(policy), offline=True, clock=later) as mem:
            notes = [n for r in mem.run_due() if r.name == "decay" for n in r.notes]
        assert notes == ["resumed an interrupted run"]
        after = snapshot(victim)
        assert after["memories"] == final["memories"] and _events(after) == _events(final)
        decay_run = {r[1]: tuple(r)[:3] for r in after["pass_runs"]}["decay"]
        assert decay_run == {r[1]: tuple(r)[:3] for r in final["pass_runs"]}["decay"]
        with connect(victim) as db:
            assert db.execute("SELECT count(*) FROM pass_progress").fetchone()[0] == 0
        outcomes.append((" ".join(map(str, args)), f"cursor {cursor}"))
    print("\nbatched kills survived:", outcomes)


def test_a_resumed_batched_pass_reports_all_the_rows_it_changed(tmp_path):
    policy = tmp_path / "batched.yaml"
    policy.write_text(f"name: lifecycle-batched\nextends: {LIFECYCLE}\npasses:\n  decay:\n    batch: 500\n")
    base = str(tmp_path / "base.db")
    seed_article.generate(base, 3_000, START, seed=4)
    Memory(base, policy=str(policy), offline=True, clock=FixedClock(START)).close()
    ref, victim = copy_db(base, tmp_path / "ref.db"), copy_db(base, tmp_path / "victim.db")
    assert run_proc("pass_kill.py", ref, "--policy", policy, "--now", NOW.isoformat()).returncode == 0
    proc = run_proc(
        "pass_kill.py",
        victim,
        "--policy",
        policy,
        "--now",
        NOW.isoformat(),
        "--label",
        "decay.rules[1] update",
        "--at-commit",
        "--at",
        3,
    )
    assert proc.returncode == -signal.SIGKILL
    with Memory(victim, policy=str(policy), offline=True, clock=FixedClock(NOW)) as mem:
        mem.run_due()
    q = "SELECT rows_changed FROM pass_runs WHERE pass = 'decay'"
    with connect(ref) as a, connect(victim) as b:
        assert b.execute(q).fetchone() == a.execute(q).fetchone()


def _compression_db(path: str) -> str:
    """Four groups of three memories the rules cluster judge merges, and three loners."""
    groups = [
        [
            "The billing service stores invoices in PostgreSQL",
            "Billing service invoices are stored in PostgreSQL",
            "Invoices of the billing service live in PostgreSQL",
        ],
        [
            "User prefers dark mode in the editor",
            "User likes dark mode in the editor",
            "The user prefers the editor in dark mode",
        ],
        [
            "Deploys of the docs site go through GitHub Actions",
            "The docs site deploys with GitHub Actions",
            "GitHub Actions deploys the docs site",
        ],
        [
            "Alice reviews changes to the auth module",
            "Changes to the auth module are reviewed by Alice",
            "Alice is the reviewer for the auth module",
        ],
    ]
    with Memory(path, policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        for text in [t for g in groups for t in g] + [
            "User runs nightly reports at 2am",
            "The CLI is written in Go",
        ]:
            mem.add(text, judged=False)
    settle(path)
    return path


def _by_content(path) -> dict:
    with connect(path) as db:
        return {r[0]: r[1] for r in db.execute("SELECT content, status FROM memories")}


def test_sigkill_inside_a_merge_keeps_every_merge_whole(tmp_path):
    """Compression commits merge by merge: a kill inside the second merge keeps the first
    merge whole and leaves no trace of the second."""
    base = _compression_db(str(tmp_path / "base.db"))
    ref = copy_db(base, tmp_path / "ref.db")
    assert run_proc("pass_kill.py", ref, "--now", START.isoformat()).returncode == 0
    victim = copy_db(base, tmp_path / "victim.db")
    proc = run_proc("pass_kill.py", victim, "--now", START.isoformat(), "--kill-merge", "2")
    assert proc.returncode == -signal.SIGKILL
    assert integrity(victim) == "ok"
    with connect(victim) as db:
        assert db.execute("SELECT count(*) FROM memories WHERE status = 'compressed'").fetchone()[0] == 3
        assert db.execute("SELECT count(*) FROM memory_events WHERE event_type = 'merged'").fetchone()[0] == 1
        assert status_event_problems(db) == []


def test_run_due_after_a_kill_inside_compression_finishes_the_merges(tmp_path):
    base = _compression_db(str(tmp_path / "base.db"))
    ref = copy_db(base, tmp_path / "ref.db")
    assert run_proc("pass_kill.py", ref, "--now", START.isoformat()).returncode == 0
    victim = copy_db(base, tmp_path / "victim.db")
    proc = run_proc("pass_kill.py", victim, "--now", START.isoformat(), "--kill-merge", "2")
    assert proc.returncode == -signal.SIGKILL
    with Memory(victim, policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        mem.run_due()
    originals = {k: v for k, v in _by_content(base).items()}
    assert {k: _by_content(victim)[k] for k in originals} == {k: _by_content(ref)[k] for k in originals}


# ---- crash in the middle of remember ----------------------------------------------------
TURNS = [
    ["I use PostgreSQL for the billing service.", "Noted."],
    ["The deadline for the study tracker is March 15.", "Got it."],
    ["hello!", "Hi, how can I help?"],
    ["I prefer tabs over spaces in Python code.", "Okay."],
    ["We migrated the billing service from PostgreSQL to MySQL.", "Got it."],
    ["The deadline for the study tracker moved to April 1.", "Noted."],
    ["I prefer tabs over spaces in Python code.", "You said that already."],
    ["Never deploy on Fridays.", "Understood."],
]
MIGRATION_TURN = 4  # supersedes turn 0's memory


def turn_problems(db: sqlite3.Connection) -> list:
    """A turn is pending with nothing stored from it, or done/dropped with every memory
    it names stored (created with its turn id, or reinforced by it); never half."""
    db.row_factory = sqlite3.Row
    problems = []
    created = {}
    for e in db.execute(
        "SELECT memory_id, event_type, detail FROM memory_events "
        "WHERE event_type IN ('created', 'reinforced')"
    ):
        turn = json.loads(e["detail"] or "{}").get("turn")
        if turn is not None:
            created.setdefault(turn, set()).add(e["memory_id"])
    for t in db.execute("SELECT * FROM inbox"):
        ids = set(json.loads(t["memory_ids"] or "[]"))
        if t["status"] == "pending":
            if t["id"] in created or ids:
                problems.append((t["id"], "pending but has memories", created.get(t["id"])))
        elif t["status"] in ("done", "dropped"):
            if ids != created.get(t["id"], set()) or (t["status"] == "done") != bool(ids):
                problems.append((t["id"], t["status"], ids, created.get(t["id"])))
        else:
            problems.append((t["id"], "unknown status", t["status"]))
    superseded_by = db.execute(
        "SELECT m.id, m.contradicted_by FROM memories m WHERE status = 'superseded'"
    ).fetchall()
    for mid, new in superseded_by:
        if db.execute("SELECT count(*) FROM memories WHERE id = ?", (new,)).fetchone()[0] != 1:
            problems.append((mid, "superseded by a memory that is not there", new))
    db.row_factory = None
    return problems + status_event_problems(db)


def judged_turns(path) -> dict:
    """(turn id, text) -> (inbox status, [(content, importance, confidence, expires_at)])
    of the memories the turn stored (their status may change later, by later turns)."""
    with connect(path) as db:
        out = {}
        for uid, user, status, ids in db.execute("SELECT id, user_text, status, memory_ids FROM inbox"):
            rows = db.execute(
                "SELECT content, importance, confidence, expires_at FROM "
                "memories WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (ids or "[]",),
            ).fetchall()
            out[(uid, user)] = (status, rows)
        return out


@pytest.fixture(scope="module")
def remember_reference(tmp_path_factory):
    d = tmp_path_factory.mktemp("remember")
    turns = d / "turns.json"
    turns.write_text(json.dumps(TURNS))
    ref = str(d / "reference.db")
    proc = run_proc("remember_kill.py", ref, turns, "--now", NOW.isoformat())
    assert proc.returncode == 0, proc.stderr
    with connect(ref) as db:
        assert turn_problems(db) == []
        assert db.execute("SELECT count(*) FROM memories WHERE status = 'superseded'").fetchone()[0] >= 1
    return d, turns, judged_turns(ref)


@pytest.mark.parametrize(
    "point, turn, expect",
    [
        ("inbox", 1, "pending"),
        ("judging", 3, "pending"),
        ("insert", 1, "pending"),
        ("supersede", MIGRATION_TURN, "pending"),
        ("inbox_done", MIGRATION_TURN, "pending"),
        ("commit", MIGRATION_TURN, "pending"),
        ("after_commit", MIGRATION_TURN, "done"),
    ],
)
def test_sigkill_mid_remember_leaves_the_turn_pending_or_whole(remember_reference, point, turn, expect):
    d, turns, reference = remember_reference
    db = str(d / f"victim-{point}.db")
    proc = run_proc("remember_kill.py", db, turns, "--now", NOW.isoformat(), "--turn", turn, "--point", point)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert integrity(db) == "ok"
    with connect(db) as conn:
        assert turn_problems(conn) == []
        rows = conn.execute("SELECT user_text, status FROM inbox ORDER BY id").fetchall()
        assert len(rows) == turn + 1 and rows[-1] == (TURNS[turn][0], expect)
        if point == "supersede":  # the older memory is still active: nothing half-applied
            assert (
                conn.execute(
                    "SELECT status FROM memories WHERE content LIKE '%PostgreSQL%' ORDER BY id LIMIT 1"
                ).fetchone()[0]
                == "active"
            )
    with Memory(db, policy=LIFECYCLE, offline=True, clock=FixedClock(NOW)) as mem:
        mem.run_due()
        assert mem.pending() == []
    with connect(db) as conn:
        assert turn_problems(conn) == []
    # the recovered turns were judged exactly as an uninterrupted run judged them
    got = judged_turns(db)
    assert got == {k: v for k, v in reference.items() if k in got}


def test_sigkill_at_random_moments_of_a_remember_loop(remember_reference):
    d, _, _ = remember_reference
    many = d / "many.json"
    rng = random.Random(5)
    tools = ["PostgreSQL", "MySQL", "Redis", "uv", "poetry", "Docker", "pytest", "Vim"]
    many.write_text(
        json.dumps(
            [
                [f"I use {rng.choice(tools)} for project {i} and prefer {rng.choice(tools)}.", "Noted."]
                for i in range(400)
            ]
        )
    )
    outcomes = []
    for k in range(3):
        db = str(d / f"random-{k}.db")
        proc = spawn("remember_kill.py", db, many, "--now", NOW.isoformat(), "--announce")
        target = rng.randint(5, 40)
        for line in proc.stdout:
            if line.strip() == f"TURN {target}":
                break
        time.sleep(rng.uniform(0, 0.01))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert integrity(db) == "ok"
        with connect(db) as conn:
            assert turn_problems(conn) == []
            outcomes.append(dict(conn.execute("SELECT status, count(*) FROM inbox GROUP BY status")))
        with Memory(db, policy=LIFECYCLE, offline=True, clock=FixedClock(NOW)) as mem:
            mem.run_due()
            assert mem.pending() == []
        with connect(db) as conn:
            assert turn_problems(conn) == []
    print("\ninbox after random kills:", outcomes)
