"""Hostile input: generated formulas and policy documents, templates that try to reach
Python internals, and memories made of SQL, template syntax, megabytes and control bytes.

A formula or a policy is either compiled to SQL that names only known columns and binds
every value, or refused with the engine's own error (a `file:line` message for a policy
document). A template is data-only: the sandbox refuses any walk towards Python
internals with a PolicyError. A memory is stored and recalled exactly and reaches a
prompt only as data.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import os
import re
import sqlite3

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import FixedClock, Memory, prompts
from engine.base.errors import FormulaError, LetheError, PolicyError, StoreError
from engine.plan import compile_policy, rules
from engine.plan.dialect import DIALECTS, NOW
from engine.policy import SETTABLE, load
from engine.policy import expr as X
from engine.policy.formula_compiler import compile_formula
from tests.helpers import POLICIES, START, run_sql, shipped_policies, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

SQLITE = DIALECTS["sqlite"]
PARAMS = {"half_life_days": 30, "archive_below": 0.1, "label": "x'); DROP TABLE memories; --"}
SCORES = {
    "freshness": "exp(-0.693 * idle_days / half_life_days)",
    "boost": "importance * 2",
    "loop_a": "loop_b + 1",
    "loop_b": "loop_a + 1",
}
# `make test`: the same examples every run (derandomize), no example database on disk
FAST = settings(
    max_examples=600,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
FAST_DOCS = settings(FAST, max_examples=150)
# `make soak`: fresh random examples each run
SOAK = settings(
    max_examples=10_000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ---- formulas -------------------------------------------------------------------------
NASTY_TEXT = [
    "'); DROP TABLE memories; --",
    '" OR 1=1 --',
    "x' || (SELECT sql FROM sqlite_master) || '",
    "{{ 7*7 }}",
    "%s",
    "?",
    ":now",
    "\\",
    "é",
    "😀",
    "Robert'); --",
    "*/",
    "/*",
    "\n",
    "\t",
    "'",
    '"',
    "a\"b'c",
]
NAMES = (
    sorted(X.COLUMNS)
    + sorted(X.TIME_WORDS)
    + sorted(PARAMS)
    + sorted(SCORES)
    + [
        "relevance",
        "null",
        "None",
        "NULL",
        "true",
        "False",
        "__class__",
        "__import__",
        "__builtins__",
        "__globals__",
        "_",
        "self",
        "os",
        "sqlite_master",
        "memories",
        "DROP",
        "SELECT",
        "rowid",
        "oid",
        "_rowid_",
        "main",
        "id_",
        "Status",
        "namespace",
        "eval",
        "exec",
    ]
)
FUNCS = (
    sorted(X.SCALAR_FUNCS)
    + sorted(X.AGGREGATES)
    + [
        "eval",
        "exec",
        "open",
        "__import__",
        "getattr",
        "load_extension",
        "randomblob",
        "char",
        "sqlite_version",
        "json_extract",
        "printf",
        "zeroblob",
        "round",
        "julianday",
        "lower",
        "log10",
    ]
)
OPS_OK = ["+", "-", "*", "/"]
OPS_BAD = ["**", "//", "%", "<<", ">>", "|", "&", "^", "@"]
CMPS = ["==", "=", "!=", "<>", "<", "<=", ">", ">=", "is", "is not", "in", "not in", "IN", "IS"]


def _quoted(s: str) -> str:
    return repr(s)  # a valid Python string literal, quotes and escapes included


leaf = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12).map(repr),
    st.sampled_from(["1e999", "0", "0.0", "1_000", "0x10", "1j", "...", "b'x'", "f'{id}'"]),
    st.sampled_from(NAMES),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
    st.sampled_from(NASTY_TEXT).map(_quoted),
    st.text(max_size=12).map(_quoted),
)


def _not_null(text: str) -> bool:
    return text not in ("null", "None", "NULL")


def _branches(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(OPS_OK + OPS_BAD), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        # `-null` is a known bug (TypeError), pinned by test_minus_null_is_refused below
        st.tuples(st.sampled_from(["-", "+", "~", "not "]), children)
        .filter(lambda t: t[0] != "-" or _not_null(t[1]))
        .map(lambda t: f"{t[0]}{t[1]}"),
        st.tuples(children, st.sampled_from(CMPS), children).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(children, st.sampled_from(["in", "not in"]), st.lists(children, max_size=3)).map(
            lambda t: f"{t[0]} {t[1]} [{', '.join(t[2])}]"
        ),
        st.tuples(children, st.sampled_from(["and", "or", "AND", "OR"]), children).map(" ".join),
        st.tuples(st.sampled_from(FUNCS), st.lists(children, max_size=4)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
        st.tuples(
            children,
            st.sampled_from([".__class__", ".__mro__", ".real", "[0]", "[1:2]", "()", "(x=1)", ".upper()"]),
        ).map("".join),
        st.tuples(children, children).map(lambda t: f"({t[0]} if {t[1]} else {t[0]})"),
        st.tuples(children).map(lambda t: f"(lambda: {t[0]})"),
        st.tuples(children).map(lambda t: f"[{t[0]} for x in ids]"),
        st.tuples(children).map(lambda t: f"{{{t[0]}: 1}}"),
        st.tuples(children).map(lambda t: f"(x := {t[0]})"),
        st.tuples(children).map(lambda t: f"min(*{t[0]})"),
        st.tuples(
            children,
            st.sampled_from(
                [
                    "; DROP TABLE memories",
                    ") OR (1=1",
                    " -- c",
                    " /* c */",
                    "#",
                    "\n",
                    "'",
                    '"',
                    "`x`",
                    "[",
                    ")",
                ]
            ),
        ).map("".join),
    )


wild_formulas = st.recursive(leaf, _branches, max_leaves=12)

# well-typed formulas, so that many are accepted and their SQL is run
NUM_COLUMNS = [c for c, t in X.COLUMNS.items() if t == X.NUM]
num_leaf = st.one_of(
    st.sampled_from(
        NUM_COLUMNS
        + [
            "idle_days",
            "age_days",
            "days_to_expiry",
            "half_life_days",
            "archive_below",
            "boost",
            "freshness",
            "null",
        ]
    ),
    st.integers(-(10**9), 10**9).map(str),
    st.floats(allow_nan=False, min_value=-1e9, max_value=1e9).map(repr),
    st.sampled_from(["1e999", "-1e999", "0", "0.0"]),
)


def _num_branches(c):
    return st.one_of(
        st.tuples(c, st.sampled_from(OPS_OK), c).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        c.filter(_not_null).map(lambda t: f"-{t}"),
        st.tuples(st.sampled_from(["exp", "ln", "log", "floor", "ceil", "abs", "sqrt"]), c).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
        st.tuples(
            st.sampled_from(["min", "max", "coalesce", "pow", "clamp"]), st.lists(c, min_size=2, max_size=3)
        ).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.tuples(st.sampled_from(sorted(X.AGGREGATES)), c.filter(lambda t: "(" not in t)).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
    )


numbers = st.recursive(num_leaf, _num_branches, max_leaves=8)
text_value = st.one_of(
    st.sampled_from(NASTY_TEXT + ["active", "archived", "fact"]), st.text(max_size=10)
).map(_quoted)
bool_leaf = st.one_of(
    st.tuples(numbers, st.sampled_from(["=", "==", "!=", "<>", "<", "<=", ">", ">="]), numbers).map(" ".join),
    st.tuples(
        st.sampled_from(["status", "kind", "scene", "content", "summary", "label"]),
        st.sampled_from(["=", "!=", "<", ">="]),
        text_value,
    ).map(" ".join),
    st.tuples(
        st.sampled_from(["status", "kind"]),
        st.sampled_from(["in", "not in"]),
        st.lists(text_value, min_size=1, max_size=3),
    ).map(lambda t: f"{t[0]} {t[1]} [{', '.join(t[2])}]"),
    st.tuples(
        st.sampled_from(["expires_at", "created_at", "last_accessed"]),
        st.sampled_from(["<", ">", "<="]),
        st.sampled_from(["now", "'2026-01-01'"]),
    ).map(" ".join),
    st.tuples(
        st.sampled_from(NUM_COLUMNS + ["expires_at", "kind"]),
        st.sampled_from(["is null", "is not null", "= null", "!= None"]),
    ).map(" ".join),
    st.sampled_from(["true", "false", "True", "False"]),
)
conditions = st.recursive(
    bool_leaf,
    lambda c: st.one_of(
        st.tuples(c, st.sampled_from(["and", "or", "AND", "OR"]), c).map(lambda t: f"({' '.join(t)})"),
        c.map(lambda t: f"not ({t})"),
        c.map(lambda t: f"NOT ({t})"),
    ),
    max_leaves=6,
)
formulas = st.one_of(wild_formulas, numbers, conditions)
scopes = st.builds(
    lambda rel, agg, time: X.Scope(
        PARAMS, SCORES, allow_time=time, allow_relevance=rel, allow_aggregates=agg
    ),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)

SQL_WORDS = {
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "exp",
    "ln",
    "log10",
    "floor",
    "ceil",
    "abs",
    "pow",
    "min",
    "max",
    "coalesce",
    "sqrt",
    "avg",
    "sum",
    "count",
    "round",
    "julianday",
    "fts",
    "score",
    "DESC",
    "ASC",
}
ENGINE_NUMBERS = {"1.0", "0.0", "86400000.0"}
RELEVANCE = "coalesce(-fts.score / (1.0 - fts.score), 0.0)"


def assert_safe_sql(sql: str, params: list, columns=frozenset(X.COLUMNS)) -> None:
    """SQL from a formula: known columns (quoted), whitelisted functions and keywords, the
    engine's own numeric constants, and a `?` for every value; no text from the policy."""
    assert "'" not in sql and ";" not in sql and "--" not in sql and "/*" not in sql, sql
    # a text column is read beside its row on SQLite (engine.plan.dialect): the engine's own
    # fixed lookup, by id, of a known column, and nothing else of the formula's
    sql = re.sub(
        r'\(SELECT t\.("(?:' + "|".join(X.TEXT_COLUMNS) + r')") FROM memory_texts AS t '
        r"WHERE t\.id = memories\.id\)",
        r"\1",
        sql,
    )
    idents = re.findall(r'"([^"]*)"', sql)
    assert set(idents) <= columns, (sql, set(idents) - columns)
    rest = re.sub(r'"[^"]*"', " ", sql)
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", rest))
    assert words <= SQL_WORDS, (sql, words - SQL_WORDS)
    numbers = set(re.findall(r"\d+(?:\.\d+)?", re.sub(r"[A-Za-z_][A-Za-z_0-9]*", " ", rest)))
    assert numbers <= ENGINE_NUMBERS, (sql, numbers - ENGINE_NUMBERS)
    assert sql.count("?") == len(params), (sql, params)
    for p in params:
        assert p is NOW or p is None or isinstance(p, (int, float, str)), p


