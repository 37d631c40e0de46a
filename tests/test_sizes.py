"""Sizes (issue 42, findings 2 and 9): memory text, tags and keyed values have a size limit
at every entry point (API, CLI, MCP, LangGraph through `put`, import); a prompt shows a
long text cut, and says so, so data never makes a template fail; one render builds at
most so many characters in all, whatever it keeps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from engine import FixedClock, InputError, Memory, StoreError, prompts
from engine.base import inputs
from engine.cli import main
from engine.prompts import budget
from engine.store.transfer import copy_store
from tests.helpers import store_of

OVER = inputs.MAX_TEXT + 1


@pytest.fixture
def mem(tmp_path):
    with Memory(str(tmp_path / "m.db"), offline=True, clock=FixedClock("2026-03-02T09:00:00")) as m:
        yield m


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.add("x" * OVER, judged=False),
        lambda m: m.add("x" * OVER),
        lambda m: m.add("short", summary="s" * OVER, judged=False),
        lambda m: m.add("short", tags=["t" * (inputs.MAX_TAG + 1)], judged=False),
        lambda m: m.add("short", tags=[f"t{i}" for i in range(inputs.MAX_TAGS + 1)], judged=False),
        lambda m: m.remember("x" * OVER),
        lambda m: m.remember("hi", "x" * OVER),
        lambda m: m.put("k", "x" * OVER, None),
        lambda m: m.put("k", "short", {"v": "x" * OVER}),
        lambda m: m.correct(m.add("short one", judged=False), "x" * OVER, "why"),
    ],
    ids=[
        "add raw",
        "add judged",
        "summary",
        "a long tag",
        "many tags",
        "remember user",
        "remember assistant",
        "put content",
        "put value",
        "correct",
    ],
)
def test_an_oversized_memory_is_refused_at_the_api_and_nothing_is_stored(mem, call):
    """Before: two 6 MB memories stored without judging wedged every later judged write."""
    before = mem.counts()
    with pytest.raises(InputError, match="at most"):
        call(mem)
    assert mem.counts() == before or mem.counts() == {"active": 1}
    assert mem.pending() == []


def test_the_cli_refuses_an_oversized_memory(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("x" * OVER)
    result = CliRunner().invoke(
        main, ["add", "--db", str(tmp_path / "m.db"), "--raw", "--offline", "x" * OVER]
    )
    assert result.exit_code == 2 and "at most" in result.output, result.output


def test_an_import_refuses_a_source_holding_an_oversized_memory(tmp_path):
    src = tmp_path / "src.db"
    with Memory(str(src), offline=True) as m:
        m.add("fine", judged=False)
        big = m.add("small now", judged=False)
        store_of(m).db.execute("UPDATE memories SET content = ? WHERE id = ?", ("x" * OVER, big))
        store_of(m).db.commit()
    with pytest.raises(StoreError, match=f"#{big}.*at most"):
        copy_store(str(src), str(tmp_path / "dst.db"))
    assert (
        not os.path.exists(tmp_path / "dst.db")
        or Memory(str(tmp_path / "dst.db"), offline=True).counts() == {}
    )


def test_long_memories_never_make_a_judged_write_or_a_pass_fail(mem, monkeypatch):
    """Before: 'template does too much work' blamed the shipped contradiction.j2 once the
    candidates passed the render's 10M characters (two 6 MB memories); every remember was
    parked and `lethe run` exited 1. Here the bound is 1M (the memories 300K each, so the
    test runs in seconds). Now a prompt shows each text cut to PROMPT_TEXT characters and
    says how much is left out; the rules judges still read the whole text."""
    monkeypatch.setattr(budget, "MAX_SIZE", 1_000_000)
    for i in range(6):
        mem.add(f"Project {i} notes: " + "word " * 60_000, judged=False)
    start = time.monotonic()
    assert mem.add("Project notes moved to the wiki.")
    written = mem.remember("The project notes are in the wiki now.", "Noted.")
    assert not mem.pending(), mem.pending()
    assert [r.name for r in mem.run(["compression"])] == ["compression"]
    assert mem.recall("project notes")
    assert time.monotonic() - start < 120
    shown = prompts.render(
        "contradiction.j2",
        mem.policy.prompt_dirs,
        {
            "memory": {"content": "y" * OVER, "summary": "s", "kind": None, "tags": []},
            "candidates": [
                {
                    "n": 1,
                    "content": "z" * OVER,
                    "summary": None,
                    "created_at": "2026-01-01",
                    "importance": 5,
                    "similarity": None,
                }
            ],
            "now": "2026-03-02T09:00:00",
            "today": "2026-03-02",
        },
    )
    assert len(shown) < 3 * prompts.PROMPT_TEXT + 20_000
    assert f"{OVER - prompts.PROMPT_TEXT:,} more characters not shown" in shown
    del written


def test_a_render_of_short_texts_is_unchanged():
    short = {
        "memory": {"content": "User likes tea.", "summary": None, "kind": None, "tags": []},
        "candidates": [],
        "now": "2026-03-02T09:00:00",
        "today": "2026-03-02",
    }
    assert prompts.shortened(short) == short


TEMPLATE = """{% set ns = namespace(keep=[]) %}{% for i in range(120) %}\
{% set ns.keep = ns.keep + [("x" * 9999999) | upper] %}{% endfor %}{{ ns.keep | length }}"""


def test_one_render_builds_a_bounded_total_whatever_it_keeps(tmp_path):
    """Before: each value was bounded (10M characters) but not their total: a loop keeping
    such values validated at 1.1 GB resident and reached 3-6 GB. The render runs in a
    child limited to 1.5 GB of address space, so today's code fails by running out."""
    (tmp_path / "hog.j2").write_text(TEMPLATE)
    script = textwrap.dedent(f"""
        import resource, sys, time
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
        from engine import prompts, PolicyError
        start = time.monotonic()
        try:
            prompts.render("hog.j2", ({str(tmp_path)!r},), {{}})
        except PolicyError as exc:
            print(exc.message)
        print(round(time.monotonic() - start, 2))
        # this process's own peak (VmHWM, kB): ru_maxrss also counts the parent's resident
        # pages at the fork, which is a gigabyte in a test run that loaded torch
        print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=300
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 3, done.stdout + done.stderr
    message, seconds, rss_kb = lines[0], float(lines[1]), int(lines[2])
    assert "too much work" in message and "in all" in message, message
    assert rss_kb < (budget.MAX_TOTAL * 4 + 200_000_000) // 1024
    assert seconds < 60
