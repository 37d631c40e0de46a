"""`LetheStore`: Lethe as a LangGraph `BaseStore`, driven through LangGraph's own store API
(put, get, search, delete, list_namespaces and their async twins) and by a LangGraph graph
whose nodes read and write memories. Offline rules judges, the test clock."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import warnings
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp

from engine import Memory
from engine.integrations.langgraph import LetheStore
from engine.judges.keys import NoApiKeyWarning, RulesJudgedWarning
from tests.helpers import POLICIES, ROOT

ALICE = ("users", "alice")


@pytest.fixture
def store(db_path, clock):
    with LetheStore(db_path, policy=f"{POLICIES}/lifecycle.yaml", offline=True, clock=clock) as s:
        yield s


@pytest.fixture
def lethe(db_path, clock):
    """The same database through the Python API, for one namespace."""
    opened = []

    def make(namespace: str) -> Memory:
        opened.append(
            Memory(
                db_path, policy=f"{POLICIES}/lifecycle.yaml", namespace=namespace, offline=True, clock=clock
            )
        )
        return opened[-1]

    yield make
    for mem in opened:
        mem.close()


def test_put_then_get_gives_the_value_back(store, lethe):
    store.put(ALICE, "editor", {"text": "Alice edits in Vim", "since": 2019})
    item = store.get(ALICE, "editor")
    assert item.value == {"text": "Alice edits in Vim", "since": 2019}
    assert item.key == "editor" and item.namespace == ALICE
    assert item.created_at == dt.datetime(2026, 1, 5, 9, tzinfo=dt.timezone.utc)
    [memory] = lethe("users.alice").memories()  # the namespace tuple, joined by "."
    assert memory.content == "Alice edits in Vim"
    assert store.get(ALICE, "nothing-here") is None
    assert store.get(("users", "bob"), "editor") is None


def test_a_value_without_its_text_field_is_stored_as_json(store, lethe):
    store.put(ALICE, "prefs", {"theme": "dark", "font": 14})
    assert lethe("users.alice").memories()[0].content == '{"theme": "dark", "font": 14}'
    assert list(store.get(ALICE, "prefs").value) == ["theme", "font"]  # its key order


def test_a_put_over_a_key_supersedes_the_memory_that_was_there(store, lethe, clock):
    store.put(ALICE, "city", {"text": "Alice lives in Porto"})
    old = lethe("users.alice").keyed("city").memory.id
    clock.advance(dt.timedelta(hours=1))
    store.put(ALICE, "city", {"text": "Alice lives in Lisbon"})
    item = store.get(ALICE, "city")
    assert item.value == {"text": "Alice lives in Lisbon"}
    assert item.updated_at == dt.datetime(2026, 1, 5, 10, tzinfo=dt.timezone.utc)
    story = lethe("users.alice").history(old)
    assert story.memory.status == "superseded" and story.superseded_by.content.endswith("Lisbon")


def test_a_put_never_retires_another_keys_item_unless_judged(store, db_path, clock):
    """By default a put is stored as given. With judged=True the policy's write steps run:
    the move supersedes the old host, which stays gettable (status superseded) and ranks
    after every active item in a search, unscored."""
    store.put(ALICE, "host", {"text": "The API runs on Heroku."})
    store.put(ALICE, "move", {"text": "We moved the API from Heroku to Fly.io."})
    assert store.get(ALICE, "host").status == "active"
    with LetheStore(
        db_path, policy=f"{POLICIES}/lifecycle.yaml", offline=True, clock=clock, judged=True
    ) as judged:
        judged.put(("team",), "host", {"text": "The API runs on Heroku."})
        judged.put(("team",), "move", {"text": "We moved the API from Heroku to Fly.io."})
        host = judged.get(("team",), "host")
        assert host.value == {"text": "The API runs on Heroku."} and host.status == "superseded"
        hits = judged.search(("team",), query="where does the API run?")
        assert [(h.key, h.score is None) for h in hits] == [("move", False), ("host", True)]


def test_two_keys_with_the_same_text_are_two_items(store, lethe):
    """Before: the second put only confirmed the first key's memory, so search found one
    item, and deleting either key (or putting over it) took the other's away too."""
    store.put(ALICE, "a", {"text": "The office is in Berlin", "owner": "alice"})
    store.put(ALICE, "b", {"text": "The office is in Berlin", "owner": "bob"})
    assert sorted(i.key for i in store.search(ALICE)) == ["a", "b"]
    store.delete(ALICE, "b")
    assert store.get(ALICE, "a").value == {"text": "The office is in Berlin", "owner": "alice"}
    store.put(ALICE, "home", {"text": "Alice lives in Porto"})
    store.put(ALICE, "work", {"text": "Alice lives in Porto"})
    store.put(ALICE, "home", {"text": "Alice lives near the Ribeira"})
    assert store.get(ALICE, "work").value == {"text": "Alice lives in Porto"}
    store.put(ALICE, "a", {"text": "The office is in Berlin", "owner": "carol"})  # its own key:
    assert len([m for m in lethe("users.alice").memories() if "Berlin" in m.content]) == 1


