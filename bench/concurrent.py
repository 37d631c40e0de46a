"""remember(), add() and recall() latency while a decay pass over N memories runs in
another process, under the shipped lifecycle policy as it is shipped.

On a fresh copy of the adopted N-row database (N = the largest size, 1M by default):

1. idle: ``IDLE_OPS`` calls of each kind (offline judges: the rules judges answer
   in-process, so the figures are the engine's own cost), in turn, with no pass
   running: the baseline.
2. during: start ``lethe run --pass decay --policy policies/lifecycle.yaml`` in a
   subprocess, and call remember(), add() and recall() in turn until it exits; every
   call that began after the pass process started and before it exited counts.
   "database is locked" errors (sqlite3 OperationalError after the store's busy
   timeout) are counted, not raised.

Goal: p99 of each call at most 50 ms and remember/add at most 250 ms at worst during
the pass, and no "database is locked". The pass, one transaction when nobody waits,
gives way to the first writer that does (it rolls back and runs in ranges: engine/run/passes.py),
so its time here is that of the ranges. `--contention-policy` (bench.run) measures
another policy the same way, e.g. one whose decay is `atomic: true` (never gives way).
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import subprocess
import time
from pathlib import Path

from . import datasets as D
from .passes import _lethe_cmd
from .write import QUERIES, TURNS_TEXT

P99_GOAL_MS = 50.0
MAX_GOAL_MS = 250.0  # the worst a remember or add may wait during a pass
IDLE_OPS = 30  # of each kind
KINDS = ("remember", "add", "recall")


def _p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)] if s else float("nan")


class Caller:
    """remember(), add() and recall() in turn on one Memory (or only the `kinds` given);
    each call timed, locks counted."""

    def __init__(self, mem, kinds=KINDS):
        self.mem, self.i, self.kinds = mem, 0, kinds
        self.times: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
        self.locked = 0
        self.other_errors: list[str] = []

    def one(self) -> None:
        kind = self.kinds[self.i % len(self.kinds)]
        k = self.i // len(self.kinds)
        self.i += 1
        t0 = time.perf_counter()
        try:
            if kind == "remember":
                user, assistant = TURNS_TEXT[k % len(TURNS_TEXT)]
                self.mem.remember(f"{user} (turn {k})", assistant)
            elif kind == "add":
                self.mem.add(f"{TURNS_TEXT[k % len(TURNS_TEXT)][0]} (note {k})", importance=5)
            else:
                self.mem.recall(QUERIES[k % len(QUERIES)])
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                self.locked += 1
            else:
                self.other_errors.append(f"{kind}: {exc}")
        except Exception as exc:  # reported, not hidden
            if "locked" in str(exc):
                self.locked += 1
            else:
                self.other_errors.append(f"{kind}: {type(exc).__name__}: {exc}")
        self.times[kind].append((t0, time.perf_counter() - t0))


def _run(copy: Path, policy: Path, idle_ops: int, kinds=KINDS) -> dict:
    """Warm up, measure idle, then measure while `lethe run --pass decay` runs."""
    from engine import FixedClock, Memory

    mem = Memory(str(copy), policy=str(D.POLICY), offline=True, clock=FixedClock(D.T))
    try:
        warm = Caller(mem, kinds)
        for _ in range(2 * len(kinds)):  # first calls import the rules judges, warm caches
            warm.one()
        idle = Caller(mem, kinds)
        for _ in range(len(kinds) * idle_ops):
            idle.one()
        busy = Caller(mem, kinds)
        cmd = _lethe_cmd() + [
            "run",
            "--db",
            str(copy),
            "--policy",
            str(policy),
            "--pass",
            "decay",
            "--now",
            D.T_ISO,
            "--json",
        ]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=D.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while proc.poll() is None:
            busy.one()
        end = time.perf_counter()
        out, err = proc.communicate()
        pass_ok = proc.returncode == 0
        pass_locked = err.count("database is locked")
        changed, notes = None, []
        if pass_ok:
            changed, notes = json.loads(out)[0]["changed"], json.loads(out)[0]["notes"]
    finally:
        mem.close()

    def during(kind):
        return [d for t0, d in busy.times[kind] if start <= t0 < end]

    res = {
        "pass_s": end - start,
        "pass_ok": pass_ok,
        "pass_err": err.strip()[-300:],
        "pass_locked": pass_locked,
        "changed": changed,
        "gave_way": any("gave way" in n for n in notes),
        "locked": busy.locked + idle.locked,
        "errors": idle.other_errors + busy.other_errors,
    }
    for kind in kinds:
        dur = during(kind)
        res[kind + "_idle"] = [d for _, d in idle.times[kind]]
        res[kind] = {
            "p99": _p99(dur) * 1e3,
            "max": max(dur, default=float("nan")) * 1e3,
            "med": (statistics.median(dur) * 1e3) if dur else float("nan"),
            "calls": len(dur),
        }
    return res


def bench(n: int = 1_000_000, log=print, policy: Path | None = None) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    policy = Path(policy or D.POLICY)
    label = "shipped lifecycle" if policy == D.POLICY else policy.stem
    src = D.adopted(n, log)
    copy = D.work_copy(src, "contention")
    try:
        r = _run(copy, policy, IDLE_OPS)
    finally:
        D.drop(copy)
    for kind in KINDS:
        idle = r[kind + "_idle"]
        r[kind]["idle_p99"] = _p99(idle) * 1e3
        r[kind]["idle_med"] = statistics.median(idle) * 1e3
    how = "gave way to the calls, ran in ranges" if r["gave_way"] else "one transaction"
    log(
        f"decay pass over {D.label(n)} ({label}) took {r['pass_s']:.1f} s in another process "
        f"({how}); "
        + "; ".join(
            f"{k} p99 {r[k]['p99']:.1f} ms, max {r[k]['max']:.0f} ms "
            f"({r[k]['calls']} calls, idle p99 {r[k]['idle_p99']:.1f})"
            for k in KINDS
        )
        + f"; 'database is locked': {r['locked']} in the caller, {r['pass_locked']} in the pass"
    )
    if not r["pass_ok"]:
        problems.append(f"contention ({label}): the decay pass failed: {r['pass_err']}")
    if r["errors"]:
        problems.append(f"contention ({label}): {len(r['errors'])} error(s), first: {r['errors'][0]}")
    for kind in KINDS:
        k = r[kind]
        rows.append(
            dict(
                measure=f"{kind} p99 during decay, {label} (ms)",
                n=n,
                value=k["p99"],
                baseline=k["idle_p99"],
                goal=P99_GOAL_MS,
                absolute_goal=True,
                note=f"offline judges; {k['calls']} calls during a {r['pass_s']:.1f} s pass "
                f"(`lethe run --pass decay` in another process, {r['changed']} rows); "
                f"median {k['med']:.1f} ms; baseline: p99 with no pass running "
                f"({IDLE_OPS} calls, median {k['idle_med']:.1f} ms)",
            )
        )
        if kind != "recall":
            rows.append(
                dict(
                    measure=f"{kind} max during decay, {label} (ms)",
                    n=n,
                    value=k["max"],
                    baseline=None,
                    goal=MAX_GOAL_MS,
                    absolute_goal=True,
                )
            )
    rows.append(
        dict(
            measure=f"'database is locked' during decay, {label}",
            n=n,
            value=r["locked"] + r["pass_locked"],
            baseline=None,
            goal=0,
            absolute_goal=True,
        )
    )
    rows.append(
        dict(
            measure=f"decay pass during the calls, {label} (s)",
            n=n,
            value=r["pass_s"],
            baseline=None,
            note="wall time of the pass process while the calls ran ("
            + (
                "it gave way to them and ran in ranges"
                if r["gave_way"]
                else "one transaction: it did not give way"
            )
            + ")",
        )
    )
    # Recall alone, the pass does not give way (a recall never waits: its access is kept)
    # and stays one transaction: whether a recall ever waits for that.
    copy = D.work_copy(src, "contention")
    try:
        alone = _run(copy, policy, IDLE_OPS, kinds=("recall",))
    finally:
        D.drop(copy)
    k, idle = alone["recall"], alone["recall_idle"]
    log(
        f"recall alone during a {alone['pass_s']:.1f} s decay pass: p99 {k['p99']:.1f} ms, "
        f"max {k['max']:.0f} ms, median {k['med']:.2f} ms ({k['calls']} calls); "
        f"'database is locked': {alone['locked']}"
    )
    if not alone["pass_ok"] or alone["errors"]:
        problems.append(f"contention, recall alone ({label}): {alone['pass_err'] or alone['errors'][0]}")
    rows.append(
        dict(
            measure=f"recall alone p99 during decay, {label} (ms)",
            n=n,
            value=k["p99"],
            baseline=_p99(idle) * 1e3,
            goal=P99_GOAL_MS,
            absolute_goal=True,
            note=f"only recalls, {k['calls']} during a {alone['pass_s']:.1f} s pass, "
            f"max {k['max']:.0f} ms; baseline: p99 with no pass running",
        )
    )
    return rows, problems


LATE_DELAYS = (1.5, 3.0)  # seconds after the pass process starts (it reaches its rules ~1 s in)


def _late(copy: Path, delay: float | None) -> dict:
    """`lethe run --pass expiry --pass decay` in another process; `delay` seconds after it
    starts, one add, one remember and one recall (None: no calls, the pass alone)."""
    from engine import FixedClock, Memory

    mem = Memory(str(copy), policy=str(D.POLICY), offline=True, clock=FixedClock(D.T))
    try:
        caller = Caller(mem)
        for _ in range(len(KINDS)):  # import the rules judges, warm the caches
            caller.one()
        caller = Caller(mem)
        cmd = _lethe_cmd() + [
            "run",
            "--db",
            str(copy),
            "--policy",
            str(D.POLICY),
            "--pass",
            "expiry",
            "--pass",
            "decay",
            "--now",
            D.T_ISO,
            "--json",
        ]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=D.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if delay is not None:
            time.sleep(delay)
            for _ in KINDS:
                caller.one()
        out, err = proc.communicate()
        secs = time.perf_counter() - start
    finally:
        mem.close()
    if proc.returncode != 0:
        return {"error": err.strip()[-300:]}
    notes = [n for r in json.loads(out) for n in r["notes"]]
    waits = {k: v[0][1] * 1e3 for k, v in caller.times.items() if v}
    return {
        "pass_s": secs,
        "gave_way": any("gave way" in n for n in notes),
        "at_once": any("the rest in one transaction" in n for n in notes),
        "waits": waits,
        "locked": caller.locked,
        "errors": caller.other_errors,
    }


def late(n: int = 1_000_000, log=print) -> tuple[list[dict], list[str]]:
    """One writer that comes after the pass has begun: how long its calls wait, and how
    long the pass takes once it gave way to them (it runs in ranges while writers wait,
    then the rest in one transaction), against the same pass with nobody calling."""
    rows, problems = [], []
    src = D.adopted(n, log)
    runs = {}
    for delay in (None, *LATE_DELAYS):
        copy = D.work_copy(src, "late")
        try:
            runs[delay] = r = _late(copy, delay)
        finally:
            D.drop(copy)
        if "error" in r or r["errors"]:
            problems.append(f"late writer at {delay} s: {r.get('error') or r['errors'][0]}")
            return rows, problems
        log(
            f"late writer at {delay} s: pass {r['pass_s']:.1f} s (gave way: {r['gave_way']}, "
            f"rest at once: {r['at_once']}); " + ", ".join(f"{k} {v:.0f} ms" for k, v in r["waits"].items())
        )
    alone = runs[None]["pass_s"]
    for delay in LATE_DELAYS:
        r = runs[delay]
        first = max(r["waits"][k] for k in ("add", "remember"))
        rows.append(
            dict(
                measure=f"a writer {delay} s into the pass: its wait (ms)",
                n=n,
                value=first,
                baseline=None,
                goal=MAX_GOAL_MS,
                absolute_goal=True,
                note="the longer of one add and one remember, called one after "
                "the other, then a recall "
                f"({r['waits']['recall']:.0f} ms); 'database is locked': "
                f"{r['locked']}",
            )
        )
        how = (
            "gave way, then the rest in one transaction"
            if r["at_once"]
            else "gave way, in ranges to its end"
            if r["gave_way"]
            else "did not give way"
        )
        rows.append(
            dict(
                measure=f"the pass with a writer {delay} s in (s)",
                n=n,
                value=r["pass_s"],
                baseline=alone,
                note=f"expiry + decay, whole process ({how}); baseline: the same "
                "pass with nobody calling, this run",
            )
        )
    return rows, problems
