"""Commands for an agent at work: recall (and `--explain`), daemon (the scheduler), chat."""

from __future__ import annotations

import signal
import sys
import threading

import click

from engine.apps.chat import ChatSession, chat_model_for
from engine.base.errors import StoreError
from engine.cli.base import (
    LIMIT,
    Finite,
    as_of_option,
    echo,
    elsewhere,
    emit,
    json_option,
    lease_ttl_option,
    model_options,
    open_memory,
    store_options,
    to_json,
)
from engine.run.scheduler import Scheduler


# ---- recall -------------------------------------------------------------------------
@click.command()
@store_options
@model_options
@click.argument("query")
@click.option("--top", "top_n", type=LIMIT, help="At most this many (default: the policy's top_n).")
@click.option(
    "--explain",
    is_flag=True,
    help="Show every candidate's score parts and why others were left out; records no access.",
)
@as_of_option
@json_option
def recall(db, policy, namespace, now, offline, record, replay, query, top_n, explain, as_of, json_):
    """What the agent should know for QUERY: the policy's candidates, picked by its select
    judge; the chosen memories' access is recorded."""
    with open_memory(
        db, policy, namespace, now, offline, record, replay, must_exist=True, read_only=as_of is not None
    ) as mem:
        if explain:
            return show_explanation(mem, query, top_n, json_)
        records = mem.recall(query, top_n, as_of=as_of)
        lines = [
            f"#{r.id} (conf {r.confidence:.2f} fresh {r.decay_score:.2f}{_past(r.status)}) {r.content}"
            for r in records
        ]
        # printed before the store closes: an access kept while a pass holds the lock is
        # written at close, which waits for the lock; the answer does not
        emit([r.as_dict() for r in records], json_, lines or ["(nothing recalled)"], elsewhere(mem, records))
        sys.stdout.flush()  # a pipe's reader has it now, not when the process ends


def show_explanation(mem, query: str, top_n: int | None, json_: bool) -> None:
    """Print why recall returns what it returns for QUERY (`lethe recall --explain`)."""
    ex = mem.explain(query, top_n)
    emit(ex.as_dict(), json_, explanation_lines(ex), elsewhere(mem, ex.candidates))


def explanation_lines(ex) -> list[str]:
    picking = f"select: {ex.select}, top {ex.top_n}" if ex.select else f"top {ex.top_n}, no select step"
    lines = [
        f"recall {ex.query!r} with policy {ex.policy}",
        f"  where {ex.where}; order by {ex.order}; limit {ex.limit}; {picking}",
        f"  {'pos':>3} {'id':>6}  pick  {'rank':>7} {'imp':>6} {'conf':>5} {'decay':>5} "
        f"{'rel':>5}  {'order key':>9}  summary",
    ]
    for c in ex.candidates:
        m, key = c.memory, c.order_keys[0] if c.order_keys else None
        if c.past and (c.position == 1 or not ex.candidates[c.position - 2].past):
            lines.append("  nothing above was picked: recall.fallback's best matches (their status shown)")
        lines.append(
            f"  {c.position:>3} {'#' + str(m.id):>6}  {'yes' if c.chosen else '-':<4}  "
            f"{m.rank or 0:7.3f} {m.importance:6.1f} {m.confidence:5.2f} {m.decay_score:5.2f} "
            f"{m.relevance or 0:5.2f}  {_num(key):>9}  {f'[{m.status}] ' if c.past else ''}"
            f"{(m.summary or m.content)[:60]}"
        )
    if not ex.candidates:
        lines.append("  (no candidates)")
    f = ex.filtered
    out = ", ".join(
        f"{n} {reason.replace('_', ' ')}" for reason, n in f.items() if reason not in ("below_floor",)
    )
    lines.append(f"left out: {out}, {f.get('below_floor', 0)} below the recall floor (failing: {ex.where})")
    lines.append(
        f"also: {ex.beyond_limit} eligible beyond the limit of {ex.limit}, "
        f"{ex.not_chosen} candidates not picked"
    )
    return lines


def _past(status: str) -> str:
    """A recalled memory that is not active came from `recall.fallback`: its status says why."""
    return f", {status}" if status != "active" else ""


def _num(v) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else str(v if v is not None else "-")


# ---- daemon -------------------------------------------------------------------------
FAILING_FOR = 300.0  # seconds of failed ticks in a row before the daemon exits (code 2)


@click.command()
@store_options
@model_options
@click.option(
    "--interval",
    type=Finite(min=0.01),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between ticks; each tick runs whatever is due.",
)
@lease_ttl_option
@json_option
def daemon(db, policy, namespace, now, offline, record, replay, interval, lease_ttl, json_):
    """Run the scheduler in the foreground: every --interval seconds, pending turns and due
    passes, never at the same time as another scheduler on the same store and namespace.
    Stops cleanly on Ctrl-C (SIGINT) or SIGTERM."""
    stop = threading.Event()
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        sched = Scheduler(
            mem,
            interval,
            lease_ttl=lease_ttl,
            on_tick=lambda results: _report_tick(results, json_),
            give_up_after=max(FAILING_FOR, 3 * interval),  # then a supervisor restarts it
        )
        handlers = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
        echo(
            f"lethe daemon: policy {mem.policy.name}, {mem.database}, namespace "
            f"{namespace}, every {interval:g}s (holder {sched.holder}); Ctrl-C stops",
            err=True,
        )
        try:
            sched.start()
            while not stop.wait(0.25):
                if sched.gave_up is not None:
                    raise StoreError(f"lethe daemon: {sched.gave_up}")
        finally:
            stopped = sched.stop()
            for s, h in handlers.items():
                signal.signal(s, h)
        echo(
            "lethe daemon: stopped"
            if stopped
            else "lethe daemon: stopped (a model call was still out; its pass will run again)",
            err=True,
        )


