"""Lethe inside other programs: thin layers over the Python API (`engine.memory.Memory`).

    mcp        an MCP server (`lethe mcp`) for agent hosts: seven tools, two resources
    langgraph  `LetheStore`, a LangGraph `BaseStore`

Each needs its own extra (`pip install 'lethe-lifecycle[mcp]'`,
`'lethe-lifecycle[langgraph]'`); the SDKs are
imported only when the integration is used, so the rest of Lethe runs without them.
Importing this package imports neither.
"""

from __future__ import annotations

from engine.base.distribution import extra_error
from engine.base.errors import LetheError

# the packages an integration's SDK brings besides its own (a missing one is the extra missing)
SDK_PACKAGES = {
    "langgraph": ("langchain_core",),
    "mcp": ("pydantic", "starlette", "anyio"),
    "ui": ("starlette", "uvicorn", "python_multipart", "multipart", "anyio"),
}


class MissingExtra(LetheError, ImportError):
    """An integration whose SDK is not installed (an ImportError too, as Python expects)."""


def missing_extra(extra: str, what: str, exc: ImportError) -> MissingExtra:
    """The one-line error for an integration whose SDK failed to import: not installed
    (the extra names it), or installed and failing (the import error itself: a version
    without what Lethe uses, or a file of the user's shadowing a module)."""
    return extra_error(exc, extra, what, (extra, *SDK_PACKAGES.get(extra, ())), MissingExtra)
