"""How the policy schema (engine.policy.schema) describes a policy: a `Section` is a
mapping in a policy file, a `Key` one of its keys, with the kind of value it takes, its
default and what it does."""

from __future__ import annotations

from dataclasses import dataclass, field

# value kinds: how a value is read. Simple ones (TEXT, NUMBER, WHOLE, CHOICE) are checked
# from this table; the others by the builder, which knows what a formula or template is.
TEXT, NUMBER, WHOLE, CHOICE = "text", "number", "whole number", "one of"
CONDITION, NUM_FORMULA, ORDER = "condition", "number formula", "order"
DURATION, MAPPING, LIST, MODEL, TEMPLATE = "duration", "mapping", "list", "model name", "template"
VALUE = "number or text"

REQUIRED = object()  # the default of a key that must be given


@dataclass(frozen=True)
class Key:
    """One key of a section: its name, what its value is, its default, what it does."""

    name: str
    kind: str
    default: object = None
    doc: str = ""
    choices: tuple = ()
    minimum: int | None = None
    section: str | None = None  # a nested section this key holds (its value's keys)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def type_text(self) -> str:
        if self.kind == CHOICE and self.choices == (False, True):
            return "`true` or `false`"
        if self.kind == CHOICE:
            return "one of " + ", ".join(f"`{c}`" for c in self.choices)
        if self.kind == WHOLE and self.minimum is not None:
            return f"whole number >= {self.minimum}"
        return self.kind


@dataclass(frozen=True)
class Section:
    """A mapping in a policy; `of_names` when its keys are the author's own names."""

    name: str
    title: str
    doc: str
    keys: tuple[Key, ...] = ()
    of_names: str | None = None  # what each author-named entry is (a section name)
    extends: tuple["Section", ...] = field(default=())  # sections whose keys it also takes

    def all_keys(self) -> tuple[Key, ...]:
        inherited = tuple(k for s in self.extends for k in s.all_keys())
        return tuple({k.name: k for k in (*inherited, *self.keys)}.values())

    def allowed(self) -> set[str]:
        return {k.name for k in self.all_keys()}

    def key(self, name: str) -> Key:
        return next(k for k in self.all_keys() if k.name == name)

    def default(self, name: str):
        return self.key(name).default
