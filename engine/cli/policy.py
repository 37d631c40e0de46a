"""Commands on policy files, no database: validate, compile, render."""
from __future__ import annotations

import json
import sys

import click

from .. import policy as policy_mod
from ..errors import LetheError
from ..plan import compile_policy, render_plan
from ..prompts import render as render_template
from .base import echo, emit, json_option


@click.command()
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
        except LetheError as exc:  # report this one and go on: every file gets its line
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


@click.command(name="compile")
@click.argument("policy")
@click.option("--dialect", type=click.Choice(["sqlite", "postgres"]), default="sqlite",
              show_default=True, help="SQL dialect to compile for.")
@json_option
def compile_(policy, dialect, json_):
    """Print the SQL and parameters of every pass and of recall, as POLICY compiles."""
    plan = compile_policy(policy_mod.load(policy), dialect)
    data = {name: [{"label": s.label, "sql": s.sql, "params": s.shown_params()} for s in sts]
            for name, sts in plan.passes.items()}
    data["recall"] = [{"label": s.label, "sql": s.sql, "params": s.shown_params()}
                      for s in (plan.recall, plan.recall_query)]
    emit(data, json_, render_plan(plan).rstrip("\n"))


@click.command()
@click.argument("policy")
@click.argument("step")
@click.option("--vars", "vars_file", type=click.File("r"), metavar="FILE.json",
              help="Template variables as JSON (default: {}).")
def render(policy, step, vars_file):
    """Print the prompt POLICY's STEP (gate, confidence, contradiction, expiry, fused,
    cluster, merge, select, ...) renders to, with variables from --vars."""
    pol = policy_mod.load(policy)
    judgment = policy_mod.find_judgment(pol, step)
    try:
        variables = json.load(vars_file) if vars_file else {}
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--vars") from None
    variables.setdefault("today", "2026-01-05")
    echo(render_template(judgment.prompt, pol.prompt_dirs, variables), nl=False)
