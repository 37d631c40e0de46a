"""`lethe`: the command line. Commands parse options, call one engine function, print.

Exit codes: 0 ok, 1 a policy, validation or expectation failure, 2 usage or internal error.
Engine errors become messages in one place (`LetheGroup.invoke`), not in each command.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import click

from . import policy as policy_mod
from .clock import FixedClock
from .errors import LetheError
from .memory import DEFAULT_POLICY, Memory

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LetheGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except LetheError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:  # a bug, not a user mistake: say so, keep the exit code apart
            if os.environ.get("LETHE_DEBUG"):
                traceback.print_exc()
            click.echo(f"internal error: {type(exc).__name__}: {exc} "
                       "(set LETHE_DEBUG=1 for the traceback)", err=True)
            ctx.exit(2)


@click.group(cls=LetheGroup, context_settings=CONTEXT)
@click.version_option(package_name="lethe")
def main():
    """Lethe: agent memory with a lifecycle. Memories decay, get superseded, expire and
    merge as a YAML policy says; every change is an event you can audit.

    Start with `lethe validate policies/*.yaml`, then `lethe add`, `lethe run`, `lethe ls`
    and `lethe why ID` against a database file (--db or LETHE_DB)."""


# ---- shared options -----------------------------------------------------------------
def json_option(f):
    return click.option("--json", "json_", is_flag=True, help="Print JSON instead of text.")(f)


def store_options(f):
    """--db, --policy, --namespace, --now, --offline: what every data command needs."""
    f = click.option("--offline", is_flag=True,
                     help="Use the built-in rules judges for every model (no network).")(f)
    f = click.option("--now", metavar="ISO",
                     help="Pretend the clock reads this time (e.g. 2026-03-01T09:00:00).")(f)
    f = click.option("--namespace", "-n", default="default", envvar="LETHE_NAMESPACE",
                     show_default=True, help="The agent whose memories to use (env LETHE_NAMESPACE).")(f)
    f = click.option("--policy", "-p", default=DEFAULT_POLICY, envvar="LETHE_POLICY",
                     show_default=True,
                     help="Policy file, or a name in ./policies (env LETHE_POLICY).")(f)
    f = click.option("--db", envvar="LETHE_DB",
                     help="SQLite database file (env LETHE_DB; default: the policy's `db:`).")(f)
    return f


def model_options(f):
    """--record / --replay on every command that may call a model."""
    f = click.option("--replay", metavar="FILE", type=click.Path(dir_okay=False),
                     help="Answer every judgment from answers recorded in FILE.")(f)
    f = click.option("--record", metavar="FILE", type=click.Path(dir_okay=False),
                     help="Append every model answer to FILE (JSON lines) for --replay.")(f)
    return f


def open_memory(db, policy, namespace, now, offline, record=None, replay=None) -> Memory:
    pol = policy_mod.load(policy)
    path = db or pol.db
    if not path:
        raise click.UsageError("no database: pass --db FILE or set LETHE_DB")
    clock = FixedClock(now) if now else None
    return Memory(path, policy=pol, namespace=namespace, offline=offline, clock=clock,
                  record=record, replay=replay)


def emit(data, json_: bool, text) -> None:
    if json_:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        for line in ([text] if isinstance(text, str) else text):
            click.echo(line)


# ---- policy commands ----------------------------------------------------------------
@main.command()
@click.argument("policies", nargs=-1, required=True)
@json_option
def validate(policies, json_):
    """Load each POLICY and report every mistake with file:line:col. Exit 1 if any fails."""
    results = []
    for ref in policies:
        try:
            pol = policy_mod.load(ref)
            results.append({"policy": ref, "ok": True, "name": pol.name,
                            "passes": list(pol.passes), "write": [s.step for s in pol.write]})
        except LetheError as exc:
            results.append({"policy": ref, "ok": False, "error": str(exc)})
    lines = []
    for r in results:
        if r["ok"]:
            lines.append(f"ok    {r['policy']}  ({r['name']}: passes {', '.join(r['passes']) or '-'};"
                         f" write {', '.join(r['write']) or '-'})")
        else:
            lines.append(f"FAIL  {r['error']}")
    emit(results, json_, lines)
    if not all(r["ok"] for r in results):
        sys.exit(1)


@main.command(name="compile")
@click.argument("policy")
@click.option("--dialect", type=click.Choice(["sqlite", "postgres"]), default="sqlite",
              show_default=True, help="SQL dialect to compile for.")
@json_option
def compile_(policy, dialect, json_):
    """Print the SQL and parameters of every pass and of recall, as POLICY compiles."""
    from .plan import compile_policy, render_plan

    plan = compile_policy(policy_mod.load(policy), dialect)
    data = {name: [{"label": s.label, "sql": s.sql, "params": s.shown_params()} for s in sts]
            for name, sts in plan.passes.items()}
    data["recall"] = [{"label": s.label, "sql": s.sql, "params": s.shown_params()}
                      for s in (plan.recall, plan.recall_query)]
    emit(data, json_, render_plan(plan).rstrip("\n"))


# ---- data commands ------------------------------------------------------------------
@main.command()
@store_options
@model_options
@click.option("--pass", "pass_names", multiple=True, metavar="NAME",
              help="Run this pass now (repeatable). Without it: pending turns, then every due pass.")
@json_option
def run(db, policy, namespace, now, offline, record, replay, pass_names, json_):
    """Run passes (decay, expiry, ...) as the policy declares them, each in one transaction."""
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        names = list(pass_names) or mem.due()
        run_them = (lambda progress: mem.run(names, progress)) if pass_names else mem.run_due
        results = _with_progress(mem, names, run_them, json_)
    data = [r.as_dict() for r in results]
    lines = [f"{r.name}: {r.changed} changed"
             + "".join(f", {n} {e}" for e, n in sorted(r.events.items()))
             + "".join(f" ({note})" for note in r.notes) for r in results]
    emit(data, json_, lines or ["nothing due"])


def _with_progress(mem: Memory, names: list[str], run_them, quiet: bool):
    """A progress bar on a terminal, one tick per statement of the passes about to run."""
    steps = sum(max(1, len(mem.plan.passes.get(n, []))) for n in names)
    if quiet or not sys.stderr.isatty() or not names:
        return run_them(None)
    with click.progressbar(length=steps, label="running passes", file=sys.stderr) as bar:
        return run_them(lambda label: bar.update(1))


@main.command(name="ls")
@store_options
@click.option("--query", "-q", help="Only memories matching these words (full text).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many (default: the policy's).")
@json_option
def ls(db, policy, namespace, now, offline, query, limit, json_):
    """List recall candidates in the policy's recall order (what recall would consider)."""
    with open_memory(db, policy, namespace, now, offline) as mem:
        records = mem.candidates(query, limit)
    lines = [f"#{r.id:<6} rank {r.rank or 0:6.3f}  imp {r.importance:4.1f}  conf {r.confidence:4.2f}  "
             f"fresh {r.decay_score:4.2f}  {r.summary or r.content[:120]}" for r in records]
    emit([r.as_dict() for r in records], json_, lines or ["(no candidates)"])


