"""Formula text -> IR (engine.policy.expr): a whitelisted, Python-like expression parsed
with `ast`, its names resolved and its types checked.

Names resolve, in order, to memory columns, time words, policy params (bound values),
named scores (inlined formulas) and, where allowed, `relevance` and `similarity`.
SQL-ish spellings are accepted for policy authors: `=` for `==`, `<>` for `!=`,
`AND/OR/NOT`, `null`, `true`, `false`.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from typing import NoReturn

from engine.base.errors import FormulaError
from engine.base.inputs import INT64
from engine.policy.expr import (
    AGGREGATES,
    BOOL,
    COLUMNS,
    CONSTANT_NAMES,
    NULL,
    NUM,
    SCALAR_FUNCS,
    TEXT,
    TIME,
    TIME_WORDS,
    Agg,
    BinOp,
    BoolOp,
    Cmp,
    Col,
    Const,
    Func,
    In,
    IsNull,
    Neg,
    Node,
    Not,
    Relevance,
    Scope,
    Similarity,
    TimeWord,
)


def normalise(text: str) -> str:
    """Accept SQL-ish spellings: `=` -> `==`, `AND/OR/NOT` -> lowercase, `<>` -> `!=`.

    Spacing is kept, so columns and quoted snippets match the text as written."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    pos = lambda rc: starts[rc[0] - 1] + rc[1]  # noqa: E731
    out, last, prev = [], 0, None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
                continue
            a, b, s = pos(tok.start), pos(tok.end), tok.string
            if tok.type == tokenize.OP and s == "=":
                s = "=="
            elif (
                tok.type == tokenize.OP
                and s == ">"
                and prev is not None
                and prev.string == "<"
                and prev.end == tok.start
            ):
                out[-1], s = "!", "="
            elif tok.type == tokenize.NAME and s in ("AND", "OR", "NOT", "IN", "IS"):
                s = s.lower()
            out.append(text[last:a])
            out.append(s)
            last, prev = b, tok
        out.append(text[last:])
        return "".join(out).strip()
    except tokenize.TokenError as exc:
        raise FormulaError(f"cannot parse {text!r}: {_unclosed(text) or exc.args[0]}") from None
    except (IndentationError, SyntaxError) as exc:
        raise FormulaError(f"cannot parse {text!r}: {exc}") from None


_CLOSING = {"(": ")", "[": "]", "{": "}"}


def _unclosed(text: str) -> str | None:
    """Which bracket is never closed, said plainly (tokenize only says 'EOF in multi-line')."""
    stack, quote = [], None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _CLOSING:
            stack.append((ch, i))
        elif ch in _CLOSING.values() and stack and _CLOSING[stack[-1][0]] == ch:
            stack.pop()
    if quote:
        return f"a quote {quote} is never closed"
    if not stack:
        return None
    ch, at = stack[-1]
    return f"unclosed '{ch}' at character {at + 1} ('{text[at : at + 20]}'): add '{_CLOSING[ch]}'"


class FormulaTooLarge(FormulaError):
    """A formula past MAX_NODES parts once the scores it reads are written out in it."""


