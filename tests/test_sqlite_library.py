"""Every connection a SQLite store opens to its file comes from the store's own SQLite
library (engine.store.sqlite.sqlite_library). On a Python whose sqlite3 cannot load extensions,
a store with embeddings runs on pysqlite3; a lease connection from the standard library
beside it did not see the store's locks (CI: "database disk image is malformed", and a
runner told its lease was taken over by nobody)."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest

from engine.store import database_errors, open_store
from engine.store.sqlite.sqlite_library import driver, library
from tests.helpers import store_of

TTL = dt.timedelta(minutes=15)


def _store(tmp_path, clock, vectors):
    if vectors:
        pytest.importorskip("sqlite_vec")
        try:
            driver(True)
        except Exception as exc:  # no SQLite here that loads extensions
            pytest.skip(str(exc))
    return open_store(str(tmp_path / "m.db"), clock, vectors=vectors)


@pytest.mark.parametrize("vectors", [False, True], ids=["plain", "embeddings"])
def test_every_connection_to_the_file_is_the_stores_library(tmp_path, clock, vectors):
    store = _store(tmp_path, clock, vectors)
    try:
        assert library(store.db) is store.sql is driver(vectors)
        lease = store.lease("default", TTL, "me")
        assert library(lease.db) is store.sql
        checkpoint = store._checkpoints._connect()
        try:
            assert library(checkpoint) is store.sql
        finally:
            checkpoint.close()
        assert store.busy_errors == (store.sql.OperationalError,)
        assert store.sql.DatabaseError in database_errors()
    finally:
        store.close()


@pytest.mark.parametrize("vectors", [False, True], ids=["plain", "embeddings"])
def test_the_lease_waits_for_the_stores_write_lock(tmp_path, clock, vectors):
    """While the store's own connection holds the write lock, the lease's connection
    cannot write: renewing says "busy" (None). A connection of another SQLite library
    does not see that lock and wrote beside the store's transaction."""
    store = _store(tmp_path, clock, vectors)
    try:
        lease = store.lease("default", TTL, "me", wait=0.05)
        assert lease.acquire()
        with store.transaction():
            store.db.execute("UPDATE leases SET holder = holder")
            assert lease.renew() is None
        assert lease.renew() is True
        lease.release()
    finally:
        store.close()
    check = sqlite3.connect(str(tmp_path / "m.db"))
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        check.close()


def test_errors_of_each_library_are_caught_as_the_connection_raises_them(tmp_path):
    """`library` names the module of a connection (also of the store's subclass of it),
    so `except library(db).OperationalError` catches what that connection raises."""
    from engine.store.sqlite.sqlite_wait import connection_class

    plain = sqlite3.connect(":memory:", factory=connection_class(sqlite3))
    assert library(plain) is sqlite3
    with pytest.raises(library(plain).OperationalError):
        plain.execute("SELECT * FROM nowhere")
    plain.close()
    pysqlite3 = pytest.importorskip("pysqlite3.dbapi2")
    other = pysqlite3.connect(":memory:", factory=connection_class(pysqlite3))
    assert library(other) is pysqlite3
    assert not issubclass(pysqlite3.OperationalError, sqlite3.Error)
    with pytest.raises(library(other).OperationalError):
        other.execute("SELECT * FROM nowhere")
    other.close()


def _needs_pysqlite3_for_embeddings():
    pytest.importorskip("sqlite_vec")
    if driver(True) is sqlite3:
        pytest.skip("this Python's sqlite3 loads extensions: one library serves both")


def test_a_plain_store_on_a_file_open_with_embeddings_uses_the_same_library(tmp_path, clock):
    """A store without embeddings opened beside one with them (another policy on the same
    file, `lethe copy` of it in-process) joins its library instead of bringing another."""
    _needs_pysqlite3_for_embeddings()
    path = str(tmp_path / "m.db")
    with_vectors = open_store(path, clock, vectors=True)
    try:
        plain = open_store(path, clock)
        try:
            assert plain.sql is with_vectors.sql is driver(True)
            assert library(plain.lease("default", TTL, "other").db) is with_vectors.sql
        finally:
            plain.close()
    finally:
        with_vectors.close()
    alone = open_store(path, clock)  # nothing open any more: Python's own again
    try:
        assert alone.sql is sqlite3
    finally:
        alone.close()


def test_a_second_name_for_the_file_is_the_same_file(tmp_path, clock):
    """A hard link (or a bind mount) has a real path of its own: the file it names is
    still the open one, so a store opened through it joins the open store's library, and
    embeddings through it beside a plain store are refused, as through the first name."""
    _needs_pysqlite3_for_embeddings()
    from engine.base.errors import StoreError

    path, link = tmp_path / "m.db", tmp_path / "also.db"
    open_store(str(path), clock).close()
    link.hardlink_to(path)
    with_vectors = open_store(str(path), clock, vectors=True)
    try:
        plain = open_store(str(link), clock)
        try:
            assert plain.sql is with_vectors.sql is driver(True)
        finally:
            plain.close()
    finally:
        with_vectors.close()
    plain = open_store(str(link), clock)
    try:
        with pytest.raises(StoreError, match="two SQLite libraries on one file"):
            open_store(str(path), clock, vectors=True)
    finally:
        plain.close()
    open_store(str(path), clock, vectors=True).close()  # released: nothing left claimed