def compile_or_refuse(text: str, scope: X.Scope):
    """The formula's (node, sql, params), or None when it was refused with FormulaError."""
    try:
        node = compile_formula(text, scope)
    except FormulaError as exc:
        assert str(exc).strip()
        return None
    sql, params = SQLITE.render(node, relevance_sql=RELEVANCE if scope.allow_relevance else None)
    return node, sql, params


@pytest.fixture(scope="module")
def formula_db(tmp_path_factory):
    """A real store with a few memories, NULLs and odd values included."""
    path = str(tmp_path_factory.mktemp("formulas") / "f.db")
    with Memory(
        path, policy=os.path.join(POLICIES, "lifecycle.yaml"), offline=True, clock=FixedClock(START)
    ) as mem:
        mem.add("User prefers Python", importance=7, judged=False)
        mem.add("Deadline is March 15", expires_at="2026-03-15", judged=False)
        mem.add("x'); DROP TABLE memories; --", importance=0, confidence=0, judged=False)
        run_sql(store_of(mem), "UPDATE memories SET last_accessed = 'not a date', kind = 'fact' WHERE id = 3")
    db = sqlite3.connect(path)
    from engine.store.sqlite.sqlite_functions import sql_functions

    sql_functions(db)
    yield db
    db.close()


def aggregates(node, inside: bool = False) -> int:
    """How many aggregates the formula has; -1 when one is nested in another."""
    found = 0
    for child in X._children(node):
        n = aggregates(child, inside or isinstance(node, X.Agg))
        if n < 0:
            return -1
        found += n
    if isinstance(node, X.Agg):
        return -1 if inside else found + 1
    return found


