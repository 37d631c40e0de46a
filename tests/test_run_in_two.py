"""`make test`'s split (tests/run_in_two.py): every file in exactly one half, halves even."""

from __future__ import annotations

import random

from tests.run_in_two import deal


def test_every_file_once_and_the_halves_even():
    rng = random.Random(5)
    files = [f"tests/test_{i:02}.py" for i in range(40)]
    seconds = {f: rng.choice([0.5, 2.0, 9.0, 60.0]) for f in files}
    halves = deal(files, seconds)
    assert sorted(halves[0] + halves[1]) == files
    totals = [sum(seconds[f] for f in h) for h in halves]
    assert abs(totals[0] - totals[1]) <= max(seconds.values())
    assert all(h == sorted(h) for h in halves)


def test_unrecorded_files_count_as_the_average():
    files = ["tests/test_a.py", "tests/test_b.py", "tests/test_new.py"]
    halves = deal(files, {"tests/test_a.py": 100.0, "tests/test_b.py": 10.0})
    # the new file weighs 55 s: it joins the 10 s file, not the 100 s one
    assert halves == [["tests/test_a.py"], ["tests/test_b.py", "tests/test_new.py"]]


def test_alternate_dealing_would_fail_this():
    files = [f"tests/test_{i}.py" for i in range(4)]
    seconds = dict(zip(files, [100.0, 1.0, 100.0, 1.0], strict=True))
    halves = deal(files, seconds)
    assert [sum(seconds[f] for f in h) for h in halves] == [101.0, 101.0]


def test_a_command_beside_the_halves_fails_the_run_when_it_fails(tmp_path, monkeypatch, capsys):
    """`make test` runs the type checker beside the halves: its failure is the run's, and
    what it said is printed."""
    import os
    import sys

    import tests.run_in_two as two

    root = str(two.TESTS.parent)  # the durations plugin is imported from the repository
    monkeypatch.setenv("PYTHONPATH", root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setattr(two, "TESTS", tmp_path / "tests")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ok.py").write_text("def test_ok():\n    pass\n", encoding="utf-8")
    monkeypatch.setattr(two, "LAST", tmp_path / "last.json")
    monkeypatch.setattr(two, "DURATIONS", tmp_path / "durations.json")
    failing = f"{sys.executable} -c \"print('beside said no'); raise SystemExit(3)\""
    assert two.main(["--beside", failing]) == 1
    out = capsys.readouterr().out
    assert "beside said no" in out and "exit 3" in out
    passing = f"{sys.executable} -c \"print('beside is fine')\""
    assert two.main(["--beside", passing]) == 0
