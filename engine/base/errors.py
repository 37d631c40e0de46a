"""The engine's own errors. The CLI turns these, and only these, into messages and exit codes."""

from __future__ import annotations


class LetheError(Exception):
    """Base of every error the engine raises on purpose."""

    exit_code = 2


class PolicyError(LetheError):
    """A policy or template mistake, located as file:line:col: key.path: message."""

    exit_code = 1
    warnings: list[PolicyError]  # set by the builder: what did not stop loading (validate shows it)

    def __init__(
        self,
        message: str,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        path: str = "",
        excerpt: str = "",
    ):
        self.message, self.file, self.line, self.col = message, file, line, col
        self.path, self.excerpt = path, excerpt
        super().__init__(self.headline())

    def headline(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line or 0}:{self.col or 0}: "
        key = f"{self.path}: " if self.path else ""
        return f"{where}{key}{self.message}"

    def __str__(self) -> str:
        return self.headline() + (f"\n{self.excerpt}" if self.excerpt else "")


class PolicyErrors(PolicyError):
    """Every mistake found in one policy file: it reads as the first one (file, line, col,
    path, message) and prints them all, one located error after another."""

    def __init__(self, errors: list[PolicyError]):
        first = errors[0]
        self.errors = list(errors)
        super().__init__(first.message, first.file, first.line, first.col, first.path, first.excerpt)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


def error_fields(err: PolicyError) -> dict:
    """A located error as JSON fields: file, line, col, path, message."""
    return {"file": err.file, "line": err.line, "col": err.col, "path": err.path, "message": err.message}


class PolicyWarning(UserWarning):
    """A policy that loads but likely does not do what its author meant (a param nothing
    reads), located as file:line:col: key.path: message."""


class RulesFallbackWarning(UserWarning):
    """A model did not answer (unreachable, refused, timed out) and the built-in rules
    judged instead: said once per `Memory`; each such judgment is a `fallback` row of
    `model_calls` with its reason."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(
            f"a model did not answer ({reason}); the built-in rules judged "
            "instead (each time is a 'fallback' row of model_calls)"
        )


class StoreWarning(UserWarning):
    """Something the store could not do that its caller need not stop for (a recall's
    access it kept while a pass held the lock, and could not write at close)."""


class FormulaError(LetheError):
    """A formula that does not compile; `text` is the offending part, quoted in the message.
    `param` names the param whose value is the mistake, when one is."""

    exit_code = 1

    def __init__(self, message: str, offset: int = 0, param: str | None = None):
        self.offset, self.param = offset, param
        super().__init__(message)


class InputError(LetheError, ValueError):
    """An argument the API cannot use (wrong kind, not valid text, out of range, a value
    that is not JSON, too large): a one-line message naming it. Also a ValueError, as
    Python's own functions raise for a bad argument."""


class StoreError(LetheError):
    """A database that cannot be opened, upgraded or written as asked."""


class ExpectationError(LetheError):
    """A scenario or check whose expectation did not hold."""

    exit_code = 1


class LeaseBusy(LetheError):
    """Another runner holds the passes of this namespace: nothing was run. Not a failure
    (exit 0): the other runner is doing the work."""

    exit_code = 0


class LeaseLost(LetheError):
    """The lease ran out while its holder worked and another runner took it over: the
    holder's uncommitted work was rolled back, and the new holder finishes the job."""

    exit_code = 1


class GaveWay(Exception):
    """A pass's one transaction rolled back because a writer was waiting for the lock: the
    pass runs again in ranges (engine/run/passes.py), up to `top`, the largest id it saw.
    Never reaches a caller."""

    def __init__(self, top: int):
        super().__init__(f"gave way to a waiting writer (ids up to {top})")
        self.top = top
