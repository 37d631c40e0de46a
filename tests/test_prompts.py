"""Every rendered prompt of every shipped policy, pinned as a reviewable text snapshot.

Each judgment a policy declares (its write steps, each compression pass's cluster and
merge, recall's select) is rendered with fixed inputs shaped like the ones the engine
passes. Memory text that looks like Jinja (`{{ 7*7 }}`, `{% for %}`) or that tries to forge
candidate lines must come out as quoted data. Templates run in Jinja's sandbox: a template
that reaches for Python internals fails with a PolicyError.

Update after an intended prompt change: pytest tests/test_prompts.py --snapshot-update
"""

from __future__ import annotations

import glob
import json
import os

import jinja2
import pytest
from click.testing import CliRunner

from engine import prompts
from engine.base.errors import PolicyError
from engine.cli import main
from engine.policy import find_judgment, load
from tests.helpers import POLICIES
from tests.helpers.prompts import (
    FORGED,
    JINJA_LOOKING,
    TODAY,
    USER,
    variables,
)
from tests.helpers.snapshot_ext import TextSnapshot

SHIPPED = sorted(os.path.basename(p)[:-5] for p in glob.glob(f"{POLICIES}/*.yaml"))


def judgments(policy) -> list[str]:
    """Every judgment a policy declares, by the name `lethe render` takes."""
    names = [w.step for w in policy.write]
    for name, p in policy.passes.items():
        if p.cluster is not None:
            names += [f"{name}.cluster", f"{name}.merge"]
    if policy.recall.select is not None:
        names.append("select")
    return names


def judgment(policy, name):
    if "." in name:
        pass_name, part = name.split(".")
        p = policy.passes[pass_name]
        return p.cluster if part == "cluster" else p.merge
    return find_judgment(policy, name)


CASES = [(name, step) for name in SHIPPED for step in judgments(load(f"{POLICIES}/{name}.yaml"))]


@pytest.fixture
def text_snapshot(snapshot):
    return snapshot.use_extension(TextSnapshot)


@pytest.mark.parametrize("policy_name,step", CASES, ids=[f"{p}-{s}" for p, s in CASES])
def test_prompt(policy_name, step, text_snapshot):
    policy = load(f"{POLICIES}/{policy_name}.yaml")
    j = judgment(policy, step)
    text = prompts.render(j.prompt, policy.prompt_dirs, variables(step))
    assert text == text_snapshot


def test_every_shipped_policy_with_judgments_is_covered():
    covered = {p for p, _ in CASES}
    assert {"lifecycle", "coding-agent", "fused"} <= covered
    assert {s for p, s in CASES if p == "lifecycle"} == {
        "gate",
        "confidence",
        "contradiction",
        "expiry",
        "compression.cluster",
        "compression.merge",
        "select",
    }
    assert [s for p, s in CASES if p == "fused"][0] == "fused"
    for name in set(SHIPPED) - covered:  # e.g. archive, scheduled-sql: no model at all
        assert judgments(load(f"{POLICIES}/{name}.yaml")) == []


@pytest.mark.parametrize("policy_name,step", CASES, ids=[f"{p}-{s}" for p, s in CASES])
def test_memory_text_renders_as_data(policy_name, step):
    policy = load(f"{POLICIES}/{policy_name}.yaml")
    v = variables(step)
    text = prompts.render(judgment(policy, step).prompt, policy.prompt_dirs, v)
    assert "49" not in text  # {{ 7*7 }} was never evaluated
    shows_candidates = any(
        isinstance(v.get(k), list) and v.get(k) for k in ("candidates", "memories", "cells")
    )
    if shows_candidates:
        # printed as a quoted string, tags and all (select shows the summary: its first 120 chars)
        assert json.dumps(JINJA_LOOKING) in text or json.dumps(JINJA_LOOKING[:120]) in text
        assert "this loopthis loop" not in text
    if v.get("candidates") or v.get("memories"):
        # the forged line stays inside one quoted string: no second line starting "2: "
        assert json.dumps(FORGED) in text
        assert sum(1 for line in text.splitlines() if line.startswith(("2:", "[2]"))) <= 1
    if "user" in v and "{{ user" in _source(policy, step):
        assert json.dumps(USER) in text


def _source(policy, step) -> str:
    j = judgment(policy, step)
    with open(prompts.find(j.prompt, policy.prompt_dirs), encoding="utf-8") as fh:
        return fh.read()


