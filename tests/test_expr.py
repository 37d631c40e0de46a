"""Formulas: text -> IR (engine.policy.expr) -> SQL with bound parameters (engine.plan.dialect).

Every accepted formula is rendered and EXECUTED against a real store's `memories` table,
so these tests pin what a formula computes, not only what text it renders to.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import math
import os
import re
import sys
import threading

import pytest

from engine import policy as policy_mod
from engine.base.errors import FormulaError
from engine.plan.dialect import DIALECTS, NOW, PostgresDialect
from engine.policy import expr as X
from engine.policy.formula_compiler import compile_formula
from engine.store import Store
from tests.helpers import shipped_policies

SQLITE = DIALECTS["sqlite"]
POSTGRES = DIALECTS["postgres"]
PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = shipped_policies()

NOW_DT = dt.datetime(2026, 3, 1, 9, 0, 0)
NOW_ISO = NOW_DT.isoformat(timespec="seconds")


def iso(when: dt.datetime) -> str:
    return when.isoformat(timespec="seconds")


# Three rows, chosen so that every comparison below splits them differently.
ROWS = {
    1: dict(
        content="alpha",
        importance=7.0,
        confidence=0.9,
        access_count=3,
        decay_score=0.5,
        status="active",
        kind="fact",
        created_at=iso(NOW_DT - dt.timedelta(days=40)),
        last_accessed=iso(NOW_DT - dt.timedelta(days=30)),  # exactly 30 days
        expires_at=iso(NOW_DT + dt.timedelta(days=10)),
    ),
    2: dict(
        content="beta",
        importance=2.0,
        confidence=0.5,
        access_count=15,
        decay_score=0.05,
        status="archived",
        kind=None,
        created_at=iso(NOW_DT - dt.timedelta(days=29.99)),  # 29d 23:45:36
        last_accessed=None,
        expires_at=None,
    ),
    3: dict(
        content="it's 1; DROP TABLE memories",
        importance=5.0,
        confidence=1.0,
        access_count=1,
        decay_score=1.0,
        status="active",
        kind="preference",
        created_at=iso(NOW_DT - dt.timedelta(days=100)),
        last_accessed=iso(NOW_DT - dt.timedelta(hours=12)),
        expires_at=iso(NOW_DT - dt.timedelta(days=1)),
    ),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A real store (the real schema, math functions ensured) holding ROWS."""
    store = Store(tmp_path_factory.mktemp("expr") / "x.db")
    with store.transaction():
        for row_id, fields in ROWS.items():
            store.insert_memory({"id": row_id, **fields})
    yield store.db
    store.close()


def compile_(text, **scope) -> X.Node:
    return compile_formula(text, X.Scope(**scope))


def render(text, **scope) -> tuple[str, list]:
    return SQLITE.render(compile_(text, **scope))


def bind(params: list) -> list:
    # the same substitution engine/plan.py Statement.bind does for the NOW marker
    return [NOW_ISO if p is NOW else p for p in params]


def value(db, text, row_id, **scope):
    sql, params = render(text, **scope)
    return db.execute(f"SELECT {sql} FROM memories WHERE id = ?", [*bind(params), row_id]).fetchone()[0]


def matching(db, text, **scope) -> list[int]:
    sql, params = render(text, **scope)
    return [r[0] for r in db.execute(f"SELECT id FROM memories WHERE {sql} ORDER BY id", bind(params))]


# ---- arithmetic ---------------------------------------------------------------------
def test_the_rows_hold_integers_where_the_division_test_needs_them(db):
    assert db.execute("SELECT typeof(access_count) FROM memories WHERE id = 3").fetchone()[0] == "integer"


@pytest.mark.parametrize(
    "text, row_id, expected",
    [
        ("access_count / 2", 3, 0.5),  # 1 / 2: SQLite alone would say 0
        ("access_count / 2", 1, 1.5),
        ("7 / 2", 1, 3.5),
        ("access_count / access_count", 2, 1.0),
        ("importance * 2 - access_count + 1", 1, 12.0),
        ("(importance + 1) * 2", 1, 16.0),
        ("importance + 1 * 2", 1, 9.0),
        ("importance - 2 - 1", 1, 4.0),  # left-associative
        ("importance / 2 / 7", 1, 0.5),
        ("-importance", 1, -7.0),
        ("+importance", 2, 2.0),
        ("-(importance - 10)", 1, 3.0),
        ("importance - -1", 1, 8.0),
    ],
)
def test_arithmetic_executes_like_python(db, text, row_id, expected):
    assert value(db, text, row_id) == pytest.approx(expected, abs=1e-12)


