"""The name Lethe is published under on the package registry, and the one-line errors for an
optional extra that is not installed. The registry's `lethe` is another project, so Lethe is
`lethe-lifecycle`; the command stays `lethe`, the import `engine`."""

from __future__ import annotations

from typing import TypeVar

from engine.base.errors import LetheError

E = TypeVar("E", bound=LetheError)

NAME = "lethe-lifecycle"
VERSION = "0.1.0"  # the wheel's version too (pyproject.toml reads it from here)


def install(extra: str | None = None) -> str:
    """The pip command that installs Lethe, with `extra`: pip install 'lethe-lifecycle[mcp]'."""
    return f"pip install '{NAME}[{extra}]'" if extra else f"pip install {NAME}"


def is_missing(exc: ImportError, packages: tuple[str, ...]) -> bool:
    """Whether `exc` says one of `packages` is not installed, rather than that something
    inside it (or a file of the user's shadowing a standard module) failed to import."""
    name = getattr(exc, "name", None) or ""
    return isinstance(exc, ModuleNotFoundError) and name.split(".")[0] in packages


def extra_error(
    exc: ImportError,
    extra: str,
    what: str,
    packages: tuple[str, ...],
    error: type[E] = LetheError,  # type: ignore[assignment]
    install_line: str | None = None,
) -> E:
    """`what needs the 'extra' extra: pip install ...` when one of `packages` is missing;
    otherwise the import error itself, which no install of the extra would fix."""
    if is_missing(exc, packages):
        return error(f"{what} needs the '{extra}' extra: {install_line or install(extra)}")
    return error(f"{what}: {packages[0]} is installed but does not import: {type(exc).__name__}: {exc}")
