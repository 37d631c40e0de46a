"""Lethe inside other programs: thin layers over the Python API (`engine.memory.Memory`).

    mcp        an MCP server (`lethe mcp`) for agent hosts: seven tools, two resources
    langgraph  `LetheStore`, a LangGraph `BaseStore`

Each needs its own extra (`pip install 'lethe[mcp]'`, `'lethe[langgraph]'`); the SDKs are
imported only when the integration is used, so the rest of Lethe runs without them.
Importing this package imports neither.
"""
from __future__ import annotations

from ..errors import LetheError


class MissingExtra(LetheError, ImportError):
    """An integration whose SDK is not installed (an ImportError too, as Python expects)."""


def missing_extra(extra: str, what: str, exc: ImportError) -> MissingExtra:
    """The one-line error for an integration whose SDK failed to import: not installed,
    or (the import error then follows) a version without what Lethe uses."""
    message = f"{what} needs the '{extra}' extra: pip install 'lethe[{extra}]'"
    if exc.name != extra:
        message += f" ({exc})"
    return MissingExtra(message)