def test_true_division_is_rendered_with_a_float_factor():
    sql, params = render("access_count / 2")
    assert sql == '("access_count" * 1.0 / ?)'
    assert params == [2]


def test_negative_literal_folds_into_one_bound_value():
    assert render("-3") == ("?", [-3])


# ---- comparisons and logic ----------------------------------------------------------


@pytest.mark.parametrize(
    "text, ids",
    [
        ("importance = 7", [1]),
        ("importance == 7", [1]),
        ("importance=7", [1]),
        ("importance != 7", [2, 3]),
        ("importance <> 7", [2, 3]),
        ("importance >= 5", [1, 3]),
        ("importance > 5", [1]),
        ("importance <= 5", [2, 3]),
        ("importance < 5", [2]),
        ("status = 'active'", [1, 3]),
        ('status = "archived"', [2]),
        ("kind = 'fact'", [1]),
        ("status = 'active' and importance > 5", [1]),
        ("status = 'active' AND importance > 5", [1]),
        ("status = 'archived' OR importance > 6", [1, 2]),
        ("status = 'archived' or importance > 6", [1, 2]),
        ("NOT status = 'active'", [2]),
        ("not (status = 'active' and importance > 5)", [2, 3]),
        ("NOT (status = 'active' AND importance > 5) AND access_count < 10", [3]),
        ("importance > 1 and importance < 6 or access_count = 3", [1, 2, 3]),
        ("status = 'active' and (importance < 6 or access_count = 3)", [1, 3]),
        # chained comparisons mean what Python means
        ("2 < importance < 7", [3]),
        ("5 <= importance < 7.5", [1, 3]),
        ("1 <= access_count <= 3 < importance", [1, 3]),
        # null
        ("expires_at is None", [2]),
        ("expires_at = null", [2]),
        ("expires_at == None", [2]),
        ("expires_at is not None", [1, 3]),
        ("expires_at != null", [1, 3]),
        ("kind = null or kind = 'fact'", [1, 2]),
        ("expires_at IS NULL", [2]),
        # time
        ("expires_at < now", [3]),
        ("created_at < '2026-01-01'", [3]),
        # lists
        ("status in ['active', 'expired']", [1, 3]),
        ("status not in ['active']", [2]),
        ("importance in (2, 7)", [1, 2]),
        ("status IN ['archived'] AND importance < 5", [2]),
        # constants
        ("true", [1, 2, 3]),
        ("false", []),
        ("True and importance > 5", [1]),
    ],
)
def test_conditions_select_the_right_rows(db, text, ids):
    assert matching(db, text) == ids


@pytest.mark.parametrize(
    "text, sql, params",
    [
        ("importance != 7", '("importance" <> ?)', [7]),
        ("importance = 7", '("importance" = ?)', [7]),
        ("expires_at is None", '("expires_at" IS NULL)', []),
        ("expires_at = null", '("expires_at" IS NULL)', []),
        ("expires_at is not None", '("expires_at" IS NOT NULL)', []),
        ("NOT importance > 1", '(NOT ("importance" > ?))', [1]),
        ("2 < importance < 7", '((? < "importance") AND ("importance" < ?))', [2, 7]),
        (
            "importance > 1 AND status = 'a' OR false",
            '((("importance" > ?) AND ("status" = ?)) OR ?)',
            [1, "a", 0],
        ),
        ("status in ['a', 'b']", '("status" IN (?, ?))', ["a", "b"]),
        ("status not in ['a']", '("status" NOT IN (?))', ["a"]),
    ],
)
def test_conditions_render_to_sql(text, sql, params):
    assert render(text) == (sql, params)


def test_conditions_have_type_bool_and_arithmetic_type_num():
    assert compile_("importance > 1").type == X.BOOL
    assert compile_("importance + 1").type == X.NUM
    assert compile_("2 < importance < 7").type == X.BOOL