def test_search_with_a_query_scores_every_item_best_first(store):
    store.put(ALICE, "tea", {"text": "Alice drinks green tea"})
    store.put(ALICE, "db", {"text": "The billing service uses PostgreSQL"})
    store.put(ALICE, "food", {"data": "I like pizza"})
    hits = store.search(ALICE, query="which database does billing use?")
    assert [h.key for h in hits] == ["db", "tea", "food"]
    assert hits[0].score > 0 and hits[1].score == hits[2].score == 0.0
    assert [h.key for h in store.search(ALICE, query="what food do I like?")][0] == "food"
    assert [h.key for h in store.search(ALICE, query="billing", limit=1, offset=1)] == ["tea"]


def test_search_without_a_query_lists_in_put_order_with_filters_and_pages(store, clock):
    facts = [
        "Alice plays the cello",
        "The staging server is in Frankfurt",
        "Invoices are due on the first Monday",
        "The cat is called Miso",
        "Code review needs two approvals",
    ]
    for n, fact in enumerate(facts):
        store.put(ALICE, f"note{n}", {"text": fact, "n": n})
        clock.advance(dt.timedelta(minutes=1))
    assert [h.key for h in store.search(ALICE)] == [f"note{n}" for n in range(5)]
    assert [h.key for h in store.search(ALICE, limit=2, offset=1)] == ["note1", "note2"]
    assert [h.key for h in store.search(ALICE, filter={"n": {"$gte": 3}})] == ["note3", "note4"]
    assert [h.key for h in store.search(ALICE, filter={"n": 1})] == ["note1"]
    assert [h.key for h in store.search(ALICE, filter={"n": {"$ne": 0, "$lt": 2}})] == ["note1"]
    assert [h.key for h in store.search(("users",), filter={"n": 2})] == ["note2"]  # a prefix


def test_delete_forgets_and_never_deletes(store, lethe):
    store.put(ALICE, "wifi", {"text": "The office wifi password is hunter2"})
    mid = lethe("users.alice").keyed("wifi").memory.id
    store.delete(ALICE, "wifi")
    assert store.get(ALICE, "wifi") is None and store.search(ALICE) == []
    story = lethe("users.alice").history(mid)
    assert story.memory.status == "archived"
    assert story.events[-1]["event_type"] == "forgotten" and "'wifi'" in story.events[-1]["detail"]
    store.delete(ALICE, "wifi")  # deleting what is gone is a no-op, as in LangGraph


