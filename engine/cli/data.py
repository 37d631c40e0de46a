"""Commands on a store's memories: run, ls, why, add, remember, pending, costs."""

from __future__ import annotations

import sys

import click

from engine.base.errors import LetheError
from engine.base.lazy import lazy
from engine.cli.base import (
    LIMIT,
    MEMORY_ID,
    Finite,
    IsoTime,
    as_of_option,
    elsewhere,
    emit,
    json_option,
    lease_options,
    model_options,
    open_memory,
    store_options,
)
from engine.memory import Memory
from engine.policy import STATUSES

write = lazy("engine.run.write")  # `lethe pending` only: a pass does not import the pipeline


@click.command()
@store_options
@model_options
@click.option(
    "--pass",
    "pass_names",
    multiple=True,
    metavar="NAME",
    help="Run this pass now (repeatable). Without it: pending turns, then every due pass.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Put the turns parked as failed back in the queue and judge them now.",
)
@lease_options
@json_option
def run(
    db, policy, namespace, now, offline, record, replay, pass_names, retry_failed, wait, lease_ttl, json_
):
    """Run passes (decay, expiry, ...) as the policy declares them, each in one transaction
    (passes of rules alone that follow each other share theirs), under the namespace's
    pass lease: never at the same time as another runner (a daemon, another `lethe run`);
    with another one at work, say so and exit 0. With --pass naming passes of rules alone,
    the policy's templates are found but not parsed (`lethe validate` parses them)."""
    terms = {"wait": wait, "lease_ttl": lease_ttl}
    with open_memory(db, policy, namespace, now, offline, record, replay, only_passes=pass_names) as mem:
        names = list(pass_names) or mem.due()

        def run_them(progress):
            if pass_names:
                return mem.run(names, progress, **terms)
            return mem.run_due(progress, retry_failed=retry_failed, **terms)

        results = _with_progress(mem, names, run_them, json_)
    data = [r.as_dict() for r in results]
    lines = [
        f"{r.name}: {r.changed} changed"
        + "".join(f", {n} {e}" for e, n in sorted(r.events.items()))
        + "".join(f" ({note})" for note in r.notes)
        for r in results
    ]
    emit(data, json_, lines or ["nothing due"])


def _with_progress(mem: Memory, names: list[str], run_them, quiet: bool):
    """A progress bar on a terminal, one tick per statement of the passes about to run."""
    steps = mem.statements(names)
    if quiet or not sys.stderr.isatty() or not names:
        return run_them(None)
    with click.progressbar(length=steps, label="running passes", file=sys.stderr) as bar:
        return run_them(lambda label: bar.update(1))


@click.command(name="ls")
@store_options
@click.option("--query", "-q", help="Only memories matching these words (full text).")
@click.option(
    "--status",
    type=click.Choice([*STATUSES, "all"]),
    help="List memories with this status instead, newest first: what was archived, "
    "superseded, expired or compressed (or all).",
)
@click.option("--limit", type=LIMIT, help="At most this many (default: the policy's; 20 with --status).")
@as_of_option
@json_option
def ls(db, policy, namespace, now, offline, query, status, limit, as_of, json_):
    """List recall candidates in the policy's recall order (what recall would consider),
    or with --status the memories that have that status (what was forgotten, too)."""
    if status and (query or as_of):
        raise click.UsageError("--query and --as-of list recall candidates; use them without --status")
    with open_memory(db, policy, namespace, now, offline, must_exist=True, read_only=True) as mem:
        records = mem.memories(status, limit or 20) if status else mem.candidates(query, limit, as_of=as_of)
        note = elsewhere(mem, records)
    if status:
        return emit(
            [r.as_dict() for r in records],
            json_,
            [status_line(r) for r in records]
            or ["(no memories)" if status == "all" else f"(no {status} memories)"],
            note,
        )
    lines = [
        f"#{r.id:<6} rank {r.rank or 0:6.3f}  imp {r.importance:4.1f}  conf {r.confidence:4.2f}  "
        f"fresh {r.decay_score:4.2f}  {r.summary or r.content[:120]}"
        for r in records
    ]
    emit([r.as_dict() for r in records], json_, lines or ["(no candidates)"], note)


