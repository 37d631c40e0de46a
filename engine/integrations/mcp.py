"""Lethe as an MCP server (`lethe mcp`): seven tools and two resources over one `Memory`.

The database, policy and namespace are fixed when the server starts: no tool takes a
namespace, so a host reaches only the agent it was configured for. `Tools` is plain Python
over the API (each method returns a typed dict of `mcp_models`); `build_server` registers its
methods on the official SDK's `MCPServer`, with the method's docstring as the tool's
description, its signature and `ARGUMENTS` as the input schema. A tool's answer carries
the typed dict as structured content and its short text form as content.

The SDK is imported on first use (`sdk()`), so `lethe --help` and the rest of the engine
work without the `mcp` extra. A bad argument or a refused request comes back as an MCP
error result whose text is one line; the server carries on.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from types import SimpleNamespace
from typing import Annotated, Literal, get_args

import yaml

from engine.base import distribution
from engine.base.errors import LetheError
from engine.integrations import mcp_models as out
from engine.integrations import missing_extra
from engine.integrations.httpguard import BEARER, Guard
from engine.integrations.mcp_models import (
    Added,
    Forgotten,
    Listing,
    PassesRun,
    Recalled,
    Remembered,
    Story,
    Superseded,
)
from engine.judges.endpoint import redact
from engine.memory import Memory
from engine.policy import STATUSES
from engine.run.scheduler import Scheduler
from engine.store import masked

TRANSPORTS = ("stdio", "http")
Status = Literal["active", "archived", "superseded", "expired", "compressed", "all"]
assert get_args(Status) == (*STATUSES, "all"), "Status lists the statuses"


def sdk() -> SimpleNamespace:
    """The parts of the MCP SDK (and pydantic) Lethe uses, imported on first use; a
    one-line LetheError naming the extra when the SDK is not installed."""
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
        from mcp.types import CallToolResult, TextContent, ToolAnnotations
        from pydantic import Field, ValidationError
    except ImportError as exc:
        raise missing_extra("mcp", "the MCP server", exc) from None
    return SimpleNamespace(
        MCPServer=MCPServer,
        ResourceNotFoundError=ResourceNotFoundError,
        ToolError=ToolError,
        CallToolResult=CallToolResult,
        TextContent=TextContent,
        ToolAnnotations=ToolAnnotations,
        Field=Field,
        ValidationError=ValidationError,
    )


class Tools:
    """The tools a host calls, over one `Memory`: plain Python, returning typed dicts of
    `mcp_models`. Raises LetheError for a bad request. `ARGUMENTS` describes the
    arguments to hosts."""

    def __init__(self, memory: Memory, reader: Memory | None = None):
        self.memory = memory
        # reads that need no model (why, list_memories, the resources) go to `reader`, a
        # read-only Memory of the same store with a connection and a lock of its own: they
        # never wait behind a remember whose model hangs
        self.reader = reader
        self._scheduler: Scheduler | None = None

    def remember(self, user: str, assistant: str = "") -> Remembered:
        """Remember one conversation turn. The policy's judges decide what is worth keeping,
        how sure it is, when it expires, and whether it replaces an older memory (which is
        superseded, not deleted). Returns what was stored, reinforced and superseded, or why
        the turn is pending (a judge model was unreachable; run_passes retries it)."""
        written = self.memory.remember(user, assistant)
        gone = [
            Superseded(id=old, content=self._memory(old).content, by=new) for old, new in written.superseded
        ]
        return Remembered(
            stored=[self._out(i) for i in written.stored],
            reinforced=[self._out(i) for i in written.reinforced],
            superseded=gone,
            pending=written.pending,
        )

    def recall(self, query: str, limit: int = 6, as_of: str | None = None) -> Recalled:
        """Recall what the agent should know for a query: the policy's candidates (active,
        fresh enough, ranked), picked by its select judge; superseded, expired and archived
        memories are left out, but for a policy's `recall.fallback`: when nothing current
        fits, archived or expired ones that match, each with its status. The access of active
        ones is recorded, which keeps them fresh. `as_of`
        (ISO time): what recall would have returned then, rebuilt from the events."""
        found = self.memory.recall(query, top_n=limit, as_of=as_of)
        return Recalled(query=query, memories=[out.memory_out(m) for m in found])

    def add(
        self,
        content: str,
        importance: float | None = None,
        expires_at: str | None = None,
        tags: list[str] | None = None,
    ) -> Added:
        """Store a memory as given. The policy's write steps still run except the gate
        (confidence, contradiction, expiry); the values given here win over their judgments,
        and an older memory the new one contradicts is superseded."""
        for tag in tags or []:
            if not tag.strip() or "\x00" in tag or len(tag) > 1_000:
                raise LetheError("each tag is 1 to 1,000 characters, no NUL")
        new_id = self.memory.add(content, importance=importance, expires_at=expires_at, tags=tags)
        return Added(memory=self._out(new_id))

    def why(self, memory_id: int, as_of: str | None = None) -> Story:
        """A memory's whole history: every event (created, reinforced, superseded,
        forgotten, expired, ...), the memory that superseded it and the one it was merged
        into. Works for memories that left recall too. `as_of` (ISO time): as it stood then."""
        return out.story(self._reading.history(memory_id, as_of=as_of))

    def forget(self, memory_id: int, reason: str) -> Forgotten:
        """Forget an active memory: it is archived with a `forgotten` event that keeps the
        reason, and leaves recall. Nothing is deleted; why still shows it."""
        mem = self.memory.forget(memory_id, reason)
        return Forgotten(memory=out.memory_out(mem), reason=reason)

    def list_memories(self, status: Status = "active", limit: int = 20) -> Listing:
        """List memories by status, newest first: active ones, or those that were archived,
        superseded, expired or compressed (or all)."""
        return Listing(
            status=status, memories=[out.memory_out(m) for m in self._reading.memories(status, limit)]
        )

    def run_passes(self) -> PassesRun:
        """Run what the policy has due now: every pass whose schedule has come round
        (expiry, decay, compression, ...), then the pending turns, under the store's lease
        so no other scheduler runs them at the same time."""
        if self._scheduler is None:
            self._scheduler = Scheduler(self.memory)
        results = self._scheduler.tick()
        if results is None:
            return PassesRun(ran=[], skipped="another scheduler holds the lease")
        return PassesRun(ran=[out.pass_run(r) for r in results], skipped=None)

    # -- resources
    def policy_yaml(self) -> str:
        """The policy as loaded, its `extends:` chain merged in, with what is secret in it
        shown as *** (a base URL's user, password and query, a header's value, a DSN's
        password), as every message shows it."""
        return yaml.safe_dump(_shown(self.memory.policy.doc.data), sort_keys=False, allow_unicode=True)

    def memory_json(self, memory_id: str) -> str:
        """One memory of this namespace as JSON."""
        if not (memory_id.isascii() and memory_id.isdigit()):  # not '²', which isdigit()
            raise LetheError(f"no memory {memory_id[:40]!r}: an id is a number")
        if len(memory_id) > 30:  # past any id, and int() of 4,300 digits fails
            raise LetheError(
                f"no memory #{memory_id[:20]}... ({len(memory_id)} digits) in "
                f"namespace {self.memory.namespace!r}"
            )
        return json.dumps(self._memory(int(memory_id), self._reading).as_dict(), ensure_ascii=False, indent=2)

    @property
    def _reading(self) -> Memory:
        return self.reader or self.memory

    def close(self) -> None:
        if self._scheduler is not None:
            self._scheduler.close()

    def _memory(self, memory_id: int, memory: Memory | None = None):
        mem = (memory or self.memory).get(memory_id)
        if mem is None:
            raise LetheError(f"no memory #{memory_id} in namespace '{self.memory.namespace}'")
        return mem

    def _out(self, memory_id: int):
        return out.memory_out(self._memory(memory_id))


# What a host reads about each argument (pydantic Field settings, applied when the tools
# are registered: pydantic is imported only then).
MCP_TEXT = 100_000  # characters of one text argument (a turn, a memory, a query, a reason)
# one rule for every text argument: no NUL, at most MCP_TEXT; non-empty unless optional
TEXT = {"max_length": MCP_TEXT, "pattern": r"^[^\x00]*$"}
WORDS = {**TEXT, "min_length": 1, "pattern": r"^[^\x00]*[^\x00\s][^\x00]*$"}
WHOLE = {"strict": True}  # a whole number: true and 1.0 are not one
ARGUMENTS: dict[str, dict[str, dict]] = {
    "remember": {
        "user": {**WORDS, "description": "What the user said"},
        "assistant": {**TEXT, "description": "What the assistant answered"},
    },
    "recall": {
        "query": {**WORDS, "description": "What the agent needs to know, in its own words"},
        "limit": {**WHOLE, "ge": 1, "le": 50, "description": "At most this many"},
        "as_of": {
            "max_length": 64,
            "pattern": r"^[^\x00]*$",
            "description": "An ISO-8601 time: recall as the store stood then",
        },
    },
    "add": {
        "content": {**WORDS, "description": "The memory's text"},
        "importance": {
            "strict": True,
            "ge": 0,
            "le": 10,
            "description": "How much it matters, 0-10 (default: 5)",
        },
        "expires_at": {
            "max_length": 64,
            "pattern": r"^[^\x00]*$",
            "description": "When it stops being true: an ISO-8601 date (through that day) or date and time",
        },
        "tags": {"max_length": 100, "description": "Tags (each 1 to 1,000 characters)"},
    },
    "why": {
        "memory_id": {**WHOLE, "description": "The memory's id"},
        "as_of": {
            "max_length": 64,
            "pattern": r"^[^\x00]*$",
            "description": "An ISO-8601 time: the memory as it stood then",
        },
    },
    "forget": {
        "memory_id": {**WHOLE, "description": "The memory's id"},
        "reason": {**WORDS, "description": "Why, kept in its history"},
    },
    "list_memories": {
        "status": {"description": "Which memories"},
        "limit": {**WHOLE, "ge": 1, "le": 500, "description": "At most this many"},
    },
    "run_passes": {},
}

READS = ("why", "list_memories")  # tools that never ask a model nor write

# Hints for hosts: recall only records access (bookkeeping, like a file's atime), so it
# counts as read-only; add and remember supersede with the history kept, never delete.
ANNOTATIONS = {
    "remember": {"destructive_hint": False},
    "recall": {"read_only_hint": True},
    "add": {"destructive_hint": False},
    "why": {"read_only_hint": True, "idempotent_hint": True},
    "forget": {"destructive_hint": True},
    "list_memories": {"read_only_hint": True, "idempotent_hint": True},
    "run_passes": {"destructive_hint": True},
}


def build_server(memory: Memory, tools: Tools | None = None):
    """An `MCPServer` whose tools and resources are `Tools` over `memory`."""
    kit = sdk()
    tools = tools or Tools(memory)
    lock = threading.Lock()  # the SDK runs each call on a worker thread; one connection
    # reads that need no model take the reader's own lock (its own connection), if any
    read_lock = threading.Lock() if tools.reader is not None else lock
    server = _server_class()(
        "lethe", instructions=_instructions(memory), version=distribution.VERSION, log_level="WARNING"
    )
    for name, hints in ANNOTATIONS.items():
        fn = _tool(kit, getattr(tools, name), read_lock if name in READS else lock)
        server.add_tool(
            fn,
            name=name,
            description=_one_paragraph(fn.__doc__),
            annotations=kit.ToolAnnotations(open_world_hint=False, **hints),
        )
    resource = functools.partial(_resource, kit, read_lock)
    server.resource(
        "lethe://policy",
        name="policy",
        mime_type="application/yaml",
        description="The policy as loaded, its extends: chain merged in",
    )(resource(tools.policy_yaml))
    server.resource(
        "lethe://memory/{memory_id}",
        name="memory",
        mime_type="application/json",
        description="One memory of this namespace as JSON",
    )(resource(tools.memory_json))
    return server


def serve(
    memory: Memory,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    reader: Memory | None = None,
) -> None:
    """Serve `memory` until the host hangs up (stdio) or the process is stopped (http:
    streamable HTTP at http://HOST:PORT/mcp, every request with `Authorization: Bearer
    TOKEN` and a Host naming the server: engine.integrations.httpguard). `reader`: a
    read-only Memory of the same store for the reads that need no model."""
    if transport not in TRANSPORTS:
        raise LetheError(f"unknown transport {transport!r}; use one of {', '.join(TRANSPORTS)}")
    if transport == "http" and not token:
        raise LetheError("lethe mcp over HTTP needs a token (engine.integrations.httpguard)")
    tools = Tools(memory, reader)
    server = build_server(memory, tools)
    try:
        if transport == "stdio":
            server.run("stdio")
        elif token:  # refused above without one
            _serve_http(server, host, port, token)
    finally:
        tools.close()


def _serve_http(server, host: str, port: int, token: str) -> None:
    """The SDK's streamable HTTP app behind the bearer token and Host/Origin guard."""
    import anyio
    import uvicorn

    app = Guard(server.streamable_http_app(host=host), token, host, port, BEARER)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


# ---- adapting Tools to the SDK ----------------------------------------------------------
def _tool(kit, method, lock: threading.Lock):
    """`method` as the SDK wants a tool: its signature with `ARGUMENTS` as pydantic Fields
    (the input schema), answering a CallToolResult that carries the typed dict (the output
    schema) and its text form."""
    sig = inspect.signature(method, eval_str=True)
    kind, fields = sig.return_annotation, ARGUMENTS[method.__name__]
    params = [
        p.replace(annotation=Annotated[p.annotation, kit.Field(**fields[p.name])]) if p.name in fields else p
        for p in sig.parameters.values()
    ]

    def call(**arguments):
        try:
            with lock:
                answer = method(**arguments)
        except LetheError as exc:
            raise kit.ToolError(_first_line(exc)) from None
        shown = kit.TextContent(type="text", text=out.text(kind, answer))
        return kit.CallToolResult(content=[shown], structured_content=answer)

    call.__name__, call.__doc__ = method.__name__, inspect.getdoc(method)
    returns = Annotated[kit.CallToolResult, kind]
    call.__signature__ = sig.replace(parameters=params, return_annotation=returns)  # type: ignore[attr-defined]
    return call


def _resource(kit, lock: threading.Lock, method):
    def read(**arguments) -> str:
        try:
            with lock:
                return method(**arguments)
        except LetheError as exc:
            raise kit.ResourceNotFoundError(_first_line(exc)) from None

    read.__name__, read.__doc__ = method.__name__, inspect.getdoc(method)
    read.__signature__ = inspect.signature(method, eval_str=True)  # type: ignore[attr-defined]
    read.__annotations__ = dict(method.__annotations__)  # pydantic's validate_call reads these
    return read


@functools.cache
def _server_class():
    """MCPServer, with arguments that fail the input schema reported in one line (the
    SDK's own message is pydantic's, several lines long)."""
    kit = sdk()

    class LetheServer(kit.MCPServer):
        async def call_tool(self, name, arguments, context=None):
            unknown = sorted(set(arguments or {}) - set(ARGUMENTS.get(name, {})))
            if unknown:  # a misspelt argument was ignored, and its default used in silence
                raise kit.ToolError(
                    f"Error executing tool {name}: unknown argument"
                    f"{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                    f"{name} takes {', '.join(ARGUMENTS.get(name)) or 'none'}"
                )
            try:
                return await super().call_tool(name, arguments, context)
            except kit.ToolError as exc:
                if isinstance(exc.__cause__, kit.ValidationError):
                    raise kit.ToolError(
                        f"Error executing tool {name}: {argument_errors(exc.__cause__)}"
                    ) from None
                raise

    return LetheServer


def argument_errors(exc) -> str:
    """pydantic's errors as one line: `limit: Input should be ... (got 0); query: ...`."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        got = "" if err["type"] == "missing" else f" (got {_short(err.get('input'))})"
        parts.append(f"{where}: {err['msg']}{got}")
    return "; ".join(parts)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _one_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").split())


def _instructions(memory: Memory) -> str:
    return (
        f"Long-term memory for one agent (namespace '{memory.namespace}', policy "
        f"'{memory.policy.name}'). Call recall before answering from what you know of the "
        "user or project; call remember after a turn that says something worth keeping "
        "(a fact, a preference, a change of plan); newer facts supersede older ones. "
        "why explains a memory's history; forget archives one on request."
    )


def _shown(data, key: str | None = None):
    """`data` (a policy's document) with its secrets as ***."""
    if isinstance(data, dict):
        if key == "headers":
            return {k: "***" for k in data}
        return {k: _shown(v, k) for k, v in data.items()}
    if isinstance(data, list):
        return [_shown(v) for v in data]
    if isinstance(data, str) and key == "base_url":
        return redact(data)
    if isinstance(data, str) and key == "db":
        return masked(data)
    return data