def test_puts_without_a_key_say_once_per_namespace_that_the_rules_judged(db_path, clock):
    with (
        LetheStore(db_path, policy=f"{POLICIES}/lifecycle.yaml", clock=clock, judged=True) as keyless,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        keyless.put(ALICE, "db", {"text": "We use Postgres."})
        keyless.put(ALICE, "ci", {"text": "CI runs on GitHub Actions."})
        assert keyless.search(ALICE, query="postgres")
    assert [type(w.message) for w in caught if issubclass(w.category, NoApiKeyWarning)] == [
        RulesJudgedWarning
    ]


def test_ttl_becomes_expires_at_and_an_expired_item_is_gone(store, lethe, clock):
    assert store.supports_ttl
    store.put(ALICE, "standup", {"text": "Standup moved to 10:30 this week"}, ttl=90)
    mem = lethe("users.alice")
    assert mem.keyed("standup").memory.expires_at == "2026-01-05T10:30:00"
    clock.advance(dt.timedelta(minutes=91))
    assert store.get(ALICE, "standup") is None  # before the expiry pass has run
    assert store.search(ALICE) == []
    mem.run(["expiry"])
    assert mem.memories("expired")[0].content.startswith("Standup moved")


def test_a_read_pushes_the_ttl_back_unless_told_not_to(store, lethe, clock):
    store.put(ALICE, "focus", {"text": "Alice is on the billing rewrite"}, ttl=60)
    clock.advance(dt.timedelta(minutes=50))
    assert store.get(ALICE, "focus") is not None  # refreshed: 60 minutes from now
    assert lethe("users.alice").keyed("focus").memory.expires_at == "2026-01-05T10:50:00"
    clock.advance(dt.timedelta(minutes=50))
    assert [h.key for h in store.search(ALICE, refresh_ttl=False)] == ["focus"]
    clock.advance(dt.timedelta(minutes=11))
    assert store.get(ALICE, "focus") is None
    with pytest.raises(ValueError, match="above 0"):
        store.put(ALICE, "never", {"text": "x"}, ttl=0)
    with pytest.raises(ValueError):
        store.put(ALICE, "never", {"text": "x"}, ttl=float("nan"))


def test_list_namespaces(store):
    for ns in [("users", "alice"), ("users", "bob"), ("docs", "v1"), ("docs", "draft", "v1")]:
        store.put(ns, "k", {"text": f"Something kept for {'/'.join(ns)}"})
    assert store.list_namespaces() == [
        ("docs", "draft", "v1"),
        ("docs", "v1"),
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert store.list_namespaces(prefix=("users",)) == [("users", "alice"), ("users", "bob")]
    assert store.list_namespaces(suffix=("v1",)) == [("docs", "draft", "v1"), ("docs", "v1")]
    assert store.list_namespaces(prefix=("docs", "*", "v1")) == [("docs", "draft", "v1")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("users",)]
    assert store.list_namespaces(limit=1, offset=1) == [("docs", "v1")]


def test_memories_from_other_paths_answer_to_memory_id(store, lethe):
    mem = lethe("users.alice")
    ids = mem.remember("I'm allergic to peanuts.", "Noted, no peanuts.")
    item = store.get(ALICE, f"memory-{ids[0]}")
    assert item.value == {"text": mem.get(ids[0]).content} and "peanuts" in item.value["text"]
    assert [h.key for h in store.search(ALICE)] == [f"memory-{ids[0]}"]
    assert store.get(ALICE, "memory-99999999999999999999999") is None  # past INTEGER: none


def test_index_names_the_fields_a_memory_is_made_of(db_path, clock, lethe):
    with LetheStore(
        db_path,
        policy=f"{POLICIES}/lifecycle.yaml",
        offline=True,
        clock=clock,
        index={"fields": ["title", "tags[*]"], "dims": 8},
    ) as indexed:
        indexed.put(ALICE, "a", {"title": "Quarterly plan", "tags": ["okr", "q3"], "x": 1})
        indexed.put(ALICE, "b", {"body": "ignored"}, index=["body"])
        indexed.put(ALICE, "c", {"title": "Not indexed at all"}, index=False)
        hits = indexed.search(ALICE, query="quarterly okr")
        assert [(h.key, h.score is None) for h in hits] == [("a", False), ("b", False), ("c", True)]
    contents = [m.content for m in lethe("users.alice").memories()]
    assert "Quarterly plan\nokr\nq3" in contents and "ignored" in contents
    with pytest.raises(ValueError):
        LetheStore(db_path, offline=True, index={"fields": "title"})


def test_values_are_kept_as_langgraph_keeps_them(store):
    """Dates, sets, bytes and NaN come back as they went in (issue 42: a NaN locked the
    namespace); a value that cannot be kept is a ValueError and the namespace still works."""
    value = {
        "z": 1,
        "when": dt.date(2026, 1, 2),
        "tags": {"a"},
        "raw": b"\x00\xff",
        "score": float("nan"),
        "a": [1, {"y": 2, "b": 3}],
    }
    store.put(ALICE, "odd", value)
    got = store.get(ALICE, "odd").value
    assert list(got) == list(value) and got["when"] == dt.date(2026, 1, 2)
    assert got["tags"] == {"a"} and got["raw"] == b"\x00\xff" and got["score"] != got["score"]
    assert list(got["a"][1]) == ["y", "b"]
    deep = current = {}
    for _ in range(5000):
        current["a"] = current = {}
    for bad in (deep, {"c": object()}):
        with pytest.raises(ValueError, match="cannot store"):
            store.put(ALICE, "bad", bad)
    with pytest.raises(ValueError, match="a dict"):
        store.batch([PutOp(ALICE, "bad", ["not", "a", "dict"])])
    store.put(ALICE, "fine", {"text": "The namespace still works"})
    assert [h.key for h in store.search(ALICE)] == ["odd", "fine"]
    assert store.get(ALICE, "bad") is None


def test_bad_namespaces_and_values_are_refused(store):
    with pytest.raises(InvalidNamespaceError):
        store.put(("users", "a.b"), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):  # batch() checks too, not only put()
        store.batch([GetOp(("a.b",), "k")])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp((), "k")])
    store.put(ALICE, "k", {"n": 1})
    with pytest.raises(ValueError, match="Unsupported operator"):
        store.search(ALICE, filter={"n": {"$near": 1}})


