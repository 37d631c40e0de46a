"""Both stores satisfy the store's declared contract (engine/store/protocol.py): every
member of every protocol exists on `SqliteStore` and `PostgresStore`, and each method takes
the protocol's parameters (same names, kinds and defaults; more only with a default). The
`both_backends` tests are the other half: they check that the two behave alike."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from engine.store import PostgresStore, SqliteStore
from engine.store import protocol as P

STORES = [SqliteStore, PostgresStore]


def members(proto: type) -> dict[str, object]:
    """A protocol's own members: its methods, properties and annotated attributes."""
    out: dict[str, object] = {}
    for klass in reversed(proto.__mro__):
        if klass in (object, type) or klass.__name__ in ("Protocol", "Generic"):
            continue
        out.update({name: None for name in getattr(klass, "__annotations__", {})})
        out.update(
            {
                n: v
                for n, v in vars(klass).items()
                if not n.startswith("_") and (callable(v) or isinstance(v, property))
            }
        )
    return out


def problems(klass: type, proto: type) -> list[str]:
    """What `klass` lacks of `proto`, or takes differently."""
    found = []
    for name, wanted in members(proto).items():
        if not hasattr(klass, name):
            if name not in _instance_attributes(klass):
                found.append(f"{name}: missing")
            continue
        have = inspect.getattr_static(klass, name)
        if isinstance(wanted, property) or not callable(wanted):
            continue
        if isinstance(have, property) or not callable(have):
            found.append(f"{name}: not a method")
            continue
        found += [f"{name}: {p}" for p in _mismatches(inspect.signature(wanted), inspect.signature(have))]
    return found


def _instance_attributes(klass: type) -> set[str]:
    """Attributes an `__init__` of the class sets (`self.x = ...`, `self.x, self.y = ...`)."""
    names: set[str] = set()
    for k in klass.__mro__:
        init = vars(k).get("__init__")
        if init is None or not inspect.isfunction(init):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return names


def _mismatches(want: inspect.Signature, have: inspect.Signature) -> list[str]:
    wanted = [p for p in want.parameters.values() if p.name != "self"]
    given = {p.name: p for p in have.parameters.values() if p.name != "self"}
    order = [p.name for p in have.parameters.values() if p.name != "self"]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in given.values())
    varkw = any(p.kind is p.VAR_KEYWORD for p in given.values())
    out = []
    for i, p in enumerate(wanted):
        if p.kind is p.VAR_KEYWORD:
            if not varkw:
                out.append("takes no **binds")
            continue
        q = given.get(p.name)
        if q is None:
            if not (varargs and p.kind is p.POSITIONAL_OR_KEYWORD):
                out.append(f"no parameter {p.name!r}")
            continue
        if p.kind is p.POSITIONAL_OR_KEYWORD and order.index(p.name) != i:
            out.append(f"{p.name!r} at another place")
        if p.default is not p.empty and q.default != p.default:
            out.append(f"{p.name!r} defaults to {q.default!r}, not {p.default!r}")
    named = {p.name for p in wanted}
    for q in given.values():
        if q.name not in named and q.default is q.empty and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            out.append(f"needs {q.name!r}, which callers do not pass")
    return out


@pytest.mark.parametrize("proto", P.PROTOCOLS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("klass", STORES, ids=lambda k: k.__name__)
def test_both_stores_satisfy_the_protocol(klass, proto):
    assert problems(klass, proto) == []


def test_the_vector_index_is_sqlites():
    assert problems(SqliteStore, P.Vectors) == []
    assert problems(PostgresStore, P.Vectors) != []  # `open_store` refuses `embed:` on a DSN


def test_the_check_can_fail():
    """A class that lacks a member, or takes other parameters, is found out."""

    class Half:
        def events(self, memory_id, limit):  # a parameter no caller passes
            return []

        def counts(self, ns):  # another name
            return {}

        def get(self, memory_id: int, namespace: str | None = "x"):  # another default
            return None

    found = problems(Half, P.Memories)
    assert "events: needs 'limit', which callers do not pass" in found
    assert "counts: no parameter 'namespace'" in found
    assert "get: 'namespace' defaults to 'x', not None" in found
    assert "insert_memory: missing" in found


def test_the_store_protocol_is_every_concern():
    assert set(members(P.Store)) == set().union(*(members(p) for p in P.PROTOCOLS))


def test_both_leases_satisfy_the_protocol():
    from engine.store.postgres.postgres_lease import PostgresLease
    from engine.store.sqlite.sqlite_lease import SqliteLease

    assert problems(SqliteLease, P.Lease) == []
    assert problems(PostgresLease, P.Lease) == []
