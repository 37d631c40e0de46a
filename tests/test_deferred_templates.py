"""A policy loaded for passes of rules alone leaves its templates unparsed until needed.

`lethe run --pass decay` does not import Jinja or compile a template (start-up is most of
a small pass: bench/RESULTS.md). What it gives up must be nothing else: a template that is
missing or leads out of its folder is still refused at load; a broken one is refused, with
the same words and place as a full load, by `check_templates`, by anything that renders it,
and by `lethe run` whenever it runs something that judges.
"""

from __future__ import annotations

import datetime as dt
import os

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory
from engine import policy as policy_mod
from engine.base.errors import PolicyError
from engine.cli import main as cli
from tests.helpers.policies import BASE

BROKEN = {  # the gate step's template, broken in ways only Jinja sees
    "syntax": "Save this? {{ user }\n",
    "unclosed block": "{% if user %}\nsave it\n",
    "undefined name": "line one\n{{ usr }}\n",
    "missing field": "{{ memory.contnt }}\n",
    "two of them": "{{ usr }}\n",  # with a broken pick.j2 as well: both are reported
}


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "gate.j2").write_text("Save this? {{ user }}\n")
    (tmp_path / "prompts" / "pick.j2").write_text("Pick for: {{ query }}\n")
    (tmp_path / "p.yaml").write_text(BASE)
    return tmp_path


def _break(folder, how: str) -> str:
    (folder / "prompts" / "gate.j2").write_text(BROKEN[how])
    if how == "two of them":
        (folder / "prompts" / "pick.j2").write_text("{% for %}\n")
    return str(folder / "p.yaml")


def _refusal(fn) -> str:
    with pytest.raises(PolicyError) as err:
        fn()
    return str(err.value)


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_a_broken_template_is_refused_later_exactly_as_a_full_load_refuses_it(folder, how):
    path = _break(folder, how)
    full = _refusal(lambda: policy_mod.load(path))
    pol = policy_mod.load(path, templates=False)
    assert [name for name, *_ in pol.unparsed] == ["gate.j2", "pick.j2"]
    assert _refusal(lambda: policy_mod.check_templates(pol)) == full
    assert pol.unparsed  # still unchecked: asked again, refused again
    assert _refusal(lambda: policy_mod.check_templates(pol)) == full


def test_sound_templates_are_checked_once_then_nothing_is_left(folder):
    pol = policy_mod.load(str(folder / "p.yaml"), templates=False)
    policy_mod.check_templates(pol)
    assert pol.unparsed == []
    assert pol == policy_mod.load(str(folder / "p.yaml"))  # the same policy as a full load


@pytest.mark.parametrize(
    "prompt, words",
    [
        ("nowhere.j2", "template 'nowhere.j2' not found"),
        ("../p.yaml", "must be a name inside the prompt folders"),
        ("link.j2", "is a link that leads out of its prompt folder"),
    ],
)
def test_a_template_that_cannot_be_found_is_still_refused_at_load(folder, prompt, words):
    (folder / "secret.txt").write_text("not a prompt\n")
    os.symlink(folder / "secret.txt", folder / "prompts" / "link.j2")
    (folder / "p.yaml").write_text(BASE.replace("prompt: gate.j2}", f"prompt: {prompt}}}"))
    deferred = _refusal(lambda: policy_mod.load(str(folder / "p.yaml"), templates=False))
    assert words in deferred
    assert deferred == _refusal(lambda: policy_mod.load(str(folder / "p.yaml")))


def test_what_renders_a_template_checks_them_first(folder):
    path = _break(folder, "undefined name")
    full = _refusal(lambda: policy_mod.load(path))
    pol = policy_mod.load(path, templates=False)
    mem = Memory(str(folder / "m.db"), policy=pol, offline=True, clock=FixedClock(dt.datetime(2025, 1, 1)))
    try:
        assert mem.add("We use uv.") >= 1  # no template: works
        assert _refusal(lambda: mem.remember("I like tea.", "Noted.")) == full
    finally:
        mem.close()


def _run(folder, *args):
    return CliRunner().invoke(
        cli, ["run", "--db", str(folder / "m.db"), "--policy", str(folder / "p.yaml"), "--offline", *args]
    )


def test_lethe_run_of_rules_alone_runs_beside_a_broken_template(folder):
    full = _refusal(lambda: policy_mod.load(_break(folder, "syntax")))
    done = _run(folder, "--pass", "decay")
    assert done.exit_code == 0, done.output
    assert "decay: 0 changed" in done.output
    for args in ((), ("--pass", "nosuch")):  # pending turns and due passes; an unknown pass
        refused = _run(folder, *args)
        assert refused.exit_code != 0
        assert full in refused.output


def test_lethe_run_of_a_pass_that_judges_checks_every_template_first(folder):
    (folder / "prompts" / "cluster.j2").write_text("{{ candidates | tojson }}\n")
    (folder / "prompts" / "merge.j2").write_text("{{ memories | tojson }}\n")
    (folder / "p.yaml").write_text(
        BASE.replace(
            "recall:\n",
            """\
  compression:
    every: 6d
    cluster:
      model: offline
      prompt: cluster.j2
      candidates: {where: "status = 'active'", order: "importance desc", limit: 100, min: 5}
    merge:
      model: offline
      prompt: merge.j2
      result: {confidence: 0.85}
recall:
""",
            1,
        )
    )
    done = _run(folder, "--pass", "compression")
    assert done.exit_code == 0, done.output
    full = _refusal(lambda: policy_mod.load(_break(folder, "undefined name")))
    refused = _run(folder, "--pass", "decay", "--pass", "compression")
    assert refused.exit_code != 0 and full in refused.output  # gate.j2: not the pass's own
    assert _run(folder, "--pass", "decay").exit_code == 0
