"""`make check-real-model`: the turns and queries of bench/real_turns.yaml through every
shipped policy against a served model (OPENAI_BASE_URL, e.g. llama.cpp's llama-server
started by ../shared/tools/real-model/serve.sh), and what the engine made of its answers.

    OPENAI_BASE_URL=http://127.0.0.1:8093/v1 python -m bench.real_model
    python -m bench.real_model --policies lifecycle fused --record-dir bench/recorded

Per policy it prints: memories stored, superseded, reinforced, expired (a year after the
last turn), refused answers, model calls, tokens, seconds, and the four counters that must
stay 0 (issue 40): facts lost to a `confirms` of a memory that says something else;
supersessions between memories about different things; example answers accepted; merged
memories that lost an expiry. `--record-dir` keeps every answer (the `replay` provider
reads them back, so tests/test_real_answers.py checks the engine on them with no model).
Not part of `make test`: slow, and a model's answers vary with load and build.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from engine import FixedClock, Memory
from engine.judges import COPIED
from engine.judges import invariants as guards
from engine.policy import load
from tests.helpers import store_of

ROOT = Path(__file__).resolve().parent.parent
TURNS = Path(__file__).with_name("real_turns.yaml")
START = dt.datetime(2026, 3, 2, 9, 0, 0)
# the example answers the prompts showed before issue 40 (a copy of one is a copied answer)
OLD_EXAMPLES = [
    {
        "save": True,
        "content": "User deploys the billing service with Docker.",
        "summary": "billing service: Docker deploys",
        "tags": ["deploy", "docker"],
        "importance": 6,
    },
    {"save": False, "content": "", "summary": "", "tags": [], "importance": 1},
    {"supersedes": [{"n": 2, "reason": "the deadline moved from March 15 to April 1"}], "confirms": [3]},
    {"clusters": [[1, 4], [2, 7, 9]]},
    {"confidence": 0.7},
    {"ids": [3, 1]},
    {
        "content": "User indents with spaces, never tabs, in every language.",
        "summary": "spaces, not tabs",
        "tags": ["style"],
    },
]
COLUMNS = (
    "policy",
    "turns",
    "stored",
    "superseded",
    "reinforced",
    "expired",
    "refused",
    "calls",
    "tokens",
    "seconds",
    "lost_to_confirms",
    "wrong_thing_supersessions",
    "example_answers_accepted",
    "merges_lost_expiry",
    "recall_hits",
)


def served_model(base_url: str) -> str:
    with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=10) as r:
        return json.load(r)["data"][0]["id"]


def served() -> tuple[str, str] | None:
    """OPENAI_BASE_URL and the model served there, or None (saying how to start one)."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        print(
            "OPENAI_BASE_URL is not set: start a model with ../shared/tools/real-model/serve.sh",
            file=sys.stderr,
        )
        return None
    return base_url, served_model(base_url)


def policy_file(folder: Path, name: str, base_url: str, model: str, timeout: float) -> str:
    shipped = ROOT / "policies" / f"{name}.yaml"
    models = {
        m.name: {
            "provider": "openai",
            "model": model,
            "base_url": base_url,
            "temperature": 0,
            "timeout": timeout,
            "max_retries": 0,
        }
        for m in load(str(shipped)).models.values()
        if m.provider == "openai"
    }
    path = folder / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump({"name": f"real-{name}", "extends": str(shipped), "models": models}), encoding="utf-8"
    )
    return str(path)


