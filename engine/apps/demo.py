"""`make demo`: the shipped scenarios under the store-and-retrieve archive and under seed A's
lifecycle, offline, through the same `run_experiment` that `lethe experiment` runs.

It prints the matrix, then where the archive recalls stale facts and the lifecycle does
not, then what the lifecycle superseded, archived, expired and compressed, and writes the
HTML report with charts to demo-out/experiment.html.
"""

from __future__ import annotations

import glob
import os

from engine.apps import report
from engine.apps.experiment import Experiment, Run, run_experiment, text_lines
from engine.base.clock import parse_time

OUT = "demo-out"
# the checkout's scenarios: `make demo` runs from the repository root
SCENARIOS = os.path.join("scenarios", "*.yaml")
# bare names: ./policies/NAME.yaml, else the ones that ship with the package
POLICIES = ("archive", "lifecycle")


def main() -> None:
    scenarios = sorted(glob.glob(SCENARIOS))
    if not scenarios:
        raise SystemExit(f"no scenarios in {SCENARIOS}: run the demo from the repository root")
    policies = list(POLICIES)
    print(
        f"Playing {len(scenarios)} scenarios from scenarios/ under policies/archive.yaml "
        "(store and retrieve, forget nothing) and policies/lifecycle.yaml (seed A), offline.\n"
    )
    exp = run_experiment(scenarios, policies, offline=True)
    for line in text_lines(exp, missed=False):
        print(line)
    archive, lifecycle = exp.policies
    summary = exp.summary()
    print(
        "\n"
        + "; ".join(f"{name} meets {s['met']}/{s['total']} expectations" for name, s in summary.items())
        + ".\n(Every miss, with file:line: lethe experiment scenarios/*.yaml --policy "
        "policies/archive.yaml --offline)"
    )
    print("\nWhere the archive recalls stale facts and the lifecycle does not:")
    for line in stale_comparison(exp, archive, lifecycle) or ["  (nowhere)"]:
        print(line)
    print("\nWhat the lifecycle did:")
    for line in lifecycle_changes([r for r in exp.runs if r.policy is lifecycle]):
        print(line)
    report = write_report(exp)
    if report:
        print(f"\nCharts of memories by status over time: {report}")
    print(
        "Try: .venv/bin/lethe experiment scenarios/*.yaml --policy policies/lifecycle.yaml "
        "--offline --report demo-out/experiment.html"
    )


def stale_comparison(exp: Experiment, archive, lifecycle) -> list[str]:
    """Each recall where the archive returned a stale memory and the lifecycle did not."""
    lines = []
    for s in exp.scenarios:
        a, b = exp.run(s, archive), exp.run(s, lifecycle)
        for ra, rb in zip(a.playback.recalls, b.playback.recalls):
            if not ra["stale"] or rb["stale"]:
                continue
            lines.append(f'  {s.name}, day {_day(s, ra["at"])}: "{ra["query"]}"')
            lines.append(f"    archive recalled:   {' | '.join(ra['stale'])}   <- stale")
            lines.append(f"    lifecycle recalled: {' | '.join(rb['recalled']) or '(nothing)'}")
    return lines


def lifecycle_changes(runs: list[Run]) -> list[str]:
    lines = []
    verbs = {"superseded": "by", "compressed": "merged into", "archived": "", "expired": ""}
    for status, verb in verbs.items():
        found = [(r, c) for r in runs for c in r.changes if c["status"] == status]
        lines.append(f"  {status} ({len(found)}):")
        for r, c in found:
            by = f'  -> {verb} "{c["by"]}"' if verb and c["by"] else ""
            lines.append(f'    day {_day(r.scenario, c["at"])}: "{c["content"]}"{by}')
    return lines


def _day(scenario, at: str | None) -> str:
    if not at:
        return "?"
    days = (parse_time(at) - scenario.start).total_seconds() / 86400
    return f"{days:.0f}"


def write_report(exp: Experiment) -> str | None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("\n(no matplotlib: pip install -e '.[report]' for the HTML report with charts)")
        return None
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "experiment.html")
    report.write_report(exp, path)
    return path


if __name__ == "__main__":
    main()
