"""How well the supersession guard (engine/judges/invariants.py) tells a real update from a
supersession between different identified things, on labelled pairs.

    python -m bench.guards                 # the dev half of bench/guard_cases.yaml
    python -m bench.guards --split all     # dev, held, and the contradiction cases of
                                           # bench/judges_cases.yaml

Refusing is the guard's positive class: precision is the share of its refusals that were
`different` pairs; recall the share of `different` pairs it refused. On the contradiction
cases of bench/judges_cases.yaml every true supersession it refuses is a real update lost.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from engine.judges.invariants import supersede_refusal

HERE = Path(__file__).resolve().parent


def score(pairs: list[dict]) -> dict:
    tp = fp = fn = tn = 0
    wrong = []
    for p in pairs:
        refused = supersede_refusal(p["new"], p["old"]) is not None
        different = p["label"] == "different"
        tp, fp = tp + (refused and different), fp + (refused and not different)
        fn, tn = fn + (not refused and different), tn + (not refused and not different)
        if refused != different:
            wrong.append(p)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"pairs": len(pairs), "precision": precision, "recall": recall, "wrong": wrong}


def judges_cases() -> tuple[int, int, list]:
    """True supersessions of bench/judges_cases.yaml the guard blocks, of how many."""
    data = yaml.safe_load((HERE / "judges_cases.yaml").read_text(encoding="utf-8"))
    blocked, total = [], 0
    for c in data["contradiction"]:
        for i in c["supersedes"]:
            total += 1
            if supersede_refusal(c["new"], c["old"][i]) is not None:
                blocked.append((c["old"][i], c["new"]))
    return len(blocked), total, blocked


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "held", "all"], default="dev")
    args = ap.parse_args(argv)
    pairs = yaml.safe_load((HERE / "guard_cases.yaml").read_text(encoding="utf-8"))["pairs"]
    splits = ["dev", "held"] if args.split == "all" else [args.split]
    for split in splits:
        s = score([p for p in pairs if p.get("split", "dev") == split])
        print(f"{split}: {s['pairs']} pairs, precision {s['precision']:.2f}, recall {s['recall']:.2f}")
        for p in s["wrong"]:
            print(f"   wrong ({p['label']}): {p['old']!r} -> {p['new']!r}")
    if args.split == "all":
        n, total, blocked = judges_cases()
        print(f"judges_cases.yaml: {n} of {total} true supersessions blocked")
        for old, new in blocked:
            print(f"   blocked: {old!r} -> {new!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
