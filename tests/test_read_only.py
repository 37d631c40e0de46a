"""Read-only commands never wait behind a writer and work on a file they cannot write
(issue 12, finding 9): opening an up-to-date store starts no write transaction, and
`ls`, `why`, `costs`, `pending` and `compile` open it read-only (no WAL switch, no
migration, no rank rebuild)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest

from engine import FixedClock, Memory, StoreError
from tests.helpers import POLICIES, ROOT, START, store_of

LIFECYCLE = f"{POLICIES}/lifecycle.yaml"
# another rank formula than the one the store's ranks were computed with: a writer opening
# the store with it rebuilds them; a reader must not
OTHER_RANK = f'name: other-rank\nextends: {LIFECYCLE}\nscores: {{rank: "importance"}}\n'
READERS = [["ls"], ["why", "1"], ["costs"], ["pending"]]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "agent.db"
    with Memory(str(path), policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        mem.add("User prefers tabs over spaces", judged=False)
        mem.remember("I use Vim for everything.", "ok")
    other = tmp_path / "other.yaml"
    other.write_text(OTHER_RANK)
    return str(path), str(other)


def cli(*args, timeout=20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_opening_an_up_to_date_store_read_only_writes_nothing(store):
    path, other = store
    with Memory(path, policy=other, offline=True, read_only=True) as mem:
        assert store_of(mem).db.in_transaction is False
        assert [m.content for m in mem.candidates()]  # it reads
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store_of(mem).db.execute("DELETE FROM memories")  # and cannot write, by construction
    with sqlite3.connect(path) as db:  # the ranks stayed those of the old formula
        assert db.execute("SELECT rank_formula FROM policy_state").fetchone()[0] != "importance"


@pytest.mark.parametrize("command", READERS + [["compile"]], ids=" ".join)
def test_readers_do_not_wait_behind_a_writer(store, command):
    """Another process holds the write lock for 30 s. Before: `ls` with a policy whose
    rank differs waited for it (and failed with "database is locked")."""
    path, other = store
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1], "
            "isolation_level=None); db.execute('BEGIN IMMEDIATE'); db.execute(\"UPDATE memories "
            "SET importance = 7\"); print('locked', flush=True); time.sleep(30)",
            path,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        args = [*command, other] if command == ["compile"] else [*command, "--db", path, "--policy", other]
        done = cli(*args)
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started < 10
    finally:
        holder.kill()
        holder.wait()


def _can_mount_read_only() -> bool:
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind / /mnt && mount -o remount,bind,ro /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


@pytest.mark.skipif(
    shutil.which("unshare") is None or not _can_mount_read_only(),
    reason="needs a private read-only mount (unshare -m, as root)",
)
@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_readers_work_on_a_file_on_a_read_only_file_system(store, tmp_path, command):
    """The folder is mounted read-only (as root, file modes would not stop us): no -shm can
    be made beside the file. Before: even `PRAGMA journal_mode` failed to open it."""
    path, other = store
    ro = tmp_path / "ro"
    ro.mkdir()
    argv = " ".join(
        f"'{a}'"
        for a in [sys.executable, "-m", "engine.cli", *command, "--db", f"{ro}/agent.db", "--policy", other]
    )
    script = f"mount --bind '{tmp_path}' '{ro}' && mount -o remount,bind,ro '{ro}' && cd '{ROOT}' && {argv}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "error" not in done.stderr


def test_a_reader_says_what_a_file_holding_no_store_is(tmp_path):
    """An empty SQLite file has no Lethe store; the seed article's file has not been
    adopted; a memories table that is not the article's is not one Lethe adopts (before, the
    reader sent it to `lethe run`, which then failed on 'no such column'); none is 'an
    older version of Lethe', and the reader changes none."""
    empty, article = tmp_path / "empty.db", tmp_path / "agent_memory.db"
    other = tmp_path / "other.db"
    sqlite3.connect(empty).execute("CREATE TABLE notes (x)")
    shutil.copyfile(f"{ROOT}/tests/fixtures/schemas/v0-article.sqlite", article)
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT NOT NULL)")
    db.commit()
    db.close()
    for path, said in (
        (empty, f"error: no Lethe store at {empty}: this command does not create one"),
        (
            article,
            f"error: {article} holds memories Lethe has not adopted yet; run "
            "a command that writes, such as `lethe run`, once to adopt it",
        ),
        (
            other,
            f"error: cannot adopt {other}: its memories table is not the seed "
            "article's (it has no column summary, tags",
        ),
    ):
        before = path.read_bytes()
        done = cli("ls", "--db", path, "--policy", LIFECYCLE)
        assert done.returncode == 2 and done.stderr.startswith(said), done.stderr
        assert "older version" not in done.stderr and path.read_bytes() == before


