"""Driving `lethe mcp` from a test: the command line, a client session, bearer
tokens and free local ports."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import anyio
from mcp import Client

NOW = "2026-01-05T09:00:00"


def lethe_mcp(db: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "engine.cli", "mcp", "--db", db, "--offline", "--now", NOW, *extra]


def talk(server, script):
    """Run `script(client)` against `server` (an MCPServer, StdioServerParameters or URL)."""

    async def go():
        async with Client(server) as client:
            return await script(client)

    return anyio.run(go)


def structured(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


TOKEN = "test-token-0123456789abcdef"


def bearer(url: str, token: str, **headers):
    """A streamable HTTP transport to `url` that sends `Authorization: Bearer token`."""
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    sent = {"Authorization": f"Bearer {token}", **headers}
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=sent))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"lethe mcp exited: {proc.stderr.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {seconds}s")