# ---- functions ----------------------------------------------------------------------
FUNCTION_CASES = [
    ("exp", "exp(1)", 1, math.e),
    ("exp", "exp(-0.693 * 30 / 30)", 1, math.exp(-0.693)),
    ("ln", "ln(importance)", 1, math.log(7)),
    ("ln", "ln(1)", 1, 0.0),
    ("log", "log(100)", 1, 2.0),  # base 10, in both dialects
    ("floor", "floor(2.7)", 1, 2),
    ("floor", "floor(-2.5)", 1, -3),
    ("ceil", "ceil(2.1)", 1, 3),
    ("ceil", "ceil(importance / 2)", 1, 4),
    ("abs", "abs(-3.5)", 1, 3.5),
    ("abs", "abs(importance - 10)", 1, 3.0),
    ("pow", "pow(2, 10)", 1, 1024.0),
    ("pow", "pow(importance, 0.5)", 1, math.sqrt(7)),
    ("min", "min(3, importance, 5)", 1, 3),
    ("min", "min(1.0, importance)", 2, 1.0),
    ("max", "max(3, importance, 5)", 1, 7.0),
    ("max", "max(0, importance - 10)", 1, 0),
    ("coalesce", "coalesce(last_accessed, created_at)", 2, ROWS[2]["created_at"]),
    ("coalesce", "coalesce(last_accessed, created_at)", 1, ROWS[1]["last_accessed"]),
    ("coalesce", "coalesce(null, access_count)", 2, 15),
    ("clamp", "clamp(importance, 0, 5)", 1, 5),
    ("clamp", "clamp(importance, 3, 10)", 2, 3),
    ("clamp", "clamp(0.25, 0, 1)", 1, 0.25),
    ("sqrt", "sqrt(16)", 1, 4.0),
    ("sqrt", "sqrt(importance * 7)", 1, 7.0),
]


@pytest.mark.parametrize("name, text, row_id, expected", FUNCTION_CASES, ids=[c[1] for c in FUNCTION_CASES])
def test_every_whitelisted_function_executes(db, name, text, row_id, expected):
    got = value(db, text, row_id)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_the_function_cases_cover_the_whole_whitelist():
    assert (
        {c[0] for c in FUNCTION_CASES}
        == set(X.SCALAR_FUNCS)
        == {"exp", "ln", "log", "floor", "ceil", "abs", "pow", "min", "max", "coalesce", "clamp", "sqrt"}
    )


def test_clamp_renders_as_max_of_min():
    assert render("clamp(importance, 0, 1)") == ('max(?, min(?, "importance"))', [0, 1])


@pytest.mark.parametrize(
    "text, message",
    [
        ("min(1)", "min() takes 2 to 8 arguments"),
        ("pow(2)", "pow() takes 2 arguments"),
        ("clamp(importance, 1)", "clamp() takes 3 arguments"),
        ("exp(1, 2)", "exp() takes 1 arguments"),
        ("exp(content)", "'content' is text, a number is needed here"),
        ("floor(status = 'a')", "is bool, a number is needed here"),
    ],
)
def test_function_arity_and_argument_types_are_checked(text, message):
    with pytest.raises(FormulaError) as err:
        compile_(text)
    assert message in str(err.value)


# ---- aggregates (merge results only) ------------------------------------------------
MERGE = dict(allow_aggregates=True, allow_time=False)


@pytest.mark.parametrize(
    "text, sql, expected",
    [
        ("max(access_count)", 'max("access_count")', 15),
        ("min(importance)", 'min("importance")', 2.0),
        ("sum(access_count)", 'sum("access_count")', 19),
        ("count(id)", 'count("id")', 3),
        ("min(10, avg(importance) * 1.2)", 'min(?, (avg("importance") * ?))', min(10, (7 + 2 + 5) / 3 * 1.2)),
    ],
)
def test_aggregates_are_allowed_in_merge_scope_and_aggregate(db, text, sql, expected):
    got_sql, params = render(text, **MERGE)
    assert got_sql == sql
    assert db.execute(f"SELECT {got_sql} FROM memories", params).fetchone()[0] == pytest.approx(
        expected, abs=1e-12
    )


def test_time_words_are_refused_in_merge_scope():
    with pytest.raises(FormulaError, match="time word 'idle_days' is not allowed here"):
        compile_("avg(idle_days)", **MERGE)


