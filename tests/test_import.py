"""`lethe import` from an older SQLite source (the seed article's database, a file of an
older Lethe) with odd values in it: the same rows as adopting the file and importing it,
into a SQLite file and into PostgreSQL, with the source's bytes untouched and no temp copy
left behind, also when the import is interrupted and run again."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory
from engine.base.errors import StoreError
from engine.cli import main
from engine.store import MIGRATIONS, open_store
from engine.store.transfer import TABLES, copy_store
from tests.helpers import POLICIES, ROOT, START, pg_server, run_sql, store_of
from tests.helpers.odd_values import ODD

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

SCRATCH = "lethe-import-"  # how an adopted copy's temp folder is named
SCHEMAS = os.path.join(ROOT, "tests", "fixtures", "schemas")
# the versions before m015 that ran every earlier migration: the article, the first Lethe
# schema, one in the middle, the last one before m015
OLD = [
    "v0-article.sqlite",
    "v1-m001_article_schema.sqlite",
    "v10-m010_pass_progress_count.sqlite",
    "v14-m014_inbox_retries.sqlite",
]


def odd_source(folder, name: str = "v0-article.sqlite") -> str:
    """A copy of an old-version fixture with odd values written into it, as an older
    Lethe or another program could have left them."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name.replace(".sqlite", ".db"))
    shutil.copyfile(os.path.join(SCHEMAS, name), path)
    db = sqlite3.connect(path)
    for mid, col, value in ODD:
        db.execute(f"UPDATE memories SET {col} = ? WHERE id = ?", (value, mid))
    db.commit()
    db.close()
    return path


def adopted(path: str, folder, clock) -> str:
    """What opening the source with Lethe gives: a copy of it, upgraded in place."""
    os.makedirs(folder, exist_ok=True)
    copy = os.path.join(folder, "adopted.db")
    shutil.copyfile(path, copy)
    open_store(copy, clock).close()
    return copy


def everything(target: str) -> dict:
    """Every row an import copies, in order."""
    with open_store(target, read_only=True) as store:
        return {
            table: [tuple(r) for r in run_sql(store, f"SELECT * FROM {table} ORDER BY {key or '1, 2'}")]
            for table, key in TABLES
        }


def fingerprint(path: str) -> tuple:
    """The source's bytes, and what lies beside it (no -wal, -shm or journal appears)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), sorted(os.listdir(os.path.dirname(path)))


def left_behind() -> list[str]:
    return [f for f in os.listdir(tempfile.gettempdir()) if f.startswith(SCRATCH)]


@pytest.fixture
def target(backend, tmp_path, request):
    """A factory of empty destinations of the test's backend."""
    made = iter(range(100))

    def make() -> str:
        if backend == "postgres":
            return pg_server.fresh_schema(request.getfixturevalue("pg_dsn"))
        return str(tmp_path / f"destination-{next(made)}.db")

    make()  # a server, when one is started, is started now: not in the temp folder below
    return make


