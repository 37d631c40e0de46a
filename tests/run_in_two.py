"""`make test`: the suite as two pytest processes side by side, one per core.

In one process the suite takes about 11 minutes on 2 idle cores and leaves one of them idle;
dealt in two (test files alternately, in name order) it takes about 7. Each half runs whole
files, so each file's fixtures and snapshots are checked as in one run; what a split run
cannot see, a snapshot folder whose test file is gone, is checked here first. The first
half prints as it runs, the second when it ends. Extra arguments go to both halves.

    python tests/run_in_two.py [pytest arguments]
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

TESTS = pathlib.Path(__file__).resolve().parent


def orphan_snapshots() -> list[str]:
    folder = TESTS / "__snapshots__"
    modules = {p.stem for p in TESTS.glob("test_*.py")}
    return (
        sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in modules)
        if folder.is_dir()
        else []
    )


def main(extra: list[str]) -> int:
    orphans = orphan_snapshots()
    if orphans:
        print(
            f"unused snapshots: tests/__snapshots__/ holds {', '.join(orphans)} with no test file",
            file=sys.stderr,
        )
        return 1
    files = sorted(str(p.relative_to(TESTS.parent)) for p in TESTS.glob("test_*.py"))
    halves = [files[0::2], files[1::2]]
    python = sys.executable
    with tempfile.TemporaryFile("w+") as second_out:
        second = subprocess.Popen(
            [python, "-m", "pytest", "-p", "no:cacheprovider", *halves[1], *extra],
            stdout=second_out,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=TESTS.parent,
        )
        try:
            first = subprocess.call([python, "-m", "pytest", *halves[0], *extra], cwd=TESTS.parent)
        finally:
            second_code = second.wait()
        second_out.seek(0)
        print("\n---- the second half ----", flush=True)
        sys.stdout.write(second_out.read())
    # pytest's 5 = no test collected in a half (a -k or -m that selects none there)
    codes = [c for c in (first, second_code) if c not in (0, 5)]
    if not codes and first == 5 and second_code == 5:
        return 5
    print(f"\nmake test: first half exit {first}, second half exit {second_code}", flush=True)
    return codes[0] if codes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
