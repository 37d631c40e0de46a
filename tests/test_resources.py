"""Where a policy reference and a template name lead: paths as given, bare names in
./policies (the working directory when loading, not when importing) then the shipped ones,
`extends:` beside the extending file first, and the shipped prompts last."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import Memory, prompts
from engine.base import resources
from engine.base.errors import PolicyError
from engine.policy import is_path, load, resolve

ROOT = Path(__file__).resolve().parents[1]


def policy_file(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def named(name: str, **params) -> str:
    lines = "".join(f"  {k}: {v}\n" for k, v in params.items())
    return f"name: {name}\nparams:\n{lines}" if params else f"name: {name}\n"


@pytest.fixture
def empty(tmp_path, monkeypatch):
    """An empty working directory: no policies/ of its own."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---- the shipped package data -------------------------------------------------------
def test_every_top_level_policy_and_prompt_ships():
    assert resources.shipped_policy_names() == sorted(
        f[:-5] for f in os.listdir(ROOT / "policies") if f.endswith(".yaml")
    )
    assert set(os.listdir(resources.shipped_prompts_dir())) >= set(os.listdir(ROOT / "prompts"))


def test_a_shipped_policy_by_name_or_none():
    assert resources.shipped_policy("lifecycle") == os.path.join(
        resources.shipped_policies_dir(), "lifecycle.yaml"
    )
    assert resources.shipped_policy("no-such-policy") is None


# ---- bare names and paths -----------------------------------------------------------
@pytest.mark.parametrize(
    "ref, path",
    [
        ("lifecycle", False),
        ("coding-agent", False),
        ("lifecycle.yaml", True),
        ("mine.yml", True),
        ("policies/lifecycle", True),
        ("./lifecycle", True),
    ],
)
def test_what_counts_as_a_path(ref, path):
    assert is_path(ref) is path


def test_a_bare_name_falls_back_to_the_shipped_policy(empty):
    assert resolve("lifecycle") == resources.shipped_policy("lifecycle")
    assert load("lifecycle").name == "lifecycle"


def test_a_bare_name_prefers_the_working_directorys_policies(empty):
    mine = policy_file(empty / "policies", "lifecycle", named("mine"))
    assert resolve("lifecycle") == str(mine)
    assert load("lifecycle").name == "mine"


def test_the_working_directory_is_read_when_loading_not_when_importing(tmp_path, monkeypatch):
    one = policy_file(tmp_path / "one" / "policies", "agent", named("one"))
    two = policy_file(tmp_path / "two" / "policies", "agent", named("two"))
    monkeypatch.chdir(one.parent.parent)
    assert load("agent").name == "one"
    monkeypatch.chdir(two.parent.parent)
    assert load("agent").name == "two"


def test_a_path_is_used_as_given_and_never_looked_up_among_the_shipped(empty):
    with pytest.raises(PolicyError) as err:
        load("lifecycle.yaml")
    assert (
        "policy not found: 'lifecycle.yaml' (looked in lifecycle.yaml; the shipped policy "
        "of that name is 'lifecycle', without a path)" in str(err.value)
    )  # a hint, not a lookup
    policy_file(empty, "lifecycle", named("here"))
    assert load("lifecycle.yaml").name == "here"


def test_an_unknown_name_says_where_it_looked_and_what_ships(empty):
    with pytest.raises(PolicyError) as err:
        load("nowhere")
    message = str(err.value)
    assert os.path.join(str(empty), "policies", "nowhere.yaml") in message
    assert os.path.join(resources.shipped_policies_dir(), "nowhere.yaml") in message
    assert "shipped policies: " + ", ".join(resources.shipped_policy_names()) in message
    assert "lifecycle" in resources.shipped_policy_names()


# ---- extends ------------------------------------------------------------------------
def test_extends_a_name_looks_beside_the_extending_file_first(empty):
    policy_file(empty / "policies", "base", named("cwd-base", half_life_days=2))
    child = policy_file(empty / "elsewhere", "child", "name: child\nextends: base\n")
    policy_file(empty / "elsewhere", "base", named("beside-base", half_life_days=1))
    assert load(str(child)).params == {"half_life_days": 1}
    os.remove(empty / "elsewhere" / "base.yaml")
    assert load(str(child)).params == {"half_life_days": 2}


def test_extends_a_shipped_name_from_anywhere(empty):
    child = policy_file(
        empty / "mine", "child", "name: child\nextends: lifecycle\nparams: {half_life_days: 7}\n"
    )
    pol = load(str(child))
    assert pol.params["half_life_days"] == 7 and set(pol.passes) == set(load("lifecycle").passes)


# ---- prompts ------------------------------------------------------------------------
GATED = (
    "name: gated\nmodels: {cheap: {provider: rules}}\n"
    "write:\n  - {step: gate, model: cheap, prompt: gate.j2}\n"
)


def test_a_policy_outside_the_checkout_uses_the_shipped_templates(empty):
    pol = load(str(policy_file(empty / "policies", "gated", GATED)))
    assert pol.prompt_dirs[-1] == resources.shipped_prompts_dir()
    assert prompts.find("gate.j2", pol.prompt_dirs) == os.path.join(
        resources.shipped_prompts_dir(), "gate.j2"
    )


def test_templates_beside_the_policies_folder_win_over_the_shipped(empty):
    (empty / "prompts").mkdir()
    (empty / "prompts" / "gate.j2").write_text("mine: {{ user }}\n")
    pol = load(str(policy_file(empty / "policies", "gated", GATED)))
    assert prompts.find("gate.j2", pol.prompt_dirs) == str(empty / "prompts" / "gate.j2")


# ---- the default policy -------------------------------------------------------------
def test_memory_without_a_policy_opens_the_shipped_lifecycle_anywhere(empty):
    mem = Memory(str(empty / "m.db"), offline=True)
    try:
        assert mem.policy.name == "lifecycle"
        assert mem.policy.path == resources.shipped_policy("lifecycle")
    finally:
        mem.close()