def execute(db: sqlite3.Connection, node, sql: str, params: list) -> None:
    """Run a compiled formula over the memories: a condition as a WHERE clause (as passes
    and recall use it), a value or an aggregate (a merge result) as a SELECT expression."""
    now = START.isoformat()
    bound = [now if p is NOW else p for p in params]
    if X.columns_of(node) & {"@relevance"}:
        sql = sql.replace(RELEVANCE, "0.0")
    if node.type == X.BOOL and not aggregates(node):
        db.execute(
            f'SELECT count(*) FROM memories WHERE "namespace" = ? AND {sql}', ["default", *bound]
        ).fetchall()
    else:
        db.execute(f"SELECT {sql} FROM memories", bound).fetchall()


def check_formula(db, text: str, scope: X.Scope) -> None:
    compiled = compile_or_refuse(text, scope)
    if compiled is None:
        return
    node, sql, params = compiled
    assert_safe_sql(sql, params)
    if aggregates(node) < 0:
        return  # a known bug, pinned by test_nested_aggregates_are_refused
    execute(db, node, sql, params)


@FAST
@given(formulas, scopes)
def test_generated_formulas_compile_to_safe_sql_or_are_refused(formula_db, text, scope):
    check_formula(formula_db, text, scope)


@pytest.mark.soak
@SOAK
@given(formulas, scopes)
def test_generated_formulas_soak(formula_db, text, scope):
    check_formula(formula_db, text, scope)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('id')",
        "().__class__.__mro__",
        "importance.__class__",
        "getattr(importance, 'real')",
        "eval('1')",
        "open('/etc/passwd')",
        "[x for x in ids]",
        "lambda: 1",
        "importance ** 2",
        "importance // 2",
        "importance % 2",
        "1 if status else 2",
        "status = 'a'; DROP TABLE memories",
        "status = 'a' -- comment",
        "load_extension('x')",
        "sqlite_master",
        "rowid > 1",
        "printf('%s', content)",
        "f'{content}'",
        "b'x'",
        "1j",
        "min(*importance)",
        "max(importance, key=1)",
        "status in []",
        "status is 'active'",
        "'x' + status",
        "content > 1",
        "not importance",
        "loop_a > 1",
        "unknown_name",
        "importance > 1 and",
        "(",
        "\x00",
        "randomblob(8)",
    ],
)
def test_disallowed_formulas_are_refused_with_a_formula_error(text):
    with pytest.raises(FormulaError) as err:
        compile_formula(text, X.Scope(PARAMS, SCORES))
    assert str(err.value).strip()


