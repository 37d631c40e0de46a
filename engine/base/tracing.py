"""OpenTelemetry spans for what Lethe does (the `otel` extra): one per `remember`, `recall`,
pass and judge call, with the GenAI semantic conventions' attributes on judge calls
(`gen_ai.request.model`, `gen_ai.usage.input_tokens`, ...) and Lethe's own (`lethe.*`:
namespace, memory ids, statuses changed). docs/observability.md lists them.

Nothing here imports OpenTelemetry. Spans are made only in a program that has imported
`opentelemetry.trace` itself: one that set up a tracer provider, or runs under
`opentelemetry-instrument`. Anywhere else every call here returns at once, so Lethe
without the extra (or with it installed and unused) starts and runs as it did.
"""

from __future__ import annotations

import contextlib
import sys
import time

from engine.base.distribution import VERSION

TRACER = "lethe"


def _trace():
    """The OpenTelemetry API module when the program uses it, else None."""
    return sys.modules.get("opentelemetry.trace")


class _Unrecorded:
    """What `span()` yields when there is no tracing: setting attributes does nothing."""

    def set_attribute(self, key, value) -> None:
        pass

    def set_attributes(self, attributes) -> None:
        pass


UNRECORDED = _Unrecorded()


def _clean(attributes: dict) -> dict:
    """OpenTelemetry takes text, numbers, booleans and lists of one of them; None is left out."""
    out = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = [v if isinstance(v, (str, int, float, bool)) else str(v) for v in value]
        elif not isinstance(value, (str, int, float, bool)):
            value = str(value)
        out[key] = value
    return out


@contextlib.contextmanager
def span(name: str, **attributes):
    """A span around a block (the current span while it runs, so judge calls inside it
    are its children); yields it, for attributes known only at the end."""
    trace = _trace()
    if trace is None:
        yield UNRECORDED
        return
    tracer = trace.get_tracer(TRACER, VERSION)
    with tracer.start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield _Attributes(current)


class _Attributes:
    """A span that takes Lethe's values as they are (lists of ids, None)."""

    def __init__(self, inner):
        self.inner = inner

    def set_attribute(self, key, value) -> None:
        self.inner.set_attributes(_clean({key: value}))

    def set_attributes(self, attributes) -> None:
        self.inner.set_attributes(_clean(dict(attributes)))


def now() -> int:
    return time.time_ns()


def record(
    name: str, start_ns: int, attributes: dict, error: str | None = None, client: bool = False
) -> None:
    """A span for something already done, from `start_ns` to now, under the current span:
    a judge call is logged when it has ended, where its time and tokens are known."""
    trace = _trace()
    if trace is None:
        return
    kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
    done = trace.get_tracer(TRACER, VERSION).start_span(
        name, kind=kind, start_time=start_ns, attributes=_clean(attributes)
    )
    if error:
        done.set_status(trace.Status(trace.StatusCode.ERROR, error))
    done.end()


def model_call(
    step: str,
    model: str,
    served: str | None,
    provider: str | None,
    input_tokens: int,
    output_tokens: int,
    latency_ms: float,
    outcome: str,
    namespace: str,
    attempt: int = 0,
    estimated: bool = False,
) -> None:
    """A judge call's span, named as the GenAI conventions name a chat call."""
    if _trace() is None:
        return
    failed = outcome in ("unavailable", "bad_answer", "failed")
    record(
        f"chat {model}",
        now() - int(latency_ms * 1e6),
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider or "none",
            "gen_ai.system": provider or "none",
            "gen_ai.request.model": model,
            "gen_ai.response.model": served,
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "error.type": outcome if failed else None,
            "lethe.namespace": namespace,
            "lethe.step": step,
            "lethe.outcome": outcome,
            "lethe.attempt": attempt,
            "lethe.tokens_estimated": estimated,
        },
        error=outcome if failed else None,
        client=provider == "openai",
    )
