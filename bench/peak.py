"""Peak memory of an expiry + decay pass over N memories, in a process of its own.

For each N, on a fresh copy of the adopted database, a child process
(``python -m bench.peak child DB POLICY NOW``) opens the store with ``engine.Memory``,
then runs ``Memory.run(["expiry", "decay"])``, and reports:

* peak RSS - the child's ``VmHWM`` from /proc/self/status at exit: the high-water mark
  of its own address space (Python, the engine's imports, SQLite's page cache - the
  store sets cache_size = 64 MiB). Not ``ru_maxrss`` from wait4/getrusage: on Linux that
  keeps the parent's RSS at fork time (the benchmark process), which would hide the
  child's own figure under the parent's;
* rss before - the child's RSS after the open, before the pass;
* Python heap peak - ``tracemalloc``'s peak during the pass alone: what the pass holds
  in Python objects (SQLite's own allocations are not Python's).

Goal: flat in N (no table loaded into Python): each figure at N at most FLAT_GOAL times
its value at the smallest N, or the growth shown to be SQLite's page cache, bounded by a
setting. Reference: the same for ``bench/bare_sql.py``'s statements (``python -m
bench.peak bare DB NOW``; SQLite's default 2 MiB page cache).

At the largest N the child runs once more with a page cache of SMALL_CACHE_MIB (``child
DB POLICY NOW MIB``: the store's connection is set to it after the open, before the
pass): if the growth is SQLite's and bounded by that setting, it falls with it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import store_of

from . import datasets as D

FLAT_GOAL = 1.5
CACHE_MIB = 64.0  # engine/store.py: PRAGMA cache_size = -65536 (KiB)
SMALL_CACHE_MIB = 16  # the second run at the largest N


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def child(db: str, policy: str, now: str, cache_mib: str | None = None) -> None:
    import tracemalloc

    from engine import FixedClock, Memory
    from engine.base.clock import parse_time

    mem = Memory(db, policy=policy, clock=FixedClock(parse_time(now)))
    if cache_mib is not None:  # the benchmark's own setting, on the connection the pass uses
        store_of(mem).db.execute(f"PRAGMA cache_size = {-1024 * int(cache_mib)}")
    before = _status_kib("VmRSS")
    tracemalloc.start()
    res = mem.run(["expiry", "decay"])
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mem.close()
    print(
        json.dumps(
            {
                "rss_before_kib": before,
                "py_peak_kib": py_peak // 1024,
                "hwm_kib": _status_kib("VmHWM"),
                "changed": sum(r.changed for r in res),
            }
        )
    )


def child_bare(db: str, now: str) -> None:
    sys.path.insert(0, str(D.ROOT / "bench"))
    import bare_sql

    counts = bare_sql.main(db, now)
    print(json.dumps({"hwm_kib": _status_kib("VmHWM"), "counts": counts}))


def run_child(args: list[str]) -> dict:
    """Run `python -m bench.peak ARGS` and return the JSON it prints."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.peak", *args], cwd=D.ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench.peak {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def bench(sizes, log=print) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    first: dict[str, float] = {}
    for n in sizes:
        copy = D.work_copy(D.adopted(n, log), "peak")
        try:
            info = run_child(["child", str(copy), str(D.POLICY), D.T_ISO])
            maxrss = info["hwm_kib"]
        finally:
            D.drop(copy)
        copy = D.work_copy(D.adopted(n, log), "peak-bare")
        try:
            bare_rss = run_child(["bare", str(copy), D.T_ISO])["hwm_kib"]
        finally:
            D.drop(copy)
        mb = lambda kib: kib / 1024  # noqa: E731
        figures = {"rss": mb(maxrss), "py": mb(info["py_peak_kib"])}
        log(
            f"peak memory of expiry+decay at N={D.label(n)}: peak RSS {figures['rss']:.1f} MiB "
            f"(after open, before the pass {mb(info['rss_before_kib']):.1f} MiB; bare SQL "
            f"{mb(bare_rss):.1f} MiB); Python heap peak during the pass {figures['py']:.2f} MiB"
        )
        rows.append(
            dict(
                measure="pass peak RSS (MiB)",
                n=n,
                value=figures["rss"],
                baseline=mb(bare_rss),
                note="VmHWM (peak RSS of the process's own address space) of a process "
                "that opens the store and runs expiry+decay (Memory.run); "
                "baseline: the same for bare_sql's statements",
            )
        )
        rows.append(
            dict(
                measure="pass RSS growth (MiB)",
                n=n,
                value=mb(maxrss - info["rss_before_kib"]),
                baseline=CACHE_MIB,
                note=f"peak RSS minus the RSS after open, before the pass "
                f"({mb(info['rss_before_kib']):.1f} MiB); baseline: the page-cache "
                f"cap the store sets (PRAGMA cache_size = -65536)",
            )
        )
        rows.append(
            dict(
                measure="pass Python heap peak (MiB)",
                n=n,
                value=figures["py"],
                baseline=None,
                note="tracemalloc peak during Memory.run(expiry, decay)",
            )
        )
        if n == max(sizes):
            rows += _with_small_cache(n, maxrss - info["rss_before_kib"], log)
        if not first:
            first = dict(figures, n=n)
        else:
            for key, label in (("rss", "peak RSS"), ("py", "Python heap peak")):
                rows.append(
                    dict(
                        measure=f"pass {label} flat (at N / at {D.label(first['n'])})",
                        n=n,
                        value=figures[key] / first[key],
                        baseline=None,
                        goal=FLAT_GOAL,
                        absolute_goal=True,
                    )
                )
    return rows, problems


def _with_small_cache(n: int, growth_kib: int, log) -> list[dict]:
    """The pass again with a page cache of SMALL_CACHE_MIB: its growth against the
    setting, and against the growth under the store's own 64 MiB."""
    copy = D.work_copy(D.adopted(n, log), "peak-small")
    try:
        info = run_child(["child", str(copy), str(D.POLICY), D.T_ISO, str(SMALL_CACHE_MIB)])
    finally:
        D.drop(copy)
    small = (info["hwm_kib"] - info["rss_before_kib"]) / 1024
    log(
        f"  the same with a {SMALL_CACHE_MIB} MiB page cache: RSS growth {small:.1f} MiB "
        f"(against {growth_kib / 1024:.1f} MiB with {CACHE_MIB:.0f} MiB)"
    )
    return [
        dict(
            measure=f"pass RSS growth, {SMALL_CACHE_MIB} MiB page cache (MiB)",
            n=n,
            value=small,
            baseline=float(SMALL_CACHE_MIB),
            note=f"the same child with PRAGMA cache_size = -{1024 * SMALL_CACHE_MIB} set "
            "after the open; baseline: that setting",
        ),
        dict(
            measure=f"pass RSS growth: {CACHE_MIB:.0f} MiB cache / {SMALL_CACHE_MIB} MiB cache",
            n=n,
            value=growth_kib / 1024,
            baseline=small,
            informative=True,
            note="how the growth follows the page-cache setting: the cache is 4x; the "
            "growth is SQLite's (the pass's Python heap peak is the row above)",
        ),
    ]


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "child":
        child(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "bare":
        child_bare(*sys.argv[2:])
    else:
        print("usage: python -m bench.peak child DB POLICY NOW [CACHE_MIB] | bare DB NOW", file=sys.stderr)
        sys.exit(2)
