"""Reference implementation of the seed article's design (SEEDS.md section A).

This module does what the "Memory lifecycle" article does, in the article's own
style: per-row Python loops over ``sqlite3``. It exists so that tests and
benchmarks can check that Lethe's set-based SQL gives the same results on the
same database file, and measure how much faster it is. It also holds a fast,
deterministic generator of article-format databases.

Timestamps are ISO-8601 text as produced by
``datetime.isoformat(timespec='seconds')``. Comparisons with ``now`` follow the
article: expiry compares the text of ``expires_at`` with
``now.isoformat(timespec='seconds')``; decay parses ``last_accessed`` /
``created_at`` with ``datetime.fromisoformat``. Pass a ``now`` of the same kind
(naive or timezone-aware) as the stored timestamps.

CLI::

    python -m bench.seed_article generate PATH N --now ISO [--seed S] [--batch B]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sqlite3
import sys
import time
from datetime import datetime, timedelta

__all__ = [
    "ARTICLE_SCHEMA",
    "STATUSES",
    "create_article_db",
    "generate",
    "article_expiry",
    "article_decay",
    "article_recall_candidates",
]

# The article's DDL, exactly: two tables, no indexes, no extra columns.
ARTICLE_SCHEMA = """\
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content TEXT NOT NULL,
    summary TEXT,
    tags TEXT,
    importance REAL DEFAULT 5.0,
    confidence REAL DEFAULT 1.0,
    access_count INTEGER DEFAULT 0,
    decay_score REAL DEFAULT 1.0,
    status TEXT DEFAULT 'active',
    contradicted_by INTEGER REFERENCES memories(id),
    created_at TEXT,
    last_accessed TEXT,
    expires_at TEXT
);
CREATE TABLE IF NOT EXISTS memory_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id INTEGER REFERENCES memories(id),
    event_type TEXT NOT NULL,
    detail TEXT,
    occurred_at TEXT
);
"""

STATUSES = ("active", "archived", "superseded", "expired", "compressed")

SUMMARY_CHARS = 120
DECAY_LN2 = 0.693  # the article's constant, not math.log(2)
ACCESS_BONUS_STEP = 0.03
ACCESS_BONUS_CAP = 0.3
ARCHIVE_BELOW = 0.1
RECALL_MIN_DECAY = 0.15


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def create_article_db(path) -> None:
    """Create an empty article-format database file at ``path``."""
    conn = sqlite3.connect(os.fspath(path))
    try:
        conn.executescript(ARTICLE_SCHEMA)
        conn.commit()
    finally:
        conn.close()


# --------------------------------------------------------------------------
# Data generator
# --------------------------------------------------------------------------

_TOOLS = (
    "Python",
    "TypeScript",
    "Go",
    "Rust",
    "PostgreSQL",
    "SQLite",
    "MySQL",
    "Redis",
    "Docker",
    "Kubernetes",
    "Terraform",
    "pytest",
    "Vim",
    "VS Code",
    "tmux",
    "FastAPI",
    "Django",
    "React",
    "Svelte",
    "pandas",
    "Polars",
    "DuckDB",
    "GitHub Actions",
    "Makefiles",
    "uv",
    "Poetry",
    "ruff",
    "mypy",
)
_TASKS = (
    "data pipelines",
    "unit tests",
    "the study tracker",
    "the billing service",
    "quick scripts",
    "deployment",
    "code review",
    "the mobile app",
    "logging",
    "database migrations",
    "the CLI",
    "prototyping",
    "the auth module",
    "nightly reports",
    "load testing",
    "the docs site",
    "API clients",
    "the search index",
    "infrastructure",
    "local development",
)
_PEOPLE = ("Alice", "Bob", "Priya", "Chen", "Marta", "Omar", "Yuki", "Sam")
_DATES = (
    "March 15",
    "April 1",
    "May 30",
    "June 12",
    "the end of the sprint",
    "Friday",
    "the v2 release",
    "next Monday",
    "Q3",
    "the demo",
)
_TEMPLATES = (
    "User prefers {tool} for {task} (#{i})",
    "User decided to use {tool} for {task} (#{i})",
    "Always run {tool} before committing changes to {task} (#{i})",
    "Never use {tool} in {task} (#{i})",
    "Bug in {task} was fixed by pinning {tool} (#{i})",
    "Deadline for {task} is {date} (#{i})",
    "Blocked on {person} for {task} until {date} (#{i})",
    "{person} owns {task} and reviews {tool} changes (#{i})",
    "User is migrating {task} from {tool} to {tool2} (#{i})",
    "User asked to keep answers about {task} short (#{i})",
)
_TAG_WORDS = (
    "preference",
    "decision",
    "bug",
    "fix",
    "instruction",
    "deadline",
    "project",
    "tooling",
    "database",
    "deploy",
    "testing",
    "people",
    "style",
)

# confidence values and their cumulative weights (mostly 1.0 / 0.7)
_CONF_VALUES = (1.0, 0.7, 0.5, 0.3, 0.1)
_CONF_CUM = (0.55, 0.85, 0.94, 0.98, 1.0)
# non-active statuses and their cumulative share of all rows (~15% in total)
_STATUS_CUM = (
    (0.85, "active"),
    (0.91, "archived"),
    (0.95, "superseded"),
    (0.97, "expired"),
    (1.00, "compressed"),
)
_DAY = 86_400


def _tag_pool(rng: random.Random, size: int = 256) -> list[str]:
    pool = []
    for _ in range(size):
        k = rng.randint(1, 3)
        pool.append(json.dumps(rng.sample(_TAG_WORDS, k)))
    return pool


def _article_score(idle_seconds: int, access_count: int, half_life_days: float) -> float:
    days_idle = idle_seconds // _DAY  # same as timedelta.days (floors)
    return min(
        1.0,
        math.exp(-DECAY_LN2 * days_idle / half_life_days)
        + min(ACCESS_BONUS_CAP, access_count * ACCESS_BONUS_STEP),
    )


def generate(path, n: int, now: datetime, seed: int = 7, batch: int = 50_000) -> None:
    """Write ``n`` article-format memories into the database at ``path``.

    Creates the file/tables if needed and appends otherwise (content numbers
    ``#i`` continue from the current maximum id, so on an empty database
    ``#i`` equals the row id). Deterministic for a given ``seed`` and ``now``.

    Spreads: created_at uniform over the 400 days before ``now``;
    last_accessed NULL for ~40% (those have access_count 0), else between
    created_at and now, skewed recent; access_count mostly 1-3 with a tail to
    50; importance integer 1-10 (REAL) centred on 5-6; confidence mostly
    1.0/0.7; decay_score as yesterday's daily decay would have left it
    (0.0 for archived rows); status ~85% active, rest archived / superseded
    (with contradicted_by -> a later id) / expired / compressed; ~10% with
    expires_at, about half already past (all 'expired' rows are past) and part
    of the rest within the next 30 days.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if batch < 1:
        raise ValueError("batch must be >= 1")
    now = now.replace(microsecond=0)
    rng = random.Random(seed)
    tags_pool = _tag_pool(rng)
    n_tags = len(tags_pool)
    half_life = 30.0
    span = 400 * _DAY

    conn = sqlite3.connect(os.fspath(path))
    try:
        conn.executescript(ARTICLE_SCHEMA)
        # Connection-level speed settings; nothing persists in the file.
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA journal_mode=MEMORY")
        start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM memories").fetchone()[0]
        last_id = start + n
        insert = (
            "INSERT INTO memories (id, content, summary, tags, importance, confidence,"
            " access_count, decay_score, status, contradicted_by, created_at,"
            " last_accessed, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
        )
        rand = rng.random
        randrange = rng.randrange
        gauss = rng.gauss
        n_templates = len(_TEMPLATES)
        n_tools = len(_TOOLS)
        n_tasks = len(_TASKS)
        n_people = len(_PEOPLE)
        n_dates = len(_DATES)
        td = timedelta

        rows: list[tuple] = []
        for i in range(start + 1, last_id + 1):
            # --- content -------------------------------------------------
            tool = _TOOLS[randrange(n_tools)]
            content = _TEMPLATES[randrange(n_templates)].format(
                i=i,
                tool=tool,
                tool2=_TOOLS[randrange(n_tools)],
                task=_TASKS[randrange(n_tasks)],
                person=_PEOPLE[randrange(n_people)],
                date=_DATES[randrange(n_dates)],
            )
            tags = tags_pool[randrange(n_tags)]

            # --- times ---------------------------------------------------
            created_off = randrange(60, span)  # seconds before now
            created = now - td(seconds=created_off)
            if rand() < 0.4:
                last_accessed = None
                access_count = 0
                idle_off = created_off
            else:
                u = rand()
                idle_off = int(created_off * u * u)  # skewed towards recent
                last_accessed = _iso(now - td(seconds=idle_off))
                r = rand()
                if r < 0.04:
                    access_count = randrange(10, 51)  # the tail
                else:
                    access_count = 1 + min(9, int(rng.expovariate(0.6)))

            # --- scalar attributes ---------------------------------------
            importance = float(min(10, max(1, round(gauss(5.5, 1.8)))))
            r = rand()
            confidence = _CONF_VALUES[-1]
            for k, cum in enumerate(_CONF_CUM):
                if r < cum:
                    confidence = _CONF_VALUES[k]
                    break
            r = rand()
            status = "active"
            for cum, word in _STATUS_CUM:
                if r < cum:
                    status = word
                    break

            contradicted_by = None
            if status == "superseded" and i < last_id:
                contradicted_by = randrange(i + 1, last_id + 1)

            if status == "archived":
                decay = 0.0
            else:
                # what yesterday's daily decay run would have written
                decay = _article_score(idle_off - _DAY, access_count, half_life)

            # --- expiry ----------------------------------------------------
            expires_at = None
            r = rand()
            if status == "expired" or r < 0.04:
                # already past: between created_at and now
                expires_at = _iso(now - td(seconds=1 + randrange(created_off)))
            elif r < 0.07:
                # within the next 30 days
                expires_at = _iso(now + td(seconds=randrange(60, 30 * _DAY)))
            elif r < 0.09:
                # further out
                expires_at = _iso(now + td(seconds=randrange(30 * _DAY, 365 * _DAY)))

            rows.append(
                (
                    i,
                    content,
                    content[:SUMMARY_CHARS],
                    tags,
                    importance,
                    confidence,
                    access_count,
                    decay,
                    status,
                    contradicted_by,
                    _iso(created),
                    last_accessed,
                    expires_at,
                )
            )
            if len(rows) >= batch:
                conn.executemany(insert, rows)
                conn.commit()
                rows.clear()
        if rows:
            conn.executemany(insert, rows)
        conn.commit()
    finally:
        conn.close()


# --------------------------------------------------------------------------
# The article's hygiene jobs, per-row style
# --------------------------------------------------------------------------


def article_expiry(conn: sqlite3.Connection, now: datetime) -> int:
    """Expire active memories whose ``expires_at`` text is before ``now``.

    One SELECT, then one UPDATE and one event INSERT per row, one commit.
    Returns the number of memories expired.
    """
    now_iso = _iso(now)
    rows = conn.execute(
        "SELECT id, expires_at FROM memories"
        " WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at < ?",
        (now_iso,),
    ).fetchall()
    count = 0
    for memory_id, expires_at in rows:
        conn.execute("UPDATE memories SET status = 'expired' WHERE id = ?", (memory_id,))
        conn.execute(
            "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) VALUES (?, ?, ?, ?)",
            (memory_id, "expired", f"expired: expires_at {expires_at} has passed", now_iso),
        )
        count += 1
    conn.commit()
    return count


def article_decay(conn: sqlite3.Connection, now: datetime, half_life_days: float = 30) -> tuple[int, int]:
    """The article's daily decay pass, then archiving of faded memories.

    Returns ``(updated, archived)``: how many active memories got a new
    decay_score, and how many of them were archived (score < 0.1).
    """
    now_iso = _iso(now)
    rows = conn.execute(
        "SELECT id, last_accessed, created_at, access_count FROM memories WHERE status = 'active'"
    ).fetchall()
    updates = []
    for memory_id, last_accessed, created_at, access_count in rows:
        ref = datetime.fromisoformat(last_accessed or created_at)
        days_idle = (now - ref).days
        score = math.exp(-DECAY_LN2 * days_idle / half_life_days)
        score += min(ACCESS_BONUS_CAP, (access_count or 0) * ACCESS_BONUS_STEP)
        score = min(1.0, score)
        updates.append((score, memory_id))
    conn.executemany("UPDATE memories SET decay_score = ? WHERE id = ?", updates)

    faded = conn.execute(
        "SELECT id, decay_score FROM memories WHERE status = 'active' AND decay_score < ?",
        (ARCHIVE_BELOW,),
    ).fetchall()
    for memory_id, score in faded:
        conn.execute(
            "UPDATE memories SET status = 'archived', decay_score = 0.0 WHERE id = ?",
            (memory_id,),
        )
        conn.execute(
            "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) VALUES (?, ?, ?, ?)",
            (memory_id, "archived", f"decay score {score:.4f} fell below {ARCHIVE_BELOW}", now_iso),
        )
    conn.commit()
    return len(updates), len(faded)


def article_recall_candidates(conn: sqlite3.Connection, limit: int = 60) -> list[int]:
    """The article's retrieval pre-filter (full scan): ids of active memories
    with decay_score > 0.15, best ``importance * confidence * decay_score``
    first, ties broken by id descending."""
    rows = conn.execute(
        "SELECT id FROM memories"
        " WHERE status = 'active' AND decay_score > ?"
        " ORDER BY importance * confidence * decay_score DESC, id DESC"
        " LIMIT ?",
        (RECALL_MIN_DECAY, limit),
    ).fetchall()
    return [r[0] for r in rows]


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.seed_article",
        description="Article-format (SEEDS.md A) reference database tools.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write N generated memories into PATH")
    gen.add_argument("path")
    gen.add_argument("n", type=int)
    gen.add_argument(
        "--now",
        required=True,
        type=datetime.fromisoformat,
        help="reference time, ISO-8601 (e.g. 2025-06-01T12:00:00)",
    )
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--batch", type=int, default=50_000)
    args = parser.parse_args(argv)

    if args.command == "generate":
        t0 = time.perf_counter()
        generate(args.path, args.n, args.now, seed=args.seed, batch=args.batch)
        elapsed = time.perf_counter() - t0
        print(f"generated {args.n} memories into {args.path} in {elapsed:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