# ---- params and named scores --------------------------------------------------------
def test_params_are_bound_values(db):
    scope = dict(params={"half_life_days": 30, "label": "fact"})
    assert render("importance / half_life_days", **scope) == ('("importance" * 1.0 / ?)', [30])
    assert value(db, "importance / half_life_days", 1, **scope) == pytest.approx(7 / 30)
    assert matching(db, "kind = label", **scope) == [1]
    assert "fact" not in render("kind = label", **scope)[0]


def test_a_param_that_is_not_a_number_or_text_is_refused():
    with pytest.raises(FormulaError, match="param 'weights' must be a number or text"):
        compile_("importance * weights", params={"weights": [1, 2]})


def test_named_scores_are_inlined(db):
    scores = {"boost": "importance * 2", "total": "boost + access_count"}
    sql, params = render("total", scores=scores)
    assert sql == '(("importance" * ?) + "access_count")'
    assert params == [2]
    assert "boost" not in sql and "total" not in sql
    assert value(db, "total / 2", 1, scores=scores) == pytest.approx(8.5)


def test_scores_can_use_params():
    sql, params = render("fresh", params={"hl": 30}, scores={"fresh": "exp(-idle_days / hl)"})
    assert sql.startswith("exp(((-(round((julianday(?)")
    assert params[-1] == 30


@pytest.mark.parametrize(
    "scores, start, cycle",
    [
        ({"a": "a + 1"}, "a", "a -> a"),
        ({"a": "b + 1", "b": "a * 2"}, "a", "a -> b -> a"),
        ({"a": "b", "b": "c", "c": "exp(a)"}, "a + 1", "a -> b -> c -> a"),
    ],
)
def test_a_cycle_of_scores_is_refused(scores, start, cycle):
    with pytest.raises(FormulaError) as err:
        compile_(start, scores=scores)
    assert "refers to itself" in str(err.value)
    assert cycle in str(err.value)


def test_an_error_inside_a_score_names_the_score():
    with pytest.raises(FormulaError) as err:
        compile_("importance * fresh", scores={"fresh": "exp(-recency)"})
    assert "in score 'fresh'" in str(err.value)
    assert "unknown name 'recency'" in str(err.value)


# ---- time words ---------------------------------------------------------------------
def test_now_is_the_bound_clock_text(db):
    assert render("now") == ("?", [NOW])
    assert value(db, "now", 1) == NOW_ISO


@pytest.mark.parametrize("row_id", [1, 2, 3])
def test_idle_days_matches_python(db, row_id):
    row = ROWS[row_id]
    last = dt.datetime.fromisoformat(row["last_accessed"] or row["created_at"])
    gap = NOW_DT - last
    assert value(db, "floor(idle_days)", row_id) == gap.days
    assert value(db, "idle_days", row_id) == pytest.approx(gap.total_seconds() / 86400, abs=1e-9)


def test_exactly_thirty_idle_days_is_thirty_and_a_hair_less_is_29(db):
    assert value(db, "idle_days", 1) == 30.0  # exact, not 29.999999...
    assert value(db, "floor(idle_days)", 1) == 30 == dt.timedelta(days=30).days
    assert value(db, "floor(idle_days)", 2) == 29 == dt.timedelta(days=29.99).days
    assert 29.98 < value(db, "idle_days", 2) < 30.0


@pytest.mark.parametrize(
    "text, row_id, expected",
    [
        ("age_days", 1, 40.0),
        ("age_days", 3, 100.0),
        ("days_to_expiry", 1, 10.0),
        ("days_to_expiry", 3, -1.0),
        ("days_to_expiry", 2, None),  # no expiry: null, not a number
        ("idle_days", 3, 0.5),
    ],
)
def test_age_and_expiry_in_days(db, text, row_id, expected):
    got = value(db, text, row_id)
    assert got == (pytest.approx(expected, abs=1e-9) if expected is not None else None)


