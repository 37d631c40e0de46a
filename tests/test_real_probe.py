"""bench/real_probe.py scores what a served model answers to the gate, contradiction,
expiry and select prompts against bench/real_probe.yaml's labels (here a fake OpenAI server answers)."""

from __future__ import annotations

import json

import pytest
import yaml

from bench import real_probe

MEMORY = {
    "content": "The board report is due on March 20.",
    "summary": "board report",
    "tags": [],
    "importance": 5,
}
ANSWERS = {  # what the fake model answers each step, and which labelled cases that is right for
    "nothing": (
        {
            "gate": {"save": False, "memories": []},
            "contradiction": {"supersedes": [], "confirms": []},
            "expiry": {"expires_at": None},
            "select": {"ids": []},
        },
        lambda step, case: (
            (case["memories"] == 0)
            if step == "gate"
            else case["expires_at"] is None
            if step == "expiry"
            else not case["picks"]
            if step == "select"
            else not (case.get("supersedes") or case.get("confirms"))
        ),
    ),
    "one, first": (
        {
            "gate": {"save": True, "memories": [MEMORY]},
            "contradiction": {"supersedes": [{"n": 1, "reason": "r"}], "confirms": []},
            "expiry": {"expires_at": "2026-03-20"},
            "select": {"ids": [1]},
        },
        lambda step, case: (
            (case["memories"] == 1)
            if step == "gate"
            else case["expires_at"] == "2026-03-20"
            if step == "expiry"
            else case["picks"] == [1]
            if step == "select"
            else case.get("supersedes") == [1] and not case.get("confirms")
        ),
    ),
}


@pytest.mark.parametrize("answers", sorted(ANSWERS))
def test_each_answer_is_scored_against_its_label(fake_openai, monkeypatch, capsys, answers):
    said, right = ANSWERS[answers]
    fake_openai.responder = lambda request: json.dumps(
        said[request["response_format"]["json_schema"]["name"]]
    )
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    assert real_probe.main(["--split", "all"]) == 0
    out = capsys.readouterr().out
    cases = yaml.safe_load(real_probe.CASES.read_text(encoding="utf-8"))
    for step in real_probe.STEPS:
        labelled = cases["dev"][step] + cases["held"][step]
        assert f"dev+held {step}: {sum(right(step, c) for c in labelled)}/{len(labelled)} as labelled" in out
    assert len(fake_openai.requests) == sum(
        len(cases[s][t]) for s in ("dev", "held") for t in real_probe.STEPS
    )
