"""Tests for bench/seed_article.py, the seed article's reference implementation."""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

# `bench` is not part of the installed package; make the repo root importable.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from bench.seed_article import (  # noqa: E402
    ARTICLE_SCHEMA,
    STATUSES,
    article_decay,
    article_expiry,
    article_recall_candidates,
    create_article_db,
    generate,
    main,
)

NOW = datetime(2025, 6, 1, 12, 0, 0)
NOW_ISO = NOW.isoformat(timespec="seconds")

MEMORY_COLUMNS = [
    # name, declared type, default, notnull, pk
    ("id", "INTEGER", None, 0, 1),
    ("content", "TEXT", None, 1, 0),
    ("summary", "TEXT", None, 0, 0),
    ("tags", "TEXT", None, 0, 0),
    ("importance", "REAL", "5.0", 0, 0),
    ("confidence", "REAL", "1.0", 0, 0),
    ("access_count", "INTEGER", "0", 0, 0),
    ("decay_score", "REAL", "1.0", 0, 0),
    ("status", "TEXT", "'active'", 0, 0),
    ("contradicted_by", "INTEGER", None, 0, 0),
    ("created_at", "TEXT", None, 0, 0),
    ("last_accessed", "TEXT", None, 0, 0),
    ("expires_at", "TEXT", None, 0, 0),
]
EVENT_COLUMNS = [
    ("id", "INTEGER", None, 0, 1),
    ("memory_id", "INTEGER", None, 0, 0),
    ("event_type", "TEXT", None, 1, 0),
    ("detail", "TEXT", None, 0, 0),
    ("occurred_at", "TEXT", None, 0, 0),
]


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def _columns(conn, table):
    return [
        (name, ctype, default, notnull, pk)
        for _cid, name, ctype, notnull, default, pk in conn.execute(f"PRAGMA table_info({table})")
    ]


@pytest.fixture
def gen_db(tmp_path):
    path = tmp_path / "article.db"
    generate(path, 2000, NOW, seed=7)
    conn = sqlite3.connect(path)
    yield path, conn
    conn.close()


def _insert(
    conn,
    content,
    *,
    created,
    last_accessed=None,
    access_count=0,
    status="active",
    expires_at=None,
    decay_score=1.0,
    importance=5.0,
    confidence=1.0,
):
    cur = conn.execute(
        "INSERT INTO memories (content, summary, tags, importance, confidence,"
        " access_count, decay_score, status, created_at, last_accessed, expires_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            content,
            content[:120],
            "[]",
            importance,
            confidence,
            access_count,
            decay_score,
            status,
            _iso(created),
            _iso(last_accessed) if last_accessed else None,
            _iso(expires_at) if expires_at else None,
        ),
    )
    return cur.lastrowid


def _row(conn, mid):
    return conn.execute("SELECT status, decay_score FROM memories WHERE id = ?", (mid,)).fetchone()


def _events(conn, mid):
    return conn.execute(
        "SELECT event_type, detail, occurred_at FROM memory_events WHERE memory_id = ?",
        (mid,),
    ).fetchall()


# ---------------------------------------------------------------- schema


def test_schema_is_exactly_the_article(tmp_path):
    path = tmp_path / "empty.db"
    create_article_db(path)
    conn = sqlite3.connect(path)
    try:
        objects = conn.execute("SELECT type, name FROM sqlite_master ORDER BY type, name").fetchall()
        # sqlite_sequence is SQLite's own bookkeeping for AUTOINCREMENT.
        assert objects == [
            ("table", "memories"),
            ("table", "memory_events"),
            ("table", "sqlite_sequence"),
        ]
        assert _columns(conn, "memories") == MEMORY_COLUMNS
        assert _columns(conn, "memory_events") == EVENT_COLUMNS
        fks = {(r[3], r[2], r[4]) for r in conn.execute("PRAGMA foreign_key_list(memories)")}
        assert fks == {("contradicted_by", "memories", "id")}
        fks = {(r[3], r[2], r[4]) for r in conn.execute("PRAGMA foreign_key_list(memory_events)")}
        assert fks == {("memory_id", "memories", "id")}
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 0
    finally:
        conn.close()
    # The DDL is idempotent: applying it again to the same file is harmless.
    conn = sqlite3.connect(path)
    conn.executescript(ARTICLE_SCHEMA)
    conn.close()