@pytest.mark.parametrize("row_id", [1, 2, 3])
def test_seed_freshness_formula_equals_python(db, row_id):
    text = "min(1.0, exp(-0.693 * floor(idle_days) / 30) + min(0.3, access_count * 0.03))"
    row = ROWS[row_id]
    idle = (NOW_DT - dt.datetime.fromisoformat(row["last_accessed"] or row["created_at"])).days
    expected = min(1.0, math.exp(-0.693 * idle / 30) + min(0.3, row["access_count"] * 0.03))
    assert abs(value(db, text, row_id) - expected) < 1e-12


def test_time_words_are_refused_where_the_value_is_stored():
    with pytest.raises(FormulaError, match="time word 'age_days' is not allowed here"):
        compile_("importance / age_days", allow_time=False)


def test_relevance_only_in_recall(db):
    with pytest.raises(FormulaError, match="'relevance' is only known in recall"):
        compile_("relevance * importance")
    node = compile_("relevance * importance", allow_relevance=True)
    sql, params = SQLITE.render(node, relevance_sql="0.5")
    assert sql == '(0.5 * "importance")'
    assert db.execute(f"SELECT {sql} FROM memories WHERE id = 1").fetchone()[0] == 3.5


# ---- nothing pasted -----------------------------------------------------------------
NASTY = "x'); DROP TABLE memories; --"


@pytest.mark.parametrize(
    "text, scope, secrets",
    [
        (f'content = "{NASTY}"', {}, [NASTY, "DROP"]),
        ("kind = label", {"params": {"label": NASTY}}, [NASTY, "DROP"]),
        ("status = \"active' OR '1'='1\"", {}, ["OR '1'", "active"]),
        ("importance > 12345.5", {}, ["12345"]),
        ("importance * weight", {"params": {"weight": 987654}}, ["987654"]),
        ("coalesce(kind, 'fallback-text')", {}, ["fallback-text"]),
        ("status = 'a' and kind != 'b'", {}, ["'a'", "'b'"]),
    ],
)
def test_literals_and_param_values_are_bound_never_pasted(db, text, scope, secrets):
    sql, params = render(text, **scope)
    assert "'" not in sql  # identifiers use "", values use ?
    for s in secrets:
        assert s not in sql
    assert sql.count("?") == len(params)
    db.execute(f"SELECT count(*) FROM memories WHERE {sql}", bind(params)).fetchone()
    assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == 3


def test_a_nasty_string_is_compared_as_data(db):
    assert matching(db, 'content = "it\'s 1; DROP TABLE memories"') == [3]
    assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == 3


def test_identifiers_come_only_from_the_schema():
    with pytest.raises(FormulaError):
        SQLITE.quote('status" OR 1=1 --')
    assert SQLITE.quote("decay_score") == '"decay_score"'