def _report_tick(results, json_: bool) -> None:
    if results is None:
        why = "another runner holds the lease"
        data: dict[str, object] = {"skipped": why}
        lines = [f"skipped: {why}"]
    elif not results:
        return  # nothing was due: stay quiet
    else:
        data = {"ran": [r.as_dict() for r in results]}
        lines = [
            f"{r.ran_at}  {r.name}: {r.changed} changed"
            + "".join(f", {n} {e}" for e, n in sorted(r.events.items()))
            + "".join(f" ({note})" for note in r.notes)
            for r in results
        ]
    if json_:
        click.echo(to_json(data, indent=None))
    else:
        emit(data, False, lines)
    sys.stdout.flush()


# ---- chat ---------------------------------------------------------------------------
@click.command()
@store_options
@model_options
@click.option(
    "--answer-model",
    default="gpt-4o-mini",
    show_default=True,
    envvar="LETHE_ANSWER_MODEL",
    help="The chat model that answers (env LETHE_ANSWER_MODEL); judges use the policy's models.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="OpenAI-compatible endpoint of the chat model (default $OPENAI_BASE_URL, then "
    "api.openai.com). With --offline, the only way to get answers.",
)
@click.option("--no-answer", is_flag=True, help="Never ask a chat model: show what was recalled and stored.")
@click.option(
    "--template",
    default="chat.j2",
    show_default=True,
    help="Prompt template for the chat model, looked up in the policy's prompt folders.",
)
@click.option("--top", "top_n", type=LIMIT, help="Recall at most this many memories a turn.")
@json_option
def chat(
    db,
    policy,
    namespace,
    now,
    offline,
    record,
    replay,
    answer_model,
    base_url,
    no_answer,
    template,
    top_n,
    json_,
):
    """Chat in the terminal with an agent that uses its memory: each message is recalled
    against the store, answered by --answer-model with the recalled memories in its prompt,
    then remembered. --offline keeps the judges on their built-in rules and, without
    --base-url, shows what was recalled and stored instead of an answer (as does having no
    OPENAI_API_KEY). Reads messages line by line from stdin; /quit or end of input ends."""
    model, why_not = chat_model_for(answer_model, base_url, offline, not no_answer)
    interactive = sys.stdin.isatty()
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        session = ChatSession(mem, model, template, top_n, no_model_note=why_not)
        if why_not and not json_:
            echo(f"({why_not}; showing what is recalled and stored)")
        try:
            for user in _messages(interactive):
                turn = session.turn(user)
                if json_:  # one JSON object a line, as turns happen
                    click.echo(to_json(turn.as_dict(), indent=None))
                else:
                    emit(None, False, _turn_lines(turn, said=why_not))
        except KeyboardInterrupt:  # Ctrl-C mid-turn: the turn is in the inbox, nothing lost
            click.echo("", err=True)
        finally:
            session.close()


def _messages(interactive: bool):
    while True:
        if interactive:
            click.echo("you> ", nl=False)
        line = sys.stdin.readline()
        if not line or line.strip() in ("/quit", "/exit"):
            return
        if line.strip():
            yield line.strip()


def _stored_lines(turn) -> list[str]:
    """What remember did with the turn: stored (superseding, expiring) or reinforced."""
    w = turn.written
    reinforced, expiring = set(w.reinforced) if w else set(), dict(w.expiring) if w else {}
    lines = []
    for m in turn.stored:
        if m.id in reinforced:
            lines.append(f"  reinforced #{m.id} (confidence now {m.confidence:g}): {m.content}")
            continue
        lines.append(f"  stored #{m.id} [{m.status}]: {m.content}")
        lines += [f"    supersedes #{old.id}: {old.content}" for old, new in turn.superseded if new == m.id]
        if m.id in expiring:
            lines.append(f"    expires {expiring[m.id]}")
    return lines


def _turn_lines(turn, said: str | None) -> list[str]:
    lines = [
        f"  recalled #{m.id} (conf {m.confidence:.2f}, fresh {m.decay_score:.2f}): {m.content}"
        for m in turn.recalled
    ] or ["  recalled nothing"]
    if turn.answer is not None:
        lines.append(f"assistant> {turn.answer}")
    elif turn.note and turn.note != said:  # why there is no answer, unless said at the start
        lines.append(f"  ({turn.note})")
    lines += _stored_lines(turn) or ["  stored nothing"]
    if turn.pending:
        lines.append(f"  {turn.pending} turn(s) wait for a judge model; `lethe run` retries them")
    return lines