def test_generated_db_has_same_schema(gen_db):
    _path, conn = gen_db
    assert _columns(conn, "memories") == MEMORY_COLUMNS
    assert _columns(conn, "memory_events") == EVENT_COLUMNS
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type != 'table'").fetchone()[0] == 0


# ---------------------------------------------------------------- generator


def test_generate_spreads(gen_db):
    _path, conn = gen_db
    rows = conn.execute(
        "SELECT id, content, summary, tags, importance, confidence, access_count,"
        " decay_score, status, contradicted_by, created_at, last_accessed, expires_at"
        " FROM memories ORDER BY id"
    ).fetchall()
    assert len(rows) == 2000
    assert [r[0] for r in rows] == list(range(1, 2001))
    assert conn.execute("SELECT COUNT(*) FROM memory_events").fetchone()[0] == 0

    oldest = NOW - timedelta(days=400)
    n_null_access = n_active = n_expires = n_past = n_soon = 0
    for mid, content, summary, tags, imp, conf, ac, decay, status, contra, created, last, expires in rows:
        assert content.endswith(f"(#{mid})")
        assert summary == content[:120]
        parsed = json.loads(tags)
        assert isinstance(parsed, list) and parsed and all(isinstance(t, str) for t in parsed)
        assert isinstance(imp, float) and imp == int(imp) and 1 <= imp <= 10
        assert conf in (1.0, 0.7, 0.5, 0.3, 0.1)
        assert 0 <= ac <= 50
        assert 0.0 <= decay <= 1.0
        assert status in STATUSES
        if status == "archived":
            assert decay == 0.0
        if contra is not None:
            assert status == "superseded" and mid < contra <= 2000
        assert len(created) == 19 and created == _iso(datetime.fromisoformat(created))
        c = datetime.fromisoformat(created)
        assert oldest <= c < NOW
        if last is None:
            n_null_access += 1
            assert ac == 0
        else:
            assert c <= datetime.fromisoformat(last) <= NOW
        n_active += status == "active"
        if expires is not None:
            n_expires += 1
            e = datetime.fromisoformat(expires)
            n_past += e < NOW
            n_soon += NOW <= e <= NOW + timedelta(days=30)
        if status == "expired":
            assert expires is not None and expires < NOW_ISO

    assert 0.33 * 2000 < n_null_access < 0.47 * 2000
    assert 0.80 * 2000 < n_active < 0.90 * 2000
    assert 0.06 * 2000 < n_expires < 0.15 * 2000
    assert 0.3 < n_past / n_expires < 0.7
    assert n_soon > 0
    low = conn.execute("SELECT COUNT(*) FROM memories WHERE access_count <= 3").fetchone()[0]
    assert low > 0.75 * 2000
    assert conn.execute("SELECT MAX(access_count) FROM memories").fetchone()[0] > 20
    mid_imp = conn.execute("SELECT COUNT(*) FROM memories WHERE importance BETWEEN 4 AND 7").fetchone()[0]
    assert mid_imp > 0.6 * 2000
    hi_conf = conn.execute("SELECT COUNT(*) FROM memories WHERE confidence IN (1.0, 0.7)").fetchone()[0]
    assert hi_conf > 0.7 * 2000


def test_generate_is_deterministic(tmp_path):
    def dump(path):
        conn = sqlite3.connect(path)
        try:
            return conn.execute("SELECT * FROM memories ORDER BY id").fetchall()
        finally:
            conn.close()

    generate(tmp_path / "a.db", 500, NOW, seed=3, batch=64)
    generate(tmp_path / "b.db", 500, NOW, seed=3, batch=1000)
    generate(tmp_path / "c.db", 500, NOW, seed=4)
    a = dump(tmp_path / "a.db")
    assert a == dump(tmp_path / "b.db")
    assert a != dump(tmp_path / "c.db")


def test_generate_appends(tmp_path):
    path = tmp_path / "x.db"
    generate(path, 10, NOW)
    generate(path, 5, NOW)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, content FROM memories ORDER BY id").fetchall()
    finally:
        conn.close()
    assert [r[0] for r in rows] == list(range(1, 16))
    assert all(c.endswith(f"(#{i})") for i, c in rows)


