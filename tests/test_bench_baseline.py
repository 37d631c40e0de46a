"""The benchmark's baselines do the work they stand for: bench/bare_sql.py's `--design`
(Lethe's design with none of its code) ends where Lethe's own pass ends, with recall's
index rebuilt as it was; and its flags refuse what they cannot measure."""

import datetime as dt
import shutil
import sqlite3
import subprocess
import sys

import pytest

from bench import bare_sql, seed_article
from engine import Memory
from engine.store.sqlite import bulk
from tests.helpers import POLICIES, ROOT, START

T = START + dt.timedelta(days=1)
N = bulk.BULK_MIN_ROWS + 2_000  # enough for Lethe's decay to rebuild the index too


@pytest.fixture(scope="module")
def adopted(tmp_path_factory):
    path = tmp_path_factory.mktemp("baseline") / "adopted.db"
    seed_article.generate(path, N, START, seed=11)
    Memory(str(path), policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: START, offline=True).close()
    return path


def rows_and_events(path):
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, status, decay_score, rank FROM memories ORDER BY id").fetchall()
        events = conn.execute(
            "SELECT memory_id, event_type FROM memory_events WHERE "
            "event_type IN ('archived', 'expired') ORDER BY 1, 2"
        ).fetchall()
        index = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (bare_sql.RECALL_INDEX,)
        ).fetchone()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return rows, events, index
    finally:
        conn.close()


def same_rows(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x[:2] == y[:2], (x, y)
        assert x[2] == pytest.approx(y[2], abs=1e-9) and x[3] == pytest.approx(y[3], abs=1e-9)


def test_the_design_baseline_ends_where_lethe_ends(tmp_path, adopted):
    lethe, design = str(tmp_path / "lethe.db"), str(tmp_path / "design.db")
    shutil.copy(adopted, lethe)
    shutil.copy(adopted, design)
    with Memory(lethe, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as m:
        ran = m.run(["expiry", "decay"])
    db = bare_sql.connect(design)
    try:
        counts = bare_sql.run(db, T.isoformat(timespec="seconds"), design=True)
    finally:
        db.close()
    assert counts["archived"] == ran[1].events["archived"] > 0
    assert counts["expired"] == ran[0].events["expired"] > 0
    (l_rows, l_events, l_index), (d_rows, d_events, d_index) = (
        rows_and_events(lethe),
        rows_and_events(design),
    )
    same_rows(l_rows, d_rows)
    assert l_events == d_events
    assert d_index == l_index and "WHERE status = 'active'" in d_index[0]


def test_the_design_baseline_rebuilds_only_an_index_that_is_there(tmp_path, adopted):
    path = str(tmp_path / "no-index.db")
    shutil.copy(adopted, path)
    conn = sqlite3.connect(path)
    conn.execute(f"DROP INDEX {bare_sql.RECALL_INDEX}")
    conn.commit()
    conn.close()
    db = bare_sql.connect(path)
    try:
        with pytest.raises(SystemExit, match="not an adopted file"):
            bare_sql.run(db, T.isoformat(timespec="seconds"), design=True)
    finally:
        db.close()


def test_the_read_time_baseline_reads_as_lethe_ends(tmp_path, adopted):
    """bench/bare_sql.py --read-time (a design measured, not built) writes only the expiry,
    the archive and the head's scores; every row as a reader computes it then (an active
    row's decay_score from its inputs at T) is Lethe's, and so are the events and the
    stored score of every head row."""
    lethe, rt = str(tmp_path / "lethe.db"), str(tmp_path / "read-time.db")
    shutil.copy(adopted, lethe)
    shutil.copy(adopted, rt)
    with Memory(lethe, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as m:
        m.run(["expiry", "decay"])
    db = bare_sql.connect(rt)
    try:
        with pytest.raises(SystemExit, match="holds the head only"):  # floor NULL: no head
            bare_sql.run_read_time(db, T.isoformat(timespec="seconds"))
        floor = db.execute(
            "SELECT rank FROM memories WHERE status = 'active' ORDER BY rank DESC LIMIT 1 OFFSET 99"
        ).fetchone()[0]
        db.execute("UPDATE recall_head SET floor = ?", (floor,))
        head = [
            r[0]
            for r in db.execute("SELECT id FROM memories WHERE status = 'active' AND rank >= ?", (floor,))
        ]
        counts = bare_sql.run_read_time(db, T.isoformat(timespec="seconds"))
        read = db.execute(
            "SELECT id, status, CASE WHEN status = 'active' THEN "
            f"{bare_sql.FRESH} ELSE decay_score END FROM memories ORDER BY id",
            {"now": T.isoformat(timespec="seconds")},
        ).fetchall()
        stored = dict(db.execute("SELECT id, decay_score FROM memories"))
    finally:
        db.close()
    l_rows, l_events, _ = rows_and_events(lethe)
    assert counts["archived"] > 0 and counts["expired"] > 0 and 0 < counts["decayed"] <= 100
    assert len(read) == len(l_rows)
    for x, y in zip(read, l_rows):
        assert x[:2] == y[:2] and x[2] == pytest.approx(y[2], abs=1e-9), (x, y)
    by_id = {r[0]: r for r in l_rows}
    assert all(stored[i] == pytest.approx(by_id[i][2], abs=1e-9) for i in head)
    assert rows_and_events(rt)[1] == l_events


@pytest.mark.parametrize(
    "flags, why",
    [
        (["--design", "--article"], "are for an adopted copy"),
        (["--design", "--article", "--as-lethe"], "are for an adopted copy"),
        (["--design"], "is not in WAL mode"),  # the copy must be in the store's journal already
        (["--read-time", "--as-lethe"], "is not in WAL mode"),
    ],
)
def test_the_design_flag_refuses_what_it_cannot_measure(tmp_path, adopted, flags, why):
    path = str(tmp_path / "refused.db")
    shutil.copy(adopted, path)
    sqlite3.connect(path).execute("PRAGMA journal_mode = DELETE").connection.close()
    proc = subprocess.run(
        [sys.executable, "bench/bare_sql.py", path, T.isoformat(timespec="seconds"), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert why in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert rows_and_events(path)[1] == rows_and_events(str(adopted))[1]  # nothing ran


@pytest.mark.parametrize("args", [[], ["only-a-db.db"], ["x.db", "2025-06-02", "--desing"]])
def test_the_baseline_script_prints_its_usage_for_arguments_it_cannot_run(args):
    proc = subprocess.run(
        [sys.executable, "bench/bare_sql.py", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert proc.stderr.startswith("usage: python bench/bare_sql.py DB NOW_ISO"), proc.stderr
    assert "Traceback" not in proc.stderr