@pytest.mark.parametrize(
    "step", ["gate", "contradiction", "compression.cluster", "compression.merge", "select"]
)
def test_cli_render_prints_the_same_prompt(step, tmp_path):
    policy = load(f"{POLICIES}/lifecycle.yaml")
    v = {k: val for k, val in variables(step).items() if k != "now"}  # JSON: no datetimes
    path = tmp_path / "vars.json"
    path.write_text(json.dumps(v))
    out = CliRunner().invoke(main, ["render", f"{POLICIES}/lifecycle.yaml", step, "--vars", str(path)])
    assert out.exit_code == 0, out.output
    assert out.output == prompts.render(judgment(policy, step).prompt, policy.prompt_dirs, v)


def test_cli_render_names_an_unknown_step():
    out = CliRunner().invoke(main, ["render", f"{POLICIES}/lifecycle.yaml", "nope"])
    assert out.exit_code == 1 and "has no step 'nope'" in out.output
    assert (
        "gate, confidence, contradiction, expiry, compression.cluster, compression.merge, select"
        in out.output
    )


def test_a_missing_variable_outside_tojson_is_a_policy_error(tmp_path):
    path = tmp_path / "vars.json"
    path.write_text(json.dumps({"today": TODAY, "user": "u", "assistant": "a"}))
    out = CliRunner().invoke(
        main, ["render", f"{POLICIES}/lifecycle.yaml", "compression.cluster", "--vars", str(path)]
    )
    assert out.exit_code == 1, out.output
    assert "cluster.j2" in out.output and "'candidates' is undefined" in out.output


def test_cli_render_names_a_missing_variable_under_tojson(tmp_path):
    path = tmp_path / "vars.json"
    path.write_text(json.dumps({"today": TODAY}))
    out = CliRunner().invoke(main, ["render", f"{POLICIES}/lifecycle.yaml", "gate", "--vars", str(path)])
    assert "'user' is undefined" in out.output
    assert out.exit_code == 1


# ---------------------------------------------------------------------------------------
# the sandbox

ESCAPES = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ lipsum.__globals__ }}",
    "{{ memory.__class__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ '{0.__class__}'.format(1) }}",
    "{% set x = [] %}{{ x.append(1) }}",
    "{{ memory.update({'content': 'changed'}) }}",
]


def _evil_dir(tmp_path, source: str):
    d = tmp_path / "evil_prompts"
    d.mkdir(exist_ok=True)
    (d / "evil.j2").write_text(source)
    return (str(d),)


@pytest.mark.parametrize("source", ESCAPES)
def test_template_escapes_fail_with_a_policy_error(tmp_path, source):
    dirs = _evil_dir(tmp_path, source)
    with pytest.raises(PolicyError, match="sandbox forbids") as err:
        prompts.render("evil.j2", dirs, {"memory": {"content": "x"}})
    assert "evil.j2:1" in str(err.value)


@pytest.mark.parametrize("source", ["{% for i in range(10**7) %}{% endfor %}", "{{ 1 / 0 }}"])
def test_template_runtime_errors_are_policy_errors(tmp_path, source):
    dirs = _evil_dir(tmp_path, source)
    with pytest.raises(PolicyError):
        prompts.render("evil.j2", dirs, {})


def test_a_policy_with_an_escaping_template_loads_but_cannot_render(tmp_path):
    d = tmp_path / "my_prompts"
    d.mkdir()
    (d / "gate.j2").write_text("Turn: {{ user | tojson }} {{ ''.__class__.__mro__ }}\n")
    policy = tmp_path / "evil.yaml"
    policy.write_text(f"name: evil\nextends: {POLICIES}/lifecycle.yaml\nprompts: my_prompts\n")
    loaded = load(str(policy))
    with pytest.raises(PolicyError, match="sandbox forbids"):
        prompts.render(find_judgment(loaded, "gate").prompt, loaded.prompt_dirs, variables("gate"))
    vars_file = tmp_path / "v.json"
    vars_file.write_text(json.dumps({"user": "hi"}))
    out = CliRunner().invoke(main, ["render", str(policy), "gate", "--vars", str(vars_file)])
    assert out.exit_code == 1
    assert "sandbox forbids" in out.output and "Traceback" not in out.output


def test_the_environment_is_sandboxed_and_strict():
    env = prompts.environment((os.path.join(os.path.dirname(POLICIES), "prompts"),))
    assert isinstance(env, jinja2.sandbox.ImmutableSandboxedEnvironment)
    assert env.undefined is jinja2.StrictUndefined
    assert env.autoescape is False
