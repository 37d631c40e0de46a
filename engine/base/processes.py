"""Processes of this host: whether one a name was written by has gone. A lease holder
(`host:pid:random`) and an import's temp copy (`lethe-import-<pid>@<host>-...`) both name
their process, so a successor on the same host knows at once when it died."""

from __future__ import annotations

import os


def gone(pid: str) -> bool:
    """Whether `pid` (digits) names no process of this host any more. What cannot be told
    (not a pid, another user's process) is not gone."""
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def host() -> str:
    """This machine's name (socket.gethostname(), without importing socket where os has it)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def holder_gone(holder: str) -> bool:
    """Whether `holder` (`host:pid:...`, a lease's or a claim's) names a process of this
    host that has died."""
    name, _, rest = str(holder).partition(":")
    return name == host() and gone(rest.partition(":")[0])