# ---- refusals -----------------------------------------------------------------------
REFUSED = [
    # (formula, fragments the message must contain)
    ("import os", ["cannot parse 'import os'"]),
    ("__import__('os')", ["unknown function '__import__'"]),
    ("content.__class__", ["not allowed in a formula", "__class__"]),
    ("content.upper()", ["only plain function calls are allowed", "upper"]),
    ("tags[0]", ["not allowed in a formula", "tags"]),
    ("lambda: 1", ["not allowed in a formula", "lambda"]),
    ("[x for x in tags]", ["not allowed in a formula", "for x in tags"]),
    ("{k: 1 for k in tags}", ["not allowed in a formula"]),
    ("max(1, importance=2)", ["importance"]),  # `=` reads as `==`: a bool, not a number
    ("max(1, *tags)", ["not allowed in a formula"]),
    ('f"{content}"', ["not allowed in a formula", 'f"{content}"']),
    ("(x := 1)", ["not allowed in a formula", ":="]),
    ("importance ** 2", ["operator not allowed (use + - * /)", "**"]),
    ("importance % 2", ["operator not allowed (use + - * /)", "%"]),
    ("importance // 2", ["operator not allowed (use + - * /)", "//"]),
    ("importance @ 2", ["operator not allowed"]),
    ("importance & 1", ["operator not allowed"]),
    ("~importance", ["operator not allowed", "~importance"]),
    ("recency > 1", ["unknown name 'recency'"]),
    ("os", ["unknown name 'os'"]),
    ("foo(1)", ["unknown function 'foo'"]),
    ("getattr(content, 'x')", ["unknown function 'getattr'"]),
    ("avg(importance)", ["unknown function 'avg'", "only allowed in merge results"]),
    ("sum(access_count) > 1", ["unknown function 'sum'", "only allowed in merge results"]),
    ("content + 1", ["'content' is text, a number is needed here"]),
    ("-content", ["'content' is text, a number is needed here"]),
    ("importance = 'high'", ["cannot compare num with text"]),
    ("status > 3", ["cannot compare text with num"]),
    ("importance > 1 > 'x'", ["cannot compare num with text"]),
    ("importance = true", ["cannot compare num with bool"]),
    ("not importance", ["'importance' is num, a condition is needed here"]),
    ("importance and status = 'a'", ["'importance' is num, a condition is needed here"]),
    ("1; DROP TABLE memories", ["cannot parse '1; DROP TABLE memories'"]),
    ("status = 'active'; DELETE FROM memories", ["cannot parse"]),
    ("status = 'active' -- comment", ["unknown name 'comment'"]),
    ("decay_score > 0) OR (1=1", ["cannot parse 'decay_score > 0) OR (1=1'"]),
    ("decay_score > 0 /* x */", ["cannot parse"]),
    ("", ["a formula must be text or a number, got ''"]),
    ("   ", ["a formula must be text or a number"]),
    ("importance is 3", ["'is' only compares with null"]),
    ("status in 'active'", ["'in' needs a list of values"]),
    ("status in []", ["'in' needs a list of values"]),
    ("importance if status else 0", ["not allowed in a formula"]),
    ("{1: 2}", ["not allowed in a formula"]),
    ("...", ["not allowed in a formula"]),
    ("b'x'", ["not allowed in a formula"]),
    ("1j", ["not allowed in a formula"]),
    ("importance\n> 1", ["cannot parse"]),
    ("yield 1", ["cannot parse"]),
    ("relevance > 0.5", ["'relevance' is only known in recall"]),
]


@pytest.mark.parametrize("text, fragments", REFUSED, ids=[r[0] or "<empty>" for r in REFUSED])
def test_refused_with_a_formula_error_that_says_why(text, fragments):
    with pytest.raises(FormulaError) as err:  # a FormulaError, never anything else
        compile_(text)
    for fragment in fragments:
        assert fragment in str(err.value)


@pytest.mark.parametrize("not_text", [["importance"], {"a": 1}, b"importance"])
def test_a_formula_that_is_not_text_is_refused(not_text):
    with pytest.raises(FormulaError, match="a formula must be text or a number"):
        compile_(not_text)


@pytest.mark.parametrize(
    "value, node",
    [
        (0.5, X.Const(X.NUM, 0.5)),
        (3, X.Const(X.NUM, 3)),
        (True, X.Const(X.BOOL, True)),
        (None, X.Const(X.NULL, None)),
    ],
)
def test_a_bare_yaml_number_or_bool_is_a_constant(value, node):
    assert compile_formula(value, X.Scope()) == node


@pytest.mark.parametrize(
    "text, quoted",
    [
        ("content.__class__", "'content.__class__'"),
        ("importance ** 2", "'importance ** 2'"),
        ("__import__('os')", "'__import__('os')'"),
    ],
)
def test_the_message_quotes_the_offending_text_as_written(text, quoted):
    with pytest.raises(FormulaError) as err:
        compile_(text)
    assert quoted in str(err.value)


def test_the_offset_points_into_the_formula():
    with pytest.raises(FormulaError) as err:
        compile_("importance > 1 and recency > 2")
    assert err.value.offset == len("importance > 1 and ")


# ---- PostgreSQL ---------------------------------------------------------------------
def shipped_nodes(pol) -> list[tuple[str, X.Node]]:
    out = [("scores.rank", pol.rank), ("recall.where", pol.recall.candidates.where)]
    out += [(f"recall.order[{i}]", n) for i, (n, _) in enumerate(pol.recall.candidates.order)]
    for name, ps in pol.passes.items():
        for i, rule in enumerate(ps.rules):
            if rule.when is not None:
                out.append((f"passes.{name}.rules[{i}].when", rule.when))
            out += [(f"passes.{name}.rules[{i}].set.{c}", n) for c, n in rule.set.items()]
        for what, judgment in (("cluster", ps.cluster), ("merge", ps.merge)):
            if judgment is not None and judgment.candidates is not None:
                out += candidate_nodes(f"passes.{name}.{what}.candidates", judgment.candidates)
        out += [(f"passes.{name}.merge.result.{c}", n) for c, n in ps.merge_result.items()]
    for i, step in enumerate(pol.write):
        if step.judgment.candidates is not None:
            out += candidate_nodes(f"write[{i}].candidates", step.judgment.candidates)
    if pol.recall.on_access:
        out += [(f"recall.on_access.set.{c}", n) for c, n in pol.recall.on_access.set.items()]
    return out


