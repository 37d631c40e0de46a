"""A policy is hostile input: nothing in it (YAML, formulas, Jinja templates) may read a file
outside the prompt folders, hang `lethe validate` or a render, or crash with an internal
error. Each refusal is a PolicyError, located at file:line:col where the loader knows it.

The probe that found these: a lone ~/Downloads/evil.yaml with `prompts: ".."` reading
~/.ssh/id_rsa as a template; scores that double at each level; nested range() loops; a
template that includes itself; a NUL in `db:`; a replay `file:` of /dev/zero.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory, prompts
from engine.base.errors import LetheError, PolicyError
from engine.cli import main as cli
from engine.judges import ReplayProvider
from engine.policy import load
from engine.prompts import budget

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not for a model server"
VARS = {"user": "u", "assistant": "a", "memory": {"content": "c"}, "query": "q"}


def within(seconds: float, fn):
    """fn()'s result or exception, or a failure when it takes longer than `seconds` (the
    thread is left to finish on its own: before the fixes some of these never did)."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    start = time.perf_counter()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds}s"
    out["seconds"] = time.perf_counter() - start
    return out


def refusal(seconds: float, fn) -> PolicyError:
    out = within(seconds, fn)
    assert isinstance(out.get("error"), PolicyError), out
    return out["error"]


def policy(folder, *, prompt="gate.j2", extra="", name="p.yaml") -> str:
    path = folder / name
    path.write_text(
        "name: probe\nmodels: {m: {provider: rules}}\n"
        + extra
        + f"write: [{{step: gate, model: m, prompt: '{prompt}'}}]\n"
    )
    return str(path)