def test_a_batch_reads_before_it_writes(store):
    store.put(ALICE, "k", {"text": "First version of the note"})
    before, _, _ = store.batch(
        [
            GetOp(ALICE, "k"),
            PutOp(ALICE, "k", {"text": "Second"}),
            PutOp(ALICE, "k", {"text": "Third and last version"}),
        ]
    )
    assert before.value == {"text": "First version of the note"}
    assert store.get(ALICE, "k").value == {"text": "Third and last version"}


def test_the_async_twins(store):
    async def go():
        await store.aput(ALICE, "lang", {"text": "Alice writes Rust at work"})
        got = await store.aget(ALICE, "lang")
        found = await store.asearch(ALICE, query="which language does Alice write?")
        spaces = await store.alist_namespaces()
        await store.adelete(ALICE, "lang")
        return got, found, spaces, await store.aget(ALICE, "lang")

    got, found, spaces, gone = asyncio.run(go())
    assert got.value == {"text": "Alice writes Rust at work"}
    assert [h.key for h in found] == ["lang"] and spaces == [ALICE] and gone is None


class Turn(TypedDict, total=False):
    user_id: str
    message: str
    recalled: list[str]


def remember_node(state: Turn, runtime: Runtime) -> dict:
    key = f"turn-{len(runtime.store.search(('users', state['user_id']))) + 1}"
    runtime.store.put(("users", state["user_id"]), key, {"text": state["message"]})
    return {}


def recall_node(state: Turn, runtime: Runtime) -> dict:
    hits = runtime.store.search(("users", state["user_id"]), query=state["message"])
    return {"recalled": [h.value["text"] for h in hits if h.score]}  # active and relevant