def candidate_nodes(where: str, c) -> list[tuple[str, X.Node]]:
    return [(f"{where}.where", c.where)] + [(f"{where}.order[{i}]", n) for i, (n, _) in enumerate(c.order)]


@pytest.mark.parametrize("path", SHIPPED, ids=[os.path.basename(p) for p in SHIPPED])
def test_postgres_renders_every_shipped_formula_with_percent_s(path):
    pol = policy_mod.load(path)
    nodes = shipped_nodes(pol)
    assert nodes
    for where, node in nodes:
        sql, params = POSTGRES.render(node, relevance_sql="0.0")
        assert "?" not in sql, where
        assert sql.count("%s") == len(params), where
        assert "%" not in sql.replace("%s", ""), where
        assert "julianday(" not in sql, where
        if ".merge.result." not in where:  # there max()/min() are aggregates, valid as is
            assert not re.search(r"\b(min|max)\(", sql), where


def test_postgres_uses_least_greatest_and_epoch_days():
    pol = policy_mod.load(os.path.join(PROJECT, "policies", "lifecycle.yaml"))
    decay = pol.passes["decay"].rules[0].set["decay_score"]
    sql, params = POSTGRES.render(decay)
    assert sql.startswith("least(%s::double precision, (exp(least(greatest(")  # exp saturates
    assert sql.count("least(") == 3
    assert "extract(epoch from (" in sql
    assert params.count(NOW) == 1 and 30 in params
    sqlite_sql, sqlite_params = SQLITE.render(decay)
    assert sqlite_sql.startswith("min(?, (exp(")
    assert len(sqlite_params) == len(params)


def test_postgres_keeps_aggregates_and_turns_scalar_min_into_least():
    node = compile_("min(10, avg(importance) * 1.2)", **MERGE)
    assert POSTGRES.render(node) == (
        'least(%s::bigint, (avg("importance") * %s::double precision))',
        [10, 1.2],
    )
    assert POSTGRES.render(compile_("max(access_count)", **MERGE)) == ('max("access_count")', [])


@pytest.mark.parametrize(
    "text, sql",
    [
        ("clamp(importance, 0, 1)", 'greatest(%s::bigint, least(%s::bigint, "importance"))'),
        # division by zero is NULL, as in SQLite (PostgreSQL would raise)
        ("max(importance, 1) / 2", '(greatest("importance", %s::bigint) * 1.0 / nullif(%s::bigint, 0))'),
        ("log(importance)", '(CASE WHEN "importance" > 0 THEN log("importance") END)'),
        ("status != 'x'", '("status" <> %s::text)'),
    ],
)
def test_postgres_spellings(text, sql):
    assert isinstance(POSTGRES, PostgresDialect)
    assert POSTGRES.render(compile_(text))[0] == sql


def test_rendering_keeps_nothing_on_the_shared_dialect():
    """One dialect object serves every store (DIALECTS): a render writes into its own
    state, so the dialect is the same after it and threads rendering at once each get the
    text and parameters of their own call."""
    node = compile_("similarity * 2 + importance", allow_similarity=True)
    for d in (SQLITE, POSTGRES):
        before = dict(vars(d))
        d.render(node, similarity=("sim(?)", ["v"]))
        assert vars(d) == before

    def renders(i: int) -> list[tuple[str, list]]:
        start.wait()
        return [SQLITE.render(node, similarity=(f"sim{i}(?)", [f"v{i}"])) for _ in range(300)]

    threads = 8
    start = threading.Barrier(threads)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(renders, range(threads)))
    finally:
        sys.setswitchinterval(interval)
    for i, got in enumerate(results):
        assert got == [SQLITE.render(node, similarity=(f"sim{i}(?)", [f"v{i}"]))] * len(got)
