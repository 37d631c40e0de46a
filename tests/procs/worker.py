"""An agent process for the concurrency test: remembers, adds and recalls against one
database until its time is up, logging every acknowledged write and every error.

    python tests/procs/worker.py DB LOG --worker 1 --seconds 5 [--policy lifecycle]

Each line of LOG is JSON: {"op": "remember", "user": ..., "ids": [...]} for an
acknowledged remember, {"op": "add", "id": ..., "content": ...} for an add,
{"op": "recall", "ids": [...], "namespaces": [...]} for a recall, {"error": "lock" |
"other", ...} for an exception that reached the caller, and a last {"done": ...}."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import time
import traceback

from _common import START, is_lock_error, policy_path

from engine import FixedClock, Memory

TOOLS = [
    "PostgreSQL",
    "MySQL",
    "SQLite",
    "Redis",
    "poetry",
    "uv",
    "pip",
    "Docker",
    "Podman",
    "pytest",
    "unittest",
    "Vim",
    "Emacs",
    "VS Code",
    "GitHub Actions",
    "GitLab CI",
]
TASKS = [
    "the billing service",
    "the study tracker",
    "the CLI",
    "the docs site",
    "deployment",
    "nightly reports",
    "the search index",
    "the auth module",
]
DATES = ["March 15", "April 1", "May 30", "June 12", "next Friday", "the v2 release"]


def turn(rng: random.Random, token: str) -> tuple[str, str]:
    tool, tool2 = rng.sample(TOOLS, 2)
    task, date = rng.choice(TASKS), rng.choice(DATES)
    user = rng.choice(
        [
            f"I use {tool} for {task} ({token}).",
            f"We migrated {task} from {tool} to {tool2} ({token}).",
            f"I prefer {tool} for {task}, ticket {token}.",
            f"The deadline for {task} is {date} ({token}).",
            f"Never use {tool} in {task} ({token}).",
            f"Thanks, that helped ({token})!",
            f"hello there {token}",
        ]
    )
    return user, "Noted."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("log")
    ap.add_argument("--worker", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--policy", default="lifecycle")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--online", action="store_true", help="judge through the policy's models")
    ap.add_argument("--real-clock", action="store_true", help="the wall clock, as in production")
    ap.add_argument("--stop-file", help="stop (before --seconds are up) once this file exists")
    a = ap.parse_args()

    rng = random.Random(a.seed * 1000 + a.worker)
    clock = None if a.real_clock else FixedClock(START + dt.timedelta(minutes=a.worker))
    counts = {"remember": 0, "add": 0, "recall": 0, "lock": 0, "other": 0}
    with open(a.log, "a", buffering=1, encoding="utf-8") as log:

        def write(obj):
            log.write(json.dumps(obj, ensure_ascii=False) + "\n")

        try:
            mem = Memory(
                a.db, policy=policy_path(a.policy), namespace=a.namespace, offline=not a.online, clock=clock
            )
        except Exception as exc:  # opening (and migrating) is a caller-visible step too
            kind = "lock" if is_lock_error(exc) else "other"
            counts[kind] += 1
            write({"error": kind, "op": "open", "type": type(exc).__name__, "msg": str(exc)[:500]})
            write({"done": True, "worker": a.worker, "counts": counts})
            return
        deadline = time.monotonic() + a.seconds
        i = 0
        while time.monotonic() < deadline and not (a.stop_file and os.path.exists(a.stop_file)):
            i += 1
            token = f"w{a.worker}n{i}"
            r = rng.random()
            op = "remember" if r < 0.6 else "add" if r < 0.75 else "recall"
            try:
                if op == "remember":
                    user, assistant = turn(rng, token)
                    ids = mem.remember(user, assistant)
                    write({"op": op, "user": user, "ids": ids})
                elif op == "add":
                    content = f"Note {token}: {rng.choice(TOOLS)} settings for {rng.choice(TASKS)}"
                    new_id = mem.add(
                        content, importance=rng.randint(1, 10), judged=a.online and rng.random() < 0.5
                    )
                    write({"op": op, "id": new_id, "content": content})
                else:
                    query = f"what do I use for {rng.choice(TASKS)}?"
                    got = mem.recall(query)
                    write(
                        {
                            "op": op,
                            "ids": [m.id for m in got],
                            "namespaces": sorted({m.namespace for m in got}),
                        }
                    )
                counts[op] += 1
            except Exception as exc:
                kind = "lock" if is_lock_error(exc) else "other"
                counts[kind] += 1
                write(
                    {
                        "error": kind,
                        "op": op,
                        "type": type(exc).__name__,
                        "msg": str(exc)[:500],
                        "trace": traceback.format_exc()[-2000:],
                    }
                )
            if clock is not None:
                clock.advance(dt.timedelta(minutes=7))
        mem.close()
        write({"done": True, "worker": a.worker, "counts": counts})


if __name__ == "__main__":
    main()