def status_line(r) -> str:
    """One memory with its status, and what replaced or absorbed it."""
    why = f"  (superseded by #{r.contradicted_by})" if r.contradicted_by else ""
    why += f"  (merged into #{r.merged_into})" if r.merged_into else ""
    return f"#{r.id:<6} [{r.status}]  {r.summary or r.content[:120]}{why}"


@click.command()
@store_options
@click.argument("memory_id", type=MEMORY_ID)
@as_of_option
@json_option
def why(db, policy, namespace, now, offline, memory_id, as_of, json_):
    """Show a memory's whole history: its events, what superseded it, what it merged into."""
    with open_memory(db, policy, namespace, now, offline, must_exist=True, read_only=True) as mem:
        try:
            h = mem.history(memory_id, as_of=as_of)
        except LetheError:  # the CLI's user owns the file: say where the id is
            held_by = mem.namespace_of(memory_id)
            if held_by is None:
                raise
            raise LetheError(
                f"no memory #{memory_id} in namespace '{mem.namespace}': "
                f"#{memory_id} belongs to namespace '{held_by}'"
            ) from None
    m = h.memory
    data = {
        "memory": m.as_dict(),
        "events": h.events,
        "superseded_by": h.superseded_by.as_dict() if h.superseded_by else None,
        "merged_into": h.merged_into.as_dict() if h.merged_into else None,
    }
    lines = [
        f"#{m.id} [{m.status}] {m.content}",
        f"  importance {_short(m.importance)}  confidence {_short(m.confidence)}  "
        f"decay {_short(m.decay_score)}  "
        f"accessed {m.access_count}x  said {m.created_at}  expires {m.expires_at or '-'}",
        "  recorded             said                 event",
    ]
    for e in h.events:  # when Lethe recorded each change, and when what it records was said
        at = e.get("said_at") or e["occurred_at"]
        lines.append(f"  {e['occurred_at']}  {at:<19}  {e['event_type']:<12} {e['detail'] or ''}")
    # what replaced it, unless an event already says so word for word (a `superseded`
    # event names the new memory and its text: the line printed it a second time)
    said = [str(e["detail"] or "") for e in h.events]
    for what, other in (("superseded by", h.superseded_by), ("merged into", h.merged_into)):
        if other:
            text = f"{what} #{other.id}: {other.content[:100]}"
            if not any(text in detail for detail in said):
                lines.append(f"  {text}")
    emit(data, json_, lines)


@click.command()
@store_options
@model_options
@click.argument("content")
@click.option("--summary", help="Short form for recall indexes (default: the first 120 characters).")
@click.option("--tags", help="Comma-separated tags.")
@click.option("--importance", type=Finite(0, 10), help="How much this matters, 0-10 (default 5).")
@click.option(
    "--confidence", type=Finite(0, 1), help="How sure we are, 0-1 (default: the confidence judge's rating)."
)
@click.option(
    "--expires-at",
    type=IsoTime(end_of_day=True),
    help="When this stops being true (a bare date: the end of that day).",
)
@json_option
@click.option("--raw", is_flag=True, help="Store exactly as given: no judges at all.")
def add(
    db,
    policy,
    namespace,
    now,
    offline,
    record,
    replay,
    content,
    summary,
    tags,
    importance,
    confidence,
    expires_at,
    json_,
    raw,
):
    """Store CONTENT as a memory. Every write step of the policy runs except the gate
    (confidence, contradiction, expiry); values given as options win over judgments."""
    tag_list = [t.strip() for t in (tags or "").split(",") if t.strip()]
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        new_id = mem.add(
            content,
            summary=summary,
            tags=tag_list,
            importance=importance,
            confidence=confidence,
            expires_at=expires_at,
            judged=not raw,
        )
        record = mem.get(new_id)
    emit(
        record.as_dict(),
        json_,
        f"#{new_id} [{record.status}] {record.content}"
        f"  (confidence {record.confidence:g}, expires {record.expires_at or '-'})",
    )


