"""An MCP client for the soak run: talks to `lethe mcp --transport http` with its token
until its time is up, logging every acknowledged write and every error, as worker.py does.

    python tests/procs/mcp_client.py URL TOKEN LOG --client 1 --seconds 60

Each line of LOG is JSON: {"op": "add", "id": ..., "content": ..., "via": "mcp"}, {"op":
"remember", "user": ..., "stored": [...], "via": "mcp"}, {"op": "recall" | "list", "n": ...},
{"error": "tool" | "connection", "op": ..., "msg": ...} and a last {"done": ...}. A session
that fails (the server killed, the database restarting) is opened again."""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import anyio
from _common import ROOT  # noqa: F401  (puts the project on sys.path)
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from worker import TASKS, TOOLS, turn


async def session(a, rng, log, deadline: float, counter: list[int]) -> None:
    headers = {"Authorization": f"Bearer {a.token}"}
    transport = streamable_http_client(a.url, http_client=create_mcp_http_client(headers=headers))
    async with Client(transport) as client:
        while time.monotonic() < deadline and not stopped(a):
            counter[0] += 1
            token = f"m{a.client}n{counter[0]}"
            r = rng.random()
            if r < 0.4:
                content = f"Note {token}: {rng.choice(TOOLS)} settings for {rng.choice(TASKS)}"
                op, args = "add", {"content": content}
            elif r < 0.6:
                user, _ = turn(rng, token)
                op, args = "remember", {"user": user, "assistant": "Noted."}
            elif r < 0.85:
                op, args = "recall", {"query": f"what do I use for {rng.choice(TASKS)}?"}
            else:
                op, args = "list_memories", {"limit": 5}
            result = await client.call_tool(op, args)
            if result.is_error:
                log({"error": "tool", "op": op, "msg": result.content[0].text[:500]})
                continue
            got = result.structured_content
            if op == "add":
                log({"op": "add", "id": got["memory"]["id"], "content": content, "via": "mcp"})
            elif op == "remember":
                stored = [m["id"] for m in got["stored"]]
                log({"op": "remember", "user": args["user"], "stored": stored, "via": "mcp"})
            else:
                log({"op": "recall" if op == "recall" else "list", "n": len(got["memories"]), "via": "mcp"})


def stopped(a) -> bool:
    return bool(a.stop_file) and os.path.exists(a.stop_file)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("token")
    ap.add_argument("log")
    ap.add_argument("--client", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--stop-file", help="stop (before --seconds are up) once this file exists")
    a = ap.parse_args()
    rng = random.Random(7000 + a.client)
    deadline = time.monotonic() + a.seconds
    counter = [0]
    with open(a.log, "a", buffering=1, encoding="utf-8") as fh:

        def log(obj):
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")

        while time.monotonic() < deadline and not stopped(a):
            try:
                anyio.run(session, a, rng, log, deadline, counter)
            except Exception as exc:  # the server killed or not up yet: a new session
                while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                    exc = exc.exceptions[0]
                log({"error": "connection", "type": type(exc).__name__, "msg": str(exc)[:300]})
                time.sleep(0.5)
        log({"done": True, "client": a.client})


if __name__ == "__main__":
    main()
