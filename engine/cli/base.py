"""What every command shares: the group class that turns engine errors into exit codes,
the shared options, opening a `Memory` from them, and printing text or JSON.

Nothing here imports a command module: commands import this, never the other way round.
"""

from __future__ import annotations

import datetime as dt
import difflib
import glob
import json
import math
import os
import re
import sys
import traceback
import warnings
from typing import TYPE_CHECKING

import click

from engine.base.clock import FixedClock, far_ahead, parse_duration, parse_time, until_end_of_day
from engine.base.errors import LetheError, StoreError
from engine.base.lazy import lazy
from engine.base.resources import DEFAULT_POLICY

# imported when a command opens a store: `lethe --help` and `--version` do without them
memory = lazy("engine.memory")
policy_mod = lazy("engine.policy")
store = lazy("engine.store")

if TYPE_CHECKING:  # the type, without importing it at start-up
    from engine.memory import Memory

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LetheGroup(click.Group):
    """The one place an engine error becomes a message and an exit code."""

    def invoke(self, ctx):
        try:
            with warnings.catch_warnings():
                warnings.showwarning = show_warning
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:  # `lethe ls | head -1`: the reader has what it wanted
            quiet_stdout()
            ctx.exit(0)
        except LetheError as exc:  # exit 0: not a failure (another runner holds the lease)
            echo(f"{'error: ' if exc.exit_code else ''}{exc}", err=True)
            ctx.exit(exc.exit_code)
        except store.database_errors() as exc:  # a corrupt page, a full disk, a lock held too long
            echo(f"error: the database failed: {exc}", err=True)
            ctx.exit(1)
        except Exception as exc:  # a bug, not a user mistake: say so, keep the exit code apart
            if os.environ.get("LETHE_DEBUG"):
                traceback.print_exc()
            echo(
                f"internal error: {type(exc).__name__}: {exc} (set LETHE_DEBUG=1 for the traceback)", err=True
            )
            ctx.exit(2)


def quiet_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone: what is still buffered must not
    fail again when Python flushes it at exit ('Exception ignored ... BrokenPipeError')."""
    try:
        sys.stdout.flush()
    except OSError:
        pass
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # not a real file (captured output)
        pass


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning from the engine as one `warning:` line on stderr, in the CLI's words."""
    text = message.for_cli() if hasattr(message, "for_cli") else str(message)
    click.echo(f"warning: {text}", err=True)


# ---- parameter types: a bad value is a one-line usage error naming it (exit 2) --------
class IsoTime(click.ParamType):
    """An ISO-8601 date or time the clock can work with (kept as the text given; with
    `end_of_day`, a bare date means the end of that day, as an expiry does)."""

    name = "ISO"

    def __init__(self, end_of_day: bool = False):
        self.end_of_day = end_of_day

    def convert(self, value, param, ctx):
        try:
            when = until_end_of_day(value) if self.end_of_day else parse_time(str(value))
        except (ValueError, OverflowError):
            self.fail(
                f"{value!r} is not a usable ISO-8601 date or time (e.g. 2026-03-01 or 2026-03-01T09:00:00)",
                param,
                ctx,
            )
        try:
            when + dt.timedelta(days=400)  # room for the arithmetic on it (leases, expiries)
        except OverflowError:
            self.fail(
                f"{value!r} is too near the year 9999 for the arithmetic Lethe does on "
                "it (leases, expiries): give a date before 9998-11-26",
                param,
                ctx,
            )
        return value


class Duration(click.ParamType):
    """A duration such as 30s, 15m, 2h (at most a year)."""

    name = "DURATION"

    def convert(self, value, param, ctx):
        try:
            delta = parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not dt.timedelta(0) < delta <= dt.timedelta(days=366):
            self.fail(f"{value!r} must be longer than 0 and at most a year", param, ctx)
        return delta


