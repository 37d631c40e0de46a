"""The `passes:` section of a policy and its rules (with recall's `on_access`, a rule
too): turned into `Pass` and `Rule`, checking every name, column, status and event, and
compiling every formula against the policy's scope. A compression pass's cluster and
merge are judgments (engine.policy.build_judgments)."""

from __future__ import annotations

import re

from engine.base.clock import parse_duration
from engine.policy import expr as X
from engine.policy.build_judgments import JudgmentBuilder
from engine.policy.types import SETTABLE, STATUSES, Pass, Rule


class PassBuilder(JudgmentBuilder):
    """Passes and their rules."""

    def passes(self) -> dict:
        passes = self.mapping(self.d.get("passes"), ("passes",))
        out = {}
        for name, spec in passes.items():
            built = self.collect(self.one_pass, name, spec)
            if built is not None:
                out[name] = built
        return out

    def one_pass(self, name, spec) -> Pass:
        p = ("passes", name)
        self.check_pass_name(name, p)
        spec = self.keys(spec, p, "pass")
        every = None
        if spec.get("every") is not None:
            try:
                every = parse_duration(spec["every"])
            except (ValueError, OverflowError) as exc:
                self.note(p + ("every",), str(exc))
        ps = Pass(name, every, batch=spec.get("batch"), atomic=spec.get("atomic") is True)
        if ps.atomic and ps.batch:
            self.fail(p + ("atomic",), "a pass with `batch:` commits every range: it cannot be atomic too")
        rules = spec.get("rules") or []
        ps.rules = [
            r
            for r in (self.collect(self.rule, r, p + ("rules", i)) for i, r in enumerate(rules))
            if r is not None
        ]
        if ("cluster" in spec) != ("merge" in spec):
            self.fail(p, "a compression pass needs both 'cluster' and 'merge'")
        if "cluster" in spec:
            ps.cluster = self.collect(self.judgment, spec["cluster"], p + ("cluster",))
            ps.merge = self.collect(self.judgment, spec["merge"], p + ("merge",), "merge")
            result = spec["merge"].get("result") if isinstance(spec["merge"], dict) else None
            ps.merge_result = self.collect(
                self.merge_result, result or {}, p + ("merge", "result"), fallback={}
            )
        if not rules and "cluster" not in spec:
            self.fail(p, "a pass needs rules, or cluster and merge")
        return ps

    def check_pass_name(self, name, path):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            self.fail(path, f"'{name}' is not a valid pass name", of_key=True)

    def rule(self, spec, path, need_when=True) -> Rule:
        spec = dict(spec) if isinstance(spec, dict) else spec
        if isinstance(spec, dict) and not need_when:
            spec.setdefault("when", None)  # on_access: the recalled memories
        spec = self.keys(spec, path, "rule")
        when = (
            self.collect(self.formula, spec["when"], path + ("when",), self.scope(), X.BOOL)
            if spec.get("when") is not None
            else None
        )
        sets = self.collect(self.mapping, spec.get("set"), path + ("set",), fallback={})
        compiled = {c: self.collect(self.set_value, c, v, path + ("set", c)) for c, v in sets.items()}
        event = spec.get("event")
        if event is not None and not (isinstance(event, str) and re.fullmatch(r"[a-z_][a-z0-9_-]*", event)):
            self.note(path + ("event",), f"event must be a short lowercase word, got {event!r}")
        if not compiled and not event:
            self.fail(path, "a rule needs 'set' or 'event'")
        return Rule(when, compiled, event, {k: v for k, v in spec.items() if v is not None})

    def set_value(self, col, value, path) -> X.Node:
        if col not in SETTABLE:
            why = "cannot be set by a policy" if col in X.COLUMNS else "unknown column"
            self.fail(path, f"'{col}' {why}; settable: {', '.join(SETTABLE)}", of_key=True)
        kind = SETTABLE[col]
        if kind == "status":
            if value not in STATUSES:
                self.fail(path, f"status must be one of {', '.join(STATUSES)}, got {value!r}")
            return X.Const(X.TEXT, value)
        if kind == X.TEXT:
            if value is not None and not isinstance(value, str):
                self.fail(path, f"must be text, got {value!r}")
            return X.Const(X.TEXT if value is not None else X.NULL, value)
        return self.formula(value, path, self.scope(), kind)

    def merge_result(self, spec, path) -> dict:
        spec = self.keys(spec, path, "merge result")
        scope = self.scope(allow_aggregates=True, allow_time=False)
        found = {c: self.collect(self.formula, v, path + (c,), scope, X.NUM) for c, v in spec.items()}
        return {c: node for c, node in found.items() if node is not None}
