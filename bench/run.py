"""Run the benchmarks and print one plain table.

    python -m bench.run                                # every part (make bench)
    python -m bench.run passes --sizes 10000,100000    # one part, some sizes
    python -m bench.run recall --sizes 1M
    python -m bench.run write | tokens | contention | peak   # rows 3-6 (see bench/RESULTS.md)
    python -m bench.run inspector --sizes 1M           # `lethe ui`'s pages (the ui extra)
    python -m bench.run asof --sizes 1M                # as-of recall, 10 events a memory

Data is cached under bench/data/ (gitignored). A goal in parentheses is shown for reference
only (not counted as met or missed). Exit status 1 when results disagree (a correctness
failure); a missed speed goal is reported in the table, not as a failure, unless --strict.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import datasets as D

HEADERS = ("measure", "N", "value", "baseline", "ratio", "goal", "met?")


def _num(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    if x >= 100:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def cells(row: dict) -> tuple[tuple[str, ...], bool | None]:
    value, base = row["value"], row.get("baseline")
    ratio = goal = "-"
    met = None
    r = None
    if isinstance(value, (int, float)) and isinstance(base, (int, float)) and value and base:
        if row.get("speedup"):
            r = base / value
            ratio = f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower"
        else:
            r = value / base
            ratio = f"{r:.2f}"
    if "check" in row:
        goal, met = "same", bool(row["check"])
    elif row.get("goal") is not None:
        g = row["goal"]
        if row.get("absolute_goal"):
            goal, met = f"<= {g:g}", value <= g
        else:
            goal = f"<= {g:g}x"
            met = (r <= g) if r is not None else None
    n = row["n"]
    mets = "-" if met is None else ("yes" if met else "NO")
    if row.get("informative") and met is not None:  # shown for reference, not a goal
        goal, mets, met = f"({goal})", f"({mets.lower()})", None
    return (
        row["measure"],
        n if isinstance(n, str) else D.label(n),
        _num(value),
        _num(base),
        ratio,
        goal,
        mets,
    ), met


def table(rows: list[dict]) -> tuple[str, int]:
    body, missed = [], 0
    for row in rows:
        c, met = cells(row)
        body.append(c)
        missed += met is False
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(HEADERS)]
    right = {2, 3, 4}

    def fmt(r):
        return "  ".join(
            (s.rjust(w) if i in right else s.ljust(w)) for i, (s, w) in enumerate(zip(r, widths))
        )

    lines = [fmt(HEADERS), "  ".join("-" * w for w in widths)] + [fmt(r) for r in body]
    notes, seen = [], set()
    for row in rows:
        key = (row["measure"], row.get("note"))
        if row.get("note") and key not in seen:
            seen.add(key)
            n = row["n"] if isinstance(row["n"], str) else D.label(row["n"])
            notes.append(f"  {row['measure']} N={n}: {row['note']}")
    if notes:
        lines += ["", "notes:"] + notes
    return "\n".join(lines), missed


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _bytecode(log) -> None:
    """Compile the engine's modules to bytecode before anything is timed, as installing a
    wheel does. From a checkout (an editable install) with PYTHONDONTWRITEBYTECODE set, or
    a source tree Python may not write to, every `lethe` process the benchmark starts would
    otherwise compile the engine again: 10k's whole-process pass took 0.39 s instead of 0.29 s
    that way (farm-bench, 11 paired runs)."""
    import compileall

    import engine

    folder = os.path.dirname(engine.__file__)
    if not compileall.compile_dir(folder, quiet=1, workers=1):
        log(f"bench: could not compile {folder} to bytecode: start-up figures include compiling it")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    ap.add_argument(
        "part",
        nargs="?",
        choices=(
            "all",
            "passes",
            "recall",
            "write",
            "tokens",
            "contention",
            "late",
            "peak",
            "inspector",
            "asof",
        ),
        default="all",
    )
    ap.add_argument(
        "--sizes", type=D.parse_sizes, default=list(D.DEFAULT_SIZES), help="comma-separated, e.g. 10k,100k,1M"
    )
    ap.add_argument(
        "--repeat", type=int, default=None, help="runs per pass measurement (default 5 up to 100k, 2 above)"
    )
    ap.add_argument("--calls", type=int, default=200, help="recall calls per N")
    ap.add_argument(
        "--token-sizes",
        type=D.parse_sizes,
        default=[100, 10_000, 1_000_000],
        help="stored memories for the prompt-token row (default 100,10k,1M)",
    )
    ap.add_argument(
        "--contention-policy",
        default=None,
        help="policy for the contention part (default: the shipped lifecycle)",
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed too")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    load0 = _load()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    _bytecode(log)
    rows, problems = [], []
    if args.part in ("all", "passes"):
        from . import passes

        r, p = passes.bench(args.sizes, args.repeat, log)
        rows += r
        problems += p
    if args.part in ("all", "recall"):
        from . import recall

        r, p = recall.bench(args.sizes, args.calls, log)
        rows += r
        problems += p
    if args.part in ("all", "write"):
        from . import write

        r, p = write.latency(log=log)
        rows += r
        problems += p
    if args.part in ("all", "tokens"):
        from . import write

        r, p = write.tokens(args.token_sizes, log=log)
        rows += r
        problems += p
    if args.part in ("all", "contention"):
        from . import concurrent

        r, p = concurrent.bench(max(args.sizes), log, args.contention_policy)
        rows += r
        problems += p
    if args.part in ("all", "late"):
        from . import concurrent

        r, p = concurrent.late(max(args.sizes), log)
        rows += r
        problems += p
    if args.part in ("all", "peak"):
        from . import peak

        r, p = peak.bench(args.sizes, log)
        rows += r
        problems += p
    if args.part in ("all", "inspector"):
        from . import inspector

        r, p = inspector.bench(args.sizes, log)
        rows += r
        problems += p
    if args.part in ("all", "asof"):
        from . import asof

        r, p = asof.rows_for_run(args.sizes, log)
        rows += r
        problems += p
    elapsed = time.perf_counter() - t0

    text, missed = table(rows)
    sys.stderr.flush()
    print(
        f"\nLethe benchmark ({args.part}; sizes {', '.join(D.label(n) for n in args.sizes)}; "
        f"T = {D.T_ISO}; policy {D.POLICY.relative_to(D.ROOT)})\n"
    )
    print(text)
    print(
        f"\n{missed} goal(s) missed; {len(problems)} disagreement(s); took {elapsed:.1f} s; "
        f"load average {load0} at start, {_load()} at end ({os.cpu_count()} CPUs)"
    )
    for p in problems:
        print(f"DISAGREE: {p}")
    if problems or (args.strict and missed):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
