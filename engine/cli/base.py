"""What every command shares: the group class that turns engine errors into exit codes,
the shared options, opening a `Memory` from them, and printing text or JSON.

Nothing here imports a command module: commands import this, never the other way round.
"""
from __future__ import annotations

import json
import os
import traceback

import click

from .. import policy as policy_mod
from ..clock import FixedClock
from ..errors import LetheError
from ..memory import DEFAULT_POLICY, Memory

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LetheGroup(click.Group):
    """The one place an engine error becomes a message and an exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except LetheError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:  # a bug, not a user mistake: say so, keep the exit code apart
            if os.environ.get("LETHE_DEBUG"):
                traceback.print_exc()
            click.echo(f"internal error: {type(exc).__name__}: {exc} "
                       "(set LETHE_DEBUG=1 for the traceback)", err=True)
            ctx.exit(2)


# ---- shared options -----------------------------------------------------------------
def json_option(f):
    """--json: print JSON instead of text (parameter `json_`)."""
    return click.option("--json", "json_", is_flag=True, help="Print JSON instead of text.")(f)


def store_options(f):
    """--db, --policy, --namespace, --now, --offline: what every data command needs."""
    f = click.option("--offline", is_flag=True,
                     help="Use the built-in rules judges for every model (no network).")(f)
    f = click.option("--now", metavar="ISO",
                     help="Pretend the clock reads this time (e.g. 2026-03-01T09:00:00).")(f)
    f = click.option("--namespace", "-n", default="default", envvar="LETHE_NAMESPACE",
                     show_default=True, help="The agent whose memories to use (env LETHE_NAMESPACE).")(f)
    f = click.option("--policy", "-p", default=DEFAULT_POLICY, envvar="LETHE_POLICY",
                     show_default=True,
                     help="Policy file, or a name: ./policies/NAME.yaml, else the shipped one "
                          "(env LETHE_POLICY).")(f)
    f = click.option("--db", envvar="LETHE_DB",
                     help="SQLite database file or postgresql:// DSN (env LETHE_DB; default: the "
                          "policy's `db:`).")(f)
    return f


def model_options(f):
    """--record / --replay on every command that may call a model."""
    f = click.option("--replay", metavar="FILE", type=click.Path(dir_okay=False),
                     help="Answer every judgment from answers recorded in FILE.")(f)
    f = click.option("--record", metavar="FILE", type=click.Path(dir_okay=False),
                     help="Append every model answer to FILE (JSON lines) for --replay.")(f)
    return f


# ---- opening and printing -----------------------------------------------------------
def open_memory(db, policy, namespace, now, offline, record=None, replay=None) -> Memory:
    """The `Memory` the store options describe: --db, else the policy's `db:`."""
    pol = policy_mod.load(policy)
    path = db or pol.db
    if not path:
        raise click.UsageError("no database: pass --db FILE (or a postgresql:// DSN) or set LETHE_DB")
    clock = FixedClock(now) if now else None
    return Memory(path, policy=pol, namespace=namespace, offline=offline, clock=clock,
                  record=record, replay=replay)


def emit(data, json_: bool, text) -> None:
    """Print `data` as JSON with --json, else `text` (a line or a list of lines)."""
    if json_:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        for line in ([text] if isinstance(text, str) else text):
            click.echo(line)
