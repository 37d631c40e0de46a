"""Run `run_due()` over a database and SIGKILL ourselves at a chosen point inside a pass.

    python tests/procs/pass_kill.py DB --now ISO --count
        run to the end; print {"counts": {label: progress callbacks}, "results": [...]}
    python tests/procs/pass_kill.py DB --now ISO --label "decay.rules[0] update" --at 120
        die at the 120th progress callback (every --every VM instructions) of that statement
    python tests/procs/pass_kill.py DB --now ISO --label "decay.rules[1] update" --at-commit
        die when the COMMIT that follows that statement is about to run (with --at N: the
        N-th such COMMIT, for a batched pass that commits once per id range)
    python tests/procs/pass_kill.py DB --now ISO --kill-merge 2
        die inside the transaction of the second merge of a compression pass
    python tests/procs/pass_kill.py DB --now ISO --announce
        print "LABEL <label>" as each statement starts (for a killer outside)

Labels are the pass statement labels the engine reports through `progress`
("expiry.rules[0] update", "decay.rules[1] event archived", ...)."""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys

from _common import die, policy_path, store_of

from engine import FixedClock, Memory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--now", required=True)
    ap.add_argument("--policy", default="lifecycle")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--label")
    ap.add_argument("--at", type=int, default=1)
    ap.add_argument("--at-commit", action="store_true")
    ap.add_argument("--kill-merge", type=int)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--announce", action="store_true")
    a = ap.parse_args()

    mem = Memory(
        a.db, policy=policy_path(a.policy), namespace=a.namespace, offline=True, clock=FixedClock(a.now)
    )
    db = store_of(mem).db
    state = {"label": "open"}
    calls: collections.Counter = collections.Counter()
    commits = [0]

    def on_label(label: str) -> None:
        state["label"] = label
        if a.announce:
            print("LABEL", label, flush=True)

    def on_progress() -> int:
        label = state["label"]
        calls[label] += 1
        if a.label == label and not a.at_commit and calls[label] >= a.at:
            die()
        return 0

    def on_trace(sql: str) -> None:
        s = sql.lstrip().upper()
        if s.startswith("BEGIN"):
            state["label"] = "begin"
        elif s.startswith("COMMIT"):
            if a.at_commit and state["label"] == a.label:
                commits[0] += 1
                if commits[0] >= a.at:
                    die()
            state["label"] = "commit"

    db.set_progress_handler(on_progress, a.every)
    db.set_trace_callback(on_trace)
    # a pass watches for waiting writers through the same (one) progress handler, and
    # would replace ours; nobody writes here, so it would never give way: keep ours
    store_of(mem).giving_way = contextlib.nullcontext

    if a.kill_merge:
        from engine.run import compress

        original, merges = compress._write_merge, [0]

        def write_merge(*args, **kw):
            new_id = original(*args, **kw)
            merges[0] += 1
            if merges[0] >= a.kill_merge:
                die()  # inside the merge's transaction, after all its writes
            return new_id

        compress._write_merge = write_merge

    results = mem.run_due(progress=on_label)
    db.set_progress_handler(None, 0)
    db.set_trace_callback(None)
    print(json.dumps({"counts": dict(calls), "results": [r.as_dict() for r in results]}))
    sys.stdout.flush()
    mem.close()


if __name__ == "__main__":
    main()
