"""Remember a list of turns and SIGKILL ourselves at a chosen point of one of them.

    python tests/procs/remember_kill.py DB TURNS.json --now ISO --turn 3 --point insert

TURNS.json is a list of [user, assistant]. Points, all on the turn with index --turn:
  inbox        just after the turn is saved in the inbox, before any judge runs
  judging      after the contradiction judge answered (outside any transaction)
  insert       inside the write transaction, just after the new memory row is inserted
  supersede    inside the write transaction, just after an older memory was superseded
  inbox_done   inside the write transaction, as the inbox row is about to be marked done
  commit       as the COMMIT of the write transaction is about to run
  after_commit just after remember() returned for that turn (it was acknowledged)
  none         no kill: remember every turn and print the ids (a reference run)
With --announce, "TURN i" is printed before each turn (for a killer outside)."""

from __future__ import annotations

import argparse
import json

from _common import die, policy_path, store_of

from engine import FixedClock, Memory
from engine.run import write
from engine.run.judging import Judging
from engine.run.write import Writer

POINTS = ("inbox", "judging", "insert", "supersede", "inbox_done", "commit", "after_commit", "none")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("turns")
    ap.add_argument("--now", required=True)
    ap.add_argument("--policy", default="lifecycle")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--turn", type=int, default=0)
    ap.add_argument("--point", choices=POINTS, default="none")
    ap.add_argument("--announce", action="store_true")
    a = ap.parse_args()
    with open(a.turns, encoding="utf-8") as fh:
        turns = json.load(fh)

    mem = Memory(
        a.db, policy=policy_path(a.policy), namespace=a.namespace, offline=True, clock=FixedClock(a.now)
    )
    armed = {"on": False, "stage": None}

    def wrap(owner, name, after=None, before=None):
        original = getattr(owner, name)

        def wrapped(*args, **kw):
            if armed["on"] and before and before(*args, **kw):
                die()
            out = original(*args, **kw)
            if armed["on"] and after and after(*args, **kw):
                die()
            return out

        setattr(owner, name, wrapped)

    if a.point == "inbox":
        wrap(Writer, "process", before=lambda *_a, **_k: True)
    elif a.point == "judging":
        wrap(Judging, "run_step", after=lambda self, step, *r, **k: step.step == "contradiction")
    elif a.point == "insert":
        wrap(write, "store_memory", after=lambda *_a, **_k: True)
    elif a.point == "supersede":
        wrap(Writer, "supersede", after=lambda *_a, **_k: True)
    elif a.point in ("inbox_done", "commit"):

        def on_trace(sql: str) -> None:
            if not armed["on"]:
                return
            s = sql.lstrip().upper()
            if s.startswith("UPDATE INBOX SET STATUS"):
                if a.point == "inbox_done":
                    die()
                armed["stage"] = "marked"
            elif armed["stage"] == "marked" and s.startswith("COMMIT"):
                die()

        store_of(mem).db.set_trace_callback(on_trace)

    out = []
    for i, (user, assistant) in enumerate(turns):
        if a.announce:
            print("TURN", i, flush=True)
        armed["on"] = i == a.turn and a.point != "none"
        out.append(mem.remember(user, assistant))
        if armed["on"] and a.point == "after_commit":
            print(json.dumps({"acknowledged": out[-1]}), flush=True)
            die()
    armed["on"] = False
    print(json.dumps({"ids": out}))
    mem.close()


if __name__ == "__main__":
    main()
