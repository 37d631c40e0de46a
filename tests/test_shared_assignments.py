"""A pass's rule whose new value the stored rank reuses computes it once per row
(`SET (decay_score, rank) = (SELECT ...)`, engine.plan.rules) and writes exactly what the
per-column form writes: the same scores, ranks and skipped rows."""
import datetime as dt
import shutil
import sqlite3

from bench import seed_article
from engine import Memory
from engine.dialect import Dialect
from engine.plan.rules import rule_statements
from tests.conftest import POLICIES, START

T = START + dt.timedelta(days=1)


class PerColumn(Dialect):
    row_value_set = False  # the form every statement had before


def decay_update(mem, dialect):
    rule = mem.policy.passes["decay"].rules[0]
    return next(s for s in rule_statements(mem.policy, rule, dialect, "decay.rules[0]")
                if s.label.endswith("update"))


def test_the_decay_formula_is_written_once_in_its_set(tmp_path):
    path = str(tmp_path / "plan.db")
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        shared, per_column = decay_update(mem, Dialect()), decay_update(mem, PerColumn())
    set_shared = shared.sql.split("\nWHERE")[0]
    set_per_column = per_column.sql.split("\nWHERE")[0]
    assert set_shared.count("julianday(coalesce") == 1
    assert set_per_column.count("julianday(coalesce") == 2
    assert shared.sql.split("\nWHERE")[1] == per_column.sql.split("\nWHERE")[1]  # same guard


def test_both_forms_write_the_same_rows(tmp_path):
    a, b = str(tmp_path / "shared.db"), str(tmp_path / "per_column.db")
    seed_article.generate(a, 3000, START, seed=11)
    conn = sqlite3.connect(a)  # two rows the formula cannot score: no time to decay from
    conn.execute("UPDATE memories SET created_at = NULL, last_accessed = NULL "
                 "WHERE id IN (7, 8) AND status = 'active'")
    conn.commit()
    conn.close()
    shutil.copy(a, b)
    changed = {}
    for path, dialect in ((a, Dialect()), (b, PerColumn())):
        with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T,
                    offline=True) as mem:
            st = decay_update(mem, dialect)
            changed[path] = mem.store.run(st, "default", T.isoformat())
    rows = "SELECT id, status, decay_score, rank FROM memories ORDER BY id"
    assert sqlite3.connect(a).execute(rows).fetchall() == sqlite3.connect(b).execute(rows).fetchall()
    active = sqlite3.connect(a).execute(
        "SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
    assert changed[a] == changed[b] == active - 2  # the two unscorable rows are skipped