def test_a_store_that_needs_upgrading_is_not_upgraded_by_a_reader(tmp_path):
    path = tmp_path / "old.db"
    shutil.copyfile(f"{ROOT}/tests/fixtures/schemas/v6-m006_inbox.sqlite", path)
    with pytest.raises(StoreError, match="older version of Lethe"):
        Memory(str(path), policy=LIFECYCLE, offline=True, read_only=True)
    done = cli("ls", "--db", path, "--policy", LIFECYCLE)
    assert done.returncode == 2 and "run a command that writes" in done.stderr


# ---- a user audit of the installed wheel: a store a writer cannot use says why ----------
WRITERS = [
    ["add", "x", "--offline"],
    ["remember", "I use uv.", "--offline"],
    ["run", "--offline"],
    ["recall", "x", "--offline"],
]


@pytest.mark.skipif(
    shutil.which("unshare") is None or not _can_mount_read_only(),
    reason="needs a private read-only mount (unshare -m, as root)",
)
@pytest.mark.parametrize("command", WRITERS, ids=" ".join)
def test_writers_on_a_read_only_mount_say_it_is_read_only(store, tmp_path, command):
    """Before: `error: cannot open ro/agent.db: unable to open database file` (or `the
    database failed: attempt to write a readonly database`), which said neither why nor
    what works."""
    path, _ = store
    ro = tmp_path / "ro"
    ro.mkdir()
    argv = " ".join(
        f"'{a}'" for a in [sys.executable, "-m", "engine.cli", *command, "--db", f"{ro}/agent.db"]
    )
    script = f"mount --bind '{tmp_path}' '{ro}' && mount -o remount,bind,ro '{ro}' && cd '{ROOT}' && {argv}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"error: cannot open {ro}/agent.db: the file is read-only" in done.stderr
    assert "only the commands that read work: lethe ls, why, pending and costs" in done.stderr


@pytest.mark.parametrize("command", WRITERS, ids=" ".join)
def test_writers_say_a_read_only_folder_is_why(store, monkeypatch, command):
    """A folder the writer may not write (file modes do not stop root, so os.access
    answers as for another user): SQLite needs it for the -wal and -shm files."""
    from click.testing import CliRunner

    from engine.cli import main

    path, _ = store
    folder = os.path.dirname(path)
    for beside in (path + "-wal", path + "-shm"):
        if os.path.exists(beside):
            os.remove(beside)
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: False if str(p) == folder and mode == os.W_OK else real(p, mode, **kw),
    )
    out = CliRunner().invoke(main, [*command, "--db", path])
    assert out.exit_code == 2, out.output
    assert (
        f"its directory {folder} is read-only, and SQLite needs to write its -wal and "
        f"-shm files" in out.output
    )


@pytest.mark.parametrize("command", [*WRITERS, *READERS], ids=" ".join)
def test_a_db_that_is_a_directory_or_in_a_missing_one_says_so(tmp_path, command):
    from click.testing import CliRunner

    from engine.cli import main

    out = CliRunner().invoke(main, [*command, "--db", str(tmp_path)])
    assert out.exit_code == 2
    assert f"cannot open {tmp_path}: it is a directory, not a database file" in out.output
    out = CliRunner().invoke(main, [*command, "--db", str(tmp_path / "nodir" / "a.db")])
    assert out.exit_code == 2
    assert f"the directory {tmp_path / 'nodir'} does not exist" in out.output
    assert not (tmp_path / "nodir").exists()


def test_a_link_is_judged_by_the_folder_of_the_file_it_names(tmp_path, monkeypatch):
    """SQLite writes -wal and -shm beside the file a link points to: a link in a folder the
    writer may not write, to a file in one it may, works (it was refused), and the reverse
    is refused (it was let through to SQLite's own 'unable to open database file')."""
    from engine.store.sqlite.sqlite_store import unusable

    (tmp_path / "ro").mkdir()
    (tmp_path / "rw").mkdir()
    target = tmp_path / "rw" / "agent.db"
    target.write_bytes(b"")
    link = tmp_path / "ro" / "agent.db"
    link.symlink_to(target)
    back = tmp_path / "rw" / "back.db"
    (tmp_path / "ro" / "real.db").write_bytes(b"")
    back.symlink_to(tmp_path / "ro" / "real.db")
    real = os.access
    ro = str(tmp_path / "ro")
    monkeypatch.setattr(
        os, "access", lambda p, mode, **kw: False if str(p) == ro and mode == os.W_OK else real(p, mode, **kw)
    )
    assert unusable(str(link), read_only=False) is None
    problem = unusable(str(back), read_only=False)
    assert problem and problem.startswith(f"its directory {ro} is read-only"), problem
