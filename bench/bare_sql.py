"""The hand-written baseline: the lifecycle policy's expiry + decay passes as plain SQL.

Run as its own process (the benchmark times the whole process, like `lethe run`):

    python bench/bare_sql.py DB NOW_ISO            # an adopted copy (with the stored rank)
    python bench/bare_sql.py DB NOW_ISO --article  # an un-adopted copy of the article's file

One transaction: expiry (INSERT events SELECT + UPDATE status), decay (UPDATE
decay_score and the stored rank = importance * confidence * new decay_score for active
rows), archive below 0.1 (INSERT events SELECT + UPDATE status, decay_score, rank).
The same columns and event rows Lethe writes, with the same formula (whole idle days
from julianday, rounded to the millisecond, as the engine's dialect does). Prints the
counts as JSON. Imports nothing but the standard library.

`--article` runs the same statements without the stored rank (the article's file has no
such column, and no index): the floor, what the article's own schema costs for the same
three rules (expiry, decay, archive) and their events.

`--as-lethe` runs them as any `lethe run` has to: it imports click and yaml first (the CLI
is a click command, and the policy it runs is a YAML file it reads), and the file is in WAL
mode (the store's journal, which lets recalls read while a pass writes; the benchmark
converts the copy before timing). With `--article` that is the floor with Lethe's
unavoidable costs and none of its own work. (Before the nineteenth round it imported click
alone.)

`--design` (on an adopted copy, with `--as-lethe`) runs Lethe's design with none of its
code: the statements that keep the stored rank (the decay formula computed once a row),
with recall's (namespace, status, rank, id) index dropped before the decay and created
again after it in the same transaction (as a Lethe pass over most of the file does).
`--head` is the same but leaves recall's index in place: for a copy whose index covers
only the head of the ranking (what a store of many memories keeps: engine.store.sqlite.recall_head),
which a pass barely touches. What the goal leaves for Lethe's code, measured rather than
argued. (Before the nineteenth round these imported jinja2 too; a pass of rules alone has
not imported it since the fourteenth: tests/test_startup.py.) Without `--as-lethe`
(nineteenth round) the same statements on the same WAL file import no package: what a
`lethe run` of this design would cost if neither its CLI nor its policy's format had to
be loaded.

`--read-time` (on an adopted copy, with `--as-lethe`; bench/prototypes.py readtime): a
design not built, measured. Only what a read cannot compute is written: the expiry, the
archived rows (found by computing the decay formula at `now` in the WHERE, not stored),
and the head of the ranking (the rows in recall's partial index, whose stored rank recall
reads). Every other active row's decay_score would be computed when it is read, from its
inputs and the pass's time.
"""

import json
import sqlite3
import sys

FRESH = (
    "min(1.0, exp(-0.693 * floor(round((julianday(:now) - julianday(coalesce("
    "last_accessed, created_at))) * 86400000.0) / 86400000.0) / 30)"
    " + min(0.3, access_count * 0.03))"
)

STATEMENTS = [
    (
        "expired_events",
        "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
        "SELECT id, 'expired', json_object('rule', 'expiry', 'from', json_object('status', status), "
        "'to', json_object('status', 'expired')), :now "
        "FROM memories WHERE status = 'active' AND expires_at < :now",
    ),
    ("expired", "UPDATE memories SET status = 'expired' WHERE status = 'active' AND expires_at < :now"),
    (
        "decayed",
        f"UPDATE memories SET decay_score = {FRESH}, rank = importance * confidence * ({FRESH}) "
        "WHERE status = 'active'",
    ),
    (
        "archived_events",
        "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
        "SELECT id, 'archived', json_object('rule', 'decay', 'from', json_object('status', status, "
        "'decay_score', decay_score), 'to', json_object('status', 'archived', 'decay_score', 0)), :now "
        "FROM memories WHERE status = 'active' AND decay_score < 0.1",
    ),
    (
        "archived",
        "UPDATE memories SET status = 'archived', decay_score = 0.0, rank = 0.0 "
        "WHERE status = 'active' AND decay_score < 0.1",
    ),
]

# the design's decay at its cheapest: the formula once per row, the rank from its value
DECAYED_ONCE = (
    "UPDATE memories SET (decay_score, rank) = (SELECT f, importance * confidence * f "
    f"FROM (SELECT {FRESH} AS f)) WHERE status = 'active'"
)