@main.command()
@store_options
@click.argument("memory_id", type=int)
@json_option
def why(db, policy, namespace, now, offline, memory_id, json_):
    """Show a memory's whole history: its events, what superseded it, what it merged into."""
    with open_memory(db, policy, namespace, now, offline) as mem:
        h = mem.history(memory_id)
    m = h.memory
    data = {"memory": m.as_dict(), "events": h.events,
            "superseded_by": h.superseded_by.as_dict() if h.superseded_by else None,
            "merged_into": h.merged_into.as_dict() if h.merged_into else None}
    lines = [f"#{m.id} [{m.status}] {m.content}",
             f"  importance {m.importance}  confidence {m.confidence}  decay {m.decay_score}  "
             f"accessed {m.access_count}x  created {m.created_at}  expires {m.expires_at or '-'}"]
    for e in h.events:
        lines.append(f"  {e['occurred_at']}  {e['event_type']:<12} {e['detail'] or ''}")
    if h.superseded_by:
        lines.append(f"  superseded by #{h.superseded_by.id}: {h.superseded_by.content[:100]}")
    if h.merged_into:
        lines.append(f"  merged into #{h.merged_into.id}: {h.merged_into.content[:100]}")
    emit(data, json_, lines)


@main.command()
@store_options
@model_options
@click.argument("content")
@click.option("--summary", help="Short form for recall indexes (default: the first 120 characters).")
@click.option("--tags", help="Comma-separated tags.")
@click.option("--importance", type=click.FloatRange(0, 10),
              help="How much this matters, 0-10 (default 5).")
@click.option("--confidence", type=click.FloatRange(0, 1),
              help="How sure we are, 0-1 (default: the confidence judge's rating).")