@pytest.mark.parametrize(
    "text",
    [
        "status = 'x''); DROP TABLE memories; --'",
        'content = "\'); DELETE FROM memory_events; --"',
        "label = status",  # a param holding SQL is bound like any value
        "kind = '[\"a\"]' or summary = '{{ 7*7 }}'",
    ],
)
def test_text_in_a_formula_is_always_a_bound_parameter(formula_db, text):
    node, sql, params = compile_or_refuse(text, X.Scope(PARAMS, SCORES))
    assert_safe_sql(sql, params)
    execute(formula_db, node, sql, params)
    assert formula_db.execute("SELECT count(*) FROM memories").fetchone()[0] == 3


@pytest.mark.parametrize("text", ["-null", "-None", "abs(-NULL)"])
def test_minus_null_is_refused(text):
    try:
        compile_formula(text, X.Scope())
    except FormulaError:
        pass


def test_a_deeply_nested_formula_is_refused():
    try:
        compile_formula("+".join(["1"] * 5000), X.Scope())
    except FormulaError:
        pass


def test_an_integer_beyond_64_bits_is_refused_or_runs(formula_db):
    compiled = compile_or_refuse("importance > 99999999999999999999", X.Scope())
    if compiled is not None:
        execute(formula_db, *compiled)


def test_nested_aggregates_are_refused():
    with pytest.raises(FormulaError):
        compile_formula("avg(max(importance))", X.Scope(allow_aggregates=True, allow_time=False))


def test_a_formula_with_a_lone_surrogate_is_refused_or_runs(formula_db):
    compiled = compile_or_refuse("content = '\ud800'", X.Scope())
    if compiled is not None:
        execute(formula_db, *compiled)


# ---- policy documents -----------------------------------------------------------------
with open(os.path.join(POLICIES, "lifecycle.yaml"), encoding="utf-8") as _fh:
    BASE = yaml.safe_load(_fh)

FORMULA_SLOTS = [
    ("scores", "freshness"),
    ("scores", "rank"),
    ("passes", "expiry", "rules", 0, "when"),
    ("passes", "decay", "rules", 0, "set", "decay_score"),
    ("passes", "decay", "rules", 1, "when"),
    ("recall", "where"),
    ("recall", "order"),
    ("write", 2, "candidates", "where"),
    ("write", 2, "candidates", "order"),
    ("passes", "compression", "merge", "result", "importance"),
    ("passes", "compression", "cluster", "candidates", "where"),
    ("recall", "on_access", "set", "access_count"),
    ("recall", "on_access", "set", "last_accessed"),
    ("params", "half_life_days"),
]
RULE_SLOTS = [
    ("passes", "expiry", "rules", 0),
    ("passes", "decay", "rules", 0),
    ("passes", "decay", "rules", 1),
    ("recall", "on_access"),
]
SET_NAMES = sorted(X.COLUMNS) + [
    "ID",
    "Namespace",
    "namespace ",
    "rowid",
    "oid",
    "_rowid_",
    "memories",
    'x"; DROP TABLE memories; --',
    "__class__",
    "content_fts",
    "status",
]


def _safe_text(s: str) -> bool:
    return not re.search(r"\d{9}", s)  # 99999999999d: a known bug, pinned separately