class Finite(click.FloatRange):
    """A number in a range, never NaN or infinity."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


MEMORY_ID = click.IntRange(1, 2**63 - 1)  # what SQLite's INTEGER holds
LIMIT = click.IntRange(1, 2**63 - 1)


# ---- shared options -----------------------------------------------------------------
def json_option(f):
    """--json: print JSON instead of text (parameter `json_`)."""
    return click.option("--json", "json_", is_flag=True, help="Print JSON instead of text.")(f)


def store_options(f):
    """--db, --policy, --namespace, --now, --offline: what every data command needs."""
    f = click.option(
        "--offline", is_flag=True, help="Use the built-in rules judges for every model (no network)."
    )(f)
    f = click.option(
        "--force-time",
        is_flag=True,
        expose_value=False,
        callback=_force_time,
        help="Take a --now more than a day ahead of the wall clock on a store "
        "whose passes run on it (refused otherwise).",
    )(f)
    f = click.option(
        "--now", type=IsoTime(), help="Pretend the clock reads this time (e.g. 2026-03-01T09:00:00)."
    )(f)
    f = click.option(
        "--namespace",
        "-n",
        default="default",
        envvar="LETHE_NAMESPACE",
        show_default=True,
        help="The agent whose memories to use (env LETHE_NAMESPACE).",
    )(f)
    f = click.option(
        "--policy",
        "-p",
        default=DEFAULT_POLICY,
        envvar="LETHE_POLICY",
        show_default=True,
        help="Policy file, or a name: ./policies/NAME.yaml, else the shipped one (env LETHE_POLICY).",
    )(f)
    f = click.option(
        "--db",
        envvar="LETHE_DB",
        help="SQLite database file or postgresql:// DSN (env LETHE_DB; default: the policy's `db:`).",
    )(f)
    return f


def _force_time(ctx, param, value):
    ctx.meta["lethe.force_time"] = value
    return value


def as_of_option(f):
    """--as-of: read what the store held at a past time, rebuilt from its events."""
    return click.option(
        "--as-of",
        "as_of",
        type=IsoTime(),
        metavar="ISO",
        help="As the store stood at this time, rebuilt from its events (records nothing; docs/time.md).",
    )(f)


def model_options(f):
    """--record / --replay on every command that may call a model."""
    f = click.option(
        "--replay",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="Answer every judgment from answers recorded in FILE.",
    )(f)
    f = click.option(
        "--record",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="Append every model answer to FILE (JSON lines) for --replay.",
    )(f)
    return f


def lease_ttl_option(f):
    """--lease-ttl: how long a runner's pass lease outlives it."""
    return click.option(
        "--lease-ttl",
        default="15m",
        show_default=True,
        type=Duration(),
        help="How long the pass lease outlives this process if it dies (e.g. "
        "30s, 15m); while it runs it keeps renewing it.",
    )(f)


def lease_options(f):
    """--wait / --lease-ttl on every command that runs passes under the namespace's lease."""
    f = lease_ttl_option(f)
    f = click.option(
        "--wait",
        type=Finite(min=0),
        default=0.0,
        show_default=True,
        metavar="SECONDS",
        help="Wait this long for another runner's pass lease; "
        "then say who holds it and exit 0 without running.",
    )(f)
    return f