@click.option("--expires-at", metavar="ISO", help="When this stops being true.")
@json_option
@click.option("--raw", is_flag=True, help="Store exactly as given: no judges at all.")
def add(db, policy, namespace, now, offline, record, replay, content, summary, tags, importance,
        confidence, expires_at, json_, raw):
    """Store CONTENT as a memory. Every write step of the policy runs except the gate
    (confidence, contradiction, expiry); values given as options win over judgments."""
    tag_list = [t.strip() for t in (tags or "").split(",") if t.strip()]
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        new_id = mem.add(content, summary=summary, tags=tag_list, importance=importance,
                         confidence=confidence, expires_at=expires_at, judged=not raw)
        record = mem.get(new_id)
    emit(record.as_dict(), json_, f"#{new_id} [{record.status}] {record.content}"
         f"  (confidence {record.confidence:g}, expires {record.expires_at or '-'})")


@main.command()
@store_options
@model_options
@click.argument("user")
@click.argument("assistant", default="")
@json_option
def remember(db, policy, namespace, now, offline, record, replay, user, assistant, json_):
    """Judge one conversation turn (USER said, ASSISTANT answered) and store what is worth
    keeping. If a model is unreachable the turn stays pending (see `lethe pending`)."""
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        ids = mem.remember(user, assistant)
        records = [mem.get(i) for i in ids]
        pending = len(mem.pending())
    data = {"ids": ids, "memories": [r.as_dict() for r in records], "pending": pending}
    lines = [f"#{r.id} [{r.status}] {r.content}" for r in records] or ["nothing stored"]
    if pending:
        lines.append(f"{pending} turn(s) pending: a model was unreachable; `lethe run` retries them")
    emit(data, json_, lines)


@main.command()
@store_options
@model_options
@click.argument("query")
@click.option("--top", "top_n", type=click.IntRange(min=1), help="At most this many (default: the policy's top_n).")
@click.option("--explain", is_flag=True, help="Show every candidate's score parts and why others "
              "were left out; records no access.")
@json_option
def recall(db, policy, namespace, now, offline, record, replay, query, top_n, explain, json_):
    """What the agent should know for QUERY: the policy's candidates, picked by its select
    judge; the chosen memories' access is recorded."""
    with open_memory(db, policy, namespace, now, offline, record, replay) as mem:
        if explain:
            return cli_agent.show_explanation(mem, query, top_n, json_)
        records = mem.recall(query, top_n)
    lines = [f"#{r.id} (conf {r.confidence:.2f} fresh {r.decay_score:.2f}) {r.content}" for r in records]
    emit([r.as_dict() for r in records], json_, lines or ["(nothing recalled)"])


@main.command()
@store_options
@json_option
def pending(db, policy, namespace, now, offline, json_):
    """List turns saved but not yet judged because a model was unreachable."""
    with open_memory(db, policy, namespace, now, offline) as mem:
        rows = mem.pending()
    lines = [f"turn {r['id']} ({r['attempts']} attempts, last error: {r['last_error'] or '-'}): "
             f"{r['user_text'][:80]}" for r in rows]
    emit(rows, json_, lines or ["nothing pending"])


@main.command()
@store_options
@json_option
def costs(db, policy, namespace, now, offline, json_):
    """Sum every logged model call per step and model: calls, tokens, latency, outcomes."""
    with open_memory(db, policy, namespace, now, offline) as mem:
        rows = mem.store.costs(namespace)
    lines = [f"{r['step']:<14} {r['model']:<14} {r['calls']:>5} calls  {r['prompt_tokens']:>8} in  "
             f"{r['completion_tokens']:>7} out{'*' if r['estimated'] else ' '} "
             f"{r['avg_latency_ms']:>8} ms avg  {r['ok']} ok  {r['repaired']} repaired  "
             f"{r['retried']} retried  {r['fell_back']} fell back  {r['failed']} failed"
             + (f"  {r['unavailable']} unavailable" if r['unavailable'] else "")
             + (f"  (*{r['estimated']} estimated)" if r['estimated'] else "")
             for r in rows]
    emit(rows, json_, lines or ["no model calls logged"])


@main.command()
@click.argument("policy")
@click.argument("step")
@click.option("--vars", "vars_file", type=click.File("r"), metavar="FILE.json",
              help="Template variables as JSON (default: {}).")
def render(policy, step, vars_file):
    """Print the prompt POLICY's STEP (gate, confidence, contradiction, expiry, fused,
    cluster, merge, select, ...) renders to, with variables from --vars."""
    from .prompts import render as render_template

    pol = policy_mod.load(policy)
    judgment = policy_mod.find_judgment(pol, step)
    try:
        variables = json.load(vars_file) if vars_file else {}
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--vars") from None
    variables.setdefault("today", "2026-01-05")
    click.echo(render_template(judgment.prompt, pol.prompt_dirs, variables), nl=False)


# commands that live in their own modules register themselves on `main`
from . import cli_agent, cli_scenarios  # noqa: E402,F401

if __name__ == "__main__":  # pragma: no cover
    main()