def compile_formula(text: object, scope: Scope, _stack: tuple = (), _parts: list | None = None) -> Node:
    """Parse and type-check a formula (text or a bare number/bool) into IR. Each score it
    reads is written out in it, and so on down: past MAX_NODES parts it is refused
    (FormulaTooLarge), as soon as the count passes it (scores that each read the one before
    twice would otherwise double at each level, and never finish compiling)."""
    if isinstance(text, bool) or text is None:
        return Const(BOOL if isinstance(text, bool) else NULL, text)
    if isinstance(text, (int, float)):
        return Const(NUM, text)
    if not isinstance(text, str) or not text.strip():
        raise FormulaError(f"a formula must be text or a number, got {text!r}")
    if len(text) > MAX_FORMULA:
        raise FormulaError(f"a formula is at most {MAX_FORMULA} characters, this one has {len(text)}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FormulaError(f"a formula must be valid text (no lone surrogates): {text!r}") from None
    try:
        tree = ast.parse(normalise(text), mode="eval")
        return _Compiler(text, scope, _stack, [0] if _parts is None else _parts).visit(tree.body)
    except SyntaxError as exc:
        raise FormulaError(f"cannot parse {text!r}: {exc.msg}", (exc.offset or 1) - 1) from None
    except (RecursionError, MemoryError):
        raise FormulaError(f"formula too deeply nested: {text[:60]!r}...") from None


MAX_FORMULA = 4000
MAX_NODES = 10_000  # parts of a formula with its scores written out; a shipped one has < 100


def _bindable_number(value, compiler, node):
    """SQLite binds integers up to 64 bits; larger ones (or inf/nan) are mistakes."""
    if isinstance(value, int) and abs(value) > INT64:
        compiler.fail(node, "number too large for the database: '{snippet}'")
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        compiler.fail(node, "not a finite number: '{snippet}'")
    return value


class _Compiler:
    def __init__(self, text: str, scope: Scope, stack: tuple, parts: list):
        self.text, self.scope, self.stack = text, scope, stack
        self.parts = parts  # [count], shared with the compilers of the scores it reads

    def fail(self, node: ast.AST, message: str, param: str | None = None) -> NoReturn:
        snippet = ast.get_source_segment(normalise(self.text), node) or self.text
        raise FormulaError(message.format(snippet=snippet), getattr(node, "col_offset", 0), param)

    def visit(self, node: ast.AST) -> Node:
        self.parts[0] += 1
        if self.parts[0] > MAX_NODES:
            chain = " -> ".join(self.stack[:3]) + (" -> ..." if len(self.stack) > 3 else "")
            via = f" (through score {chain})" if self.stack else ""
            raise FormulaTooLarge(
                f"formula too large once the scores it reads are written out: "
                f"more than {MAX_NODES:,} parts{via}"
            )
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.fail(node, "not allowed in a formula: '{snippet}'")
        return method(node)

    def visit_Constant(self, node: ast.Constant) -> Node:
        v = node.value
        if isinstance(v, bool):
            return Const(BOOL, v)
        if isinstance(v, (int, float)):
            return Const(NUM, _bindable_number(v, self, node))
        if isinstance(v, str):
            return Const(TEXT, v)
        if v is None:
            return Const(NULL, None)
        self.fail(node, "not allowed in a formula: '{snippet}'")

    def visit_Name(self, node: ast.Name) -> Node:
        name, s = node.id, self.scope
        if name in CONSTANT_NAMES:
            v = CONSTANT_NAMES[name]
            return Const(NULL if v is None else BOOL, v)
        if name in COLUMNS:
            return Col(COLUMNS[name], name)
        if name in TIME_WORDS:
            if not s.allow_time:
                self.fail(node, "time word '{snippet}' is not allowed here (the value is stored)")
            return TimeWord(TIME_WORDS[name], name)
        if name == "relevance":
            if not s.allow_relevance:
                self.fail(node, "'relevance' is only known in recall, where there is a query")
            return Relevance(NUM)
        if name == "similarity":
            if not s.allow_similarity:
                self.fail(
                    node,
                    "'similarity' needs an embedding model (declare `embed:` in the "
                    "policy) and is only known in candidate and recall where/order",
                )
            return Similarity(NUM)
        if name in s.params:
            if s.used is not None:
                s.used.add(name)
            value = s.params[name]
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                self.fail(node, "param '{snippet}' must be a number or text")
            if isinstance(value, str):
                return Const(TEXT, value, name)
            return Const(NUM, _bindable_number(value, self, node), name)
        if name in s.scores:
            if name in self.stack:
                cycle = " -> ".join(self.stack + (name,))
                self.fail(node, f"score '{name}' refers to itself: {cycle}")
            try:
                return compile_formula(s.scores[name], s, self.stack + (name,), self.parts)
            except FormulaTooLarge:
                raise  # said once, where the count passed the bound
            except FormulaError as exc:
                raise FormulaError(f"in score '{name}': {exc}", node.col_offset) from None
        close = difflib.get_close_matches(name, sorted(s.names()), n=1, cutoff=0.7)
        self.fail(node, "unknown name '{snippet}'" + (f" (did you mean '{close[0]}'?)" if close else ""))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Node:
        arg = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(BOOL, self.boolean(node.operand, arg))
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            self.number(node.operand, arg)
            if isinstance(node.op, ast.UAdd):
                return arg
            if isinstance(arg, Const) and arg.value is None:
                return Const(NULL, None)
            if isinstance(arg, Const) and isinstance(arg.value, (int, float)):  # checked above
                return Const(NUM, -arg.value)
            return Neg(NUM, arg)
        self.fail(node, "operator not allowed: '{snippet}'")

    _BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}

    def visit_BinOp(self, node: ast.BinOp) -> Node:
        op = self._BIN.get(type(node.op))
        if op is None:
            self.fail(node, "operator not allowed (use + - * /): '{snippet}'")
        left, right = self.visit(node.left), self.visit(node.right)
        self.number(node.left, left)
        self.number(node.right, right)
        if op in ("/", "%") and isinstance(right, Const) and right.value == 0:
            # SQL gives NULL for every row: a pass would skip them all, recall would rank none
            named = f" ({right.param} is 0)" if right.param else ""
            self.fail(node, f"division by zero{named}: '{{snippet}}'", right.param)
        return BinOp(NUM, op, left, right)

    def visit_BoolOp(self, node: ast.BoolOp) -> Node:
        op = "and" if isinstance(node.op, ast.And) else "or"
        items = tuple(self.boolean(v, self.visit(v)) for v in node.values)
        return BoolOp(BOOL, op, items)

    _CMP = {ast.Eq: "=", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

    def visit_Compare(self, node: ast.Compare) -> Node:
        parts, left_ast = [], node.left
        left = self.visit(left_ast)
        for i, (op, right_ast) in enumerate(zip(node.ops, node.comparators)):
            parts.append(self.compare(node, op, left, right_ast))
            if i + 1 < len(node.ops):  # a chain: the right side is the next left side
                left, left_ast = self.visit(right_ast), right_ast
        return parts[0] if len(parts) == 1 else BoolOp(BOOL, "and", tuple(parts))

    def compare(self, node, op, left: Node, right_ast: ast.AST) -> Node:
        if isinstance(op, (ast.Is, ast.IsNot)):
            right = self.visit(right_ast)
            if not (isinstance(right, Const) and right.value is None):
                self.fail(node, "'is' only compares with null: '{snippet}'")
            return IsNull(BOOL, left, isinstance(op, ast.IsNot))
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(right_ast, (ast.List, ast.Tuple, ast.Set)) or not right_ast.elts:
                self.fail(node, "'in' needs a list of values: '{snippet}'")
            values = tuple(self.visit(e) for e in right_ast.elts)
            for v in values:
                self.comparable(node, left, v)
            return In(BOOL, left, values, isinstance(op, ast.NotIn))
        sql_op = self._CMP.get(type(op))
        if sql_op is None:
            self.fail(node, "comparison not allowed: '{snippet}'")
        right = self.visit(right_ast)
        if isinstance(right, Const) and right.value is None and sql_op in ("=", "!="):
            return IsNull(BOOL, left, sql_op == "!=")
        self.comparable(node, left, right)
        return Cmp(BOOL, sql_op, left, right)

    def visit_Call(self, node: ast.Call) -> Node:
        if not isinstance(node.func, ast.Name) or node.keywords:
            self.fail(node, "only plain function calls are allowed: '{snippet}'")
        name, n = node.func.id, len(node.args)
        if self.scope.allow_aggregates and name in AGGREGATES and n == 1:
            if getattr(self, "in_aggregate", False):
                self.fail(node, "an aggregate inside an aggregate is not allowed: '{snippet}'")
            self.in_aggregate = True
            try:
                arg = self.visit(node.args[0])
            finally:
                self.in_aggregate = False
            self.number(node.args[0], arg)
            return Agg(NUM, name, arg)
        if name not in SCALAR_FUNCS:
            hint = " (aggregates are only allowed in merge results)" if name in AGGREGATES else ""
            known = sorted(SCALAR_FUNCS) + (sorted(AGGREGATES) if self.scope.allow_aggregates else [])
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
            hint = hint or (f" (did you mean '{close[0]}'?)" if close else "")
            self.fail(node, f"unknown function '{name}'{hint}: '{{snippet}}'")
        lo, hi = SCALAR_FUNCS[name]
        if not lo <= n <= hi:
            self.fail(node, f"{name}() takes {lo if lo == hi else f'{lo} to {hi}'} arguments: '{{snippet}}'")
        args = tuple(self.visit(a) for a in node.args)
        if name == "coalesce":
            return Func(args[0].type if args[0].type != NULL else args[-1].type, name, args)
        for a_ast, a in zip(node.args, args):
            self.number(a_ast, a)
        return Func(NUM, name, args)

    # -- type checks: few, but they catch the mistakes policy authors make
    def number(self, node: ast.AST, value: Node) -> Node:
        if value.type not in (NUM, NULL):
            self.fail(
                node, f"'{{snippet}}' is {value.type}, a number is needed here", getattr(value, "param", None)
            )
        return value

    def boolean(self, node: ast.AST, value: Node) -> Node:
        if value.type != BOOL:
            self.fail(node, f"'{{snippet}}' is {value.type}, a condition is needed here")
        return value

    def comparable(self, node: ast.AST, left: Node, right: Node) -> None:
        a, b = left.type, right.type
        ok = a == b or NULL in (a, b) or {a, b} == {TIME, TEXT}
        if not ok:
            param = next((p for v in (right, left) if (p := getattr(v, "param", None))), None)
            self.fail(node, f"cannot compare {a} with {b}: '{{snippet}}'", param)
