"""Where the shipped policies and prompts are: package data, beside `engine.shipped`.

A wheel installed in another project carries `lifecycle` and its templates inside the
`engine.shipped` package, so a bare policy name resolves wherever the process runs. In a
checkout (or an editable install) the same package links to the top-level `policies/` and
`prompts/`. Nothing is computed at import time: the working directory and the installed
package are read when a policy is looked up.
"""

from __future__ import annotations

import os
import stat

from engine import shipped

POLICY_SUFFIX = ".yaml"
DEFAULT_POLICY = "lifecycle"  # the policy a Memory, the CLI and the integrations use unnamed


def _shipped(folder: str) -> str:
    # the package's own folder: importlib.resources.files would say the same for an
    # installed or linked package, and costs 8-16 ms of imports (tempfile, zipfile) at the
    # start of every command that loads a policy. realpath: in a checkout the link leads to
    # the top-level folder, and errors and prompt folders then name the file an author edits
    return os.path.realpath(os.path.join(os.path.dirname(shipped.__file__), folder))


def shipped_policies_dir() -> str:
    """The folder of the policies that ship with the package."""
    return _shipped("policies")


def shipped_prompts_dir() -> str:
    """The folder of the prompt templates that ship with the package."""
    return _shipped("prompts")


def shipped_policy_names() -> list[str]:
    """The bare names of the shipped policies (`lifecycle`, `archive`, ...), sorted."""
    folder = shipped_policies_dir()
    if not os.path.isdir(folder):
        return []
    return sorted(f[: -len(POLICY_SUFFIX)] for f in os.listdir(folder) if f.endswith(POLICY_SUFFIX))


def shipped_policy(name: str) -> str | None:
    """The shipped policy file for a bare name, or None when no such policy ships."""
    path = os.path.join(shipped_policies_dir(), name + POLICY_SUFFIX)
    return path if os.path.isfile(path) else None


class NotReadable(Exception):
    """A file `read_regular` refused: why, in words that follow its name."""


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, for a file a policy names (a
    template, a replay file), which may be anything: /dev/zero, a folder, a FIFO that never
    ends. Opened with O_NONBLOCK, so a FIFO never waits for a writer. Raises NotReadable
    (not a regular file, too large) or the OSError of opening it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable("is not a regular file")
        if info.st_size > limit:
            raise NotReadable(f"is larger than {limit:,} bytes")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while it was read
        raise NotReadable(f"is larger than {limit:,} bytes")
    return data
