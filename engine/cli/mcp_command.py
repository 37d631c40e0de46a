"""`lethe mcp`: serve one store, policy and namespace to MCP hosts (engine.integrations.mcp)."""

from __future__ import annotations

import os
import signal
import sys

import click

from engine.cli.base import model_options, open_memory, store_options
from engine.integrations import httpguard
from engine.integrations import mcp as integration


@click.command("mcp")
@store_options
@model_options
@click.option(
    "--transport",
    type=click.Choice(integration.TRANSPORTS),
    default="stdio",
    show_default=True,
    help="stdio for a host that starts the server itself; http for streamable HTTP at http://HOST:PORT/mcp.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on with --transport http."
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on with --transport http.",
)
@click.option(
    "--token",
    envvar="LETHE_MCP_TOKEN",
    help="With --transport http: the bearer token every request must carry (env "
    "LETHE_MCP_TOKEN); made and printed at start when none is given on a "
    "loopback address, required on any other.",
)
def mcp(db, policy, namespace, now, offline, record, replay, transport, host, port, token):
    """Serve memory to an MCP host (Claude Desktop, Claude Code, Cursor, ...): the tools
    remember, recall, add, why, forget, list_memories and run_passes, and the resources
    lethe://policy and lethe://memory/{id}. The database, policy and namespace are fixed
    here: a host reaches only this agent's memories. Needs the mcp extra."""
    integration.sdk()  # a missing extra is said before anything is opened
    made = False
    if transport == "http":
        token, made = httpguard.check_bind(host, token)
    with (
        open_memory(db, policy, namespace, now, offline, record, replay) as mem,
        open_memory(db, policy, namespace, now, offline, read_only=True) as reader,
    ):
        if transport == "http":
            click.echo(
                f"lethe mcp: namespace {namespace} of {mem.database} at http://{host}:{port}/mcp", err=True
            )
            if made:
                click.echo(
                    f"lethe mcp: token {token} (send Authorization: Bearer {token}; "
                    "give your own with --token or LETHE_MCP_TOKEN)",
                    err=True,
                )
        stopped = _serve_until_stopped(mem, transport, host, port, token, reader)
    click.echo("lethe mcp: stopped", err=True)
    if stopped and transport == "stdio":
        # a worker thread is still blocked reading the host's stdin, which would keep the
        # process alive until the host writes or hangs up; the store is closed by now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class _Stopped(Exception):
    """SIGINT or SIGTERM arrived: the server stops, the store is closed."""


def _stop(signum, frame):
    raise _Stopped()


def _serve_until_stopped(mem, transport: str, host: str, port: int, token, reader) -> bool:
    """Serve until the host hangs up (False) or SIGINT/SIGTERM arrives (True). uvicorn
    (http) shuts down on either signal and then raises it again: it ends here, cleanly,
    instead of killing the process before the store is closed."""
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    stopped = False
    try:
        integration.serve(mem, transport, host, port, token, reader)
    except* _Stopped:  # raised inside the SDK's task groups, it may come grouped
        stopped = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return stopped
