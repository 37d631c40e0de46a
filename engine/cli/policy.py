"""Commands on policy files, no database: validate, compile, render."""

from __future__ import annotations

import json
import sys

import click

from engine import policy as policy_mod
from engine.base import distribution
from engine.base.errors import LetheError, PolicyError, error_fields
from engine.base.lazy import lazy
from engine.cli.base import echo, emit, json_option
from engine.plan import compile_policy, render_plan
from engine.policy import variables
from engine.prompts import render as render_template
from engine.prompts import used_names

embeddings = lazy("engine.judges.embeddings")  # only a policy with `embed:` asks it anything


@click.command()
@click.argument("policies", nargs=-1, required=True)
@json_option
def validate(policies, json_):
    """Load each POLICY and report every mistake with file:line:col (a param no formula
    reads among them), every warning, and an extra the policy needs that is not
    installed. Exit 1 if any fails."""
    results = [_validated(ref) for ref in policies]
    lines = []
    for r in results:
        if r["ok"]:
            lines.append(
                f"ok    {r['policy']}  ({r['name']}: passes {', '.join(r['passes']) or '-'};"
                f" write {', '.join(r['write']) or '-'})"
            )
        else:
            lines += [f"FAIL  {text}" for text in r["shown"]]
        lines += [f"warn  {text}" for text in r["shown_warnings"]]
    emit([{k: v for k, v in r.items() if not k.startswith("shown")} for r in results], json_, lines)
    if not all(r["ok"] for r in results):
        sys.exit(1)


def _validated(ref: str) -> dict:
    """One policy's verdict; a mistake is reported and the next file still checked."""
    try:
        pol = policy_mod.load(ref)
    except PolicyError as exc:
        found, warned = getattr(exc, "errors", [exc]), getattr(exc, "warnings", [])
        return {
            "policy": ref,
            "ok": False,
            "error": str(exc),
            "errors": [error_fields(e) for e in found],
            "warnings": [error_fields(w) for w in warned],
            "shown": [str(e) for e in found],
            "shown_warnings": [w.headline() for w in warned],
        }
    except LetheError as exc:
        return {
            "policy": ref,
            "ok": False,
            "error": str(exc),
            "errors": [{"file": None, "line": None, "col": None, "path": "", "message": str(exc)}],
            "warnings": [],
            "shown": [str(exc)],
            "shown_warnings": [],
        }
    absent: dict[str, list[str]] = {}
    for extra, module in embeddings.missing_extras(pol.embed):
        absent.setdefault(extra, []).append(module)
    missing = [
        f"{ref}: embed needs the '{extra}' extra ({', '.join(modules)} not installed): "
        f"{distribution.install(extra)}"
        for extra, modules in absent.items()
    ]
    if missing:
        return {
            "policy": ref,
            "ok": False,
            "error": missing[0],
            "errors": [
                {"file": pol.path, "line": None, "col": None, "path": "embed", "message": m} for m in missing
            ],
            "warnings": [error_fields(w) for w in pol.warnings],
            "shown": missing,
            "shown_warnings": [w.headline() for w in pol.warnings],
        }
    return {
        "policy": ref,
        "ok": True,
        "name": pol.name,
        "passes": list(pol.passes),
        "write": [s.step for s in pol.write],
        "warnings": [error_fields(w) for w in pol.warnings],
        "shown": [],
        "shown_warnings": [w.headline() for w in pol.warnings],
    }


@click.command(name="compile")
@click.argument("policy")
@click.option(
    "--dialect",
    type=click.Choice(["sqlite", "postgres"]),
    default="sqlite",
    show_default=True,
    help="SQL dialect to compile for.",
)
@json_option
def compile_(policy, dialect, json_):
    """Print the SQL and parameters of every pass and of recall, as POLICY compiles."""
    plan = compile_policy(policy_mod.load(policy), dialect)
    data = {
        name: [{"label": s.label, "sql": s.sql, "params": s.shown_params()} for s in sts]
        for name, sts in plan.passes.items()
    }
    data["recall"] = [
        {"label": s.label, "sql": s.sql, "params": s.shown_params()} for s in (plan.recall, plan.recall_query)
    ]
    emit(data, json_, render_plan(plan).rstrip("\n"))


def _variables_help() -> str:
    """The variables each step's template is given, grouped, for `lethe render --help`."""
    groups: dict[tuple, list[str]] = {}
    for step in variables.VARIABLES:
        groups.setdefault(tuple(variables.names(step)), []).append(step)
    rows = [f"  {', '.join(steps)}: {', '.join(names)}" for names, steps in groups.items()]
    return "\b\nTemplate variables, by step (--example gives each an example value):\n" + "\n".join(rows)


@click.command(epilog=_variables_help())
@click.argument("policy")
@click.argument("step")
@click.option(
    "--vars",
    "vars_file",
    type=click.File("r"),
    metavar="FILE.json",
    help="Template variables as JSON (default: {}); with --example, they override the examples.",
)
@click.option(
    "--example",
    is_flag=True,
    help="Render with example values of every variable the step's template is given.",
)
def render(policy, step, vars_file, example):
    """Print the prompt POLICY's STEP (gate, confidence, contradiction, expiry, fused,
    cluster, merge, select, ...) renders to, with variables from --vars or --example."""
    pol = policy_mod.load(policy)
    judgment = policy_mod.find_judgment(pol, step)
    try:
        given = json.load(vars_file) if vars_file else {}
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--vars") from None
    if not isinstance(given, dict):
        raise click.BadParameter("must be a JSON object of variables", param_hint="--vars")
    kind = step.rpartition(".")[2]
    values = {**(variables.example(kind) if example else {}), **given}
    values.setdefault("today", "2026-01-05")
    try:
        echo(render_template(judgment.prompt, pol.prompt_dirs, values), nl=False)
    except PolicyError as exc:
        raise _with_what_it_needs(exc, judgment.prompt, pol.prompt_dirs, kind, values) from None


def _with_what_it_needs(exc: PolicyError, template: str, dirs, kind: str, values: dict):
    """A template that met a name nobody gave (`'user' is undefined`, from `lethe render
    lifecycle gate` without --example): the same error, saying which variables it uses,
    which were not given, and how to give them."""
    try:
        order = variables.names(kind)  # the step's order (`lethe render --help`), then others
        used = sorted(used_names(template, dirs), key=lambda n: order.index(n) if n in order else len(order))
    except Exception:  # a template that cannot be read: its own error says why
        return exc
    missing = [name for name in used if name not in values]
    if not missing or "undefined" not in exc.message:
        return exc
    return PolicyError(
        f"{exc.message}\n{template} uses {', '.join(used)}; not given: "
        f"{', '.join(missing)}. Add --example to render it with an example "
        "value of each, or --vars FILE.json to give your own (a JSON object; "
        "`lethe render --help` lists each step's variables)",
        exc.file,
        exc.line,
        exc.col,
        exc.path,
        exc.excerpt,
    )