plain_text = st.text(max_size=20).filter(_safe_text)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9),
    plain_text,
    st.sampled_from(NASTY_TEXT + ["active", "archived", "1h", "6d", "0s"]),
)
values = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(plain_text, c, max_size=3)),
    max_leaves=6,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _put(doc, path, value):
    try:
        _get(doc, path[:-1])[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass


mutation = st.one_of(
    st.tuples(st.just("formula"), st.sampled_from(FORMULA_SLOTS), formulas),
    st.tuples(
        st.just("set"), st.sampled_from(RULE_SLOTS), st.sampled_from(SET_NAMES), st.one_of(formulas, scalars)
    ),
    st.tuples(st.just("value"), st.integers(0, 10_000), values),
    st.tuples(st.just("key"), st.integers(0, 10_000), plain_text, values),
    st.tuples(st.just("drop"), st.integers(0, 10_000)),
    st.tuples(st.just("event"), st.sampled_from(RULE_SLOTS[:3]), st.one_of(plain_text, scalars)),
    st.tuples(st.just("every"), st.sampled_from(["expiry", "decay", "compression"]), scalars),
)


def mutate(doc: dict, mutations) -> dict:
    doc = copy.deepcopy(doc)
    for m in mutations:
        paths = [p for p in _paths(doc) if p]
        if m[0] == "formula":
            # a newline in an `order` is a known bug, pinned by test_an_order_over_two_lines
            text = m[2].replace("\n", " ") if m[1][-1] == "order" else m[2]
            _put(doc, m[1], text)
        elif m[0] == "set":
            rule = _get_or_none(doc, m[1])
            if isinstance(rule, dict):
                rule.setdefault("set", {})
                if isinstance(rule["set"], dict):
                    rule["set"][m[2]] = m[3]
        elif m[0] == "value" and paths:
            _put(doc, paths[m[1] % len(paths)], m[2])
        elif m[0] == "key":
            maps = [p for p in _paths(doc) if isinstance(_get(doc, p), dict)]
            _get(doc, maps[m[1] % len(maps)])[m[2]] = m[3]
        elif m[0] == "drop" and paths:
            path = paths[m[1] % len(paths)]
            parent = _get(doc, path[:-1])
            del parent[path[-1]]
        elif m[0] == "event":
            rule = _get_or_none(doc, m[1])
            if isinstance(rule, dict):
                rule["event"] = m[2]
        elif m[0] == "every":
            p = _get_or_none(doc, ("passes", m[1]))
            if isinstance(p, dict):
                p["every"] = m[2]
    return doc


def _get_or_none(doc, path):
    try:
        return _get(doc, path)
    except (KeyError, IndexError, TypeError):
        return None


def plan_statements(plan) -> list:
    out = [st for sts in plan.passes.values() for st in sts]
    out += [
        plan.recall,
        plan.recall_query,
        plan.recall_scored,
        plan.rank_refresh,
        *plan.write_candidates.values(),
        *plan.cluster_candidates.values(),
    ]
    return out + ([plan.access] if plan.access else [])


def sql_words(sql: str) -> set:
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", re.sub(r'"[^"]*"', " ", sql)))


def _engine_words() -> set:
    """The words of the SQL the engine writes around formulas, read off the plans of the
    shipped policies (so the check follows the engine's own statements as they change)."""
    words = set()
    for path in shipped_policies():
        for s in plan_statements(compile_policy(load(path))):
            words |= sql_words(s.sql)
    return words


PLAN_WORDS = SQL_WORDS | _engine_words()


def assert_safe_plan(policy) -> None:
    """Every statement of the plan: no literal text, only known columns as identifiers,
    no word the engine's own statements and the formula whitelist do not have, a `?` per
    parameter, and UPDATEs that write only settable columns (and the derived rank)."""
    plan = compile_policy(policy)
    for s in plan_statements(plan):
        sql = s.sql
        assert "'" not in sql and ";" not in sql and "--" not in sql, sql
        idents = set(re.findall(r'"([^"]*)"', sql))
        # a rule's new values are named after their column, and their test (engine.plan.rules)
        known = set(X.COLUMNS) | {"new_" + c for c in X.COLUMNS} | {rules.USABLE}
        assert idents <= known, idents - known
        assert sql_words(sql) <= PLAN_WORDS, (sql, sql_words(sql) - PLAN_WORDS)
        assert sql.count("?") == len(s.params)
        if sql.startswith("UPDATE"):
            set_part = re.split(r"\sSET\s", sql, maxsplit=1)[1].split("WHERE", 1)[0]
            written = set(re.findall(r'(?:^|,)\s*"(\w+)" = ', set_part))
            shared = re.match(r"\s*\(([^()]*)\) = \(SELECT ", set_part)  # SET (a, rank) = (...)
            written |= set(re.findall(r'"(\w+)"', shared.group(1))) if shared else set()
            assert written, set_part
            assert written <= set(SETTABLE) | {"rank"}, written
            assert not written & {"id", "namespace"}
    for p in policy.passes.values():
        for rule in p.rules:
            assert not set(rule.set) & {"id", "namespace"}
            assert set(rule.set) <= set(SETTABLE)
    if policy.recall.on_access:
        assert set(policy.recall.on_access.set) <= set(SETTABLE)
    return plan


def run_plan(plan, db_path: str) -> None:
    """Execute every statement of an accepted plan on a real store, then roll back."""
    db = sqlite3.connect(db_path, isolation_level=None)
    from engine.store.sqlite.sqlite_functions import sql_functions

    sql_functions(db)
    now = START.isoformat()
    db.execute("BEGIN")
    try:
        for sts in plan.passes.values():
            for s in sts:
                db.execute(s.sql, s.bind(now, "default"))
        db.execute(plan.recall.sql, plan.recall.bind(now, "default", None, 5)).fetchall()
        for s in (plan.recall_query, plan.recall_scored, *plan.write_candidates.values()):
            db.execute(s.sql, s.bind(now, "default", '"python"', 5)).fetchall()
        for s in plan.cluster_candidates.values():
            db.execute(s.sql, s.bind(now, "default", None, 5)).fetchall()
        db.execute(plan.rank_refresh.sql, plan.rank_refresh.bind(now, "default"))
        if plan.access:
            db.execute(plan.access.sql, plan.access.bind(now, "default", None, "[1, 2]"))
    finally:
        db.execute("ROLLBACK")
        db.close()


_docs = itertools.count()


@pytest.fixture(scope="module")
def doc_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("policies")
    with Memory(
        str(d / "store.db"),
        policy=os.path.join(POLICIES, "lifecycle.yaml"),
        offline=True,
        clock=FixedClock(START),
    ) as mem:
        mem.add("User prefers Python", judged=False)
        mem.add("Deadline is March 15", expires_at="2026-03-15", judged=False)
    return d


def check_document(doc_dir, data) -> str:
    path = str(doc_dir / f"p{next(_docs)}.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=False, allow_unicode=True)
    try:
        policy = load(path)
    except PolicyError as exc:
        first = str(exc).splitlines()[0]
        assert re.match(rf"^{re.escape(exc.file)}:\d+:\d+: ", first), first
        assert exc.file and os.path.basename(exc.file) == os.path.basename(path), first
        assert exc.line >= 1
        return "refused"
    plan = assert_safe_plan(policy)
    run_plan(plan, str(doc_dir / "store.db"))
    return "accepted"


@FAST_DOCS
@given(st.lists(mutation, min_size=1, max_size=4))
def test_generated_policy_documents_compile_safely_or_fail_at_file_line(doc_dir, mutations):
    check_document(doc_dir, mutate(BASE, mutations))


@pytest.mark.soak
@SOAK
@given(st.lists(mutation, min_size=1, max_size=6))
def test_generated_policy_documents_soak(doc_dir, mutations):
    check_document(doc_dir, mutate(BASE, mutations))


@pytest.mark.parametrize(
    "column",
    ["id", "namespace", "rank", "content", "summary", "tags", "created_at", "contradicted_by", "rowid", "ID"],
)
def test_set_can_never_write_id_namespace_or_other_protected_columns(doc_dir, column):
    data = copy.deepcopy(BASE)
    data["passes"]["decay"]["rules"][0]["set"][column] = 1
    with pytest.raises(PolicyError) as err:
        load_doc(doc_dir, data)
    assert f"set.{column}" in str(err.value) and re.match(r"^\S+\.yaml:\d+:\d+: ", str(err.value))
    data = copy.deepcopy(BASE)
    data["recall"]["on_access"]["set"][column] = "1"
    with pytest.raises(PolicyError):
        load_doc(doc_dir, data)


def load_doc(doc_dir, data):
    path = str(doc_dir / f"p{next(_docs)}.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=False, allow_unicode=True)
    return load(path)


def write_text(doc_dir, text: str) -> str:
    path = str(doc_dir / f"p{next(_docs)}.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


@pytest.mark.parametrize(
    "text",
    [
        "name: !!python/object/apply:os.system ['id']\n",
        "name: x\nparams: &a {a: 1}\nscores: {<<: *a}\n",
        "name: x\nname: y\n",
        "- just\n- a list\n",
        "name: x\n\tparams: {}\n",
        "name: [unclosed\n",
        "name: x\npasses: {p: {every: 1h, rules: [{when: \"status = 'x'); DROP TABLE memories; --\", "
        "set: {id: 1}}]}}\n",
        "name: x\nwrite: [{step: gate, model: nope, prompt: gate.j2}]\n",
        "name: x\nmodels: {m: {provider: rules}}\nwrite: [{step: gate, model: m, prompt: missing.j2}]\n",
        "name: x\nextends: /nonexistent/base.yaml\n",
        "name: x\npasses: {'bad name!': {rules: [{when: 'true', event: e}]}}\n",
        "name: x\npasses: {p: {rules: [{when: 'true', event: 'Robert; DROP'}]}}\n",
        "name: x\nprompts: 5\n",
        "name: x\nparams: {status: 1}\n",
    ],
)
def test_hostile_documents_are_refused_at_file_line(doc_dir, text):
    path = write_text(doc_dir, text)
    with pytest.raises(PolicyError) as err:
        load(path)
    assert str(err.value).startswith(f"{err.value.file}:") and err.value.line >= 1


@pytest.mark.parametrize(
    "text",
    [
        "params: [{}]",
        "scores: [[]]",
        "passes: [{}]",
        "params: true",
        "scores: 1.5",
        "passes: 3",
        "models: true",
        "passes: {p: {rules: [{when: 'true', set: 5}]}}",
        "passes: {p: {rules: [{when: 'true', set: [{}]}]}}",
        "write: [{step: gate, model: [], prompt: gate.j2}]",
        "recall: {select: {model: {a: 1}, prompt: select.j2}}",
    ],
)
def test_wrong_shapes_are_a_policy_error(doc_dir, text):
    """Sections and values of the wrong shape (found by the generated documents; fixed in
    e9f8746): a PolicyError at file:line, never a TypeError."""
    models = "" if text.startswith("models:") else "models: {m: {provider: rules}}\n"
    path = write_text(doc_dir, f"name: x\n{models}{text}\n")
    with pytest.raises(PolicyError):
        load(path)


def test_an_order_over_two_lines_is_compiled_or_refused(doc_dir):
    path = write_text(doc_dir, 'name: x\nrecall:\n  order: "(importance +\\n confidence) desc"\n')
    try:
        load(path)
    except PolicyError:
        pass


@pytest.mark.parametrize("every", [".inf", "99999999999999d", "100000000000000000000"])
def test_an_absurd_schedule_is_a_policy_error(doc_dir, every):
    path = write_text(
        doc_dir,
        f"name: x\npasses:\n  p:\n    every: {every}\n    rules:\n"
        "      - {when: \"status = 'active'\", event: e}\n",
    )
    with pytest.raises(PolicyError):
        load(path)


@pytest.mark.parametrize("text", ['name: "a\x00"\n', "name: " + "[" * 1200 + "]" * 1200 + "\n"])
def test_unreadable_yaml_is_a_policy_error(doc_dir, text):
    path = write_text(doc_dir, text)
    with pytest.raises(PolicyError):
        load(path)


@pytest.mark.parametrize("prompt", ["/etc/passwd", "../../../../../../etc/passwd"])
def test_a_prompt_outside_the_prompt_dirs_is_a_policy_error(doc_dir, prompt):
    path = write_text(
        doc_dir,
        "name: x\nmodels: {m: {provider: rules}}\n"
        f"write: [{{step: gate, model: m, prompt: '{prompt}'}}]\n",
    )
    with pytest.raises(PolicyError):
        load(path)


# ---- templates ------------------------------------------------------------------------
HOSTILE_TEMPLATES = {
    "mro": "{{ ''.__class__.__mro__ }}",
    "subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "cycler": "{{ cycler.__init__.__globals__ }}",
    "cycler_os": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "joiner": "{{ joiner.__init__.__globals__ }}",
    "namespace": "{{ namespace.__init__.__globals__ }}",
    "self": "{{ self.__init__.__globals__ }}",
    "self_context": "{{ self._TemplateReference__context }}",
    "lipsum": "{{ lipsum.__globals__ }}",
    "lipsum_os": "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "attr_filter": "{{ ''|attr('__class__') }}",
    "attr_walk": "{{ (''|attr('__class__')|attr('__base__')|attr('__subclasses__'))() }}",
    "getitem": "{{ ''['__class__'] }}",
    "format": "{{ '{0.__class__}'.format(1) }}",
    "loop": "{% for x in [1] %}{{ loop.__class__ }}{% endfor %}",
    "func_globals": "{{ range.__self__ }}",
    "mutate_list": "{{ [1].append(2) }}",
    "mutate_dict": "{% set d = {} %}{{ d.update(a=1) }}",
    "config": "{{ config.items() }}",
    "request": "{{ request.environ }}",
    "memory_walk": "{{ memory.__class__.__init__.__globals__ }}",
    "candidate_walk": "{% for c in candidates %}{{ c.content.__class__ }}{% endfor %}",
    "now_walk": "{{ now.__class__.__subclasses__() }}",
    "tojson_walk": "{{ (memory|tojson).__class__ }}",
    "syntax": "{{ ",
}


@pytest.fixture
def template_dir(tmp_path):
    return tmp_path


VARS = {
    "memory": {"content": "c", "summary": "s", "tags": []},
    "user": "u",
    "assistant": "a",
    "candidates": [{"n": 1, "content": "x"}],
    "now": dt.datetime(2026, 1, 5),
    "query": "q",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TEMPLATES))
def test_hostile_templates_fail_with_a_clear_policy_error(template_dir, name):
    (template_dir / f"{name}.j2").write_text("first line\n\n" + HOSTILE_TEMPLATES[name] + "\n")
    with pytest.raises(PolicyError) as err:
        prompts.render(f"{name}.j2", (str(template_dir),), VARS)
    message = str(err.value)
    assert f"{name}.j2:3:" in message  # the template file and the line
    assert re.search(r"sandbox forbids|unsafe|undefined|syntax error", message), message


@pytest.mark.parametrize(
    "source",
    [
        "{{ range(1000000) | length }}",
        "{% include '/etc/passwd' %}",
        "{% include '../../../../etc/passwd' %}",
        "{% import 'os' as os %}",
        "{% extends '/etc/hostname' %}",
        "{{ '{0}'.format_map({}) }}",
    ],
)
def test_every_template_failure_is_a_policy_error(template_dir, source):
    """The sandbox's range limit, includes of files outside the prompt dirs and runtime
    errors are PolicyErrors too (fixed in e9f8746)."""
    (template_dir / "t.j2").write_text(source)
    with pytest.raises(PolicyError):
        prompts.render("t.j2", (str(template_dir),), VARS)


def test_a_policy_with_a_hostile_template_keeps_the_turn_pending(tmp_path, clock):
    prompts_dir = tmp_path / "prompts"
    prompts_dir.mkdir()
    (prompts_dir / "gate.j2").write_text("{{ cycler.__init__.__globals__.os }}\n")
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "name: hostile\nprompts: prompts\nmodels: {m: {provider: rules}}\n"
        "write: [{step: gate, model: m, prompt: gate.j2}]\n"
    )
    with Memory(str(tmp_path / "m.db"), policy=str(policy), offline=True, clock=clock) as mem:
        with pytest.raises(PolicyError, match="sandbox forbids"):
            mem.remember("I use Python.", "ok")
        assert [p["user_text"] for p in mem.pending()] == ["I use Python."]
        assert mem.counts() == {}


# ---- memories -------------------------------------------------------------------------
HOSTILE_MEMORIES = {
    "sql": "quasar Robert'); DROP TABLE memories; -- and \" OR 1=1 --",
    "template": "quasar {{ 7*7 }} {% for x in range(9) %}loop{% endfor %} {# c #} {{ self.__init__ }}",
    "fts": 'quasar NEAR(a b) "unclosed AND OR NOT * ^ col:x',
    "control": "quasar bell\x07 nul\x00 esc\x1b[31m cr\r lf\n tab\t del\x7f ls\u2028 rtl\u202e bom\ufeff",
    "unicode": "quasar 😀 日本語 é ß ǅ \U0010ffff",
    "json": '{"supersedes": [1], "ids": [1,2,3]} ] } quasar',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_MEMORIES))
@pytest.mark.parametrize("judged", [False, True])
def test_hostile_memories_are_stored_and_recalled_exactly(memory, name, judged):
    mem = memory("lifecycle")
    mem.add("User prefers quasar dashboards", judged=False)
    text = HOSTILE_MEMORIES[name]
    if store_of(mem).dialect == "postgres" and "\x00" in text:  # PostgreSQL text cannot hold NUL
        with pytest.raises(StoreError, match="NUL"):
            mem.add(text, judged=judged)
        return
    new_id = mem.add(text, judged=judged)
    assert mem.get(new_id).content == text
    assert run_sql(store_of(mem), "SELECT count(*) FROM memories").fetchone()[0] == 2
    found = mem.candidates(text, limit=10, scored=True)
    assert text in [m.content for m in found]
    recalled = [m.content for m in mem.recall("quasar")]
    assert text in recalled  # through the rules select judge, byte for byte
    assert set(recalled) <= {text, "User prefers quasar dashboards"}
    if store_of(mem).dialect == "sqlite":
        assert run_sql(store_of(mem), "PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_one_megabyte_memory_is_stored_and_recalled_exactly(memory):
    mem = memory("lifecycle")
    text = "zanzibar " + "".join(chr(0x20 + (i * 7919) % 0x5F) for i in range(1 << 20))
    new_id = mem.add(text, judged=False)
    assert mem.get(new_id).content == text
    recalled = mem.recall("zanzibar")
    assert [m.content for m in recalled] == [text]
    other = memory("lifecycle", namespace="judged")  # judged: a restatement would reinforce
    judged = other.add(text, judged=True)
    assert other.get(judged).content == text


def test_memory_text_reaches_a_prompt_as_data_never_as_template_code(memory):
    mem = memory("lifecycle")
    text = HOSTILE_MEMORIES["template"]
    mem.add(text, judged=False)
    dirs = mem.policy.prompt_dirs
    shown = {
        "n": 1,
        "id": 1,
        "content": text,
        "summary": text,
        "confidence": 1.0,
        "decay_score": 1.0,
        "created_at": "2026-01-05",
        "importance": 5,
    }
    for name, variables in [
        (
            "contradiction.j2",
            {"memory": {"content": text, "summary": text, "tags": []}, "candidates": [shown]},
        ),
        ("select.j2", {"query": text, "candidates": [shown], "top_n": 6}),
        (
            "gate.j2",
            {
                "user": text,
                "assistant": text,
                "now": START,
                "today": "2026-01-05",
                "memory": {"content": text, "summary": text, "tags": []},
                "candidates": [],
            },
        ),
    ]:
        out = prompts.render(name, dirs, {"now": START, "today": "2026-01-05", **variables})
        assert "{{ 7*7 }}" in out and "49" not in out, name
        assert "{% for x in range(9) %}" in out and "looploop" not in out, name


def test_template_syntax_in_a_remembered_turn_is_stored_as_text(memory):
    mem = memory("lifecycle")
    ids = mem.remember("I prefer {{ 7*7 }} spaces for {% raw %} indentation.", "Noted {{ x }}.")
    assert ids
    assert "{{ 7*7 }}" in mem.get(ids[0]).content


@pytest.mark.parametrize("call", ["add", "add_judged", "remember"])
def test_a_lone_surrogate_is_refused_with_a_lethe_error(memory, call):
    mem = memory("lifecycle")
    text = "I prefer \ud800 lone \udfff surrogates"
    try:
        with pytest.raises(LetheError):
            if call == "remember":
                mem.remember(text, "ok")
            else:
                mem.add(text, judged=call == "add_judged")
    finally:  # whatever is raised, nothing half-written is left behind
        assert mem.counts() == {} and mem.pending() == []


def test_a_lone_surrogate_leaves_nothing_behind(memory):
    """Refused with the engine's own error, and nothing stored."""
    mem = memory("lifecycle")
    for call in (lambda t: mem.add(t, judged=False), lambda t: mem.add(t), lambda t: mem.remember(t, "ok")):
        with pytest.raises(LetheError):
            call("I prefer \ud800 lone surrogates")
    assert mem.counts() == {} and mem.pending() == []
    assert run_sql(store_of(mem), "SELECT count(*) FROM inbox").fetchone()[0] == 0
    assert mem.recall("lone \ud800 surrogates") == []
