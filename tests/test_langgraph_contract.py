"""LetheStore against LangGraph's own `InMemoryStore`: one script of store calls (put, get,
search, delete, list_namespaces, their async twins, bad arguments) runs on both, and what
each call returns (values, keys, order, the kind of error) is compared call by call.

Where the two differ by design (docs/integrations.md), the script compares what is common:
a search with a query returns the same items, LetheStore's scored best first by recall's
relevance where InMemoryStore (without an index) gives them unscored in put order; TTL is
tried on LetheStore alone (InMemoryStore does not support it).
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from engine.integrations.langgraph import LetheStore
from tests.helpers import POLICIES

pytestmark = pytest.mark.both_backends  # the keyed events are read alike on both

A, B, DOCS = ("users", "alice"), ("users", "bob"), ("docs", "v1")


def items(found) -> list:
    """Items as comparable data: namespace, key, value (times differ by clock)."""
    if found is None:
        return None
    return [(tuple(i.namespace), i.key, i.value) for i in found]


def one(item):
    return None if item is None else items([item])[0]


def unordered(found) -> list:
    return sorted(items(found), key=lambda i: (i[0], i[1]))


SCRIPT = [  # (label, call, how to compare)
    ("put a", lambda s: s.put(A, "editor", {"text": "Alice edits in Vim", "since": 2019}), None),
    ("put a 2", lambda s: s.put(A, "food", {"data": "I like pizza", "z": 1, "a": 2}), None),
    ("put a 3", lambda s: s.put(A, "city", {"text": "Alice lives in Porto"}), None),
    ("put b", lambda s: s.put(B, "editor", {"text": "Bob edits in Emacs"}), None),
    ("put docs", lambda s: s.put(DOCS, "intro", {"title": "Intro", "n": 3}), None),
    ("get", lambda s: one(s.get(A, "editor")), "same"),
    ("get key order", lambda s: list(s.get(A, "food").value), "same"),
    ("get missing key", lambda s: one(s.get(A, "nothing")), "same"),
    ("put over a key", lambda s: s.put(A, "city", {"text": "Alice lives in Lisbon"}), None),
    ("get after put over", lambda s: one(s.get(A, "city")), "same"),
    ("search all", lambda s: items(s.search(A)), "same"),
    ("search page", lambda s: items(s.search(A, limit=2, offset=1)), "same"),
    ("search prefix", lambda s: items(s.search(("users",))), "same"),
    ("search filter eq", lambda s: items(s.search(A, filter={"since": 2019})), "same"),
    ("search filter op", lambda s: items(s.search(A, filter={"since": {"$gt": 2000}})), "same"),
    ("search filter ne", lambda s: items(s.search(A, filter={"z": {"$ne": 1}})), "same"),
    ("search query", lambda s: unordered(s.search(A, query="what food do I like?")), "same"),
    ("search query limit", lambda s: len(s.search(A, query="editor", limit=2)), "same"),
    ("search other ns", lambda s: items(s.search(("nobody",))), "same"),
    ("list namespaces", lambda s: s.list_namespaces(), "same"),
    ("list prefix", lambda s: s.list_namespaces(prefix=("users",)), "same"),
    ("list suffix", lambda s: s.list_namespaces(suffix=("v1",)), "same"),
    ("list depth", lambda s: s.list_namespaces(max_depth=1), "same"),
    ("list page", lambda s: s.list_namespaces(limit=1, offset=1), "same"),
    (
        "odd values",
        lambda s: s.put(A, "odd", {"when": dt.date(2026, 1, 2), "tags": {"x"}, "raw": b"\x00", "n": None}),
        None,
    ),
    ("get odd values", lambda s: one(s.get(A, "odd")), "same"),
    ("delete", lambda s: s.delete(A, "editor"), None),
    ("get deleted", lambda s: one(s.get(A, "editor")), "same"),
    ("delete again", lambda s: s.delete(A, "editor"), None),
    ("search after delete", lambda s: items(s.search(A)), "same"),
    ("put deleted key again", lambda s: s.put(A, "editor", {"text": "Alice edits in Helix"}), None),
    ("search order after re-put", lambda s: [i.key for i in s.search(A)], "same"),
    (
        "batch reads before writes",
        lambda s: [
            one(r)
            for r in s.batch(
                [
                    GetOp(A, "city"),
                    PutOp(A, "city", {"text": "Alice lives in Braga"}),
                    PutOp(A, "city", {"text": "Alice lives in Faro"}),
                    GetOp(A, "city"),
                ]
            )
        ],
        "same",
    ),
    ("get after batch", lambda s: one(s.get(A, "city")), "same"),
    ("batch search", lambda s: [items(r) for r in s.batch([SearchOp(B), SearchOp(DOCS)])], "same"),
    ("async put", lambda s: asyncio.run(s.aput(B, "lang", {"text": "Bob writes Go"})), None),
    ("async get", lambda s: one(asyncio.run(s.aget(B, "lang"))), "same"),
    ("async search", lambda s: items(asyncio.run(s.asearch(B))), "same"),
    ("async delete", lambda s: asyncio.run(s.adelete(B, "lang")), None),
    ("async list", lambda s: asyncio.run(s.alist_namespaces(prefix=("users",))), "same"),
    ("namespace with a period", lambda s: s.put(("a.b",), "k", {"x": 1}), "error"),
    ("empty namespace", lambda s: s.put((), "k", {"x": 1}), "error"),
    ("root langgraph", lambda s: s.put(("langgraph",), "k", {"x": 1}), "error"),
    ("unknown operator", lambda s: s.search(A, filter={"n": {"$near": 1}}), "error"),
    ("label not text", lambda s: s.get(("users", 1), "k"), "error"),
    ("search bad prefix", lambda s: s.search(("a.b",)), "error"),
]


def play(store) -> list:
    out = []
    for label, call, how in SCRIPT:
        try:
            result = call(store)
        except Exception as exc:  # the kind of error is what is compared
            kind = next(
                (
                    k.__name__
                    for k in (InvalidNamespaceError, ValueError, TypeError, NotImplementedError)
                    if isinstance(exc, k)
                ),
                type(exc).__name__,
            )
            result = ("error", kind)
        out.append((label, result if how else None))
    return out


def test_the_script_is_long_enough():
    assert len(SCRIPT) >= 30


def test_lethe_store_answers_the_script_as_in_memory_store_does(db_path, clock):
    expected = play(InMemoryStore())
    with LetheStore(db_path, policy=f"{POLICIES}/lifecycle.yaml", offline=True, clock=clock) as store:
        seen = play(store)
    assert [label for label, _ in seen] == [label for label, _ in expected]
    for (label, got), (_, want) in zip(seen, expected):
        assert got == want, f"{label}: LetheStore {got!r}, InMemoryStore {want!r}"
    # and each error step did fail, on both
    errors = [label for label, _, how in SCRIPT if how == "error"]
    assert all(dict(expected)[label][0] == "error" for label in errors)


def test_a_query_search_is_scored_best_first_where_in_memory_store_is_not(db_path, clock):
    with LetheStore(db_path, policy=f"{POLICIES}/lifecycle.yaml", offline=True, clock=clock) as store:
        for store_ in (store, InMemoryStore()):
            for _, call, _ in SCRIPT[:5]:
                call(store_)
        hits = store.search(A, query="which editor does Alice use?")
        assert [h.key for h in hits][0] == "editor"
        scores = [h.score for h in hits]
        assert all(isinstance(x, float) for x in scores) and scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), "5"])
def test_a_ttl_langgraph_would_not_take_is_a_value_error(db_path, clock, ttl):
    with LetheStore(db_path, offline=True, clock=clock) as store:
        with pytest.raises(ValueError):
            store.put(A, "k", {"text": "x"}, ttl=ttl)
        assert store.search(A) == []