def play(
    name: str, policy: str, data: dict, db: str, record: str | None = None, replay: str | None = None
) -> dict:
    """One policy through every turn and query; its row of the table. With `replay`, the
    answers recorded by an earlier run are given again (no model is asked)."""
    clock = FixedClock(START)
    mem = Memory(db, policy=policy, clock=clock, record=record, replay=replay)
    started = time.perf_counter()
    thing_of: dict[int, str] = {}
    row = dict.fromkeys(COLUMNS, 0)
    row.update(policy=name, turns=len(data["turns"]))
    for turn in data["turns"]:
        clock.advance(dt.timedelta(hours=1))
        written = mem.remember(turn["user"], turn.get("assistant", "Noted."))
        for mid in written.stored:
            thing_of[mid] = turn["thing"]
        row["stored"] += len(written.stored)
        row["reinforced"] += len(written.reinforced)
        row["superseded"] += len(written.superseded)
        if turn.get("fact", True) and not turn.get("repeat") and written.reinforced and not written.stored:
            row["lost_to_confirms"] += 1
        for old, new in written.superseded:
            if thing_of.get(old) != thing_of.get(new) and thing_of.get(old) not in turn.get("replaces", []):
                row["wrong_thing_supersessions"] += 1
        mem.run_due()
    for q in data["queries"]:
        picked = mem.recall(q["query"])
        row["recall_hits"] += any(q["expect"].lower() in m.content.lower() for m in picked)
    clock.advance(dt.timedelta(days=7))
    mem.run([p for p in mem.policy.passes if p == "compression"])
    row["merges_lost_expiry"] = merges_lost_expiry(mem)
    clock.advance(dt.timedelta(days=365))
    mem.run([p for p in mem.policy.passes if p == "expiry"])
    rows = (
        store_of(mem).db.execute("SELECT status, count(*) FROM memories GROUP BY status").fetchall()
        if hasattr(store_of(mem), "db")
        else []
    )
    row["expired"] = dict((r[0], r[1]) for r in rows).get("expired", 0)
    calls = (
        store_of(mem)
        .db.execute("SELECT outcome, prompt_tokens + completion_tokens, detail FROM model_calls")
        .fetchall()
    )
    row["calls"] = len(calls)
    row["tokens"] = sum(c[1] or 0 for c in calls)
    row["refused"] = sum(c[0] == "bad_answer" for c in calls)
    copied_refused = sum(c[0] == "bad_answer" and COPIED in (c[2] or "") for c in calls)
    answers = replay or record
    row["example_answers_accepted"] = (
        max(0, copies(answers) - copied_refused) if answers and Path(answers).exists() else 0
    )
    row["seconds"] = round(time.perf_counter() - started)
    mem.close()
    return row


def copies(record: str) -> int:
    """Recorded answers equal to an example answer a prompt shows or showed."""
    examples = list(OLD_EXAMPLES)
    for path in (ROOT / "prompts").glob("*.j2"):
        examples += guards.example_answers(path.read_text(encoding="utf-8"))
    n = 0
    for line in Path(record).read_text(encoding="utf-8").splitlines():
        try:
            answer = json.loads(json.loads(line)["answer"])
        except (ValueError, KeyError, TypeError):
            continue
        n += answer in examples and not _changes_nothing(answer)
    return n


def _changes_nothing(answer) -> bool:
    return (
        isinstance(answer, dict)
        and "save" not in answer
        and not any(
            v for k, v in answer.items() if k in ("supersedes", "confirms", "clusters", "expires_at", "ids")
        )
    )


def merges_lost_expiry(mem: Memory) -> int:
    """Merged memories with a later (or no) expiry than the earliest of their members."""
    db = store_of(mem).db
    lost = 0
    for _, detail, expires in db.execute(
        "SELECT e.memory_id, e.detail, m.expires_at FROM memory_events e JOIN memories m "
        "ON m.id = e.memory_id WHERE e.event_type = 'merged'"
    ).fetchall():
        members = json.loads(detail)["merged_from"]
        dated = [
            r[0]
            for r in db.execute(
                f"SELECT expires_at FROM memories WHERE id IN ({','.join('?' * len(members))})", members
            ).fetchall()
            if r[0]
        ]
        if dated and (expires is None or expires > min(dated)):
            lost += 1
    return lost


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--policies",
        nargs="*",
        default=["lifecycle", "coding-agent", "fused", "scenes", "scenes-decay", "archive", "scheduled-sql"],
    )
    ap.add_argument("--record-dir", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--parallel", type=int, default=3)
    ap.add_argument("--turns", type=int, default=None, help="only the first N turns")
    args = ap.parse_args(argv)
    found = served()
    if found is None:
        return 2
    base_url, model = found
    data = yaml.safe_load(TURNS.read_text(encoding="utf-8"))
    if args.turns:
        data["turns"] = data["turns"][: args.turns]
    folder = Path(tempfile.mkdtemp(prefix="lethe-real-"))
    if args.record_dir:
        Path(args.record_dir).mkdir(parents=True, exist_ok=True)
    jobs = {}
    with cf.ThreadPoolExecutor(max_workers=args.parallel) as pool:
        for name in args.policies:
            record = (
                str(Path(args.record_dir) / f"{model}-{name}.jsonl")
                if args.record_dir
                else str(folder / f"{name}.jsonl")
            )
            Path(record).unlink(missing_ok=True)
            policy = policy_file(folder, name, base_url, model, args.timeout)
            jobs[name] = pool.submit(play, name, policy, data, str(folder / f"{name}.db"), record)
    rows = [jobs[n].result() for n in args.policies]
    print(f"model: {model} at {base_url}; {len(data['turns'])} turns, {len(data['queries'])} queries")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
