"""The "daemon" of the concurrency test: runs due passes in a loop with a clock that
advances a fixed step per round, through the API or through `lethe run` (alternately
with --cli), until its time is up. Logs one JSON line per round, errors included.

    python tests/procs/pass_loop.py DB LOG --seconds 5 --step 2d [--cli] [--lease]

With --lease a round is a `Scheduler.tick()`: due passes under the pass lease (a long
lease, so two daemons' simulated clocks drifting apart never expire each other's). With
--epoch T (time.time() at the test's start), every daemon's clock reads the same simulated
time at the same real moment, `step` for every 40 ms since T, as daemons on one server share
the wall clock: clocks that drift apart by days are the clock going back, which runs a pass
again by design (docs/time.md)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

from _common import ROOT, START, is_lock_error, policy_path

from engine import FixedClock, Memory, Scheduler
from engine.base.clock import iso, parse_duration


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("log")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--step", default="2d")
    ap.add_argument("--pause", type=float, default=0.02)
    ap.add_argument("--policy", default="lifecycle")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--cli", action="store_true", help="every other round through `lethe run`")
    ap.add_argument("--lease", action="store_true", help="each round under the pass lease")
    ap.add_argument("--epoch", type=float, help="a clock shared with the other daemons")
    a = ap.parse_args()

    clock = FixedClock(START)
    step = parse_duration(a.step)
    if a.epoch is not None:

        def clock():  # read at each call, so a round under the lease reads after the last one
            return START + step * ((time.time() - a.epoch) / 0.04)

        clock.advance = lambda _step: None
    counts = {"rounds": 0, "cli_rounds": 0, "lock": 0, "other": 0}
    with open(a.log, "a", buffering=1, encoding="utf-8") as log:

        def write(obj):
            log.write(json.dumps(obj, ensure_ascii=False) + "\n")

        mem = sched = None
        deadline = time.monotonic() + a.seconds
        while time.monotonic() < deadline:
            clock.advance(step)
            counts["rounds"] += 1
            try:
                if a.cli and counts["rounds"] % 2 == 0:
                    counts["cli_rounds"] += 1
                    env = {**os.environ, "PYTHONPATH": ROOT}
                    proc = subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "engine.cli",
                            "run",
                            "--db",
                            a.db,
                            "--policy",
                            policy_path(a.policy),
                            "--namespace",
                            a.namespace,
                            "--now",
                            iso(clock()),
                            "--offline",
                            "--json",
                        ],
                        capture_output=True,
                        text=True,
                        env=env,
                        cwd=ROOT,
                        timeout=300,
                    )
                    if proc.returncode != 0:
                        kind = "lock" if "locked" in proc.stderr.lower() else "other"
                        counts[kind] += 1
                        write({"error": kind, "op": "lethe run", "msg": proc.stderr[-2000:]})
                    else:
                        write(
                            {
                                "round": counts["rounds"],
                                "now": iso(clock()),
                                "cli": True,
                                "results": json.loads(proc.stdout),
                            }
                        )
                else:
                    if mem is None:
                        mem = Memory(
                            a.db,
                            policy=policy_path(a.policy),
                            namespace=a.namespace,
                            offline=True,
                            clock=clock,
                        )
                        sched = Scheduler(mem, lease_ttl="100000d") if a.lease else None
                    results = sched.tick() if sched else mem.run_due()
                    write(
                        {
                            "round": counts["rounds"],
                            "now": iso(clock()),
                            "results": [r.as_dict() for r in results or []],
                        }
                    )
            except Exception as exc:
                kind = "lock" if is_lock_error(exc) else "other"
                counts[kind] += 1
                write(
                    {
                        "error": kind,
                        "op": "run_due",
                        "type": type(exc).__name__,
                        "msg": str(exc)[:500],
                        "trace": traceback.format_exc()[-2000:],
                    }
                )
            time.sleep(a.pause)
        if mem is not None:
            if sched:
                sched.close()
            mem.close()
        write({"done": True, "counts": counts})


if __name__ == "__main__":
    main()
