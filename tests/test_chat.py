"""`lethe chat` driven through stdin against the local OpenAI-compatible server, and the
twenty-line example agent."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine import Memory
from engine.cli import main
from tests.helpers import POLICIES, ROOT, run_sql, store_of
from tests.helpers.fake_openai import closed_port_url

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

LIFECYCLE = f"{POLICIES}/lifecycle.yaml"
NOW = "2026-01-05T09:00:00"


def chat(db_path, *args, input=""):
    return CliRunner().invoke(
        main, ["chat", "--db", db_path, "--policy", LIFECYCLE, "--now", NOW, *args], input=input
    )


def system_prompt(request) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "system")


def test_chat_answers_with_recalled_memories_in_the_prompt(db_path, fake_openai):
    fake_openai.responder = lambda request: "Neovim, with tabs."
    out = chat(
        db_path,
        "--offline",
        "--base-url",
        fake_openai.base_url,
        input="My favourite editor is Neovim\nwhich editor do I use?\n/quit\nnever read\n",
    )
    assert out.exit_code == 0, out.output
    assert out.output.count("assistant> Neovim, with tabs.") == 2
    first, second = fake_openai.requests  # judges are offline: only the chat model was asked
    assert first["model"] == second["model"] == "gpt-4o-mini"
    assert "response_format" not in second  # plain text, not JSON mode
    assert "You remember nothing" in system_prompt(first)
    prompt = system_prompt(second)
    assert "Neovim" in prompt.split("The conversation so far")[0]  # a recalled memory
    assert '"My favourite editor is Neovim"' in prompt  # and the turn before
    assert second["messages"][-1] == {"role": "user", "content": "which editor do I use?"}
    assert "recalled #1" in out.output and "stored #1" in out.output
    with Memory(db_path, policy=LIFECYCLE, offline=True) as mem:
        calls = run_sql(store_of(mem), "SELECT step, outcome FROM model_calls WHERE step = 'answer'")
        assert [tuple(r) for r in calls] == [("answer", "ok"), ("answer", "ok")]
        assert mem.get(1).access_count == 1  # recalled once, for the second message


def test_chat_offline_shows_what_it_recalled_and_stored(db_path):
    out = chat(db_path, "--offline", input="I prefer tabs over spaces\ntabs or spaces?\n")
    assert out.exit_code == 0, out.output
    assert out.output.startswith("(offline: no chat model")
    assert "assistant>" not in out.output
    lines = out.output.splitlines()
    assert "  recalled nothing" in lines and "  stored #1 [active]: User prefers tabs over spaces." in lines
    assert "  recalled #1 (conf 1.00, fresh 1.00): User prefers tabs over spaces." in lines


def test_chat_without_a_key_still_runs_and_keeps_the_turn(db_path):
    out = chat(db_path, input="I prefer tabs over spaces\n")  # not offline: judges need a key too
    assert out.exit_code == 0, out.output
    assert "no OPENAI_API_KEY and no --base-url: no chat model" in out.output
    assert "1 turn(s) wait for a judge model" in out.output  # saved, judged later: not lost


def test_chat_model_unreachable_still_remembers(db_path):
    out = chat(db_path, "--offline", "--base-url", closed_port_url(), input="I prefer tabs over spaces\n")
    assert out.exit_code == 0, out.output
    assert "the chat model did not answer: cannot reach gpt-4o-mini" in out.output
    assert "stored #1 [active]: User prefers tabs over spaces." in out.output


def test_chat_json_lines(db_path, fake_openai):
    fake_openai.responder = lambda request: "Noted."
    out = chat(
        db_path,
        "--offline",
        "--base-url",
        fake_openai.base_url,
        "--answer-model",
        "gpt-4o",
        "--json",
        input="I prefer tabs over spaces\n\ntabs or spaces?\n",
    )
    turns = [json.loads(line) for line in out.output.splitlines()]
    assert [t["user"] for t in turns] == ["I prefer tabs over spaces", "tabs or spaces?"]
    assert [t["answer"] for t in turns] == ["Noted.", "Noted."]
    assert [m["id"] for m in turns[1]["recalled"]] == [1]
    assert fake_openai.requests[0]["model"] == "gpt-4o"


def example_agent(cwd, *args, input="I prefer tabs over spaces\ntabs or spaces?\n", **env):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}, "PYTHONPATH": ROOT, **env}
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "agent.py"), *args],
        input=input,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_example_agent(tmp_path, fake_openai):
    fake_openai.responder = lambda request: "Got it."
    run = example_agent(tmp_path, OPENAI_BASE_URL=fake_openai.base_url, OPENAI_API_KEY="test")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["assistant> Got it.", "assistant> Got it."]
    assert "- User prefers tabs over spaces." in system_prompt(fake_openai.requests[1])
    with open(os.path.join(ROOT, "examples", "agent.py")) as fh:
        assert len([line for line in fh.read().splitlines() if line.strip()]) <= 45  # short to read


def test_the_example_agent_on_a_local_server_needs_no_key(tmp_path, fake_openai):
    """Issue 43: with only OPENAI_BASE_URL set it died with `Missing credentials`."""
    fake_openai.responder = lambda request: "Noted."
    run = example_agent(tmp_path, "--model", "local", OPENAI_BASE_URL=fake_openai.base_url)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["assistant> Noted.", "assistant> Noted."]
    assert fake_openai.requests[0]["model"] == "local"


def test_the_example_agent_offline_answers_with_what_it_recalled(tmp_path):
    run = example_agent(tmp_path, "--offline")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == ["assistant> I remember:", "- User prefers tabs over spaces."]


def test_the_example_agent_fails_in_one_line(tmp_path):
    run = example_agent(tmp_path)
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == (
        "agent.py: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server, or pass --offline\n"
    )
    url = closed_port_url()
    run = example_agent(tmp_path, OPENAI_BASE_URL=url, input="I live in Porto\n")
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == (
        f"agent.py: the model gpt-4o-mini at {url} failed: Connection error. (your message is remembered)\n"
    )
    mem = Memory(str(tmp_path / "agent.db"), offline=True)
    assert [m.content for m in mem.memories()] == ["User lives in Porto."]
    mem.close()
