"""Policies: loading, `extends`, and every refusal, located as file:line:col: key.path.

Each broken policy is the minimal valid BASE below with one edit, so every error's line
and column are known exactly.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from click.testing import CliRunner

from engine import policy as policy_mod
from engine.base.errors import PolicyError
from engine.cli import main as cli
from engine.judges import embeddings
from engine.plan.dialect import DIALECTS
from tests.helpers import shipped_policies
from tests.helpers.policies import BASE

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = shipped_policies()
# what `lethe validate` passes here: a policy whose extra is not installed fails it
# (lifecycle-local without the `local` extra; CI installs it)
RUNNABLE = [p for p in SHIPPED if not embeddings.missing_extras(policy_mod.load(p).embed)]


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "gate.j2").write_text("Save this? {{ user }}\n")
    (tmp_path / "prompts" / "pick.j2").write_text("Pick for: {{ query }}\n")
    return tmp_path


def edited(old: str, new: str) -> str:
    assert BASE.count(old) == 1, f"the edit must apply exactly once: {old!r}"
    return BASE.replace(old, new)


def write(folder, text: str, name: str = "p.yaml") -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def refused(path: str) -> PolicyError:
    with pytest.raises(PolicyError) as err:
        policy_mod.load(path)
    return err.value


def assert_caret(err: PolicyError, line: int, col: int) -> None:
    """The excerpt numbers the offending line and puts a caret under the column."""
    rows = err.excerpt.splitlines()
    numbered = [i for i, r in enumerate(rows) if r.split("|")[0].strip() == str(line)]
    assert numbered, f"line {line} not in the excerpt:\n{err.excerpt}"
    caret = rows[numbered[0] + 1]
    assert caret.split("|")[0].strip() == "" and caret.rstrip().endswith("^"), err.excerpt
    bar = caret.index("|")
    assert caret.index("^") - (bar + 2) == col - 1, err.excerpt
    # the first mistake comes first, with its excerpt (any others found follow it)
    assert str(err).startswith(err.headline() + "\n" + err.excerpt)


def assert_located(err: PolicyError, path: str, line: int, col: int, key: str, *fragments):
    head = f"{path}:{line}:{col}: " + (f"{key}: " if key else "")
    assert str(err).startswith(head), str(err)
    assert (err.file, err.line, err.col, err.path) == (path, line, col, key)
    for fragment in fragments:
        assert fragment in err.message, err.message
    assert "\n" not in err.headline()
    assert_caret(err, line, col)


def test_base_policy_loads(folder):
    pol = policy_mod.load(write(folder, BASE))
    assert pol.name == "probe"
    assert list(pol.passes) == ["decay"]
    assert [s.step for s in pol.write] == ["gate"]
    assert pol.recall.top_n == 3 and pol.recall.candidates.limit == 10


# ---- every refusal ------------------------------------------------------------------
CASES = [
    # id, old, new, line, col, key path, message fragments
    (
        "yaml-syntax",
        "limit: 10",
        "limit: 10: 11",
        24,
        12,
        "",
        ["YAML syntax error", "mapping values are not allowed here"],
    ),
    ("yaml-tab", "    every: 23h", "\tevery: 23h", 14, 1, "", ["YAML syntax error", "'\\t'"]),
    (
        "duplicate-top",
        "name: probe\n",
        "name: probe\nname: again\n",
        2,
        1,
        "name",
        ["duplicate key 'name' (first given at line 1)"],
    ),
    (
        "duplicate-pass-key",
        "    every: 23h\n",
        "    every: 23h\n    every: 1h\n",
        15,
        5,
        "passes.decay.every",
        ["duplicate key 'every' (first given at line 14)"],
    ),
    (
        "duplicate-in-list-item",
        "        set: {decay_score: freshness}\n",
        '        when: "true"\n        set: {decay_score: freshness}\n',
        17,
        9,
        "passes.decay.rules[0].when",
        ["duplicate key 'when' (first given at line 16)"],
    ),
    (
        "duplicate-in-flow-mapping",
        "set: {decay_score: freshness}",
        "set: {decay_score: freshness, decay_score: 0}",
        17,
        39,
        "passes.decay.rules[0].set.decay_score",
        ["duplicate key 'decay_score'"],
    ),
    (
        "duplicate-model",
        "  offline: {provider: rules}\n",
        "  offline: {provider: rules}\n  cheap: {provider: rules}\n",
        5,
        3,
        "models.cheap",
        ["duplicate key 'cheap' (first given at line 3)"],
    ),
    (
        "unknown-top-key",
        "recall:\n",
        "passses: {}\nrecall:\n",
        21,
        1,
        "passses",
        ["unknown key 'passses'", "did you mean 'passes'?"],
    ),
    (
        "unknown-pass-key",
        "    every: 23h",
        "    evry: 23h",
        14,
        5,
        "passes.decay.evry",
        ["unknown key 'evry'", "did you mean 'every'?"],
    ),
    (
        "unknown-rule-key",
        "        event: archived",
        "        evnt: archived",
        20,
        9,
        "passes.decay.rules[1].evnt",
        ["unknown key 'evnt'", "did you mean 'event'?"],
    ),
    (
        "unknown-rule-key-no-hint",
        "        event: archived",
        "        colour: red",
        20,
        9,
        "passes.decay.rules[1].colour",
        ["unknown key 'colour'", "known: event, set, when"],
    ),
    (
        "unknown-model-key",
        "model: gpt-4o-mini}",
        "model: gpt-4o-mini, temprature: 0}",
        3,
        49,
        "models.cheap.temprature",
        ["unknown key 'temprature'", "did you mean 'temperature'?"],
    ),
    (
        "unknown-recall-key",
        "  limit: 10",
        "  limt: 10",
        24,
        3,
        "recall.limt",
        ["unknown key 'limt'", "did you mean 'limit'?"],
    ),
    ("missing-name", "name: probe\n", "", 1, 1, "", ["missing required key 'name'"]),
    ("name-not-text", "name: probe", "name: [probe]", 1, 7, "name", ["must be text"]),
    (
        "limit-not-a-number",
        "limit: 10",
        "limit: ten",
        24,
        10,
        "recall.limit",
        ["must be a whole number >= 0, got 'ten'"],
    ),
    (
        "top-n-zero",
        "top_n: 3",
        "top_n: 0",
        25,
        50,
        "recall.select.top_n",
        ["must be a whole number >= 1, got 0"],
    ),
    (
        "every-not-a-duration",
        "every: 23h",
        "every: soon",
        14,
        12,
        "passes.decay.every",
        ["not a duration", "'soon'"],
    ),
    (
        "param-a-list",
        "half_life_days: 30",
        "half_life_days: [30]",
        6,
        19,
        "params.half_life_days",
        ["must be a number or text, got [30]"],
    ),
    (
        "param-shadows-a-column",
        "half_life_days: 30",
        "importance: 30",
        6,
        3,
        "params.importance",
        ["'importance' is already a column"],
    ),
    (
        "unknown-write-model",
        "{step: gate, model: cheap",
        "{step: gate, model: cheep",
        11,
        25,
        "write[0].model",
        ["unknown model 'cheep'", "cheap, offline, rules"],
    ),
    ("unknown-write-step", "{step: gate,", "{step: gait,", 11, 12, "write[0].step", ["unknown step 'gait'"]),
    (
        "unknown-select-model",
        "select: {model: cheap",
        "select: {model: strong",
        25,
        19,
        "recall.select.model",
        ["unknown model 'strong'"],
    ),
    (
        "unknown-provider",
        "offline: {provider: rules}",
        "offline: {provider: ollama}",
        4,
        23,
        "models.offline.provider",
        ["unknown provider 'ollama'", "openai, rules, replay"],
    ),
    (
        "openai-without-model",
        "{provider: openai, model: gpt-4o-mini}",
        "{provider: openai}",
        3,
        10,
        "models.cheap",
        ["an openai model needs 'model: <name>'"],
    ),
    (
        "missing-template",
        "prompt: gate.j2}\npasses",
        "prompt: nope.j2}\npasses",
        11,
        40,
        "write[0].prompt",
        ["template 'nope.j2' not found"],
    ),
    (
        "when-does-not-compile",
        "when: \"status = 'active'\"\n",
        "when: \"status = 'active' and recency > 1\"\n",
        16,
        15,
        "passes.decay.rules[0].when",
        ["unknown name 'recency'"],
    ),
    (
        "set-does-not-compile",
        "set: {decay_score: freshness}",
        'set: {decay_score: "freshness ** 2"}',
        17,
        28,
        "passes.decay.rules[0].set.decay_score",
        ["operator not allowed"],
    ),
    (
        "score-does-not-compile",
        '"exp(-0.693',
        '"expo(-0.693',
        9,
        14,
        "scores.freshness",
        ["unknown function 'expo'"],
    ),
    (
        "score-cycle",
        '  freshness: "exp(-0.693 * idle_days / half_life_days)"',
        '  freshness: "stale + 1"\n  stale: "freshness * 2"',
        9,
        14,
        "scores.freshness",
        ["refers to itself", "stale -> freshness -> stale"],
    ),
    (
        "rank-uses-time",
        "scores:\n",
        'scores:\n  rank: "importance / age_days"\n',
        9,
        9,
        "scores.rank",
        ["time word 'age_days' is not allowed here"],
    ),
    (
        "order-does-not-compile",
        'order: "rank desc"',
        'order: "rnk desc"',
        23,
        10,
        "recall.order",
        ["unknown name 'rnk'"],
    ),
    (
        "order-by-a-condition",
        'order: "rank desc"',
        "order: \"status = 'a' desc\"",
        23,
        10,
        "recall.order",
        ["cannot order by bool"],
    ),
    (
        "when-is-not-a-condition",
        "when: \"status = 'active'\"\n",
        'when: "importance + 1"\n',
        16,
        15,
        "passes.decay.rules[0].when",
        ["must be a condition", "'importance + 1' is num"],
    ),
    (
        "where-is-not-a-condition",
        "where: \"status = 'active'\"",
        'where: "importance"',
        22,
        10,
        "recall.where",
        ["must be a condition"],
    ),
    (
        "set-a-condition",
        "set: {decay_score: freshness}",
        'set: {decay_score: "importance > 1"}',
        17,
        28,
        "passes.decay.rules[0].set.decay_score",
        ["must be a number"],
    ),
    (
        "set-unknown-column",
        "set: {decay_score: freshness}",
        "set: {decay_scor: freshness}",
        17,
        15,
        "passes.decay.rules[0].set.decay_scor",
        ["'decay_scor' unknown column", "settable: importance"],
    ),
    (
        "set-id",
        "set: {decay_score: freshness}",
        "set: {id: 1}",
        17,
        15,
        "passes.decay.rules[0].set.id",
        ["'id' cannot be set by a policy"],
    ),
    (
        "set-namespace",
        "set: {decay_score: freshness}",
        "set: {namespace: other}",
        17,
        15,
        "passes.decay.rules[0].set.namespace",
        ["'namespace' cannot be set by a policy"],
    ),
    (
        "set-rank",
        "set: {decay_score: freshness}",
        "set: {rank: 1}",
        17,
        15,
        "passes.decay.rules[0].set.rank",
        ["'rank' cannot be set by a policy"],
    ),
    (
        "set-content",
        "set: {decay_score: freshness}",
        "set: {content: gone}",
        17,
        15,
        "passes.decay.rules[0].set.content",
        ["'content' cannot be set by a policy"],
    ),
    (
        "bad-status-word",
        "set: {status: archived}",
        "set: {status: deleted}",
        19,
        23,
        "passes.decay.rules[1].set.status",
        ["status must be one of active, archived, superseded, expired, compressed, got 'deleted'"],
    ),
    (
        "status-smuggling",
        "set: {status: archived}",
        'set: {status: "archived\' --"}',
        19,
        23,
        "passes.decay.rules[1].set.status",
        ["status must be one of"],
    ),
    (
        "bad-event-word",
        "event: archived",
        "event: Archived Now",
        20,
        16,
        "passes.decay.rules[1].event",
        ["event must be a short lowercase word"],
    ),
    (
        "rule-without-effect",
        "        set: {decay_score: freshness}\n",
        "",
        16,
        9,
        "passes.decay.rules[0]",
        ["a rule needs 'set' or 'event'"],
    ),
    (
        "extends-missing-file",
        "name: probe\n",
        "name: probe\nextends: nowhere\n",
        2,
        10,
        "extends",
        ["policy not found: 'nowhere'"],
    ),
    (
        "extends-not-text",
        "name: probe\n",
        "name: probe\nextends: [a, b]\n",
        2,
        10,
        "extends",
        ["extends must be a policy path or name"],
    ),
]


@pytest.mark.parametrize(
    "old, new, line, col, key, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_broken_policy_is_refused_at_its_place(folder, old, new, line, col, key, fragments):
    path = write(folder, edited(old, new))
    assert_located(refused(path), path, line, col, key, *fragments)


def test_a_formula_error_in_a_policy_is_never_a_bare_formula_error(folder):
    # FormulaError is a LetheError too; the loader must wrap it with the place
    path = write(folder, edited('order: "rank desc"', "order: \"__import__('os') desc\""))
    err = refused(path)
    assert type(err) is PolicyError
    assert err.path == "recall.order" and "__import__" in err.message


def test_a_template_with_a_jinja_syntax_error_names_the_template(folder):
    (folder / "prompts" / "bad.j2").write_text("line one\nline two\n{% endif %}\n")
    path = write(folder, edited("prompt: gate.j2}\npasses", "prompt: bad.j2}\npasses"))
    err = refused(path)
    assert os.path.abspath(err.file) == str(folder / "prompts" / "bad.j2")
    assert err.line == 3
    assert str(err).startswith(f"{err.file}:3:1: template syntax error: ")
    assert "endif" in err.message


def test_an_unclosed_jinja_block_is_refused(folder):
    (folder / "prompts" / "bad.j2").write_text("{% if user %}\nsave it\n")
    path = write(folder, edited("prompt: pick.j2, top_n", "prompt: bad.j2, top_n"))
    err = refused(path)
    assert err.file.endswith(os.path.join("prompts", "bad.j2"))
    assert "template syntax error" in err.message and "endif" in err.message


def test_a_template_folder_named_by_the_policy_is_used(folder):
    (folder / "mine").mkdir()
    (folder / "mine" / "only-here.j2").write_text("{{ user }}\n")
    text = edited("name: probe\n", "name: probe\nprompts: mine\n").replace(
        "prompt: gate.j2}\npasses", "prompt: only-here.j2}\npasses"
    )
    pol = policy_mod.load(write(folder, text))
    assert pol.write[0].judgment.prompt == "only-here.j2"
    assert pol.prompt_dirs[0] == str(folder / "mine")


def test_a_policy_that_is_not_a_mapping_is_refused(folder):
    path = write(folder, "- just\n- a list\n")
    err = refused(path)
    assert str(err).startswith(f"{path}:1:1: ")
    assert "not a policy" in err.message and "just" not in str(err)  # quoted: no line


def test_a_missing_policy_file_is_refused_with_where_it_looked(folder):
    with pytest.raises(PolicyError) as err:
        policy_mod.load(str(folder / "absent.yaml"))
    assert "policy not found" in str(err.value) and "absent.yaml" in str(err.value)


def test_a_yaml_error_at_the_end_of_the_file_still_gets_a_caret(folder):
    path = write(
        folder, edited("limit: 10\n  select: {model: cheap, prompt: pick.j2, top_n: 3}\n", "limit: [10\n")
    )
    err = refused(path)
    assert "YAML syntax error" in err.message
    assert "^" in err.excerpt


@pytest.mark.parametrize("flow", ["[gate,\tconfidence]", "{a: 1,\tb: 2}"])
def test_a_policy_reads_the_same_with_or_without_libyaml(folder, monkeypatch, flow):
    """libyaml takes a tab between flow tokens that PyYAML's own parser refuses: a policy
    must not load on one machine and fail on another."""
    from engine.policy import yamldoc

    path = write(folder, f"name: tabs\nextends: lifecycle\ndescription: x\nextra: {flow}\n")
    errors = []
    for fast in (yamldoc._FAST, None):
        monkeypatch.setattr(yamldoc, "_FAST", fast)
        errors.append(refused(path).message)
    assert errors[0] == errors[1] and "cannot start any token" in errors[0]


# ---- extends ------------------------------------------------------------------------
def test_extends_cycle_is_refused(folder):
    a = write(folder, "name: a\nextends: b.yaml\n", "a.yaml")
    write(folder, "name: b\nextends: a\n", "b.yaml")
    err = refused(a)
    assert "'extends' goes round in a circle" in err.message
    assert "a.yaml -> " in err.message and "b.yaml -> " in err.message


def test_extends_itself_is_refused(folder):
    path = write(folder, "name: me\nextends: me.yaml\n", "me.yaml")
    assert "goes round in a circle" in refused(path).message


def test_extends_cycle_points_at_the_extends_that_closes_it(folder):
    a = write(folder, "name: a\nextends: b.yaml\n", "a.yaml")
    b = write(folder, "# b goes back to a\nname: b\nextends: a\n", "b.yaml")
    assert_located(refused(a), b, 3, 10, "extends", "goes round in a circle")


# a param whose value a formula cannot use is blamed where the value is written: in the
# extending file, though the formula reading it is in the file it extends
@pytest.mark.parametrize(
    "param, value, col, fragments",
    [
        (
            "half_life_days",
            '"ninety"',
            19,
            ["is text, a number is needed here", "scores.freshness reads it, lifecycle.yaml:"],
        ),
        (
            "archive_below",
            '"low"',
            18,
            ["cannot compare num with text", "passes.decay.rules[1].when reads it, lifecycle.yaml:"],
        ),
        ("half_life_days", "0", 19, ["division by zero (half_life_days is 0)", "scores.freshness reads it"]),
    ],
)
def test_a_param_a_formula_cannot_use_is_blamed_where_it_is_set(folder, param, value, col, fragments):
    shutil.copy(os.path.join(PROJECT, "policies", "lifecycle.yaml"), folder / "lifecycle.yaml")
    child = write(folder, f"name: mine\nextends: lifecycle\nparams:\n  {param}: {value}\n", "mine.yaml")
    assert_located(refused(child), child, 4, col, f"params.{param}", *fragments)


@pytest.mark.parametrize(
    "formula, fragment",
    [
        ("importance / 0", "division by zero: 'importance / 0'"),
        ("importance / (2 - 2)", None),  # not a constant: SQL's NULL, kept by the pass's guard
        ("importance / k", "division by zero (k is 0): 'importance / k'"),
    ],
)
def test_a_division_by_a_constant_zero_is_refused(folder, formula, fragment):
    k_read = " + k * 0" if fragment is None else ""  # an unread param would be its own error
    path = write(folder, f'name: z\nparams: {{k: 0}}\nscores:\n  rank: "{formula}{k_read}"\n')
    if fragment is None:
        assert policy_mod.load(path).name == "z"
        return
    err = refused(path)
    assert fragment in err.message, err.message
    assert err.path == ("params.k" if "k is 0" in fragment else "scores.rank")


@pytest.mark.parametrize("path", SHIPPED, ids=[os.path.basename(p) for p in SHIPPED])
def test_every_shipped_policy_loads(path):
    pol = policy_mod.load(path)
    assert pol.name == os.path.splitext(os.path.basename(path))[0]
    assert pol.rank.type == "num"
    # seed C recalls 6 cells; every other shipped policy shows the article's 60 candidates
    assert pol.recall.candidates.limit == (6 if pol.name.startswith("scenes") else 60)


def test_shipped_policies_are_all_there():
    assert {os.path.basename(p) for p in SHIPPED} >= {
        "archive.yaml",
        "coding-agent.yaml",
        "lifecycle.yaml",
        "scheduled-sql.yaml",
    }


def test_coding_agent_extends_lifecycle_with_a_longer_half_life():
    lifecycle = policy_mod.load(os.path.join(PROJECT, "policies", "lifecycle.yaml"))
    coding = policy_mod.load(os.path.join(PROJECT, "policies", "coding-agent.yaml"))
    assert coding.name == "coding-agent"
    assert coding.params == {**lifecycle.params, "half_life_days": 90}
    assert lifecycle.params["half_life_days"] == 30
    assert list(coding.passes) == list(lifecycle.passes)
    assert {"expiry", "decay"} <= set(coding.passes)
    assert [s.step for s in coding.write] == [s.step for s in lifecycle.write]
    assert coding.scores == lifecycle.scores
    assert coding.recall.on_access is not None
    # the inherited rule compiles against the child's params: same SQL, 90 for 30
    sqlite = DIALECTS["sqlite"]
    c_sql, c_params = sqlite.render(coding.passes["decay"].rules[0].set["decay_score"])
    l_sql, l_params = sqlite.render(lifecycle.passes["decay"].rules[0].set["decay_score"])
    assert c_sql == l_sql
    assert [90 if p == 30 else p for p in l_params] == c_params


def _local_lifecycle(folder) -> str:
    return write(
        folder,
        (
            "name: local-base\n"
            "params: {half_life_days: 7, archive_below: 0.2}\n"
            'scores:\n  freshness: "exp(-idle_days / half_life_days)"\n'
            "passes:\n"
            "  expiry:\n    every: 1h\n    rules:\n"
            '      - {when: "expires_at < now", set: {status: expired}, event: expired}\n'
            "  decay:\n    every: 1d\n    rules:\n"
            "      - {when: \"status = 'active'\", set: {decay_score: freshness}}\n"
            '      - {when: "decay_score < archive_below", set: {status: archived}}\n'
            '      - {when: "importance < 1", event: unimportant}\n'
        ),
        "lifecycle.yaml",
    )


def test_bare_extends_name_resolves_from_the_policys_folder_first(folder):
    _local_lifecycle(folder)
    child = write(folder, "name: child\nextends: lifecycle\nparams: {half_life_days: 3}\n", "child.yaml")
    pol = policy_mod.load(child)
    assert pol.name == "child"
    assert pol.params == {"half_life_days": 3, "archive_below": 0.2}  # deep merge, child wins
    assert [len(p.rules) for p in pol.passes.values()] == [1, 3]  # the local file's passes


def test_a_childs_list_replaces_the_parents_list(folder):
    _local_lifecycle(folder)
    child = write(
        folder,
        (
            "name: child\nextends: lifecycle.yaml\n"
            "passes:\n  decay:\n    rules:\n"
            '      - {when: "importance < 2", set: {decay_score: 0}}\n'
        ),
        "child.yaml",
    )
    pol = policy_mod.load(child)
    decay = pol.passes["decay"]
    assert len(decay.rules) == 1  # replaced, not appended or merged
    assert decay.rules[0].source["when"] == "importance < 2"
    assert decay.every.total_seconds() == 86400  # the mapping around it still merges
    assert len(pol.passes["expiry"].rules) == 1


def test_an_error_in_a_replacing_list_points_at_the_child(folder):
    _local_lifecycle(folder)
    child = write(
        folder,
        (
            "name: child\nextends: lifecycle\n"
            "passes:\n  decay:\n    rules:\n"
            "      - {when: \"status = 'active'\", set: {decay_score: 0.5}}\n"
            "      - {when: \"status = 'active'\", set: {decay_scor: 0.5}}\n"
        ),
        "child.yaml",
    )
    assert_located(refused(child), child, 7, 43, "passes.decay.rules[1].set.decay_scor", "unknown column")


def test_an_error_in_an_inherited_part_points_at_the_parent(folder):
    parent = write(
        folder,
        (
            "name: parent\n"
            "passes:\n  decay:\n    every: 1d\n    rules:\n"
            '      - {when: "recency > 1", set: {decay_score: 0}}\n'
        ),
        "parent.yaml",
    )
    child = write(folder, "name: child\nextends: parent\nparams: {x: 1}\n", "child.yaml")
    assert_located(refused(child), parent, 6, 16, "passes.decay.rules[0].when", "unknown name 'recency'")


def test_an_inherited_rule_that_uses_a_param_the_child_breaks_points_at_the_child(folder):
    _local_lifecycle(folder)
    child = write(folder, "name: child\nextends: lifecycle\nparams:\n  half_life_days: [1]\n", "child.yaml")
    assert_located(refused(child), child, 4, 19, "params.half_life_days", "must be a number or text")


def test_extends_a_path_relative_to_the_child(folder):
    (folder / "base").mkdir()
    shutil.copy(os.path.join(PROJECT, "policies", "lifecycle.yaml"), folder / "base" / "lifecycle.yaml")
    (folder / "agents").mkdir()
    child = write(
        folder, "name: rel\nextends: ../base/lifecycle.yaml\nparams: {recall_floor: 0.5}\n", "agents/rel.yaml"
    )
    pol = policy_mod.load(child)
    lifecycle = policy_mod.load(os.path.join(PROJECT, "policies", "lifecycle.yaml"))
    assert lifecycle.params["recall_floor"] != 0.5
    assert pol.params == {**lifecycle.params, "recall_floor": 0.5}
    assert list(pol.passes) == list(lifecycle.passes)


# ---- the CLI ------------------------------------------------------------------------
def test_validate_prints_the_place_and_exits_1(folder):
    path = write(
        folder, edited("when: \"status = 'active'\"\n", "when: \"status = 'active' and recency > 1\"\n")
    )
    result = CliRunner().invoke(cli, ["validate", path])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    first = result.output.splitlines()[0]
    assert first == f"FAIL  {path}:16:15: passes.decay.rules[0].when: unknown name 'recency'"
    assert "16 |" in result.output and "^" in result.output


@pytest.mark.parametrize(
    "text",
    [
        BASE.replace("limit: 10", "limit: 10: 11"),  # YAML syntax
        BASE + "name: twice\n",  # duplicate key
        "name: a\nextends: a.yaml\n",  # extends cycle
        "name: a\nextends: nowhere\n",  # missing parent
    ],
)
def test_validate_never_shows_a_traceback(folder, text):
    path = write(folder, text, "a.yaml")
    result = CliRunner().invoke(cli, ["validate", path])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert result.output.startswith(f"FAIL  {path}:")


def test_validate_a_missing_file_exits_1(folder):
    result = CliRunner().invoke(cli, ["validate", str(folder / "absent.yaml")])
    assert result.exit_code == 1
    assert "policy not found" in result.output and "Traceback" not in result.output


def test_validate_json_reports_the_error(folder):
    path = write(folder, edited("limit: 10", "limit: ten"))
    result = CliRunner().invoke(cli, ["validate", "--json", path])
    assert result.exit_code == 1
    [report] = json.loads(result.stdout)
    assert report["ok"] is False and report["policy"] == path
    assert report["error"].startswith(f"{path}:24:10: recall.limit: must be a whole number")


def test_validate_one_bad_among_good_still_exits_1(folder):
    bad = write(folder, edited("every: 23h", "every: soon"))
    result = CliRunner().invoke(cli, ["validate", *RUNNABLE, bad])
    assert result.exit_code == 1
    assert sum(line.startswith("ok    ") for line in result.output.splitlines()) == len(RUNNABLE)
    assert re.search(rf"^FAIL  {re.escape(bad)}:14:12: passes\.decay\.every: ", result.output, re.M)


def test_validate_passes_on_the_shipped_policies():
    result = CliRunner().invoke(cli, ["validate", *RUNNABLE])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[1] for line in lines] == RUNNABLE
    assert all(line.startswith("ok    ") for line in lines)


def test_a_relative_db_is_beside_the_file_that_names_it(folder, monkeypatch):
    (folder / "agents").mkdir()
    (folder / "base").mkdir()
    base = write(folder, "name: base\ndb: shared.db\n", "base/base.yaml")
    own = write(folder, "name: own\ndb: data/mine.db\n", "agents/own.yaml")
    child = write(folder, "name: child\nextends: ../base/base.yaml\n", "agents/child.yaml")
    monkeypatch.chdir(folder / "agents")  # wherever a command runs from
    assert policy_mod.load(own).db == str(folder / "agents" / "data" / "mine.db")
    assert policy_mod.load(child).db == str(folder / "base" / "shared.db")  # where it is said
    assert policy_mod.load(base).db == str(folder / "base" / "shared.db")
    for as_written in ("postgresql://u@localhost/lethe", ":memory:"):
        path = write(folder, f"name: w\ndb: '{as_written}'\n", "w.yaml")
        assert policy_mod.load(path).db == as_written
    path = write(folder, f"name: w\ndb: '{folder / 'abs.db'}'\n", "w.yaml")
    with pytest.raises(PolicyError, match="inside the policy's project"):  # tests/test_policy_confinement.py
        policy_mod.load(path)


def test_a_command_opens_the_policys_db_beside_it(folder, monkeypatch):
    (folder / "pol").mkdir()
    (folder / "elsewhere").mkdir()
    path = write(
        folder, f"name: withdb\nextends: {PROJECT}/policies/lifecycle.yaml\ndb: mem.db\n", "pol/withdb.yaml"
    )
    monkeypatch.chdir(folder / "elsewhere")
    res = CliRunner().invoke(cli, ["add", "hello there", "-p", path, "--offline"])
    assert res.exit_code == 0, res.output
    assert (folder / "pol" / "mem.db").exists() and not (folder / "elsewhere" / "mem.db").exists()