@click.command()
@store_options
@model_options
@click.argument("user")
@click.argument("assistant", default="")
@json_option
def remember(db, policy, namespace, now, offline, record, replay, user, assistant, json_):
    """Judge one conversation turn (USER said, ASSISTANT answered) and store what is worth
    keeping. If a model is unreachable the turn stays pending (see `lethe pending`)."""
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        written = mem.remember(user, assistant)
        records = {i: mem.get(i) for i in [*written, *(old for old, _ in written.superseded)]}
        rows = mem.pending()
    reasons = write.pending_reasons(rows)
    data = {
        **written.as_dict(),
        "memories": [records[i].as_dict() for i in written],
        "pending": len(rows),
        "pending_reason": written.pending,
        "pending_reasons": reasons,
    }
    for entry in data["superseded"]:
        entry["content"] = records[entry["id"]].content
    lines = written_lines(written, records) or ["nothing stored"]
    if rows:
        retry = "`lethe run` retries them" + (
            " (--retry-failed: the parked ones)" if any(r["status"] == "failed" for r in rows) else ""
        )
        if len(reasons) == 1:
            lines.append(f"{len(rows)} turn(s) pending ({next(iter(reasons))}); {retry}")
        else:
            lines.append(f"{len(rows)} turn(s) pending; {retry}; `lethe pending` lists them:")
            lines += [f"  {n} turn(s): {reason}" for reason, n in reasons.items()]
    emit(data, json_, lines)


def written_lines(written, records: dict) -> list[str]:
    """What one write did, memory by memory: stored (and what it superseded, when it
    expires) or reinforced."""
    expiring = dict(written.expiring)
    lines = []
    for i in written:
        r = records[i]
        if i in written.reinforced:
            lines.append(f"#{i} [{r.status}] {r.content}  (reinforced: confidence now {r.confidence:g})")
            continue
        lines.append(f"#{i} [{r.status}] {r.content}")
        lines += [
            f"  supersedes #{old}: {records[old].content}" for old, new in written.superseded if new == i
        ]
        if i in expiring:
            lines.append(f"  expires {expiring[i]}")
    return lines


@click.command()
@store_options
@click.option(
    "--retry",
    "retry_ids",
    multiple=True,
    type=MEMORY_ID,
    metavar="ID",
    help="Put this turn (parked as failed, or waiting to be tried again) back in "
    "the queue for the next `lethe run` (repeatable).",
)
@json_option
def pending(db, policy, namespace, now, offline, retry_ids, json_):
    """List turns saved but not yet judged: a model was unreachable, or judging failed
    (then they are tried again later, and parked as FAILED after repeated failures)."""
    with open_memory(db, policy, namespace, now, offline, must_exist=True, read_only=not retry_ids) as mem:
        if retry_ids:
            mem.retry_turns(retry_ids)
        rows = mem.pending()
    emit(rows, json_, [_turn_line(r) for r in rows] or ["nothing pending"])


def _turn_line(r: dict) -> str:
    when = f", next try after {r['next_retry_at']}" if r["next_retry_at"] else ""
    state = " FAILED" if r["status"] == "failed" else ""
    again = f"; retry with `lethe pending --retry {r['id']}`" if state else ""
    return (
        f"turn {r['id']}{state} ({r['attempts']} attempts, last error: "
        f"{r['last_error'] or '-'}{when}{again}): {r['user_text'][:80]}"
    )


@click.command()
@store_options
@json_option
def costs(db, policy, namespace, now, offline, json_):
    """Sum every logged model call per step and model: calls, tokens, latency, outcomes."""
    with open_memory(db, policy, namespace, now, offline, must_exist=True, read_only=True) as mem:
        rows = mem.costs()
    lines = [
        f"{r['step']:<14} {r['model']:<14} {r['calls']:>5} calls  {r['prompt_tokens']:>8} in  "
        f"{r['completion_tokens']:>7} out{'*' if r['estimated'] else ' '} "
        f"{r['avg_latency_ms']:>8} ms avg  {r['ok']} ok  {r['repaired']} repaired  "
        f"{r['retried']} retried  {r['fell_back']} fell back  {r['failed']} failed"
        + (f"  {r['unavailable']} unavailable" if r["unavailable"] else "")
        + (f"  (*{r['estimated']} estimated)" if r["estimated"] else "")
        for r in rows
    ]
    emit(rows, json_, lines or ["no model calls logged"])


def _short(value):
    """A score as `lethe why` shows it: three decimals (`decay 0.406`, not 0.4062039116581577)."""
    return round(value, 3) if isinstance(value, float) else value
