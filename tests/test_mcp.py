"""`lethe mcp`: the MCP server, driven by the official SDK's own client in-process, over
stdio as a subprocess, and over streamable HTTP on 127.0.0.1. The tool list is pinned by a
snapshot; judges are the offline rules, time is fixed with --now or the test clock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings

import pytest
from click.testing import CliRunner
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from syrupy.extensions.json import JSONSnapshotExtension

from engine.cli import main
from engine.integrations.mcp import build_server
from engine.judges.keys import RulesJudgedWarning
from tests.helpers import ROOT, store_of
from tests.helpers.mcp_client import TOKEN, bearer, free_port, lethe_mcp, structured, talk, wait_for_port


# ---- what a host sees ---------------------------------------------------------------
def test_the_tool_list_is_pinned(served_mcp, snapshot):
    _, server = served_mcp()

    async def listing(c):
        tools = (await c.list_tools()).tools
        resources = (await c.list_resources()).resources
        templates = (await c.list_resource_templates()).resource_templates
        return {
            "tools": [
                t.model_dump(
                    mode="json",
                    by_alias=True,
                    exclude_none=True,
                    include={"name", "description", "input_schema", "output_schema", "annotations"},
                )
                for t in tools
            ],
            "resources": [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in resources],
            "templates": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in templates],
        }

    listed = talk(server, listing)
    assert [t["name"] for t in listed["tools"]] == [
        "remember",
        "recall",
        "add",
        "why",
        "forget",
        "list_memories",
        "run_passes",
    ]
    read_only = {t["name"] for t in listed["tools"] if t["annotations"].get("readOnlyHint")}
    assert read_only == {"recall", "why", "list_memories"}
    assert listed == snapshot(extension_class=JSONSnapshotExtension)


def test_each_tool_answers_with_structure_and_a_short_text(served_mcp):
    mem, server = served_mcp()

    async def script(c):
        added = await c.call_tool(
            "add",
            {
                "content": "User prefers tabs over spaces",
                "importance": 8,
                "tags": ["style"],
                "expires_at": "2026-06-30",
            },
        )
        listed = await c.call_tool("list_memories", {})
        return added, listed

    added, listed = talk(server, script)
    memory_out = structured(added)["memory"]
    assert memory_out["importance"] == 8 and memory_out["tags"] == ["style"]
    assert memory_out["expires_at"] == "2026-06-30T23:59:59Z"  # UTC, said
    assert set(memory_out) == {
        "id",
        "content",
        "status",
        "importance",
        "confidence",
        "decay_score",
        "created_at",
        "expires_at",
        "tags",
    }
    assert added.content[0].text.startswith(f"#{memory_out['id']} [active] User prefers tabs")
    assert [m["id"] for m in structured(listed)["memories"]] == [memory_out["id"]]
    assert mem.get(memory_out["id"]).importance == 8


def test_recall_records_access_and_respects_the_limit(served_mcp):
    mem, server = served_mcp()
    ids = [
        mem.add(f"The {w} service runs on port 80{i}", judged=False)
        for i, w in enumerate(["billing", "search", "auth"])
    ]

    async def script(c):
        return await c.call_tool("recall", {"query": "which port does the service use?", "limit": 2})

    out = structured(talk(server, script))
    assert len(out["memories"]) == 2 and out["query"] == "which port does the service use?"
    assert {m["id"] for m in out["memories"]} <= set(ids)
    assert all(mem.get(m["id"]).access_count == 1 for m in out["memories"])


def test_forget_archives_and_why_shows_it(served_mcp):
    mem, server = served_mcp()
    mid = mem.add("The office wifi password is hunter2", judged=False)

    async def script(c):
        gone = await c.call_tool("forget", {"memory_id": mid, "reason": "the user asked"})
        story = await c.call_tool("why", {"memory_id": mid})
        archived = await c.call_tool("list_memories", {"status": "archived"})
        again = await c.call_tool("forget", {"memory_id": mid, "reason": "twice"})
        return gone, story, archived, again

    gone, story, archived, again = talk(server, script)
    assert structured(gone)["memory"]["status"] == "archived"
    events = structured(story)["events"]
    assert events[-1]["event"] == "forgotten" and events[-1]["detail"] == {"reason": "the user asked"}
    assert [m["id"] for m in structured(archived)["memories"]] == [mid]
    assert again.is_error and "archived, not active" in again.content[0].text
    assert mem.get(mid).status == "archived"  # archived, never deleted


def test_run_passes_runs_what_is_due_under_the_lease(served_mcp, clock):
    mem, server = served_mcp()
    mid = mem.add("The sprint demo is on Friday", expires_at="2026-01-09", judged=False)
    clock.advance(__import__("datetime").timedelta(days=10))

    async def script(c):
        return await c.call_tool("run_passes", {}), await c.call_tool("run_passes", {})

    first, second = talk(server, script)
    ran = {r["name"]: r for r in structured(first)["ran"]}
    assert ran["expiry"]["events"].get("expired") == 1 and structured(first)["skipped"] is None
    assert mem.get(mid).status == "expired"
    assert structured(second) == {"ran": [], "skipped": None}  # nothing is due any more
    assert second.content[0].text == "nothing was due"


def test_run_passes_skips_while_another_scheduler_holds_the_lease(served_mcp):
    mem, server = served_mcp()
    other = store_of(mem).lease(mem.namespace, __import__("datetime").timedelta(minutes=15), "other")
    assert other.acquire()
    try:
        out = talk(server, lambda c: c.call_tool("run_passes", {}))
    finally:
        other.release()
        other.close()
    assert structured(out) == {"ran": [], "skipped": "another scheduler holds the lease"}


def test_remember_says_why_a_turn_is_pending(memory, tmp_path):
    policy = tmp_path / "down.yaml"
    policy.write_text(
        "name: down\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, "
        "model: m, base_url: 'http://127.0.0.1:9/v1', timeout: 1, max_retries: 0}\n"
    )
    mem = memory(str(policy), offline=False)
    out = talk(build_server(mem), lambda c: c.call_tool("remember", {"user": "We run CI on Jenkins."}))
    assert structured(out)["stored"] == [] and structured(out)["pending"]
    assert "pending:" in out.content[0].text and len(mem.pending()) == 1


def test_tools_without_a_key_say_once_that_the_rules_judged(memory):
    """The tools call the same Memory methods as the API: the same one warning, on stderr."""
    mem = memory("lifecycle", offline=False)  # the shipped models, and no key in the tests

    async def script(c):
        return [
            await c.call_tool("add", {"content": "We use Postgres."}),
            await c.call_tool("recall", {"query": "postgres"}),
        ]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        added, recalled = talk(build_server(mem), script)
    assert not added.is_error and structured(recalled)
    assert [
        type(w.message) for w in caught if issubclass(w.category, UserWarning) and "API key" in str(w.message)
    ] == [RulesJudgedWarning]


# ---- bad requests ---------------------------------------------------------------------
BAD = [
    ("recall", {"query": "x", "limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("recall", {"limit": "many"}, "query: Field required; limit: Input should be a valid integer"),
    ("recall", {"query": ""}, "query: String should have at least 1 character"),
    ("add", {"content": "x", "importance": 50}, "importance: Input should be less than or equal to 10"),
    ("add", {"content": "x", "expires_at": "soon"}, "expires_at: not an ISO-8601 date or time: 'soon'"),
    (
        "add",
        {"content": "x", "expires_at": "2026-01-04"},
        "expires_at 2026-01-04T23:59:59 is before now (2026-01-05T09:00:00)",
    ),
    ("add", {"content": "x", "tags": "not-a-list"}, "tags: Input should be a valid list"),
    ("why", {"memory_id": 999}, "no memory #999"),
    ("why", {"memory_id": "one"}, "memory_id: Input should be a valid integer"),
    ("forget", {"memory_id": 999, "reason": "gone"}, "no memory #999 in namespace 'default'"),
    ("forget", {"memory_id": 1}, "reason: Field required"),
    # past SQLite's 64-bit INTEGER: no memory can have it (binding it raised OverflowError)
    ("why", {"memory_id": 2**63}, "no memory #9223372036854775808 in namespace 'default'"),
    ("forget", {"memory_id": 2**64, "reason": "gone"}, "no memory #18446744073709551616 in"),
    ("why", {"memory_id": -5}, "no memory #-5 in namespace 'default'"),
    ("list_memories", {"status": "deleted"}, "status: Input should be 'active', 'archived'"),
    ("remember", {"user": 5}, "user: Input should be a valid string (got 5)"),
    ("no_such_tool", {}, "Unknown tool: no_such_tool"),
]


def test_bad_arguments_are_one_line_errors_and_the_server_carries_on(served_mcp):
    _, server = served_mcp()

    async def script(c):
        results = [await c.call_tool(name, args) for name, args, _ in BAD]
        return results, await c.call_tool("list_memories", {})

    results, after = talk(server, script)
    for (name, args, expected), result in zip(BAD, results):
        text = result.content[0].text
        assert result.is_error, (name, args)
        assert expected in text and "\n" not in text, (name, args, text)
    assert not after.is_error


# ---- resources and namespaces -----------------------------------------------------------
def test_resources_show_the_policy_and_one_memory(memory):
    mem = memory("coding-agent")  # extends lifecycle
    mid = mem.add("The repo uses uv", judged=False)

    async def script(c):
        policy = await c.read_resource("lethe://policy")
        one = await c.read_resource(f"lethe://memory/{mid}")
        with pytest.raises(MCPError, match="no memory #999"):
            await c.read_resource("lethe://memory/999")
        with pytest.raises(MCPError, match="an id is a number"):
            await c.read_resource("lethe://memory/abc")
        with pytest.raises(MCPError, match="no memory #99999999999999999999999 in namespace"):
            await c.read_resource("lethe://memory/99999999999999999999999")
        with pytest.raises(MCPError, match=r"no memory #9{20}\.\.\. \(5000 digits\) in"):
            await c.read_resource("lethe://memory/" + "9" * 5000)  # was an internal error
        with pytest.raises(MCPError, match="an id is a number"):
            await c.read_resource("lethe://memory/%C2%B2")  # '²': isdigit(), not int()
        return policy.contents[0].text, one.contents[0].text

    policy_text, memory_text = talk(build_server(mem), script)
    assert "extends" not in policy_text and "name: coding-agent" in policy_text
    assert "decay:" in policy_text  # inherited from lifecycle
    assert json.loads(memory_text)["content"] == "The repo uses uv"


def test_a_host_reaches_only_the_namespace_it_was_started_with(memory, served_mcp):
    other = memory("lifecycle", namespace="bob")
    secret = other.add("Bob's bank PIN is 1234", judged=False)
    _, server = served_mcp("alice")

    async def script(c):
        return (
            await c.call_tool("why", {"memory_id": secret}),
            await c.call_tool("forget", {"memory_id": secret, "reason": "mine now"}),
            await c.call_tool("recall", {"query": "bank PIN"}),
            await c.call_tool("list_memories", {"status": "all"}),
        )

    why, forget, recall, listing = talk(server, script)
    assert why.is_error and forget.is_error
    for refused in (why, forget):  # not even where the id is: that names another tenant
        assert f"no memory #{secret} in namespace 'alice'" in refused.content[0].text
        assert "bob" not in refused.content[0].text
    assert structured(recall)["memories"] == [] and structured(listing)["memories"] == []
    assert listing.content[0].text == "(no memories)"  # not "(no all memories)"
    assert other.get(secret).status == "active"


# ---- over the wire: stdio and streamable HTTP -------------------------------------------
def test_a_host_conversation_over_stdio(tmp_path):
    """The conversation of issue 16, as a host runs it: a subprocess on stdio."""
    db = str(tmp_path / "agent.db")
    params = StdioServerParameters(command=sys.executable, args=lethe_mcp(db)[1:], cwd=str(tmp_path))

    async def script(c):
        old = structured(await c.call_tool("add", {"content": "The API runs on Heroku."}))
        moved = await c.call_tool("remember", {"user": "We moved the API from Heroku to Fly.io."})
        recalled = await c.call_tool("recall", {"query": "where does the API run?"})
        story = await c.call_tool("why", {"memory_id": old["memory"]["id"]})
        return old["memory"]["id"], structured(moved), structured(recalled), structured(story)

    old_id, moved, recalled, story = talk(params, script)
    [new] = moved["stored"]
    assert moved["superseded"] == [{"id": old_id, "content": "The API runs on Heroku.", "by": new["id"]}]
    contents = [m["content"] for m in recalled["memories"]]
    assert any("Fly.io" in c for c in contents)
    assert old_id not in [m["id"] for m in recalled["memories"]]
    assert not any("runs on Heroku" in c for c in contents)
    assert story["memory"]["status"] == "superseded"
    assert story["superseded_by"]["id"] == new["id"]
    assert [e["event"] for e in story["events"]] == ["created", "superseded"]


def test_streamable_http_on_a_free_local_port(tmp_path):
    db, port = str(tmp_path / "agent.db"), free_port()
    proc = subprocess.Popen(
        lethe_mcp(db, "--transport", "http", "--port", str(port), "--token", TOKEN),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, proc)

        async def script(c):
            added = structured(await c.call_tool("add", {"content": "Deploys happen on Tuesdays"}))
            bad = await c.call_tool("why", {"memory_id": 424242})
            listed = structured(await c.call_tool("list_memories", {}))
            return added, bad, listed

        added, bad, listed = talk(bearer(f"http://127.0.0.1:{port}/mcp", TOKEN), script)
        assert [m["id"] for m in listed["memories"]] == [added["memory"]["id"]]
        assert bad.is_error and "no memory #424242" in bad.content[0].text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"http://127.0.0.1:{port}/mcp" in err


# ---- the command ------------------------------------------------------------------------
def test_lethe_mcp_help():
    out = CliRunner().invoke(main, ["mcp", "--help"])
    assert out.exit_code == 0
    for flag in ("--transport", "--host", "--port", "--db", "--policy", "--namespace", "--offline"):
        assert flag in out.output


# an interpreter where the `mcp` package cannot be found, as on a machine without the extra
WITHOUT_MCP = """import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "mcp":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
from engine.cli import main
main(ARGS)"""


def test_without_the_extra_lethe_still_runs_and_mcp_names_the_extra(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    helped = subprocess.run(
        [sys.executable, "-c", WITHOUT_MCP.replace("ARGS", "['--help']")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert helped.returncode == 0 and "mcp" in helped.stdout
    db = tmp_path / "never.db"
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_MCP.replace("ARGS", f"['mcp', '--db', '{db}']")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 2
    assert out.stderr == "error: the MCP server needs the 'mcp' extra: pip install 'lethe-lifecycle[mcp]'\n"
    assert not db.exists()  # said before anything was opened


def test_the_policy_resource_shows_no_secret(tmp_path):
    """Before: lethe://policy showed a base URL's user, password and query, and header
    values, as written; every message already showed them as ***."""
    from engine import Memory
    from engine.integrations.mcp import Tools

    policy = tmp_path / "p.yaml"
    policy.write_text(
        "name: p\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, model: m, "
        "base_url: 'https://bob:hunter2@llm.example/v1?api-key=SECRETQ', "
        "headers: {X-Api-Key: hdr-secret}}\n"
    )
    with Memory(str(tmp_path / "m.db"), policy=str(policy), offline=True) as mem:
        shown = Tools(mem).policy_yaml()
    for secret in ("hunter2", "SECRETQ", "hdr-secret", "bob"):
        assert secret not in shown
    assert "https://***:***@llm.example/v1?***" in shown and "X-Api-Key: '***'" in shown
