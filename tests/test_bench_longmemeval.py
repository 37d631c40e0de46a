"""The LongMemEval harness (bench/longmemeval.py) on a committed slice of the oracle file,
offline: the metrics are computed from provenance, and a miss says where the evidence went."""

from __future__ import annotations

import datetime as dt
import json
import pathlib

import pytest

from bench import longmemeval
from bench.lme import data, metrics, play

SLICE = pathlib.Path(__file__).parent / "fixtures" / "longmemeval" / "longmemeval_oracle_slice.json"

# a policy that keeps every turn and archives every memory in its first decay pass: any
# question whose evidence is older than a day misses it, and the miss must say "archived"
FORGETS = """
name: forgets
models:
  offline: {provider: rules}
scores:
  rank: "importance * confidence"
passes:
  decay:
    every: 1h
    rules:
      - {when: "status = 'active'", set: {status: archived}, event: archived}
recall:
  where: "status = 'active'"
  order: "rank desc, created_at desc"
  limit: 60
"""


@pytest.fixture(scope="module")
def raw():
    return json.loads(SLICE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One run of the harness over the slice: rules lifecycle, archive and BM25."""
    out = tmp_path_factory.mktemp("lme")
    policy = out / "forgets.yaml"
    policy.write_text(FORGETS, encoding="utf-8")
    code = longmemeval.main(
        [
            "--data",
            str(SLICE),
            "--types",
            "all",
            "--offline",
            "--policy",
            "lifecycle",
            "--policy",
            str(policy),
            "--baseline",
            "archive",
            "--baseline",
            "bm25",
            "--workers",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return json.loads((out / "results.json").read_text()), out


def _evidence(q: dict) -> set[tuple[int, int]]:
    """The newest evidence session's has_answer pairs, worked out here from the raw JSON
    (sessions by date, a pair per user turn), independently of bench/lme/data.py."""
    dates = q["haystack_dates"]
    order = sorted(range(len(dates)), key=lambda i: data.parse_date(dates[i]))
    newest = set()
    for s, i in enumerate(order):
        users = [n for n, t in enumerate(q["haystack_sessions"][i]) if t["role"] == "user"]
        keys = {
            (s, j)
            for j, n in enumerate(users)
            if q["haystack_sessions"][i][n].get("has_answer")
            or (
                n + 1 < len(q["haystack_sessions"][i])
                and q["haystack_sessions"][i][n + 1]["role"] == "assistant"
                and q["haystack_sessions"][i][n + 1].get("has_answer")
            )
        }
        if keys and q["haystack_session_ids"][i] in q["answer_session_ids"]:
            newest = keys
    return newest


def test_bm25_evidence_recall_is_read_from_provenance(results, raw):
    res, _ = results
    recalled = {(r["system"], r["qid"]): r for r in res["recalled"]}
    grades = {(g["system"], g["qid"]): g for g in res["grades"]}
    hits = 0
    for q in raw:
        want = _evidence(q)
        items = recalled["bm25", q["question_id"]]["items"]
        got = {tuple(p) for item in items for p in item["pairs"]}
        expected = bool(want & got) if want else None
        assert grades["bm25", q["question_id"]]["evidence"] is expected, q["question_id"]
        hits += bool(expected)
        users = sum(1 for s in q["haystack_sessions"] for t in s if t["role"] == "user")
        assert len(recalled["bm25", q["question_id"]]["items"]) == min(6, users)
    row = next(r for r in res["rows"] if r["system"] == "bm25" and r["qtype"] == "all")
    assert row["evidence"] == [hits, sum(1 for q in raw if _evidence(q))]
    assert 0 < hits  # BM25 finds the evidence of some of these questions


def test_forced_out_evidence_is_a_miss_classified_archived(results):
    res, _ = results
    mine = [g for g in res["grades"] if g["system"] == "forgets" and g["evidence"] is not None]
    assert mine and all(g["evidence"] is False and g["miss"] == "archived" for g in mine)
    row = next(r for r in res["rows"] if r["system"] == "forgets" and r["qtype"] == "all")
    assert row["misses"] == {"archived": len(mine)} and row["recalled"] == 0


def test_archive_stores_every_turn_and_lifecycle_reports_its_costs(results, raw):
    res, _ = results
    archive = [r for r in res["recalled"] if r["system"] == "archive"]
    assert all(set(r["fates"].values()) == {"active"} for r in archive)
    assert sum(len(r["fates"]) for r in archive) == sum(
        1 for q in raw for s in q["haystack_sessions"] for t in s if t["role"] == "user"
    )
    for system in ("lifecycle", "archive"):
        row = next(r for r in res["rows"] if r["system"] == system and r["qtype"] == "all")
        assert row["n"] == len(raw) and row["errors"] == 0
        assert 0 < row["recalled"] <= 6 and row["chars"] > 0
        assert row["qa"] is None  # offline: not run, never a number
    life = next(r for r in res["rows"] if r["system"] == "lifecycle" and r["qtype"] == "all")
    assert life["calls"] > len(raw)  # the rules judges' calls are in the cost log


def test_outputs_are_written(results):
    res, out = results
    md = (out / "results.md").read_text()
    assert "| lifecycle | knowledge-update |" in md and "never stored" in md
    assert "QA" in md and "not run" in md
    page = (out / "longmemeval.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "Evidence recall per question type" in page


def test_the_played_case_holds_no_answer(raw):
    case, gold = data.split(raw[0])
    assert gold.answer and not any(gold.answer == getattr(case, f) for f in vars(case))
    assert [p.at for p in case.pairs] == sorted(p.at for p in case.pairs)


def test_each_turn_is_remembered_at_its_own_time():
    at = dt.datetime(2023, 5, 30, 23, 40)
    case = data.Case(
        "q",
        "knowledge-update",
        "Where do I keep my passport?",
        at + dt.timedelta(days=40),
        (
            data.Pair((0, 0), at, "I keep my passport in the desk drawer.", "Noted."),
            data.Pair((1, 0), at + dt.timedelta(days=30), "I moved my passport to the safe.", "Noted."),
        ),
    )
    out = play.play(case, "archive")
    assert out.error is None and out.fates == {(0, 0): "active", (1, 0): "active"}
    # archive ranks newest first: the newer evidence above the older, so not stale
    gold = data.Gold("q", "the safe", frozenset({(1, 0)}), frozenset({(0, 0)}))
    g = metrics.grade(out, gold)
    assert g.evidence is True and g.stale is False and g.in_context is True
    flipped = play.Outcome("x", "q", case.qtype, list(reversed(out.items)))
    assert metrics.grade(flipped, gold).stale is True


@pytest.mark.parametrize(
    "answer, context, found",
    [
        ("5", "I just finished my fifth project", True),
        ("25", "I have added 25 new postcards", True),
        ("25", "I have added 17 new postcards", False),
        ("under my bed", "- I keep the old sneakers under my bed", True),
        ("Instant Pot", "- I use a slow cooker", False),
    ],
)
def test_answer_in_context(answer, context, found):
    assert metrics.answer_in(answer, context) is found


def test_bm25_ranks_the_matching_turn_first():
    from bench.lme.retrieval import bm25

    docs = ["I like tea in the morning.", "My passport is in the safe.", "The weather is nice."]
    assert bm25(docs, "where is my passport?", 2)[0] == 1


def test_qa_reads_the_context_and_a_judge_grades_it(tmp_path, fake_openai, raw):
    """With an endpoint configured, a reader answers from the recalled context and a judge
    grades it with the per-type rubric (here the fake reader echoes the context and the
    fake judge says yes when the gold answer is in the response)."""
    from tests.helpers.fake_openai import prompt_text

    def answer(request):
        text = prompt_text(request)
        if text.startswith("You are a chat assistant"):
            return text.split("earlier ones):", 1)[1].split("Answer the user's question", 1)[0]
        gold = text.split("Correct answer: ", 1)[1].split("\n\nResponse:", 1)[0]
        response = text.split("\n\nResponse: ", 1)[1]
        return "yes" if gold.lower() in response.lower() else "no"

    fake_openai.responder = answer
    code = longmemeval.main(
        [
            "--data",
            str(SLICE),
            "--types",
            "knowledge-update",
            "--offline",
            "--policy",
            "none",
            "--baseline",
            "bm25",
            "--workers",
            "1",
            "--qa-base-url",
            fake_openai.base_url,
            "--reader-model",
            "reader",
            "--judge-model",
            "judge",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    res = json.loads((tmp_path / "results.json").read_text())
    contexts = {r["qid"]: "\n".join(i["text"] for i in r["items"]) for r in res["recalled"]}
    golds = {q["question_id"]: str(q["answer"]) for q in raw}
    want = sum(golds[q].lower() in contexts[q].lower() for q in contexts)
    row = next(r for r in res["rows"] if r["qtype"] == "all")
    assert row["qa"] == [want, 5] and 0 < want < 5
    judged = [r for r in fake_openai.requests if r["model"] == "judge"]
    assert len(judged) == 5 and all(
        "updated answer" in prompt_text(r) or "cannot be answered" in prompt_text(r) for r in judged
    )
    assert "judged by judge, reader reader" in res["header"]


def test_a_gate_that_kept_another_clause_is_told_from_not_recalled():
    """The evidence pair's memory is active but holds none of the answer its turn held:
    the miss says the answer was dropped when stored, not that recall failed to pick it."""
    turn = "I sorted my closet. By the way, I've been using my Fitbit for 9 months now."
    gold = data.Gold("q", "9 months", frozenset({(1, 0)}), frozenset(), (((1, 0), turn),))
    kept = {(1, 0): ["User sorted their closet."]}
    out = play.Outcome("lifecycle", "q", "knowledge-update", [], {(1, 0): "active"}, kept=kept)
    assert metrics.grade(out, gold).miss == "stored without the answer"
    out.kept = {(1, 0): ["User has been using their Fitbit for 9 months."]}
    assert metrics.grade(out, gold).miss == "active"
    out.fates = {(1, 0): "expired"}
    assert metrics.grade(out, gold).miss == "expired"


def test_served_points_the_named_policies_models_at_the_served_one(tmp_path, fake_openai, monkeypatch):
    """--served: the shipped policy by name, every model of it the one the endpoint at
    OPENAI_BASE_URL serves (the real-model slice of issue 39), and the table says which."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    served = fake_openai.models[0]
    argv = ["--data", str(SLICE), "--types", "knowledge-update", "--limit", "1", "--served"]
    argv += ["--policy", "lifecycle", "--baseline", "none", "--workers", "1", "--out", str(tmp_path)]
    assert longmemeval.main(argv) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert f"every model {served} at {fake_openai.base_url}" in res["header"]
    assert {r["system"] for r in res["rows"]} == {"lifecycle"}
    assert fake_openai.requests and {r["model"] for r in fake_openai.requests} == {served}
    assert res["rows"][0]["calls"] > 0


def test_served_refuses_offline_and_a_policy_file(fake_openai, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    base = ["--data", str(SLICE), "--served", "--baseline", "none"]
    assert longmemeval.main(base + ["--offline"]) == 2
    assert longmemeval.main(base + ["--policy", "policies/lifecycle.yaml"]) == 2
    err = capsys.readouterr().err
    assert "--offline" in err and "shipped policies by name" in err
    assert not fake_openai.requests
