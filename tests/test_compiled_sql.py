"""The compiled SQL of every shipped policy, pinned: any change to it shows up in review."""

import pytest

from engine.base.errors import PolicyError
from engine.plan import compile_policy, render_plan
from engine.policy import load
from tests.helpers import POLICIES, SHIPPED_POLICIES
from tests.helpers.snapshot_ext import SQLSnapshot

SHIPPED = sorted(SHIPPED_POLICIES)


@pytest.fixture
def sql_snapshot(snapshot):
    return snapshot.use_extension(SQLSnapshot)


@pytest.mark.parametrize("name", SHIPPED)
def test_compiled_sql(name, sql_snapshot):
    assert render_plan(compile_policy(load(f"{POLICIES}/{name}.yaml"))) == sql_snapshot


@pytest.mark.parametrize("name", ["lifecycle", "scheduled-sql"])
def test_compiled_sql_postgres(name, sql_snapshot):
    assert render_plan(compile_policy(load(f"{POLICIES}/{name}.yaml"), "postgres")) == sql_snapshot


def test_every_shipped_policy_is_snapshotted():
    assert {"archive", "coding-agent", "lifecycle", "scheduled-sql"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_postgres_plans_use_no_sqlite_only_function(name):
    """`lethe compile --dialect postgres` of every shipped policy: full text through a
    tsvector and websearch_to_tsquery, JSON and time through PostgreSQL's own functions."""
    policy = load(f"{POLICIES}/{name}.yaml")
    if policy.embed:  # vectors are searched by sqlite-vec: refused, in one clear line
        with pytest.raises(PolicyError, match="runs on SQLite only"):
            compile_policy(policy, "postgres")
        return
    text = render_plan(compile_policy(policy, "postgres"))
    for sqlite_only in (
        "bm25(",
        "MATCH ",
        "json_each(",
        "julianday(",
        "json_object(",
        "rowid",
        "CROSS JOIN",
        "?",
    ):
        assert sqlite_only not in text, sqlite_only


@pytest.mark.parametrize("name", SHIPPED_POLICIES)
def test_every_comment_line_of_a_plan_fits_100_columns(name):
    """Issue 43: `lethe compile` printed comment lines of up to 489 characters."""
    text = render_plan(compile_policy(load(f"{POLICIES}/{name}.yaml")))
    long = [line for line in text.splitlines() if line.startswith("--") and len(line) > 100]
    assert long == []
