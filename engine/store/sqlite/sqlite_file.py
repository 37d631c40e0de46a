"""The file a SQLite store opens: whether it can be opened as asked (`unusable`, in
words), and the absolute path every connection of the store opens (`absolute`), so its
lease, checkpoint thread and waiters find the same file after the process changes its
current directory."""

from __future__ import annotations

import os
import urllib.parse

# the commands that open a store read-only, and so work where it cannot be written
READ_ONLY_COMMANDS = "lethe ls, why, pending and costs (and lethe import from it)"


def unusable(path: str, read_only: bool) -> str | None:
    """Why `path` cannot be opened as asked, in words, before SQLite says only "unable to
    open database file" or "attempt to write a readonly database" (at the first write):
    a directory, a folder that does not exist, or a file or folder a writer may not write
    (SQLite writes the file and, beside it, its -wal and -shm files). None when it looks
    usable (SQLite may still refuse it: then its own error is shown)."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    path = os.path.realpath(path)  # a link: SQLite writes -wal and -shm beside its target
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        return f"it is a directory, not a database file (give a file, e.g. {os.path.join(path, 'agent.db')})"
    if not os.path.isdir(folder):
        return f"the directory {folder} does not exist"
    if read_only:
        return None
    beside = [path + "-wal", path + "-shm"]
    if os.path.exists(path) and not os.access(path, os.W_OK):
        what = "the file is read-only (its mode, or a read-only mount)"
    elif not os.access(folder, os.W_OK) and not all(
        os.path.exists(p) and os.access(p, os.W_OK) for p in beside
    ):
        what = (
            f"its directory {folder} is read-only, and SQLite "
            "needs to write its -wal and -shm files (the write-ahead log) beside it"
        )
    else:
        return None
    return (
        f"{what}, so this command, which writes, cannot use it; on a read-only file or "
        f"mount only the commands that read work: {READ_ONLY_COMMANDS}"
    )


def file_path(target: str) -> str:
    """The file a `file:` URI names (its path, unquoted, without its query), so a command
    that reads checks the same file a command that writes opened; any other target as is."""
    if not target.startswith("file:"):
        return target
    parsed = urllib.parse.urlsplit(target)
    return urllib.parse.unquote(parsed.path) or target


def on_disk(path: str) -> bool:
    """A file path, not an in-memory database nor a `file:` URI (read as it is)."""
    return path not in ("", ":memory:") and not path.startswith("file:")


def absolute(path: str) -> str:
    """`path` made absolute; an in-memory database and a `file:` URI as they are."""
    return os.path.abspath(path) if on_disk(path) else path
