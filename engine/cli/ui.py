"""`lethe ui`: the inspector, a local web app over one store (engine.apps.inspector)."""

from __future__ import annotations

import signal

import click

from engine.base.lazy import lazy
from engine.cli.base import echo, open_memory, store_options
from engine.integrations import missing_extra

httpguard = lazy("engine.integrations.httpguard")
server = lazy("engine.apps.inspector.server")  # Starlette and uvicorn: the `ui` extra
app = lazy("engine.apps.inspector.app")


@click.command("ui")
@store_options
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs --token.",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="Port to listen on."
)
@click.option(
    "--token",
    envvar="LETHE_UI_TOKEN",
    help="The token every request carries (env LETHE_UI_TOKEN); on loopback one is made when none is given.",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Browse only: no forget, restore, correct or retry (nothing is written).",
)
def ui(db, policy, namespace, now, offline, host, port, token, read_only):
    """Open the inspector in the browser: memories with filters, a memory's timeline and
    supersession chain, recall explained, pending turns, costs, the policy; forget, restore
    and correct from the page (each an event). Bound to 127.0.0.1 with a token in the URL
    printed at start. Needs the ui extra."""
    token, _ = httpguard.check_bind(host, token, httpguard.LINK)  # refused before anything is opened
    try:
        serve, prepare, url = server.serve, server.prepare, server.url
    except ImportError as exc:
        raise missing_extra("ui", "the inspector", exc) from None

    def opener(ns: str):
        return open_memory(db, policy, ns, now, offline, must_exist=True, read_only=read_only)

    inspector = app.Inspector(opener, namespace, read_only)
    asgi, token = prepare(inspector, host, port, token)
    echo(
        f"lethe ui: {inspector.memory(None).database}, namespace {namespace}"
        f"{' (read-only)' if read_only else ''}",
        err=True,
    )
    echo(f"open {url(host, port, token)}", err=True)
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        serve(asgi, host, port)
    except _Stopped:  # uvicorn shut down, then raised the signal again: ends here
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        inspector.close()  # the stores closed: kept writes made, the WAL checkpointed
    echo("lethe ui: stopped", err=True)


class _Stopped(Exception):
    """SIGINT or SIGTERM arrived: the server stops, the stores are closed."""


def _stop(signum, frame):
    raise _Stopped()
