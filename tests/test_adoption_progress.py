"""Adopting (or upgrading) a file that already holds memories says what it is doing, step
by step: a 1M-row article database takes seconds before the first pass."""

import io

from bench import seed_article
from engine import Memory
from engine.cli.base import terminal_progress
from engine.store import MIGRATIONS
from tests.helpers import START


def test_adopting_an_article_file_reports_each_step(tmp_path):
    path = tmp_path / "agent_memory.db"
    seed_article.generate(path, 300, START, seed=1)
    lines = []
    Memory(str(path), offline=True, clock=lambda: START, progress=lines.append).close()
    steps = [line for line in lines if line.startswith("upgrading")]
    assert len(steps) == len(MIGRATIONS)
    assert steps[0] == (f"upgrading {path} (300 memories): m001_article_schema (1 of {len(MIGRATIONS)})")
    assert "m004_full_text (4 of" in steps[3]
    assert lines[-1] == "computing the stored rank of 300 memories (lifecycle)"
    lines.clear()
    Memory(str(path), offline=True, clock=lambda: START, progress=lines.append).close()
    assert lines == []  # an up-to-date file: nothing to do, nothing said


def test_a_new_file_says_nothing(tmp_path):
    lines = []
    Memory(str(tmp_path / "new.db"), offline=True, clock=lambda: START, progress=lines.append).close()
    assert lines == []


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_goes_to_a_terminal_only():
    assert terminal_progress(io.StringIO()) is None  # piped: the output stays as it was
    term = Terminal()
    terminal_progress(term)("upgrading a.db (3 memories): m004_full_text (4 of 15)\x1b]0;x")
    assert term.getvalue() == ("lethe: upgrading a.db (3 memories): m004_full_text (4 of 15)\\x1b]0;x\n")