@pytest.fixture
def scratch(tmp_path, monkeypatch, target):
    """The temp folder (TMPDIR, as the CLI's user sets it), a folder of the test's own."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def normalised(rows: dict) -> list[tuple]:
    return [e for e in rows["memory_events"] if e[2] == "normalised"]


@pytest.mark.parametrize("version", OLD)
def test_importing_an_old_source_gives_the_rows_adopting_it_gives(tmp_path, target, scratch, version):
    """Before: into PostgreSQL the copy failed on 'high' in a REAL column; into SQLite the
    odd values arrived as they were, with no `normalised` event, unusable by recall."""
    clock = FixedClock(START)
    source = odd_source(tmp_path / "src", version)
    before = fingerprint(source)
    reference, imported = target(), target()
    copy_store(adopted(source, tmp_path / "ref", clock), reference, clock=clock)
    copy_store(source, imported, clock=clock, batch=4)
    assert fingerprint(source) == before and left_behind() == []
    ours, theirs = everything(imported), everything(reference)
    assert ours == theirs
    assert len(normalised(ours)) == len({mid for mid, _, _ in ODD})
    assert {e[4] for e in normalised(ours)} == {START.isoformat()}


@pytest.mark.parametrize("old", [False, True], ids=["lethe-file", "article-file"])
def test_an_id_the_source_gave_out_is_never_given_again(tmp_path, target, scratch, old):
    """Another program deleted the source's newest memory (its events kept) and, in the
    article's file, its newest event. Before: the copy's next memory got the deleted one's
    id, and `lethe why` showed it the deleted memory's history. Now the copy goes on after
    every id the source gave out, into SQLite and PostgreSQL, and out of either again."""
    if old:
        source = odd_source(tmp_path / "src")
    else:
        source = str(tmp_path / "src.db")
        with Memory(source, offline=True, clock=FixedClock(START)) as mem:
            for i in range(5):
                mem.add(f"fact {i}", importance=5)
    db = sqlite3.connect(source)
    top = db.execute("SELECT max(id) FROM memories").fetchone()[0]
    top_event = db.execute("SELECT max(id) FROM memory_events").fetchone()[0]
    db.execute(
        "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
        "VALUES (?, 'created', '{}', ?)",
        (top, START.isoformat()),
    )
    kept = db.execute("SELECT count(*) FROM memory_events WHERE memory_id = ?", (top,)).fetchone()[0]
    db.execute("DELETE FROM memories WHERE id = ?", (top,))
    if old:  # the article's events are not append-only (Lethe's are, by a trigger)
        db.execute(
            "DELETE FROM memory_events WHERE id = (SELECT max(id) FROM memory_events "
            "WHERE memory_id IS NOT ?)",
            (top,),
        )
    given_event = db.execute("SELECT max(seq) FROM sqlite_sequence WHERE name = 'memory_events'").fetchone()[
        0
    ]
    db.commit()
    db.close()
    imported, back = target(), str(tmp_path / "back.db")
    copy_store(source, imported)
    copy_store(imported, back)  # out again: PostgreSQL's sequences are read back
    for where in (imported, back):
        with Memory(where, offline=True, clock=FixedClock(START)) as mem:
            new = mem.add("a fact of its own", importance=5)
            events = run_sql(
                store_of(mem), "SELECT id FROM memory_events WHERE memory_id = ?", (new,)
            ).fetchall()
            inherited = run_sql(
                store_of(mem), "SELECT count(*) FROM memory_events WHERE memory_id = ?", (top,)
            ).fetchone()[0]
        assert new == top + 1, where
        assert events and min(e[0] for e in events) > given_event > top_event
        assert inherited == kept  # the deleted memory's history stays its own


def test_the_report_names_the_adopted_copy(tmp_path, target, scratch):
    lines = []
    result = copy_store(
        odd_source(tmp_path / "src", "v14-m014_inbox_retries.sqlite"), target(), report=lines.append
    )
    assert result.adopted == [m.__name__ for m in MIGRATIONS[14:]]
    assert "behind the current schema" in lines[0] and str(scratch) in lines[0]
    assert any("m015_normalise_odd_rows" in line for line in lines[1:])  # the upgrade's steps
    assert left_behind() == []


def test_the_imported_old_source_is_usable_by_recall(tmp_path, target, scratch):
    source = odd_source(tmp_path / "src")
    imported = target()
    copy_store(source, imported, clock=FixedClock(START))
    with Memory(
        imported, policy=os.path.join(POLICIES, "lifecycle.yaml"), offline=True, clock=FixedClock(START)
    ) as mem:
        rows = mem.memories("all", limit=100)
        assert len(rows) == 60 and all(
            isinstance(m.importance, float) and 0 <= m.importance <= 10 and isinstance(m.content, str)
            for m in rows
        )
        assert mem.recall("what does the user prefer?")


def test_the_copy_is_gone_from_disk_while_the_rows_are_copied(tmp_path, target, scratch):
    """It is read through an open handle once adopted: a kill during the copy (the long
    part) leaves nothing in the temp folder."""
    seen, imported = [], target()
    copy_store(
        odd_source(tmp_path / "src"),
        imported,
        batch=5,
        progress=lambda table, done, total: seen.append(left_behind()),
    )
    assert seen and all(s == [] for s in seen)
    assert normalised(everything(imported))  # the rows did come from an adopted copy


def test_an_up_to_date_source_is_read_in_place(tmp_path, target, scratch):
    """No copy, no migration: the rows as they are."""
    path = str(tmp_path / "src" / "current.db")
    os.makedirs(os.path.dirname(path))
    with Memory(
        path, policy=os.path.join(POLICIES, "lifecycle.yaml"), offline=True, clock=FixedClock(START)
    ) as mem:
        ids = [mem.add(f"fact number {i}") for i in range(12)]
    before = fingerprint(path)
    lines, during = [], []
    imported = target()
    result = copy_store(
        path, imported, report=lines.append, batch=5, progress=lambda *_: during.append(os.listdir(scratch))
    )
    assert result.adopted == [] and lines == [] and during and all(d == [] for d in during)
    assert fingerprint(path) == before  # a WAL file read gets no -wal or -shm beside it
    assert [r[0] for r in everything(imported)["memories"]] == ids
    assert everything(imported)["memories"] == everything(path)["memories"]


def test_an_old_source_in_wal_mode_gets_no_files_beside_it(tmp_path, target, scratch):
    source = odd_source(tmp_path / "src", OLD[-1])
    db = sqlite3.connect(source)
    db.execute("PRAGMA journal_mode = WAL")  # what every file an older Lethe wrote is in
    db.close()
    before = fingerprint(source)
    copy_store(source, target(), clock=FixedClock(START))
    assert fingerprint(source) == before and left_behind() == []


def test_a_copy_left_by_a_killed_import_is_removed_by_the_next(tmp_path, target, scratch):
    """A kill while the copy is adopted leaves its folder; the next import on this host
    removes those of processes that are gone, and only those."""
    from engine.store.transfer import _HOST

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    stale = scratch / f"{SCRATCH}{gone}@{_HOST}-x1y2z3"
    live = scratch / f"{SCRATCH}{os.getpid()}@{_HOST}-a1b2c3"  # an import running now
    elsewhere = scratch / f"{SCRATCH}{gone}@another-host-d4e5f6"
    no_pid = scratch / f"{SCRATCH}{'9' * 30}@{_HOST}-g7h8i9"  # not a pid: cannot tell, kept
    for folder in (stale, live, elsewhere, no_pid):
        folder.mkdir()
        (folder / "source.db").write_bytes(b"memories")
    keep = tmp_path / "precious"  # a link with a stale copy's name is not followed
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    link = scratch / f"{SCRATCH}{gone}@{_HOST}-l1n2k3"
    link.symlink_to(keep, target_is_directory=True)
    copy_store(odd_source(tmp_path / "src"), target(), clock=FixedClock(START))
    assert sorted(left_behind()) == sorted([live.name, elsewhere.name, no_pid.name, link.name])
    assert (keep / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("body", [b"", None])  # an empty file, another program's database
def test_a_source_without_memories_is_refused(tmp_path, target, scratch, body):
    path = tmp_path / "other.db"
    if body is None:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE songs (id INTEGER PRIMARY KEY, title TEXT)")
        db.close()
    else:
        path.write_bytes(body)
    with pytest.raises(StoreError, match="holds no memories table"):
        copy_store(str(path), target())
    assert left_behind() == []


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("where", ["memories", "memory_events"])
def test_an_interrupted_import_of_an_old_source_resumes_to_the_same_rows(tmp_path, target, scratch, where):
    """A rerun adopts a fresh copy. Stopped among the memories, it dates the `normalised`
    events with its own time, as an import never stopped would; stopped after some of
    those events were copied, it keeps their time, so all of them have one."""
    source = odd_source(tmp_path / "src", "v14-m014_inbox_retries.sqlite")
    before = fingerprint(source)
    with sqlite3.connect(source) as db:
        last_event = db.execute("SELECT max(id) FROM memory_events").fetchone()[0]
    first, rerun = FixedClock(START), FixedClock(START + dt.timedelta(days=3))

    def stop(table, done, total):
        if table == where and (where == "memories" and done >= 8 or done > last_event + 2):
            raise Interrupted

    killed = target()
    with pytest.raises(Interrupted):
        copy_store(source, killed, clock=first, batch=2, progress=stop)
    assert left_behind() == [] and fingerprint(source) == before
    again = copy_store(source, killed, clock=rerun, batch=2)
    assert again.resumed[where] > 0
    kept = rerun if where == "memories" else first
    reference = target()
    copy_store(adopted(source, tmp_path / "ref", kept), reference, clock=kept)
    ours = everything(killed)
    assert ours == everything(reference) and normalised(ours)
    assert {e[4] for e in normalised(ours)} == {kept.now.isoformat()}
    assert left_behind() == [] and fingerprint(source) == before


def test_lethe_import_says_it_read_an_adopted_copy(tmp_path, target, scratch):
    source = odd_source(tmp_path / "src")
    before = fingerprint(source)
    runner = CliRunner()
    out = runner.invoke(main, ["import", source, "--db", target(), "--now", START.isoformat()])
    assert out.exit_code == 0, out.output
    assert "read from an adopted copy" in out.output and "not to the source" in out.output
    as_json = runner.invoke(main, ["import", source, "--db", target(), "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["adopted"] == [m.__name__ for m in MIGRATIONS]
    assert fingerprint(source) == before and left_behind() == []


def test_importing_a_file_into_itself_is_refused(tmp_path):
    """It printed "0 copied, 3 already there" and exited 0, as a finished rerun would."""
    path = tmp_path / "a.db"
    with Memory(str(path), offline=True) as mem:
        mem.add("a fact", judged=False)
    (tmp_path / "link.db").symlink_to(path)
    (tmp_path / "sub").mkdir()
    for src, dst in [(path, path), (tmp_path / "link.db", path), (path, tmp_path / "sub" / ".." / "a.db")]:
        out = CliRunner().invoke(main, ["import", str(src), "--db", str(dst)])
        assert out.exit_code == 2, out.output
        assert f"error: cannot import {src} into itself" in out.output
        assert "copied" not in out.output
    with pytest.raises(StoreError, match="into itself"):
        copy_store(str(path), str(path))


def test_a_dsn_written_another_way_is_the_same_database():
    """The same server and database in another order or form was imported into itself
    ("1 already there", exit 0); another database or schema is another store."""
    pytest.importorskip("psycopg")
    from engine.store.transfer import _check_not_itself

    a = "postgresql://lethe@localhost:5433/lethe?options=-csearch_path%3Dt1&connect_timeout=5"
    for same in (
        "postgresql://lethe@localhost:5433/lethe?connect_timeout=5&options=-csearch_path%3Dt1",
        "postgres://lethe@localhost:5433/lethe?options=-csearch_path%3Dt1 ",
    ):
        with pytest.raises(StoreError, match="into itself"):
            _check_not_itself(a, same)
    for other in (
        "postgresql://lethe@localhost:5433/other?options=-csearch_path%3Dt1",
        "postgresql://lethe@localhost:5433/lethe?options=-csearch_path%3Dt2",
        "postgresql://lethe@localhost:5434/lethe?options=-csearch_path%3Dt1",
    ):
        _check_not_itself(a, other)  # not refused


def test_a_source_its_adoption_would_refuse_is_refused_by_its_own_name(tmp_path, target, scratch):
    """Before: the refusal blamed the temp folder ('set TMPDIR elsewhere'), after a
    destination had been made."""
    source = odd_source(tmp_path / "src")
    db = sqlite3.connect(source)
    db.execute("CREATE UNIQUE INDEX once ON memories(content)")
    db.commit()
    db.close()
    before = fingerprint(source)
    imported = target()
    with pytest.raises(
        StoreError,
        match=f"cannot upgrade {source}: memories has UNIQUE index 'once'.*Nothing in it was changed",
    ) as refused:
        copy_store(source, imported)
    assert "TMPDIR" not in str(refused.value)
    assert fingerprint(source) == before and left_behind() == []
    if not imported.startswith("postgresql:"):
        assert not os.path.exists(imported)
