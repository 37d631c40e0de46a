"""remember() and recall() latency while a decay pass over N memories runs in another process.

On a fresh copy of the adopted N-row database (N = the largest size, 1M by default):

1. idle (once, on the first copy): ``IDLE_OPS`` remember() and recall() calls each (offline judges: the rules judges
   answer in-process, so the figures are the engine's own cost), alternating, with no
   pass running: the baseline.
2. during: start ``lethe run --pass decay`` in a subprocess, and call remember() and
   recall() in turn until it exits; every call that began after the pass process
   started and before it exited counts. "database is locked" errors (sqlite3
   OperationalError after the store's busy timeout) are counted, not raised.

Twice: with policies/lifecycle.yaml (the decay pass is one transaction: a writer has to
wait for all of it) and with a policy that extends it with ``batch: 2000`` for decay
and expiry (committed per id range, see engine/passes.py run_batched). Goal: p99 of
both calls under 50 ms during the pass, and no "database is locked".
"""
from __future__ import annotations

import json
import math
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from . import datasets as D
from .passes import _lethe_cmd
from .write import QUERIES, TURNS_TEXT

P99_GOAL_MS = 50.0
IDLE_OPS = 30       # of each kind, measured once (on the first variant's copy)
BATCH = 2_000


def _p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)] if s else float("nan")


def batched_policy(tmp: Path) -> Path:
    path = tmp / "bench-batched.yaml"
    path.write_text(f"extends: {json.dumps(str(D.POLICY))}\n"
                    f"passes: {{decay: {{batch: {BATCH}}}, expiry: {{batch: {BATCH}}}}}\n",
                    encoding="utf-8")
    return path


class Caller:
    """remember() and recall() in turn on one Memory; each call timed, locks counted."""

    def __init__(self, mem):
        self.mem, self.i = mem, 0
        self.times: dict[str, list[tuple[float, float]]] = {"remember": [], "recall": []}
        self.locked = 0
        self.other_errors: list[str] = []

    def one(self) -> None:
        kind = "remember" if self.i % 2 == 0 else "recall"
        k = self.i // 2
        self.i += 1
        t0 = time.perf_counter()
        try:
            if kind == "remember":
                user, assistant = TURNS_TEXT[k % len(TURNS_TEXT)]
                self.mem.remember(f"{user} (turn {k})", assistant)
            else:
                self.mem.recall(QUERIES[k % len(QUERIES)])
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                self.locked += 1
            else:
                self.other_errors.append(f"{kind}: {exc}")
        except Exception as exc:  # noqa: BLE001 - reported, not hidden
            if "locked" in str(exc):
                self.locked += 1
            else:
                self.other_errors.append(f"{kind}: {type(exc).__name__}: {exc}")
        self.times[kind].append((t0, time.perf_counter() - t0))


def _run(copy: Path, policy: Path, idle_ops: int) -> dict:
    from engine import FixedClock, Memory

    mem = Memory(str(copy), policy=str(D.POLICY), offline=True, clock=FixedClock(D.T))
    try:
        warm = Caller(mem)
        for _ in range(6):            # first calls import the rules judges, warm caches
            warm.one()
        idle = Caller(mem)
        for _ in range(2 * idle_ops):
            idle.one()
        busy = Caller(mem)
        cmd = _lethe_cmd() + ["run", "--db", str(copy), "--policy", str(policy),
                              "--pass", "decay", "--now", D.T_ISO, "--json"]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=D.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        while proc.poll() is None:
            busy.one()
        end = time.perf_counter()
        out, err = proc.communicate()
        pass_ok = proc.returncode == 0
        pass_locked = err.count("database is locked")
        changed = None
        if pass_ok:
            changed = json.loads(out)[0]["changed"]
    finally:
        mem.close()

    def during(kind):
        return [d for t0, d in busy.times[kind] if start <= t0 < end]

    res = {"pass_s": end - start, "pass_ok": pass_ok, "pass_err": err.strip()[-300:],
           "pass_locked": pass_locked, "changed": changed,
           "locked": busy.locked + idle.locked, "errors": idle.other_errors + busy.other_errors}
    for kind in ("remember", "recall"):
        dur = during(kind)
        res[kind + "_idle"] = [d for _, d in idle.times[kind]]
        res[kind] = {"p99": _p99(dur) * 1e3, "max": max(dur, default=float("nan")) * 1e3,
                     "med": (statistics.median(dur) * 1e3) if dur else float("nan"),
                     "calls": len(dur)}
    return res


def bench(n: int = 1_000_000, log=print) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    src = D.adopted(n, log)
    with tempfile.TemporaryDirectory(prefix="lethe-bench-") as tmp:
        variants = (("one transaction", D.POLICY), (f"batch {BATCH}", batched_policy(Path(tmp))))
        idle: dict[str, list[float]] = {}
        for label, policy in variants:
            copy = D.work_copy(src, "contention")
            try:
                r = _run(copy, policy, 0 if idle else IDLE_OPS)
            finally:
                D.drop(copy)
            for kind in ("remember", "recall"):
                idle.setdefault(kind, r[kind + "_idle"])
                r[kind]["idle_p99"] = _p99(idle[kind]) * 1e3
                r[kind]["idle_med"] = statistics.median(idle[kind]) * 1e3
            log(f"decay pass over {D.label(n)} ({label}) took {r['pass_s']:.1f} s in another "
                f"process; remember p99 {r['remember']['p99']:.1f} ms (max "
                f"{r['remember']['max']:.0f}, {r['remember']['calls']} calls), recall p99 "
                f"{r['recall']['p99']:.1f} ms ({r['recall']['calls']} calls); idle p99 "
                f"{r['remember']['idle_p99']:.1f} / {r['recall']['idle_p99']:.1f} ms (median "
                f"{r['remember']['idle_med']:.1f} / {r['recall']['idle_med']:.1f}); "
                f"'database is locked': {r['locked']} in the caller, {r['pass_locked']} in the pass")
            if not r["pass_ok"]:
                problems.append(f"contention ({label}): the decay pass failed: {r['pass_err']}")
            if r["errors"]:
                problems.append(f"contention ({label}): {len(r['errors'])} error(s), first: "
                                f"{r['errors'][0]}")
            for kind in ("remember", "recall"):
                k = r[kind]
                rows.append(dict(
                    measure=f"{kind} p99 during decay, {label} (ms)", n=n, value=k["p99"],
                    baseline=k["idle_p99"], goal=P99_GOAL_MS, absolute_goal=True,
                    note=f"offline judges; {k['calls']} calls during a {r['pass_s']:.1f} s pass "
                         f"(`lethe run --pass decay` in another process, {r['changed']} rows); "
                         f"median {k['med']:.1f} ms, max {k['max']:.0f} ms; baseline: p99 with "
                         f"no pass running ({IDLE_OPS} calls, median {k['idle_med']:.1f} ms)"))
            rows.append(dict(measure=f"'database is locked' during decay, {label}", n=n,
                             value=r["locked"] + r["pass_locked"], baseline=None, goal=0,
                             absolute_goal=True))
    return rows, problems
