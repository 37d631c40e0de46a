"""`lethe import`: copy a store into another (a SQLite file, an article database or a
PostgreSQL database into a file or a server), keeping ids, events, inbox and pass runs."""

from __future__ import annotations

import sys

import click

from engine.base.clock import FixedClock
from engine.cli.base import IsoTime, emit, json_option, terminal_progress
from engine.store.transfer import copy_store


@click.command(name="import")
@click.argument("source", metavar="SRC")
@click.option(
    "--db",
    envvar="LETHE_DB",
    required=True,
    help="Destination: a SQLite file or a postgresql:// DSN (env LETHE_DB).",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="Rows per transaction; a rerun after a kill resumes after the last one.",
)
@click.option(
    "--now",
    type=IsoTime(),
    help="Pretend the clock reads this time: it dates the `normalised` events of "
    "an older SRC's odd values (e.g. 2026-03-01T09:00:00).",
)
@json_option
def import_(source, db, batch, now, json_):
    """Copy SRC (an agent_memory.db, a Lethe SQLite file or a postgresql:// DSN) into --db.

    Ids, events, the inbox, model calls, pass runs and scenes are kept. An older SQLite SRC
    is upgraded as opening it would (odd values normalised, with an event), in a copy in
    the temp folder (TMPDIR): SRC itself is only read. Resumable: run the same command
    again after an interruption. Stop the agents writing to SRC first."""
    shown = sys.stderr.isatty() and not json_
    result = copy_store(
        source,
        db,
        clock=FixedClock(now) if now else None,
        batch=batch,
        progress=_progress if shown else None,
        report=terminal_progress(sys.stderr) if shown else None,
    )
    if shown:
        click.echo("", err=True)
    lines = [
        f"{table}: {n:,} copied"
        + (f", {result.resumed[table]:,} already there" if result.resumed.get(table) else "")
        for table, n in result.copied.items()
    ]
    if result.adopted:
        lines.insert(
            0,
            f"read from an adopted copy ({len(result.adopted)} migrations applied to it, not to the source)",
        )
    emit(result.as_dict(), json_, [f"{result.source} -> {result.destination}", *lines])


def _progress(table: str, done: int, total: int) -> None:
    click.echo(f"\r{table}: {done:,} / {total:,}", nl=False, err=True)