# the read-time design: the archive reads the formula at :now instead of a stored score;
# the head's rows (recall's partial index) get their new score and rank stored
READ_TIME = [
    STATEMENTS[0],
    STATEMENTS[1],
    (
        "archived_events",
        "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
        "SELECT id, 'archived', json_object('rule', 'decay', 'from', json_object('status', status, "
        f"'decay_score', f), 'to', json_object('status', 'archived', 'decay_score', 0)), :now "
        f"FROM (SELECT id, status, {FRESH} AS f FROM memories WHERE status = 'active') WHERE f < 0.1",
    ),
    (
        "archived",
        "UPDATE memories SET status = 'archived', decay_score = 0.0, rank = 0.0 "
        f"WHERE status = 'active' AND {FRESH} < 0.1",
    ),
    (
        "decayed",
        "UPDATE memories SET (decay_score, rank) = (SELECT f, importance * confidence * f "
        f"FROM (SELECT {FRESH} AS f)) WHERE status = 'active' AND rank >= :floor",
    ),
]


def article_statements() -> list[tuple[str, str]]:
    """The statements without the stored rank, for the article's own schema."""
    drop = (f", rank = importance * confidence * ({FRESH})", ", rank = 0.0")
    out = []
    for name, sql in STATEMENTS:
        for text in drop:
            sql = sql.replace(text, "")
        out.append((name, sql))
    return out


def connect(db_path: str, wal: bool = False) -> sqlite3.Connection:
    db = sqlite3.connect(db_path, isolation_level=None)
    if wal and db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        raise SystemExit(f"{db_path} is not in WAL mode")
    db.execute("PRAGMA synchronous = NORMAL")  # what the engine's store uses with WAL
    return db


RECALL_INDEX = "memories_recall"


def on_rows(db: sqlite3.Connection, sql: str) -> str:
    """A statement over `memories` as it runs on an adopted file, whose rows are the table
    `memory_rows` (memories is a view there, with the text beside: the engine's m020)."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_rows'").fetchone():
        return sql
    return sql.replace("UPDATE memories ", "UPDATE memory_rows ").replace(
        "FROM memories ", "FROM memory_rows "
    )


def run_read_time(db: sqlite3.Connection, now: str) -> dict:
    """The read-time design's statements in one transaction; returns each one's count."""
    floor = db.execute("SELECT floor FROM recall_head").fetchone()[0]
    if floor is None:
        raise SystemExit("--read-time needs a copy whose recall index holds the head only")
    counts = {}
    db.execute("BEGIN IMMEDIATE")
    for name, sql in READ_TIME:
        counts[name] = db.execute(on_rows(db, sql), {"now": now, "floor": floor}).rowcount
    db.execute("COMMIT")
    return counts


def run(
    db: sqlite3.Connection, now: str, article: bool = False, design: bool = False, head: bool = False
) -> dict:
    """All five statements in one transaction; returns each one's row count. `design`:
    the decay computes its formula once a row (DECAYED_ONCE), and recall's index is dropped
    before it and created again (as it was) after it. `head`: the decay computed once, and
    the index left in place."""
    counts = {}
    db.execute("BEGIN IMMEDIATE")
    index = None
    for name, sql in article_statements() if article else STATEMENTS:
        if (design or head) and name == "decayed":
            sql = DECAYED_ONCE
        if design and name == "decayed":
            index = db.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (RECALL_INDEX,)
            ).fetchone()
            if index is None:
                raise SystemExit(f"no index {RECALL_INDEX} to rebuild: not an adopted file")
            db.execute(f"DROP INDEX {RECALL_INDEX}")
        counts[name] = db.execute(on_rows(db, sql), {"now": now}).rowcount
    if index is not None:
        db.execute(index[0])
    db.execute("COMMIT")
    return counts


def main(
    db_path: str,
    now: str,
    article: bool = False,
    as_lethe: bool = False,
    design: bool = False,
    head: bool = False,
    read_time: bool = False,
) -> dict:
    if (design or head or read_time) and article:
        raise SystemExit("--design, --head and --read-time are for an adopted copy")
    if as_lethe:  # what `lethe run` imports before its own code: its CLI, its policy's format
        import click  # noqa: F401
        import yaml  # noqa: F401
    db = connect(db_path, wal=as_lethe or design or head or read_time)
    try:
        if read_time:
            return run_read_time(db, now)
        return run(db, now, article, design=design, head=head)
    finally:
        db.close()


USAGE = (
    "usage: python bench/bare_sql.py DB NOW_ISO [--article] [--as-lethe] [--design | --head | --read-time]"
)
FLAGS = {"--article", "--as-lethe", "--design", "--head", "--read-time"}

if __name__ == "__main__":
    flags = sys.argv[3:]
    if len(sys.argv) < 3 or sys.argv[1].startswith("--") or not FLAGS.issuperset(flags):
        raise SystemExit(USAGE)
    print(
        json.dumps(
            main(
                sys.argv[1],
                sys.argv[2],
                "--article" in flags,
                "--as-lethe" in flags,
                "--design" in flags,
                "--head" in flags,
                "--read-time" in flags,
            )
        )
    )
