"""Seed C, scene memory, as a policy of the same engine: cells, scene summaries, recall."""

import datetime as dt
import json

import pytest

from tests.helpers import POLICIES, run_sql, store_of
from tests.helpers.fake_openai import Reply

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

EXCHANGES = [
    ("I'm building an agent whose goal is to remember what users tell it across sessions.", "A worthy goal."),
    ("Memories should be grouped by topic, so related things stay together.", "Makes sense."),
    ("We decided to use SQLite with full-text search for storage, no vector database.", "Simple and fast."),
    ("One risk: the scene summaries might drift over time and lose details.", "Worth watching."),
    ("The plan is to ship the first version by June 30.", "Noted."),
]


def cells(mem):
    return run_sql(
        store_of(mem),
        "SELECT id, kind, scene, importance, content FROM memories WHERE status = 'active' ORDER BY id",
    ).fetchall()


def test_five_exchanges_become_typed_cells_in_scenes_offline(memory):
    mem = memory("scenes")
    for user, assistant in EXCHANGES:
        mem.remember(user, assistant)
    rows = cells(mem)
    kinds = {r["kind"] for r in rows}
    assert {"decision", "risk", "plan"} <= kinds
    assert all(r["scene"] for r in rows)
    summaries = dict(run_sql(store_of(mem), "SELECT scene, summary FROM scenes").fetchall())
    assert set(summaries) == {r["scene"] for r in rows}
    assert all(s.strip() for s in summaries.values())
    assert all(len(s.split()) < 100 for s in summaries.values())


def test_recall_matches_words_and_falls_back_to_the_most_salient(memory):
    mem = memory("scenes")
    for user, assistant in EXCHANGES:
        mem.remember(user, assistant)
    found = mem.recall("SQLite full-text search")
    assert found and found[0].kind == "decision" and "SQLite" in found[0].content
    assert found[0].scene_summary  # the scene's summary travels with the cell
    fallback = mem.recall("quantum chromodynamics")
    by_salience = sorted(cells(mem), key=lambda r: (-r["importance"], -r["id"]))
    assert [m.id for m in fallback] == [r["id"] for r in by_salience][:6]
    context = mem.recall_context("SQLite full-text search")
    assert context.startswith(f"[{found[0].scene}] ") and "SQLite" in context


def test_a_decay_rule_applies_to_cells(memory, clock):
    mem = memory("scenes-decay")
    for user, assistant in EXCHANGES:
        mem.remember(user, assistant)
    recalled = {m.id for m in mem.recall("SQLite full-text search")}
    clock.advance(dt.timedelta(days=45))
    mem.recall("SQLite full-text search")  # used again: stays fresh
    clock.advance(dt.timedelta(days=60))
    mem.run(["decay"])
    statuses = {r[0]: r[1] for r in run_sql(store_of(mem), "SELECT id, status FROM memories")}
    assert all(statuses[i] == "active" for i in recalled)
    assert {s for i, s in statuses.items() if i not in recalled} == {"archived"}


def scenes_policy(tmp_path, base_url):
    path = tmp_path / "scenes-remote.yaml"
    path.write_text(
        f"name: scenes-remote\nextends: {POLICIES}/scenes.yaml\nmodels:\n"
        f"  cheap: {{provider: openai, model: m, base_url: '{base_url}', max_retries: 0, timeout: 2}}\n"
    )
    return str(path)


def route(cells_answer, summary_answer):
    def responder(request):
        prompt = request["messages"][-1]["content"]
        return cells_answer if "Turn this exchange" in prompt else summary_answer

    return responder


def test_extraction_and_summaries_through_a_model(tmp_path, fake_openai, memory):
    fake_openai.responder = route(
        json.dumps(
            {
                "cells": [
                    {
                        "scene": "storage",
                        "kind": "decision",
                        "salience": 0.9,
                        "content": "Use SQLite with FTS5 for memory storage.",
                    },
                    {
                        "scene": "storage",
                        "kind": "risk",
                        "salience": 0.4,
                        "content": "FTS5 ranking may miss synonyms.",
                    },
                ]
            }
        ),
        json.dumps({"summary": "Storage: SQLite with FTS5; synonyms are a known gap."}),
    )
    mem = memory(scenes_policy(tmp_path, fake_openai.base_url))
    ids = mem.remember("Let's use SQLite with FTS5.", "Agreed; synonyms may be missed.")
    assert len(ids) == 2
    rows = cells(mem)
    assert [(r["kind"], r["scene"], r["importance"]) for r in rows] == [
        ("decision", "storage", 9.0),
        ("risk", "storage", 4.0),
    ]
    assert (
        run_sql(store_of(mem), "SELECT summary FROM scenes WHERE scene = 'storage'").fetchone()[0]
        == "Storage: SQLite with FTS5; synonyms are a known gap."
    )
    summarise_prompt = fake_openai.requests[-1]["messages"][-1]["content"]
    assert summarise_prompt.index("Use SQLite") < summarise_prompt.index("FTS5 ranking")  # by salience


@pytest.mark.parametrize("bad", ["not json at all", '{"cells": "nope"}', '[{"kind": 3}]'])
def test_malformed_cells_give_no_cells_and_an_event(tmp_path, fake_openai, memory, bad):
    fake_openai.responder = route(bad, json.dumps({"summary": "x"}))
    mem = memory(scenes_policy(tmp_path, fake_openai.base_url))
    assert mem.remember("We decided to use SQLite.", "OK") == []
    assert cells(mem) == []
    events = run_sql(store_of(mem), "SELECT event_type FROM memory_events").fetchall()
    if bad.startswith("[{"):  # valid JSON, but no usable cell: simply nothing to store
        assert run_sql(store_of(mem), "SELECT status FROM inbox").fetchone()[0] == "dropped"
    else:
        assert [e[0] for e in events] == ["extract_failed"]
    assert mem.pending() == []  # judged (to nothing), not left pending


def test_summary_model_down_keeps_the_cells(tmp_path, fake_openai, memory):
    cell = json.dumps(
        {"cells": [{"scene": "plans", "kind": "plan", "salience": 0.7, "content": "Ship by June 30."}]}
    )
    fake_openai.script(Reply(cell), Reply("", status=500))
    mem = memory(scenes_policy(tmp_path, fake_openai.base_url))
    assert len(mem.remember("We ship by June 30.", "OK")) == 1
    assert run_sql(store_of(mem), "SELECT count(*) FROM scenes").fetchone()[0] == 0
    assert "summarise_failed" in [
        e[0] for e in run_sql(store_of(mem), "SELECT event_type FROM memory_events")
    ]
