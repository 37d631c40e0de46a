"""`make test`: the suite as two pytest processes side by side, one per core.

In one process the suite takes about 11 minutes on 2 idle cores and leaves one of them idle.
Each half runs whole files, so each file's fixtures and snapshots are checked as in one run;
what a split run cannot see, a snapshot folder whose test file is gone, is checked here
first. Files are dealt by the seconds they took when last recorded (tests/durations.json;
the heaviest first, each to the lighter half; a file not recorded counts as the average), so
the halves end together. The first half prints as it runs, the second when it ends. Extra
arguments go to both halves. `--beside "COMMAND"` (make test: the type checker) runs a
command of its own beside them, its minute of CPU spread over theirs rather than before
them; its output is printed at the end, and its failure fails the run. Every run writes
its files' seconds to tests/.durations-last.json (not committed); `--record-durations`
also rewrites tests/durations.json from this run.

    python tests/run_in_two.py [--record-durations] [--beside "COMMAND"] [pytest arguments]
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

TESTS = pathlib.Path(__file__).resolve().parent
DURATIONS = TESTS / "durations.json"
LAST = TESTS / ".durations-last.json"


def orphan_snapshots() -> list[str]:
    folder = TESTS / "__snapshots__"
    modules = {p.stem for p in TESTS.glob("test_*.py")}
    return (
        sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in modules)
        if folder.is_dir()
        else []
    )


def deal(files: list[str], seconds: dict[str, float]) -> list[list[str]]:
    """Two halves of about equal recorded seconds, each in name order."""
    known = [seconds[f] for f in files if f in seconds]
    average = sum(known) / len(known) if known else 1.0
    halves: list[list[str]] = [[], []]
    totals = [0.0, 0.0]
    for f in sorted(files, key=lambda f: (-seconds.get(f, average), f)):
        lighter = 0 if totals[0] <= totals[1] else 1
        halves[lighter].append(f)
        totals[lighter] += seconds.get(f, average)
    return [sorted(h) for h in halves]


def recorded() -> dict[str, float]:
    try:
        data = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def main(extra: list[str]) -> int:
    record = "--record-durations" in extra
    extra = [a for a in extra if a != "--record-durations"]
    beside: list[str] = []
    if "--beside" in extra:
        at = extra.index("--beside")
        beside, extra = shlex.split(extra[at + 1]), extra[:at] + extra[at + 2 :]
    orphans = orphan_snapshots()
    if orphans:
        print(
            f"unused snapshots: tests/__snapshots__/ holds {', '.join(orphans)} with no test file",
            file=sys.stderr,
        )
        return 1
    files = sorted(str(p.relative_to(TESTS.parent)) for p in TESTS.glob("test_*.py"))
    halves = deal(files, recorded())
    python = sys.executable
    plugin = ["-p", "tests.helpers.file_durations"]
    with tempfile.TemporaryDirectory() as tmp:
        envs = [dict(os.environ, LETHE_FILE_DURATIONS=f"{tmp}/{i}.json") for i in (0, 1)]
        with (
            open(f"{tmp}/second.out", "w+", encoding="utf-8") as second_out,
            open(f"{tmp}/beside.out", "w+", encoding="utf-8") as beside_out,
        ):
            other = (
                subprocess.Popen(beside, stdout=beside_out, stderr=subprocess.STDOUT, cwd=TESTS.parent)
                if beside
                else None
            )
            second = subprocess.Popen(
                [python, "-m", "pytest", "-p", "no:cacheprovider", *plugin, *halves[1], *extra],
                stdout=second_out,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=TESTS.parent,
                env=envs[1],
            )
            try:
                first = subprocess.call(
                    [python, "-m", "pytest", *plugin, *halves[0], *extra],
                    cwd=TESTS.parent,
                    env=envs[0],
                )
            finally:
                second_code = second.wait()
                beside_code = other.wait() if other else 0
            second_out.seek(0)
            print("\n---- the second half ----", flush=True)
            sys.stdout.write(second_out.read())
            if other:
                beside_out.seek(0)
                print(f"\n---- beside them: {' '.join(beside)} ----", flush=True)
                sys.stdout.write(beside_out.read())
        seconds: dict[str, float] = {}
        for i in (0, 1):
            try:
                part = json.loads(pathlib.Path(f"{tmp}/{i}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            seconds.update(part)
        text = json.dumps({f: round(s, 1) for f, s in sorted(seconds.items())}, indent=1) + "\n"
        for path in (LAST, DURATIONS) if record else (LAST,):
            path.write_text(text, encoding="utf-8")
    # pytest's 5 = no test collected in a half (a -k or -m that selects none there)
    codes = [c for c in (first, second_code) if c not in (0, 5)]
    if not codes and first == 5 and second_code == 5 and beside_code == 0:
        return 5
    print(
        f"\nmake test: first half exit {first}, second half exit {second_code}"
        + (f", {beside[0]} exit {beside_code}" if beside else ""),
        flush=True,
    )
    return codes[0] if codes else (beside_code and 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
