"""MCP over HTTP and the tools' inputs (issue 42, findings 10 and 11; issue 43, finding 5):
a bearer token on every bind (made and printed on loopback, required elsewhere), the
Host/Origin allow-list always on, reads that never wait behind a model call, and one
rule for every text argument."""

from __future__ import annotations

import subprocess
import threading
import time

import anyio
import httpx
import pytest

from engine import Memory
from engine.integrations.mcp import MCP_TEXT, Tools, build_server
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.mcp_client import (
    TOKEN,
    bearer,
    free_port,
    lethe_mcp,
    structured,
    talk,
    wait_for_port,
)

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def start(tmp_path, *extra):
    port = free_port()
    proc = subprocess.Popen(
        lethe_mcp(str(tmp_path / "agent.db"), "--transport", "http", "--port", str(port), *extra),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, port


def stop(proc) -> str:
    proc.terminate()
    return proc.communicate(timeout=30)[1]


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1x"])
def test_a_bind_that_is_not_loopback_refuses_to_start_without_a_token(tmp_path, host):
    """Before: `--host 0.0.0.0` served every memory to anyone who reached the port."""
    done = subprocess.run(
        lethe_mcp(
            str(tmp_path / "agent.db"), "--transport", "http", "--host", host, "--port", str(free_port())
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--token" in done.stderr, done.stderr
    assert not (tmp_path / "agent.db").exists()


def test_a_loopback_bind_makes_and_prints_a_token_and_requires_it(tmp_path):
    proc, port = start(tmp_path)
    try:
        wait_for_port(port, proc)
        url = f"http://127.0.0.1:{port}/mcp"
        assert httpx.post(url, json=INIT, headers=ACCEPT).status_code == 401
        assert (
            httpx.post(
                url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer nope-nope-nope-nope"}
            ).status_code
            == 401
        )
    finally:
        err = stop(proc)
    token = err.split("lethe mcp: token ", 1)[1].split()[0]
    assert len(token) >= 16


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_the_host_and_origin_are_checked_on_every_bind(tmp_path, host):
    """Before: on 127.0.0.2 (or any name but 127.0.0.1, localhost, ::1) a request with
    `Host: attacker.example` read another user's memories."""
    proc, port = start(tmp_path, "--host", host, "--token", TOKEN)
    try:
        wait_for_port_on(host, port, proc)
        url = f"http://{host}:{port}/mcp"
        auth = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(url, json=INIT, headers={**auth, "Host": "attacker.example"}).status_code == 403
        assert (
            httpx.post(url, json=INIT, headers={**auth, "Origin": "http://attacker.example"}).status_code
            == 403
        )
        assert httpx.post(url, json=INIT, headers=auth).status_code == 200

        async def script(c):
            return structured(await c.call_tool("add", {"content": "Deploys happen on Tuesdays"}))

        assert talk(bearer(url, TOKEN), script)["memory"]["id"] == 1
    finally:
        stop(proc)


def wait_for_port_on(host: str, port: int, proc, seconds: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"lethe mcp exited: {proc.stderr.read()}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {host}:{port}")


def test_reads_never_wait_behind_a_model_call(tmp_path):
    """Before: one lock around every tool: while a remember waited 30 s on a hung model,
    list_memories and why took 37 s. Now they read through their own read-only Memory: here
    the model answers nothing until both reads have come back, or for 20 s: a read that
    waited behind the remember comes back only after that, and fails the test."""
    released, asked = threading.Event(), threading.Event()

    def hung(request):
        asked.set()
        released.wait(30)
        return "{}"

    with FakeOpenAI(hung) as fake:
        policy = tmp_path / "slow.yaml"
        policy.write_text(
            "name: slow\nextends: lifecycle\nmodels:\n"
            f"  cheap: {{provider: openai, model: m, base_url: '{fake.base_url}', "
            "timeout: 30, max_retries: 0}\n"
            f"  strong: {{provider: openai, model: m, base_url: '{fake.base_url}', "
            "timeout: 30, max_retries: 0}\n"
        )
        db = str(tmp_path / "agent.db")
        mem = Memory(db, policy=str(policy), offline=False)
        first = mem.add("Deploys happen on Tuesdays", judged=False)
        reader = Memory(db, policy=str(policy), read_only=True)
        server = build_server(mem, Tools(mem, reader))
        seen = {}

        async def script(c):
            async def slow():
                await c.call_tool("remember", {"user": "We deploy on Fridays now."})
                seen["remembered"] = True

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                with anyio.fail_after(20):
                    while not asked.is_set():  # the remember is waiting on the model
                        await anyio.sleep(0.02)
                listed = structured(await c.call_tool("list_memories", {}))
                why = structured(await c.call_tool("why", {"memory_id": first}))
                seen["read while the model hung"] = not released.is_set() and "remembered" not in seen
                released.set()
                seen["listed"] = [m["id"] for m in listed["memories"]]
                seen["why"] = why["memory"]["id"]

        gives_up = threading.Timer(20, released.set)
        gives_up.start()
        try:
            talk(server, script)
        finally:
            gives_up.cancel()
            released.set()
            reader.close()
            mem.close()
    assert seen["read while the model hung"] and seen["remembered"], seen
    assert first in seen["listed"] and seen["why"] == first, seen


# ---- one rule for every text argument (issue 43, finding 5)
@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("remember", {"user": ""}),
        ("remember", {"user": "   "}),
        ("add", {"content": ""}),
        ("add", {"content": "x" * (MCP_TEXT + 1)}),
        ("remember", {"user": "x" * (MCP_TEXT + 1)}),
        ("add", {"content": "a\x00b"}),
        ("remember", {"user": "a\x00b"}),
        ("recall", {"query": "a\x00b"}),
        ("forget", {"memory_id": 1, "reason": ""}),
        ("recall", {"query": "tabs", "limit": True}),
        ("why", {"memory_id": True}),
        ("list_memories", {"limit": 2.0}),
        ("add", {"content": "ok", "importance": True}),
        ("recall", {"query": "tabs", "limti": 3}),
        ("add", {"content": "ok", "tag": ["x"]}),
        ("add", {"content": "ok", "tags": ["a\x00b"]}),
        ("add", {"content": "ok", "tags": [""]}),
    ],
    ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={str(x)[:12]!r}" for k, x in v.items()),
)
def test_every_text_argument_follows_one_rule_and_unknown_arguments_are_refused(served_mcp, tool, arguments):
    mem, server = served_mcp()
    mem.add("User prefers tabs", judged=False)
    before = mem.counts(), len(mem.pending())
    result = talk(server, lambda c: c.call_tool(tool, arguments))
    assert result.is_error, (tool, arguments)
    assert "\n" not in result.content[0].text
    assert (mem.counts(), len(mem.pending())) == before


def test_returned_times_carry_their_zone(served_mcp):
    mem, server = served_mcp()
    mem.add("User prefers tabs", judged=False, expires_at="2026-06-30")
    listed = talk(server, lambda c: c.call_tool("list_memories", {}))
    [m] = structured(listed)["memories"]
    assert m["created_at"].endswith("Z") and m["expires_at"].endswith("Z")
