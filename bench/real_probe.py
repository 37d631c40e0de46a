"""The gate, contradiction, expiry and select prompts alone against a served model, on labelled
cases: a quick measure of a prompt change (a few dozen calls, against the ~200 of a
`make check-real-model` run).

    OPENAI_BASE_URL=http://127.0.0.1:8093/v1 python -m bench.real_probe --split dev
    python -m bench.real_probe --prompts /tmp/old-prompts --split held   # another prompt folder

Each case of bench/real_probe.yaml is rendered with the shipped template (or the one in
`--prompts`), sent with the step's JSON schema and the engine's system message, and its
answer compared with the label: the gate's number of memories (0 when it saves nothing),
contradiction's superseded and confirmed numbers, expiry's end date (null when none), and
the numbers select picks among recall.fallback's archived memories (none for a question
about what is now). The
answers are not checked by the engine here: this measures what the model says, not what
Lethe keeps.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import time
from pathlib import Path

import yaml
from openai import OpenAI

from bench.real_model import served
from engine.judges.providers import SYSTEM
from engine.prompts import render
from engine.steps.kinds import SCHEMAS

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).with_name("real_probe.yaml")
TODAY = "2026-03-02"


def ask(client: OpenAI, model: str, step: str, prompt: str) -> dict:
    schema = {"name": step, "strict": True, "schema": SCHEMAS[step]}
    r = client.chat.completions.create(
        model=model,
        temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        response_format={"type": "json_schema", "json_schema": schema},
    )
    return json.loads(r.choices[0].message.content or "{}")


def gate(client, model, dirs, case: dict) -> tuple[bool, str]:
    variables = {"user": case["user"], "assistant": "Noted.", "today": TODAY}
    answer = ask(client, model, "gate", render("gate.j2", dirs, variables))
    items = (answer.get("memories") or []) if answer.get("save") else []
    said = [m.get("content") for m in items]
    return len(items) == case["memories"], f"gate: {case['memories']} wanted, {len(items)} given {said}"


def contradiction(client, model, dirs, case: dict) -> tuple[bool, str]:
    shown = [
        {"n": n, "content": c, "created_at": "2026-03-01 10:00:00"} for n, c in enumerate(case["shown"], 1)
    ]
    variables = {"memory": {"content": case["new"]}, "candidates": shown, "today": TODAY, "max_supersedes": 3}
    answer = ask(client, model, "contradiction", render("contradiction.j2", dirs, variables))
    got = (
        sorted({s.get("n") for s in answer.get("supersedes", [])}),
        sorted(set(answer.get("confirms", []))),
    )
    want = (sorted(case.get("supersedes", [])), sorted(case.get("confirms", [])))
    return got == want, f"contradiction: {case['new'][:60]!r} wanted supersedes/confirms {want}, given {got}"


def expiry(client, model, dirs, case: dict) -> tuple[bool, str]:
    variables = {"user": case["user"], "memory": {"content": case["user"]}, "today": TODAY}
    answer = ask(client, model, "expiry", render("expiry.j2", dirs, variables))
    got, want = answer.get("expires_at"), case.get("expires_at")
    return got == want, f"expiry: {case['user'][:60]!r} wanted {want}, given {got}"


def select(client, model, dirs, case: dict) -> tuple[bool, str]:
    """recall.fallback's second select call: archived or expired memories (`past`), to be
    picked for a question about what was and left for one about what is now."""
    shown = [
        {"n": n, "id": n, "summary": c, "content": c, "confidence": 1.0, "decay_score": 0.0}
        | {"created_at": "2025-09-01T10:00:00", "status": "archived"}
        for n, c in enumerate(case["shown"], 1)
    ]
    variables = {"query": case["query"], "candidates": shown, "top_n": 6, "past": True, "today": TODAY}
    answer = ask(client, model, "select", render("select.j2", dirs, variables))
    got, want = sorted(set(answer.get("ids", []))), sorted(case.get("picks", []))
    return got == want, f"select (past): {case['query'][:60]!r} wanted {want}, given {got}"


STEPS = ("gate", "contradiction", "expiry", "select")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "held", "all"], default="dev")
    ap.add_argument("--prompts", default=str(ROOT / "prompts"), help="the folder of the templates to probe")
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args(argv)
    found = served()
    if found is None:
        return 2
    base_url, model = found
    client = OpenAI(base_url=base_url, api_key="x", timeout=900)
    data = yaml.safe_load(CASES.read_text(encoding="utf-8"))
    splits = ["dev", "held"] if args.split == "all" else [args.split]
    jobs = [(step, case) for s in splits for step in STEPS for case in data[s].get(step, [])]
    probe = {"gate": gate, "contradiction": contradiction, "expiry": expiry, "select": select}
    started = time.perf_counter()
    with cf.ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda j: (j[0], *probe[j[0]](client, model, (args.prompts,), j[1])), jobs))
    for _, ok, line in results:
        print(("ok    " if ok else "wrong ") + line)
    for step in STEPS:
        mine = [ok for s, ok, _ in results if s == step]
        print(f"{model} {'+'.join(splits)} {step}: {sum(mine)}/{len(mine)} as labelled")
    print(f"{len(jobs)} calls in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