# ---- opening and printing -----------------------------------------------------------
def open_memory(
    db,
    policy,
    namespace,
    now,
    offline,
    record=None,
    replay=None,
    must_exist=False,
    read_only: bool = False,
    only_passes: tuple[str, ...] = (),
) -> Memory:
    """The `Memory` the store options describe: --db, else the policy's `db:`. Commands
    that only read pass `must_exist` (a mistyped path is refused, not created empty) and
    open it `read_only`: they never write, so never wait behind a writer, and work on a
    file they may not write. `only_passes`: the command runs these passes and nothing
    else; when none of them asks a judge, the policy's templates are found but not parsed
    (no Jinja at start-up: `lethe run --pass decay`), and parsed if anything renders one."""
    pol = policy_mod.load(policy, templates=not only_passes)
    # a pass that judges (what the runner runs as one: engine.run.runner.run_one), or one the
    # policy lacks: checked as a full load would
    if any(n not in pol.passes or pol.passes[n].cluster is not None for n in only_passes):
        policy_mod.check_templates(pol)
    path = db or pol.db
    if not path:
        raise click.UsageError("no database: pass --db FILE (or a postgresql:// DSN) or set LETHE_DB")
    if not db and store.is_dsn(path):  # libpq would send it PGPASSWORD, ~/.pgpass, PGUSER
        raise click.UsageError(
            f"the policy's db: names a server ({store.masked(path)}); a "
            "policy is not trusted with your PostgreSQL credentials: give "
            "the server with --db or LETHE_DB"
        )
    if must_exist and not store.is_dsn(path) and not os.path.exists(store.sqlite.sqlite_file.file_path(path)):
        raise StoreError(no_database(path))
    clock = FixedClock(now) if now else None
    mem = memory.Memory(
        path,
        policy=pol,
        namespace=namespace,
        offline=offline,
        clock=clock,
        record=record,
        replay=replay,
        read_only=read_only,
        progress=terminal_progress(sys.stderr),
    )
    forced = click.get_current_context(silent=True)
    if clock is not None and not read_only and not (forced and forced.meta.get("lethe.force_time")):
        refused = far_ahead(clock(), mem.last_wall_run())
        if refused:
            mem.close()
            raise LetheError(refused)
    return mem


def elsewhere(mem: Memory, found) -> str | None:
    """When nothing was `found` because the namespace holds nothing while others do (a
    mistyped --namespace): the line saying what the database holds, for `emit`'s note."""
    return None if found else mem.why_empty()


def terminal_progress(stream):
    """A progress callback that writes each step as a line on `stream` when it is a
    terminal (None otherwise: piped or captured output stays as it was)."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return None

    def report(line: str) -> None:
        stream.write(f"lethe: {shown(line)}\n")
        stream.flush()

    return report


# ---- printing: the only way text reaches the terminal ---------------------------------
# control characters (ESC, BEL, CR, C1, DEL), bidi overrides and line separators: a memory
# that holds them must not retitle the terminal, write the clipboard or hide text
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# what json.dumps leaves raw of those (it escapes the rest itself)
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def shown(text) -> str:
    """`text` safe for a terminal: every control character escaped (`\x1b`, `\u202e`,
    newlines as `\n`), everything else as it is."""
    return _UNSAFE.sub(_escape, str(text))


def _escape(m: re.Match) -> str:
    c = m.group(0)
    return {"\n": "\\n", "\r": "\\r"}.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def echo(text, err: bool = False, nl: bool = True) -> None:
    """Print human text, each line through `shown` (the lines we mean stay lines)."""
    click.echo("\n".join(shown(line) for line in str(text).split("\n")), err=err, nl=nl)


def to_json(data, indent: int | None = 2) -> str:
    """JSON that any parser reads and no terminal acts on: NaN and infinities become null,
    and control characters JSON leaves raw (DEL, C1, bidi, U+2028) are \\u-escaped."""
    text = json.dumps(_finite(data), indent=indent, ensure_ascii=False, default=str, allow_nan=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def no_database(path: str) -> str:
    """A command that needs an existing store (ls, why, recall, pending, costs) was given a
    database that is not there: say which look alike, or that its directory is missing."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        return (
            f"no database at {path}: the directory {folder} does not exist; commands "
            "that write (remember, add, run) create the file, not its directory"
        )
    near = difflib.get_close_matches(
        os.path.basename(path),
        [os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(folder), "*.db"))],
        n=1,
    )
    hint = f" (did you mean {os.path.join(os.path.dirname(path), near[0])}?)" if near else ""
    return (
        f"no database at {path}{hint}: this command does not create one; commands that "
        "write (remember, add, run) do"
    )


def emit(data, json_: bool, text, note: str | None = None) -> None:
    """Print `data` as JSON with --json, else `text` (a line or a list of lines); then
    `note`, a hint rather than data, on stderr (the exit code is the command's)."""
    if json_:
        click.echo(to_json(data))
    else:
        for line in [text] if isinstance(text, str) else text:
            echo(line)
    if note:
        echo(note, err=True)
