"""LongMemEval through Lethe, against the paper's retrieval baselines, in one table.

    python -m bench.longmemeval --data ../shared/data/longmemeval/longmemeval_oracle.json \\
        --types knowledge-update,temporal-reasoning --offline --out bench/data/longmemeval

For each question: a fresh SQLite store per policy, the history's pairs (a user turn and
the assistant's answer) remembered in date order at their own simulated times, passes run
as they fall due (at every simulated day and turn), then `recall(question)` at the
question's date. Raw-turn baselines rank every user turn for the question and keep the top
k (6: the shipped recall's top_n). The gold answer is read only when grading.

Metrics per type and overall: evidence recall (a recalled item derives, by provenance,
from an evidence turn of the newest evidence session), stale rate (knowledge-update: older
evidence recalled without the newer, or ranked above it), answer in context (crude string
and number match), context size, model calls and tokens per question, seconds per question,
and QA accuracy when a reader and judge model are configured (--qa-base-url). Misses are
sorted by where the newest evidence went.
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
from pathlib import Path

from .lme import data, metrics, play, report, retrieval
from .lme import qa as QA

DEFAULT_POLICIES = ("lifecycle", "lifecycle-local")
DEFAULT_BASELINES = ("archive", "bm25", "embed")
NEEDS_LOCAL = {"lifecycle-local", "embed"}


def _args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.longmemeval", description=__doc__.split("\n")[0])
    ap.add_argument("--data", action="append", required=True, help="official JSON (repeatable)")
    ap.add_argument(
        "--types",
        default="knowledge-update,temporal-reasoning",
        help="question types, comma-separated ('all' for every type)",
    )
    ap.add_argument("--limit", type=int, default=None, help="at most N questions of each type")
    ap.add_argument("--ids", default=None, help="only these question ids, comma-separated")
    ap.add_argument(
        "--split",
        choices=("dev", "held"),
        default=None,
        help="dev: questions whose sha1(question_id) ends in an even hex digit; held: the others",
    )
    ap.add_argument(
        "--policy",
        action="append",
        default=None,
        help="a policy name or file, or none (repeatable; default lifecycle, lifecycle-local)",
    )
    ap.add_argument(
        "--baseline",
        action="append",
        default=None,
        help="archive, bm25, embed, or none (repeatable; default all three)",
    )
    ap.add_argument("--offline", action="store_true", help="rules judges, no network")
    ap.add_argument(
        "--served",
        action="store_true",
        help="the named shipped policies with every model the one served at OPENAI_BASE_URL "
        "(../shared/tools/real-model/serve.sh; bench/real_model.py's policy files)",
    )
    ap.add_argument("--k", type=int, default=play.K, help="raw-turn baselines' top k (default 6)")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--out", default=None, help="folder for results.json, results.md, longmemeval.html")
    ap.add_argument("--qa-base-url", default=None, help="OpenAI-compatible endpoint for QA")
    ap.add_argument("--reader-model", default=None)
    ap.add_argument("--judge-model", default=None, help="default: the reader model")
    ap.set_defaults(served_as=None)  # what --served put in place of the policies' models
    return ap.parse_args(argv)


def systems(args, log) -> list[str]:
    """Policies then baselines, leaving out (and saying so) those that need the `local`
    extra when it is not installed."""
    wanted = [p for p in (args.policy or DEFAULT_POLICIES) if p != "none"]
    wanted += [b for b in (args.baseline or DEFAULT_BASELINES) if b != "none"]
    if retrieval.local_available():
        return list(dict.fromkeys(wanted))
    skipped = [s for s in wanted if s in NEEDS_LOCAL]
    if skipped:
        log(
            f"longmemeval: the local extra is not installed: {', '.join(skipped)} not run "
            "(pip install torch==2.13.0 'lethe-lifecycle[local]')"
        )
    return list(dict.fromkeys(s for s in wanted if s not in NEEDS_LOCAL))


def run(cases, names: list[str], offline: bool, k: int, workers: int, log) -> list:
    """Every case under every system, in `workers` processes; outcomes in task order."""
    tasks = [(case, name) for name in names for case in cases]
    if workers <= 1:
        out = []
        for i, (case, name) in enumerate(tasks, 1):
            out.append(play.play(case, name, offline, k))
            _progress(i, len(tasks), log)
        return out
    # one torch thread pool per core, not per worker per core (the local model's encode)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    with cf.ProcessPoolExecutor(workers) as pool:
        futures = [pool.submit(play.play, case, name, offline, k) for case, name in tasks]
        for i, _ in enumerate(cf.as_completed(futures), 1):
            _progress(i, len(tasks), log)
        return [f.result() for f in futures]


def _progress(i: int, n: int, log) -> None:
    if i == n or i % 10 == 0:
        log(f"longmemeval: {i}/{n} played")


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    types = None if args.types == "all" else [t.strip() for t in args.types.split(",")]
    ids = args.ids.split(",") if args.ids else None
    t0, load0 = time.perf_counter(), _load()
    if args.served and not _serve(args):
        return 2
    loaded = data.load(args.data, types, args.limit, ids, args.split)
    cases = [c for c, _ in loaded]
    golds = {g.qid: g for _, g in loaded}
    names = systems(args, log)
    log(
        f"longmemeval: {len(cases)} questions x {len(names)} systems ({', '.join(names)}), "
        f"{args.workers} worker(s)"
    )
    outcomes = run(cases, names, args.offline, args.k, args.workers, log)
    for o in outcomes:  # a policy given as a file is shown by its name
        o.system = play.label(o.system)
    names = list(dict.fromkeys(map(play.label, names)))
    grades = [metrics.grade(o, golds[o.qid]) for o in outcomes]  # the gold, after recall
    qa = QA.settings(args.qa_base_url, args.reader_model, args.judge_model)
    if qa is not None:
        _qa(QA.QA(qa), grades, outcomes, {c.qid: c for c in cases}, golds, log)
    qtypes = list(dict.fromkeys(c.qtype for c in cases))
    rows = [metrics.summarise(grades, s, t) for t in qtypes + ["all"] for s in names]
    elapsed = time.perf_counter() - t0
    cpu = sum(o.cpu for o in outcomes)
    header = (
        f"{len(cases)} {args.split + ' ' if args.split else ''}questions from "
        f"{', '.join(os.path.basename(p) for p in args.data)}; "
        f"{'offline (rules judges)' if args.offline else args.served_as or 'judges as policies declare'}; "
        f"raw-turn baselines top {args.k}; QA "
        f"{'judged by ' + qa.judge + ', reader ' + qa.reader if qa else 'not run'}; "
        f"{elapsed:.0f} s with {args.workers} worker(s) ({cpu:.0f} CPU s playing); "
        f"load average {load0} at start, "
        f"{_load()} at end ({os.cpu_count()} CPUs)"
    )
    print(f"\nLethe on LongMemEval: {header}\n")
    print(report.text(rows))
    errors = [g for g in grades if g.error]
    for g in errors[:10]:
        print(f"ERROR {g.system} {g.qid}: {g.error}")
    if args.out:
        _write(args.out, rows, header, grades, outcomes, cases, golds)
    return 1 if errors else 0


def _serve(args) -> bool:
    """Point args.policy at copies of the named shipped policies whose models are the
    served one (False, having said why, when there is none or --offline was given too)."""
    from .real_model import ROOT, policy_file, served

    if args.offline:
        print("--served and --offline: the one asks the served model, the other no model", file=sys.stderr)
        return False
    found = served()
    if found is None:
        return False
    names = [p for p in (args.policy or DEFAULT_POLICIES) if p != "none"]
    unknown = [p for p in names if not (ROOT / "policies" / f"{p}.yaml").is_file()]
    if unknown:
        print(f"--served takes shipped policies by name, not {', '.join(unknown)}", file=sys.stderr)
        return False
    args.served_as = f"every model {found[1]} at {found[0]}"
    folder = Path(tempfile.mkdtemp(prefix="lethe-lme-served-"))
    args.policy = [
        p if p == "none" else policy_file(folder, p, *found, timeout=900)
        for p in (args.policy or DEFAULT_POLICIES)
    ]
    return True


def _qa(judge, grades, outcomes, cases, golds, log) -> None:
    for g, o in zip(grades, outcomes):
        try:
            g.qa, _ = judge.grade(cases[o.qid], golds[o.qid], o.context)
        except Exception as exc:  # an unreachable judge leaves the question unjudged
            log(f"longmemeval: QA of {o.qid} under {o.system} failed: {exc}")


def _write(folder, rows, header, grades, outcomes, cases, golds) -> None:
    import dataclasses

    os.makedirs(folder, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(os.path.join(folder, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(report.markdown(rows, f"{stamp}: {header}"))
    with open(os.path.join(folder, "results.json"), "w", encoding="utf-8") as fh:
        json.dump(
            {
                "header": header,
                "rows": [dataclasses.asdict(r) for r in rows],
                "grades": [dataclasses.asdict(g) for g in grades],
                "recalled": [
                    {
                        "system": o.system,
                        "qid": o.qid,
                        "items": [{"text": i.text, "pairs": sorted(i.keys)} for i in o.items],
                        "fates": {f"{k[0]}.{k[1]}": v for k, v in (o.fates or {}).items()},
                    }
                    for o in outcomes
                ],
            },
            fh,
            indent=1,
        )
    by_key = {(o.system, o.qid): o for o in outcomes}
    qs = {q: (cases_q.question, golds[q].answer) for q, cases_q in ((c.qid, c) for c in cases)}
    with open(os.path.join(folder, "longmemeval.html"), "w", encoding="utf-8") as fh:
        fh.write(report.page(rows, f"{stamp}: {header}", grades, qs, by_key))


if __name__ == "__main__":
    sys.exit(main())
