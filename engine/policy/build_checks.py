"""What every part of the policy builder checks with: a mapping against its section's
schema (unknown and missing keys, simple types, choices, defaults), a value's type, a
formula compiled in the policy's scope. Each mistake is an error at file:line:col; an
independent check's mistake is collected (`collect`), so one `build()` reports them all."""

from __future__ import annotations

import difflib
import os
from typing import NoReturn

from engine.base.errors import FormulaError, PolicyError
from engine.policy import expr as X
from engine.policy import schema as S
from engine.policy import schema_keys as K
from engine.policy import yamldoc
from engine.policy.formula_compiler import compile_formula
from engine.policy.types import Policy

_SIMPLE = {
    K.TEXT: ((str,), "text"),
    K.MODEL: ((str,), "a model name"),
    K.TEMPLATE: ((str,), "a template file name"),
    K.NUMBER: ((int, float), "a number"),
    K.VALUE: ((int, float, str), "a number or text"),
}


class Checks:
    """The document being built, the mistakes found so far, and the checks every part of
    the builder uses (engine.policy.build.Builder is the whole builder)."""

    policy: Policy  # what is built so far: set by Builder.build before its sections
    used: set[str]  # params some formula reads (filled as formulas compile)

    def __init__(self, doc: yamldoc.Doc, templates: bool = True):
        if not isinstance(doc.data, dict):  # load() refuses any other document first
            raise doc.error((), "a policy must be a mapping of keys")
        self.doc = doc
        self.d: dict = doc.data
        self.errors: list[PolicyError] = []
        self.used = set()
        # False: each template is found now, and parsed by check_templates (Jinja is then
        # imported only by what renders one): see engine.policy.load
        self.templates = templates

    def fail(self, path, message, of_key=False) -> NoReturn:
        raise self.doc.error(path, message, of_key)

    def note(self, path, message, of_key=False) -> None:
        """A mistake that does not stop the check of the rest of the file."""
        self.errors.append(self.doc.error(path, message, of_key))

    def collect(self, fn, *args, fallback=None, **kw):
        """Run one independent check; a mistake is noted and `fallback` stands in for it."""
        try:
            return fn(*args, **kw)
        except PolicyError as exc:
            self.errors.append(exc)
            return fallback

    def keys(self, value, path, section: str) -> dict:
        """The mapping `value`, checked against its section's schema: each unknown key and
        each simple value of the wrong type is noted (the default stands in for it); a
        missing required key stops this mapping's check."""
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        sec = S.section(section)
        allowed = sec.allowed()
        for k in value:
            if k not in allowed:
                close = closest(k, allowed)
                hint = f" (did you mean '{close}'?)" if close else ""
                self.note(
                    path + (k,), f"unknown key '{k}'{hint}; known: {', '.join(sorted(allowed))}", of_key=True
                )
        out = {k: v for k, v in value.items() if k in allowed}
        for key in sec.all_keys():
            if key.name in out and not self.collect(
                self.simple, out[key.name], path + (key.name,), key, fallback=False
            ):
                out.pop(key.name)
        missing = [k.name for k in sec.all_keys() if k.required and k.name not in value]
        if missing:
            self.fail(path, f"missing required key '{missing[0]}'")
        return out

    def simple(self, value, path, key: K.Key) -> bool:
        """A value of a simple kind (text, number, whole number, choice); others pass."""
        if value is None and key.default is None:
            return True
        if key.kind in _SIMPLE:
            self.typed(value, path, *_SIMPLE[key.kind])
        elif key.kind == K.WHOLE:
            low = key.minimum or 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                self.fail(path, f"must be a whole number >= {low}, got {value!r}")
        elif key.kind == K.CHOICE and key.choices == (False, True):
            if not isinstance(value, bool):  # 1 == True: say it as YAML does
                self.fail(path, f"must be true or false, got {value!r}")
        elif key.kind == K.CHOICE and value not in key.choices:
            self.fail(path, f"unknown {key.name} {quoted(value)}; known: {', '.join(key.choices)}")
        elif key.kind == K.MAPPING and value is not None and not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        elif key.kind == K.LIST and value is not None and not isinstance(value, list):
            self.fail(path, f"{key.name} must be a list")
        return True

    def mapping(self, value, path) -> dict:
        """A section whose keys are the author's own names (params, models, passes...)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        return value

    def typed(self, value, path, kinds, what):
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            self.fail(path, f"must be {what}, got {value!r}")
        return value

    def formula(self, text, path, scope, want=None):
        try:
            node = compile_formula(text, scope)
        except FormulaError as exc:
            if exc.param and ("params", exc.param) in self.doc.values:
                # the mistake is the param's value: say so where it is written (perhaps a
                # file that extends the one holding this formula), and name the formula
                used = self.doc.mark(path)
                at = f", {os.path.basename(used.file)}:{used.line}" if used else ""
                self.fail(("params", exc.param), f"{exc} ({yamldoc.dotted(path)} reads it{at})")
            self.fail(path, str(exc))
        if want and node.type not in (want, X.NULL) and not (want == X.TIME and node.type == X.TEXT):
            label = {X.BOOL: "a condition", X.NUM: "a number", X.TIME: "a time"}[want]
            self.fail(path, f"must be {label}, but '{text}' is {node.type}")
        return node

    def scope(self, **kw) -> X.Scope:
        """The names formulas may use; params they read are noted in `self.used`."""
        return X.Scope(self.policy.params, self.policy.scores, used=self.used, **kw)


def quoted(value) -> str:
    return f"'{value}'" if isinstance(value, str) else repr(value)


def closest(word: str, options) -> str | None:
    found = difflib.get_close_matches(word, list(options), n=1, cutoff=0.7)
    return found[0] if found else None