def test_cli_generate(tmp_path, capsys):
    path = tmp_path / "cli.db"
    assert main(["generate", str(path), "300", "--now", NOW_ISO, "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "300" in out and " s" in out
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 300
    finally:
        conn.close()


# ---------------------------------------------------------------- hygiene jobs


def test_expiry_and_decay_hand_checks(gen_db):
    _path, conn = gen_db
    ids = {
        # decay cases (never accessed unless stated)
        "d30": _insert(conn, "thirty days", created=NOW - timedelta(days=30)),
        "d29_9": _insert(
            conn,
            "29.9 days idle",
            created=NOW - timedelta(days=200),
            last_accessed=NOW - timedelta(days=29.9),
            access_count=2,
        ),
        "bonus_cap": _insert(conn, "bonus capped", created=NOW - timedelta(days=60), access_count=20),
        "total_cap": _insert(
            conn,
            "total capped",
            created=NOW - timedelta(days=90),
            last_accessed=NOW - timedelta(days=1),
            access_count=10,
        ),
        "d99": _insert(conn, "just above 0.1", created=NOW - timedelta(days=99)),
        "d100": _insert(conn, "just below 0.1", created=NOW - timedelta(days=100)),
        "d120": _insert(conn, "long forgotten", created=NOW - timedelta(days=120)),
        # expiry cases
        "exp_past": _insert(
            conn,
            "deadline passed",
            created=NOW - timedelta(days=5),
            expires_at=NOW - timedelta(days=2),
            decay_score=0.8,
        ),
        "exp_now": _insert(conn, "expires right now", created=NOW - timedelta(days=5), expires_at=NOW),
        "exp_future": _insert(
            conn, "deadline ahead", created=NOW - timedelta(days=5), expires_at=NOW + timedelta(days=3)
        ),
        # non-active rows: must not be touched by either job
        "arch_past": _insert(
            conn,
            "archived, expiry passed",
            status="archived",
            created=NOW - timedelta(days=300),
            decay_score=0.0,
            expires_at=NOW - timedelta(days=10),
        ),
        "sup_old": _insert(
            conn,
            "superseded and old",
            status="superseded",
            created=NOW - timedelta(days=300),
            decay_score=0.42,
        ),
    }
    conn.commit()

    snapshot_sql = "SELECT * FROM memories WHERE status != 'active' ORDER BY id"
    non_active_before = conn.execute(snapshot_sql).fetchall()
    active_expiring = conn.execute(
        "SELECT COUNT(*) FROM memories WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at < ?",
        (NOW_ISO,),
    ).fetchone()[0]

    # ---- expiry ----
    expired = article_expiry(conn, NOW)
    assert expired == active_expiring and expired >= 1
    assert _row(conn, ids["exp_past"]) == ("expired", 0.8)
    ev = _events(conn, ids["exp_past"])
    assert len(ev) == 1
    assert ev[0][0] == "expired"
    assert _iso(NOW - timedelta(days=2)) in ev[0][1]
    assert ev[0][2] == NOW_ISO
    assert _row(conn, ids["exp_now"])[0] == "active"  # not strictly before now
    assert _row(conn, ids["exp_future"])[0] == "active"
    assert _events(conn, ids["exp_now"]) == [] and _events(conn, ids["exp_future"]) == []
    assert (
        conn.execute("SELECT COUNT(*) FROM memory_events WHERE event_type = 'expired'").fetchone()[0]
        == expired
    )
    assert article_expiry(conn, NOW) == 0  # idempotent

    n_active = conn.execute("SELECT COUNT(*) FROM memories WHERE status = 'active'").fetchone()[0]
    non_active_mid = conn.execute(snapshot_sql).fetchall()

    # ---- decay ----
    updated, archived = article_decay(conn, NOW)
    assert updated == n_active

    def score(mid):
        return _row(conn, mid)[1]

    # 30 whole days, no accesses: exactly exp(-0.693) = 0.50007...
    assert score(ids["d30"]) == pytest.approx(math.exp(-0.693), abs=1e-12)
    assert 0.5 < score(ids["d30"]) < 0.5001
    # 29.9 days idle counts as 29 whole days; access bonus 2 * 0.03
    assert score(ids["d29_9"]) == pytest.approx(math.exp(-0.693 * 29 / 30) + 0.06, abs=1e-12)
    # access bonus capped at 0.3 (20 accesses would be 0.6)
    assert score(ids["bonus_cap"]) == pytest.approx(math.exp(-0.693 * 2) + 0.3, abs=1e-12)
    # total capped at 1.0
    assert score(ids["total_cap"]) == 1.0
    # 99 days -> 0.1016 stays active; 100 days -> 0.0993 and 120 days -> 0.0625 archived
    assert _row(conn, ids["d99"]) == ("active", pytest.approx(math.exp(-0.693 * 99 / 30)))
    for key in ("d100", "d120"):
        assert _row(conn, ids[key]) == ("archived", 0.0)
        ev = _events(conn, ids[key])
        assert len(ev) == 1 and ev[0][0] == "archived" and ev[0][2] == NOW_ISO
    for key in ("d30", "d29_9", "bonus_cap", "total_cap", "d99", "exp_now", "exp_future"):
        assert _row(conn, ids[key])[0] == "active"
        assert [e[0] for e in _events(conn, ids[key])] == []

    # archived count matches the events and the rows, all at decay 0.0
    assert (
        conn.execute("SELECT COUNT(*) FROM memory_events WHERE event_type = 'archived'").fetchone()[0]
        == archived
    )
    archived_ids = {
        r[0] for r in conn.execute("SELECT memory_id FROM memory_events WHERE event_type = 'archived'")
    }
    assert len(archived_ids) == archived
    for mid in archived_ids:
        assert _row(conn, mid) == ("archived", 0.0)
    # nothing active is left below the threshold
    assert (
        conn.execute(
            "SELECT COUNT(*) FROM memories WHERE status = 'active' AND decay_score < 0.1"
        ).fetchone()[0]
        == 0
    )

    # rows that were already non-active before each job are untouched
    after = {r[0]: r for r in conn.execute(snapshot_sql)}
    for row in non_active_before:
        if row[0] != ids["exp_past"]:
            assert after[row[0]] == row
    for row in non_active_mid:
        assert after[row[0]] == row
    assert after[ids["arch_past"]][8] == "archived"
    assert after[ids["sup_old"]][7] == 0.42
    assert _events(conn, ids["arch_past"]) == [] and _events(conn, ids["sup_old"]) == []


def test_decay_matches_independent_recomputation(gen_db):
    _path, conn = gen_db
    before = {
        mid: (last, created, ac)
        for mid, last, created, ac in conn.execute(
            "SELECT id, last_accessed, created_at, access_count FROM memories WHERE status = 'active'"
        )
    }
    updated, archived = article_decay(conn, NOW, half_life_days=90)
    assert updated == len(before)
    n_arch = 0
    for mid, (status, decay) in (
        (r[0], r[1:]) for r in conn.execute("SELECT id, status, decay_score FROM memories")
    ):
        if mid not in before:
            continue
        last, created, ac = before[mid]
        ref = datetime.fromisoformat(last or created)
        days = int((NOW - ref).total_seconds() // 86400)
        expect = min(1.0, math.exp(-0.693 * days / 90) + min(0.3, ac * 0.03))
        if expect < 0.1:
            n_arch += 1
            assert (status, decay) == ("archived", 0.0)
        else:
            assert status == "active"
            assert decay == pytest.approx(expect, abs=1e-12)
    assert n_arch == archived


def test_recall_candidates(gen_db):
    _path, conn = gen_db
    article_decay(conn, NOW)
    rows = conn.execute("SELECT id, importance, confidence, decay_score, status FROM memories").fetchall()
    eligible = [r for r in rows if r[4] == "active" and r[3] > 0.15]
    eligible.sort(key=lambda r: (r[1] * r[2] * r[3], r[0]), reverse=True)
    got = article_recall_candidates(conn)
    assert len(got) == 60
    assert got == [r[0] for r in eligible[:60]]
    assert article_recall_candidates(conn, limit=5) == got[:5]


def test_recall_tie_break_by_id_desc(tmp_path):
    path = tmp_path / "ties.db"
    create_article_db(path)
    conn = sqlite3.connect(path)
    try:
        a = _insert(conn, "a", created=NOW, importance=5, confidence=1.0, decay_score=0.5)
        b = _insert(conn, "b", created=NOW, importance=5, confidence=1.0, decay_score=0.5)
        c = _insert(conn, "c", created=NOW, importance=9, confidence=1.0, decay_score=0.5)
        _insert(conn, "faded", created=NOW, importance=10, confidence=1.0, decay_score=0.15)
        _insert(conn, "gone", created=NOW, importance=10, decay_score=0.9, status="archived")
        conn.commit()
        assert article_recall_candidates(conn) == [c, b, a]
    finally:
        conn.close()
