"""Commands on scenarios: experiment."""

from __future__ import annotations

import os
import sys

import click

from engine.apps.experiment import progress_line, run_experiment, text_lines
from engine.apps.report import check_path, write_report
from engine.base.errors import ExpectationError
from engine.cli.base import emit, json_option


@click.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--policy",
    "-p",
    "policies",
    multiple=True,
    required=True,
    metavar="POLICY",
    help="Policy file, or a name in ./policies or shipped (repeatable: one column each).",
)
@click.option(
    "--offline", is_flag=True, help="Use the built-in rules judges for every model (no network, no key)."
)
@click.option(
    "--report",
    metavar="FILE.html",
    type=click.Path(dir_okay=False),
    help="Also write a self-contained HTML report with charts to FILE.html.",
)
@click.option(
    "--keep",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Keep each run's database in DIR (for `lethe why` afterwards).",
)
@json_option
def experiment(scenarios, policies, offline, report, keep, json_):
    """Play every SCENARIO under every --policy, each on a fresh store, and print the
    matrix of expectations met, end counts by status, stale recalls, model use and judge
    fallbacks. On a terminal, each run is reported as it ends. Exit 0 when every
    expectation of every run holds, 1 otherwise."""
    for path in scenarios:  # a usage error (exit 2), not a missed expectation (exit 1)
        if not os.path.isfile(path):
            raise click.UsageError(
                f"scenario not found: {path} (the example scenarios are in the scenarios/ "
                "folder of Lethe's repository; the installed package does not include them)"
            )
    if report:
        check_path(report)  # before the run, not after minutes of it
    shown = (
        None
        if json_ or not sys.stderr.isatty()
        else (lambda done, total, run: click.echo(progress_line(done, total, run), err=True))
    )
    exp = run_experiment(list(scenarios), list(policies), offline=offline, keep=keep, progress=shown)
    lines = text_lines(exp)
    if report:
        write_report(exp, report)
        lines.append(f"report: {report}")
    emit(exp.as_dict(), json_, lines)
    if not exp.ok:  # the misses are printed above (or in the JSON): the exit code says it
        sys.exit(ExpectationError.exit_code)
