"""`lethe import`: copy a store into another (a SQLite file, an article database or a
PostgreSQL database into a file or a server), keeping ids, events, inbox and pass runs."""
from __future__ import annotations

import sys

import click

from ..store.transfer import copy_store
from .base import emit, json_option


@click.command(name="import")
@click.argument("source", metavar="SRC")
@click.option("--db", envvar="LETHE_DB", required=True,
              help="Destination: a SQLite file or a postgresql:// DSN (env LETHE_DB).")
@click.option("--batch", type=click.IntRange(min=1), default=5000, show_default=True,
              help="Rows per transaction; a rerun after a kill resumes after the last one.")
@json_option
def import_(source, db, batch, json_):
    """Copy SRC (an agent_memory.db, a Lethe SQLite file or a postgresql:// DSN) into --db.

    Ids, events, the inbox, model calls, pass runs and scenes are kept. Resumable: run the
    same command again after an interruption. Stop the agents writing to SRC first."""
    progress = _progress if sys.stderr.isatty() and not json_ else None
    result = copy_store(source, db, batch=batch, progress=progress)
    if progress:
        click.echo("", err=True)
    lines = [f"{table}: {n:,} copied" + (f", {result.resumed[table]:,} already there"
                                          if result.resumed.get(table) else "")
             for table, n in result.copied.items()]
    emit(result.as_dict(), json_, [f"{result.source} -> {result.destination}", *lines])


def _progress(table: str, done: int, total: int) -> None:
    click.echo(f"\r{table}: {done:,} / {total:,}", nl=False, err=True)