@pytest.fixture
def home(tmp_path):
    """A home folder with a private key, and a lone policy downloaded into it."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_text(SECRET + "\n")
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (tmp_path / "notes").write_text(SECRET + "\n")
    (tmp_path / ".config").mkdir()
    (tmp_path / ".config" / "key.j2").write_text(SECRET + "\n")
    (tmp_path / "Downloads").mkdir()
    return tmp_path


# ---- 1. template files: only prompt templates, never dotfiles ----------------------------
@pytest.mark.parametrize("prompt", [".ssh/id_rsa", ".env", ".config/key.j2", "notes", "Downloads/p.yaml"])
def test_a_policy_cannot_read_a_dotfile_or_a_file_that_is_no_template(home, prompt):
    evil = policy(home / "Downloads", prompt=prompt, extra="prompts: '..'\n")
    err = refusal(10, lambda: load(evil))
    assert "Downloads/p.yaml:" in str(err) and "write[0].prompt" in str(err)
    assert SECRET not in str(err)
    shown = CliRunner().invoke(cli, ["render", evil, "gate", "--example"])
    assert shown.exit_code == 1 and SECRET not in shown.output and "sk-secret" not in shown.output


def test_a_template_cannot_include_a_dotfile_or_a_file_that_is_no_template(home):
    (home / "gate.j2").write_text("{{ user }}\n{% include '.ssh/id_rsa' %}\n")
    (home / "other.j2").write_text("{{ user }}\n{% include 'notes' %}\n")
    for name in ("gate.j2", "other.j2"):
        with pytest.raises(PolicyError) as err:
            prompts.render(name, (str(home),), VARS)
        assert SECRET not in str(err.value) and f"{name}:" in str(err.value)


def test_templates_with_jinja_extensions_in_a_dot_free_path_still_load(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("gate.j2", "sub/gate.jinja", "gate.jinja2"):
        (tmp_path / name).write_text("Save this? {{ user }}\n")
        assert prompts.render(name, (str(tmp_path),), VARS) == "Save this? u\n"


def test_a_template_too_large_to_be_a_prompt_is_refused(tmp_path):
    (tmp_path / "big.j2").write_text("{{ user }}" + "x" * prompts.MAX_TEMPLATE_BYTES)
    err = refusal(10, lambda: load(policy(tmp_path, prompt="big.j2", extra="prompts: .\n")))
    assert "big.j2" in err.message and "larger than" in err.message


def test_a_template_that_is_no_regular_file_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe.j2")  # opened, a FIFO waits for a writer for ever
    err = refusal(10, lambda: load(policy(tmp_path, prompt="pipe.j2", extra="prompts: .\n")))
    assert "pipe.j2" in err.message


# ---- 2. bounded work in a render ---------------------------------------------------------
HEAVY = {
    "nested ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "nested loops over text": "{% set s = 'x' * 100000 %}{% for a in s %}{% for b in s %}"
    "{% endfor %}{% endfor %}",
    "repetition": "{{ 'x' * 1000000000 }}",
    "list repetition": "{{ ([1] * 1000000000) | length }}",
    "power": "{{ 7 ** 1000000000 }}",
    "doubling": "{% set ns = namespace(s='xx') %}{% for i in range(60) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "doubling with +": "{% set ns = namespace(s='xx') %}{% for i in range(60) %}"
    "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
    "width": "{{ 'x' | center(1000000000) }}",
    "method width": "{{ 'x'.zfill(1000000000) }}",
    "format width": "{{ '%01000000000d' % 1 }}",
    "str.format width": "{{ '{:>1000000000}'.format(1) }}",
    "replace": "{{ ('x' * 100000).replace('', 'y' * 100000) }}",
    "join": "{{ ('x' * 100000).join('y' * 100000) }}",
    "recursive macro": "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "exponential macro": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
    "{% endmacro %}{{ f(60) }}",
}


@pytest.mark.parametrize("how", sorted(HEAVY))
def test_a_template_that_does_too_much_work_is_refused_at_validate(tmp_path, how):
    (tmp_path / "gate.j2").write_text("{{ user }}\n" + HEAVY[how] + "\n")
    path = policy(tmp_path, extra="prompts: .\n")
    err = refusal(20, lambda: load(path))
    assert "gate.j2:" in str(err), str(err)
    shown = within(20, lambda: CliRunner().invoke(cli, ["validate", path]))["value"]
    assert shown.exit_code == 1 and "gate.j2:" in shown.output
    assert "internal error" not in shown.output


@pytest.mark.parametrize("how", sorted(HEAVY))
def test_a_template_that_does_too_much_work_is_a_template_error_when_rendered(tmp_path, how):
    (tmp_path / "t.j2").write_text("first line\n" + HEAVY[how] + "\n")
    err = refusal(20, lambda: prompts.render("t.j2", (str(tmp_path),), VARS))
    assert "t.j2:" in str(err)


def test_ordinary_loops_and_sizes_still_render(tmp_path):
    (tmp_path / "t.j2").write_text(
        "{% for i in range(1000) %}{{ i }}{% endfor %}\n{{ 'ab' * 1000 }}\n"
        "{% for c in memory.content %}{{ c }}{% endfor %}\n{{ '%5d' % 3 }}{{ 2 ** 10 }}\n"
        "{{ ['a', 'b'] | join(', ') }} {{ 'x' | center(9) }}|{{ [1, 2] + [3] }}\n"
    )
    text = prompts.render("t.j2", (str(tmp_path),), {"memory": {"content": "c" * 5000}})
    assert "999" in text and "ab" * 1000 in text and "c" * 5000 in text
    assert "    31024" in text and "a, b     x    |[1, 2, 3]" in text


def test_a_render_that_runs_out_of_time_is_a_template_error(tmp_path, monkeypatch):
    monkeypatch.setattr(budget, "MAX_SECONDS", 0.5)
    (tmp_path / "t.j2").write_text(
        "{% set s = 'y' * 1000000 %}{% for i in range(100000) %}{{ s | list | sort | first }}{% endfor %}\n"
    )
    err = refusal(20, lambda: prompts.render("t.j2", (str(tmp_path),), VARS))
    assert "t.j2:" in str(err) and "seconds" in str(err)


# ---- 3. templates that include themselves ------------------------------------------------
@pytest.mark.parametrize("how", ["include", "import", "extends", "through another"])
def test_a_template_that_includes_itself_is_refused_at_validate(tmp_path, how):
    source = {
        "include": "{% include 'gate.j2' %}",
        "import": "{% import 'gate.j2' as g %}",
        "extends": "{% extends 'gate.j2' %}",
        "through another": "{% include 'other.j2' %}",
    }[how]
    (tmp_path / "gate.j2").write_text("{{ user }}\n" + source + "\n")
    (tmp_path / "other.j2").write_text("{% include 'gate.j2' %}\n")
    err = refusal(10, lambda: load(policy(tmp_path, extra="prompts: .\n")))
    assert "gate.j2:2:" in str(err) and "includes itself" in str(err)


def test_a_self_include_by_a_variable_name_is_a_template_error_when_rendered(tmp_path, clock):
    """A name only real values give cannot be followed when the template is parsed: the
    render that follows it is refused, and the turn stays pending."""
    (tmp_path / "gate.j2").write_text(
        "{{ user }}\n{% if user == 'gate' %}{% include user ~ '.j2' %}{% endif %}\n"
    )
    path = policy(tmp_path, extra="prompts: .\n")
    with Memory(str(tmp_path / "m.db"), policy=path, offline=True, clock=clock) as mem:
        with pytest.raises(PolicyError, match="gate.j2:2:.*recursion too deep"):
            mem.remember("gate", "ok")
        assert [p["user_text"] for p in mem.pending()] == ["gate"]


# ---- 4. formulas: bounded once the scores they read are written out ----------------------
def doubling_scores(depth: int) -> str:
    return "scores:\n  s0: importance\n" + "".join(
        f'  s{i}: "s{i - 1} + s{i - 1}"\n' for i in range(1, depth + 1)
    )


def test_scores_that_double_at_each_level_are_refused_fast(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: probe\n" + doubling_scores(40) + 'recall: {where: "s40 > 0"}\n')
    err = refusal(10, lambda: load(str(path)))
    assert "too large" in str(err)
    assert "p.yaml:" in str(err) and "scores.s" in str(err)  # located at the score
    shown = within(20, lambda: CliRunner().invoke(cli, ["validate", str(path)]))["value"]
    assert shown.exit_code == 1 and "too large" in shown.output


def test_a_large_but_reasonable_score_still_compiles(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: probe\n" + doubling_scores(8) + 'recall: {order: "s8 desc"}\n')
    assert load(str(path)).recall is not None


# ---- 5. the policy file: NUL in a value, not UTF-8, too large ----------------------------
@pytest.mark.parametrize("key", ["db", "prompts", "extends", "description"])
def test_a_nul_in_a_policy_value_is_a_policy_error(tmp_path, key):
    path = tmp_path / "p.yaml"
    path.write_text(f'name: probe\n{key}: "a\\0b"\n')
    err = refusal(10, lambda: load(str(path)))
    assert err.file and err.line == 2 and "NUL" in err.message
    for args in (
        ["validate", str(path)],
        ["recall", "--policy", str(path), "hi"],
        ["add", "--policy", str(path), "hi"],
    ):
        shown = CliRunner().invoke(cli, args)
        assert shown.exit_code == 1 and "internal error" not in shown.output, shown.output


def test_a_policy_file_that_is_not_utf8_or_too_large_is_a_policy_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: probe\ndescription: caf\xe9\n")
    err = refusal(10, lambda: load(str(bad)))
    assert err.line == 2 and "UTF-8" in err.message
    big = tmp_path / "big.yaml"
    big.write_text("name: probe\ndescription: " + "x" * 1_100_000 + "\n")
    assert "at most" in refusal(10, lambda: load(str(big))).message


# ---- 6. the replay model's file ----------------------------------------------------------
@pytest.mark.parametrize("target", ["/dev/zero", "/etc", "fifo"])
def test_a_replay_file_that_is_no_regular_file_is_refused(tmp_path, target):
    if target == "fifo":
        target = str(tmp_path / "answers.fifo")
        os.mkfifo(target)
    out = within(10, lambda: ReplayProvider(target))
    assert isinstance(out.get("error"), LetheError), out
    assert "regular file" in str(out["error"])


def test_a_replay_file_too_large_or_unreadable_is_refused(tmp_path, monkeypatch):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"step": "gate", "prompt_sha": "ab", "answer": "{}"}) + "\n")
    assert ReplayProvider(str(good)).table == {("gate", "ab"): "{}"}
    monkeypatch.setattr("engine.judges.providers.MAX_REPLAY_BYTES", 10)
    with pytest.raises(LetheError, match="larger than"):
        ReplayProvider(str(good))
    monkeypatch.undo()
    for text in ("not json\n", "[1]\n", '{"step": "gate"}\n', b"\xff\xfe\n"):
        bad = tmp_path / "bad.jsonl"
        (bad.write_bytes if isinstance(text, bytes) else bad.write_text)(text)
        with pytest.raises(LetheError, match="bad.jsonl:1"):
            ReplayProvider(str(bad))


def test_a_policy_whose_replay_model_reads_dev_zero_fails_in_words(tmp_path):
    (tmp_path / "gate.j2").write_text("{{ user }}\n")
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: probe\nprompts: .\nmodels: {m: {provider: replay, file: /dev/zero}}\n"
        "write: [{step: gate, model: m, prompt: gate.j2}]\n"
    )
    clock = FixedClock(dt.datetime(2026, 1, 5))
    with Memory(str(tmp_path / "m.db"), policy=str(path), clock=clock) as mem:
        out = within(10, lambda: mem.remember("I use Python.", "ok"))
    assert isinstance(out.get("error"), LetheError) and "regular file" in str(out["error"])
