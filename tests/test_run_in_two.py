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