def test_embeddings_on_a_file_open_without_them_are_refused_with_the_reason(tmp_path, clock):
    _needs_pysqlite3_for_embeddings()
    from engine.base.errors import StoreError

    path = str(tmp_path / "m.db")
    plain = open_store(path, clock)
    try:
        with pytest.raises(StoreError, match="two SQLite libraries on one file"):
            open_store(path, clock, vectors=True)
        plain.db.execute("SELECT count(*) FROM memories").fetchone()  # still usable
    finally:
        plain.close()
    later = open_store(path, clock, vectors=True)  # once it is closed: fine
    later.close()
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        check.close()


def test_two_threads_opening_one_file_get_one_library(tmp_path, clock):
    """The library is claimed before connecting: a store with embeddings and one without,
    opened at once from two threads, never end up on two libraries (or one is refused)."""
    import threading

    from engine.base.errors import StoreError

    _needs_pysqlite3_for_embeddings()

    def open_one(path, start, got, vectors):
        start.wait()
        try:
            got[vectors] = open_store(path, clock, vectors=vectors)
        except StoreError as exc:
            got[vectors] = exc

    for attempt in range(8):
        path = str(tmp_path / f"m{attempt}.db")
        open_store(path, clock).close()  # migrated first: the threads only connect
        start, got = threading.Barrier(2), {}
        threads = [threading.Thread(target=open_one, args=(path, start, got, v)) for v in (False, True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stores = [s for s in got.values() if not isinstance(s, Exception)]
        assert len({s.sql for s in stores}) == 1, got
        for s in stores:
            s.close()
    alone = open_store(str(tmp_path / "m0.db"), clock, vectors=True)  # nothing left claimed
    alone.close()


def test_a_store_opened_by_a_relative_path_survives_a_change_of_directory(tmp_path, clock, monkeypatch):
    """Its lease, checkpoints and release all find the file it opened, not one of the
    same name in the new current directory."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    store = open_store("m.db", clock)
    try:
        monkeypatch.chdir(tmp_path / "b")
        lease = store.lease("default", TTL, "me")
        assert lease.acquire()
        lease.release()
        checkpoint = store._checkpoints._connect()
        checkpoint.close()
    finally:
        store.close()
    assert not (tmp_path / "b" / "m.db").exists()
    if driver(True) is not sqlite3:
        # released under the key it was claimed with: embeddings may open it now
        open_store(str(tmp_path / "a" / "m.db"), clock, vectors=True).close()


# -- one SQLite library per process (issue 42, finding 12)
def test_a_store_with_embeddings_runs_on_the_standard_library_like_the_application(tmp_path, clock):
    """Before: on a Python whose sqlite3 cannot load extensions the store ran on pysqlite3;
    an application that opened and closed the same file with `sqlite3` made the process
    drop the store's POSIX locks and delete its WAL. Now every connection Lethe opens is
    the standard library's (vector functions in Python where no extension loads), the
    application's library too: one SQLite per process."""
    pytest.importorskip("numpy")
    from engine import Memory
    from tests.helpers.embeddings import embedding_policy, topic_vector
    from tests.helpers.fake_openai import FakeOpenAI

    with FakeOpenAI(embedder=topic_vector) as fake:
        path = str(tmp_path / "m.db")
        with Memory(path, policy=embedding_policy(tmp_path, fake), clock=clock) as mem:
            assert library(store_of(mem).db) is sqlite3
            mem.add("User eats chicken most days.", judged=False)
            app = sqlite3.connect(path)  # the application's own connection
            assert app.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
            app.close()
            mem.add("User's diet is beef and chicken.", judged=False)
            other = Memory(path, policy=embedding_policy(tmp_path, fake), clock=clock, read_only=True)
            assert other.counts() == {"active": 2}
            assert [r.content for r in mem.recall("diet")]
            other.close()
        db = sqlite3.connect(path)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.close()


def test_the_python_vector_functions_answer_as_sqlite_vec_does():
    """Where no extension loads, vec_distance_cosine, vec_quantize_binary, vec_bit and
    vec_distance_hamming are Python functions; they give sqlite-vec's answers."""
    np = pytest.importorskip("numpy")
    from engine.store.sqlite.vectors import python_functions

    ours = sqlite3.connect(":memory:")
    python_functions(ours)
    rng = np.random.default_rng(7)
    vectors = [rng.standard_normal(16).astype("float32").tobytes() for _ in range(6)]
    vectors.append(np.zeros(16, dtype="float32").tobytes())
    queries = [
        ("SELECT vec_distance_cosine(?, ?)", 2),
        ("SELECT hex(vec_quantize_binary(?))", 1),
        ("SELECT vec_distance_hamming(vec_bit(vec_quantize_binary(?)), vec_bit(vec_quantize_binary(?)))", 2),
    ]
    theirs = None
    try:
        import sqlite_vec
        from pysqlite3 import dbapi2

        theirs = dbapi2.connect(":memory:")
        theirs.enable_load_extension(True)
        sqlite_vec.load(theirs)
    except ImportError:
        pass
    for sql, n in queries:
        for a in vectors:
            for b in vectors[:3]:
                args = (a, b)[:n]
                got = ours.execute(sql, args).fetchone()[0]
                if theirs is not None:
                    want = theirs.execute(sql, args).fetchone()[0]
                    assert (got is None and want is None) or got == pytest.approx(want, abs=1e-5), sql
    assert ours.execute("SELECT vec_distance_cosine(?, ?)", (vectors[0], vectors[-1])).fetchone()[0] is None