def test_a_graph_reads_and_writes_memories_through_the_store(db_path, clock):
    store = LetheStore(
        db_path, policy=f"{POLICIES}/lifecycle.yaml", offline=True, clock=clock, judged=True
    )  # the move supersedes the old host
    graph = (
        StateGraph(Turn)
        .add_node("recall", recall_node)
        .add_node("remember", remember_node)
        .add_edge(START, "recall")
        .add_edge("recall", "remember")
        .add_edge("remember", END)
        .compile(store=store)
    )
    first = graph.invoke({"user_id": "alice", "message": "Our API runs on Heroku."})
    assert first["recalled"] == []
    graph.invoke({"user_id": "alice", "message": "We moved the API from Heroku to Fly.io."})
    asked = graph.invoke({"user_id": "alice", "message": "Where does the API run?"})
    assert asked["recalled"] == ["We moved the API from Heroku to Fly.io."]
    assert store.search(("users", "bob")) == []


def test_without_the_extra_the_import_names_it():
    code = """import sys
class Absent:  # an interpreter where `langgraph` cannot be found
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "langgraph":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
try:
    import engine.integrations.langgraph
except ImportError as exc:
    print(exc)"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT}
    )
    assert out.stdout == "LetheStore needs the 'langgraph' extra: pip install 'lethe-lifecycle[langgraph]'\n"


def test_an_import_error_inside_the_sdk_is_not_called_a_missing_extra(tmp_path):
    """A user's own `numbers.py` shadows the standard module LangGraph's dependencies
    import: the error says what failed, not to install an extra that is installed."""
    (tmp_path / "numbers.py").write_text("")
    out = subprocess.run(
        [sys.executable, "-c", "import engine.integrations.langgraph"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 1 and "numbers" in last
    assert "pip install" not in last and "extra" not in last


def test_as_of_reads_the_store_as_it_stood_then(store, lethe, clock):
    """`store.as_of(T)` answers get, search and list_namespaces as the store did at T,
    whatever was put, deleted, superseded or expired after: each read at T is kept and
    asked again of the view once much more has happened."""
    seen = []

    def look():  # what the store says now, without refreshing a ttl (a read writes that)
        seen.append(
            (
                clock(),
                store.get(ALICE, "editor", refresh_ttl=False),
                [(i.key, i.value, i.status) for i in store.search(ALICE, refresh_ttl=False)],
                [(i.key, i.score) for i in store.search(ALICE, query="editor Vim", refresh_ttl=False)],
                store.list_namespaces(),
            )
        )

    store.put(ALICE, "editor", {"text": "Alice edits in Vim"})
    store.put(ALICE, "standup", {"text": "Standup moved to 10:30"}, ttl=90)
    lethe("users.alice").add("Alice prefers dark editor themes", judged=False)
    look()
    clock.advance(dt.timedelta(hours=2))  # the standup's ttl passed
    store.put(ALICE, "editor", {"text": "Alice edits in Emacs now"})
    store.put(("users", "bob"), "editor", {"text": "Bob edits in Vim"})
    look()
    clock.advance(dt.timedelta(days=3))
    store.delete(ALICE, "editor")
    look()
    clock.advance(dt.timedelta(days=3))
    for at, got, listed, ranked, spaces in seen:
        then = store.as_of(at)
        item = then.get(ALICE, "editor")
        assert (item and (item.value, item.status)) == (got and (got.value, got.status)), at
        assert [(i.key, i.value, i.status) for i in then.search(ALICE)] == listed, at
        assert [i.key for i in then.search(ALICE, query="editor Vim")] == [k for k, _ in ranked], at
        assert then.list_namespaces() == spaces, at
    first = store.as_of(seen[0][0])
    assert first.get(ALICE, "editor").value == {"text": "Alice edits in Vim"}
    assert first.as_of(seen[1][0]).get(ALICE, "editor").value == {"text": "Alice edits in Emacs now"}
    with pytest.raises(ValueError, match="read only"):
        first.put(ALICE, "editor", {"text": "Alice edits in nano"})
    first.close()  # a view closes nothing: the store reads on
    assert store.get(ALICE, "editor") is None
