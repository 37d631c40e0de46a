"""recall.fallback: a question about what was, when nothing current fits, is answered from
archived and expired memories, each recalled with its status; never a superseded or a
forgotten one, never for a question about what is now, and no access is recorded."""

import pytest
from click.testing import CliRunner

from engine.base.errors import PolicyError
from engine.cli import main
from engine.judges.rules.asking import asks_about_the_past
from engine.policy import load as load_policy
from tests.helpers import POLICIES
from tests.helpers.judge import Judge, served
from tests.helpers.recall import DAY, add

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py


def aged(mem, clock, days=200):
    """Time passes with nothing recalled: the decay pass archives what was not used."""
    clock.advance(days * DAY)
    mem.run_due()


def seeded(mem, clock):
    ids = {
        "festival": add(mem, "User went to the Glastonbury festival with Priya in June", importance=4),
        "loan": add(mem, "User paid off the car loan in March", importance=4),
    }
    aged(mem, clock)
    ids["kayak"] = add(mem, "User bought a sea kayak last weekend", importance=6)
    return ids


def test_a_question_about_what_was_finds_the_archived_memory(memory, clock):
    mem = memory("lifecycle")
    ids = seeded(mem, clock)
    assert mem.get(ids["festival"]).status == "archived"
    got = mem.recall("Who did I go to the Glastonbury festival with?")
    assert [(m.id, m.status) for m in got] == [(ids["festival"], "archived")]
    got = mem.recall("When did I pay off my car loan?")
    assert [(m.id, m.status) for m in got] == [(ids["loan"], "archived")]
    # the past stays put: no access recorded, no status changed, no event written
    before = mem.history(ids["festival"]).events
    assert mem.get(ids["festival"]).access_count == 0
    assert mem.get(ids["festival"]).status == "archived"
    assert mem.history(ids["festival"]).events == before
    assert "- (archived) User went to the Glastonbury festival" in mem.recall_context(
        "which festival did I go to with Priya?"
    )


def test_a_question_about_what_is_now_gets_nothing_from_the_past(memory, clock):
    mem = memory("lifecycle")
    seeded(mem, clock)
    for asked in (
        "Is the car loan still open?",
        "what festival should I go to this summer?",
        "Glastonbury tickets",
    ):
        assert mem.recall(asked) == [], asked


def test_something_current_that_fits_wins_and_the_past_is_not_searched(memory, clock):
    mem = memory("lifecycle")
    ids = seeded(mem, clock)
    got = mem.recall("what kind of kayak did I buy?")
    assert [(m.id, m.status) for m in got] == [(ids["kayak"], "active")]
    ex = mem.explain("what kind of kayak did I buy?")
    assert not any(c.past for c in ex.candidates)
    assert mem.get(ids["kayak"]).access_count == 1  # the current one's access is recorded


def test_a_forgotten_memory_never_comes_back(memory, clock):
    mem = memory("lifecycle")
    ids = seeded(mem, clock)
    fresh = add(mem, "User went to the Reading festival in August", importance=4)
    mem.forget(fresh, "the user asked")
    assert mem.get(fresh).status == "archived"  # as a faded one is: its event tells them apart
    asked = "which festival did I go to in August?"
    assert fresh not in [m.id for m in mem.recall(asked)]
    assert fresh not in [c.memory.id for c in mem.explain(asked).candidates]
    # a faded one is still there for the same kind of question
    assert [m.id for m in mem.recall("which festival did I go to in June?")] == [ids["festival"]]


def test_a_superseded_memory_never_comes_back(memory, clock):
    mem = memory("lifecycle")
    old = add(mem, "User banks with Monzo", importance=5)
    aged(mem, clock, 10)
    new = mem.remember("I moved my salary over to Starling Bank last week.", "Noted.").stored
    assert mem.get(old).status == "superseded" and new
    aged(mem, clock)
    got = mem.recall("which bank did I use before?")
    assert old not in [m.id for m in got]


def test_explain_shows_the_fallback_and_its_status(memory, clock, db_path):
    mem = memory("lifecycle")
    ids = seeded(mem, clock)
    asked = "Who did I go to the Glastonbury festival with?"
    ex = mem.explain(asked)
    past = [c for c in ex.candidates if c.past]
    assert [c.memory.id for c in past if c.chosen] == [ids["festival"]] == ex.picks
    assert ex.as_dict()["candidates"][-len(past)]["fallback"] == "archived"
    out = CliRunner().invoke(
        main, ["recall", asked, "--explain", "--db", db_path, "--now", clock().isoformat(), "--offline"]
    )
    assert out.exit_code == 0, out.output
    assert "recall.fallback's best matches" in out.output and "[archived] User went to" in out.output
    out = CliRunner().invoke(
        main, ["recall", asked, "--db", db_path, "--now", clock().isoformat(), "--offline"]
    )
    assert out.exit_code == 0, out.output
    assert f"#{ids['festival']} (conf 1.00 fresh 0.00, archived) User went to" in out.output


def test_recall_as_of_a_time_uses_the_fallback_too(memory, clock):
    mem = memory("lifecycle")
    ids = seeded(mem, clock)
    then = clock()
    clock.advance(DAY)
    got = mem.recall("Who did I go to the Glastonbury festival with?", as_of=then)
    assert [(m.id, m.status) for m in got] == [(ids["festival"], "archived")]


@pytest.mark.sqlite_only
def test_the_policy_key(tmp_path):
    def policy(body):
        path = tmp_path / "p.yaml"
        path.write_text(f"name: p\nextends: {POLICIES}/lifecycle.yaml\n{body}")
        return load_policy(str(path))

    assert policy("").recall.past.k == 20  # the shipped lifecycle's
    assert policy("recall:\n  fallback: null\n").recall.past is None
    assert policy("recall:\n  fallback: {k: 5}\n").recall.past.source["where"] == (
        "status = 'archived' or status = 'expired'"
    )
    with pytest.raises(PolicyError, match="fallback.*select"):
        policy("recall:\n  select: null\n")
    with pytest.raises(PolicyError, match="fallback.where"):
        policy("recall:\n  fallback: {where: 'status = '}\n")


@pytest.mark.sqlite_only
def test_a_model_is_told_the_candidates_are_not_current():
    from engine import prompts

    policy = load_policy(f"{POLICIES}/lifecycle.yaml")
    shown = [{"n": 1, "id": 3, "summary": "User went to Glastonbury", "content": "User went to Glastonbury"}]
    shown[0] |= {
        "confidence": 1.0,
        "decay_score": 0.0,
        "created_at": "2026-06-01T00:00:00",
        "status": "archived",
    }
    base = {"query": "who came along?", "candidates": shown, "top_n": 6, "now": "x", "today": "2026-12-01"}
    told = prompts.render(policy.recall.select.prompt, policy.prompt_dirs, {**base, "past": True})
    plain = prompts.render(policy.recall.select.prompt, policy.prompt_dirs, {**base, "past": False})
    assert "None of these memories is current" in told
    assert "None of these memories is current" not in plain
    assert plain.count("\n") == told.count("\n")  # said on the first line: the rest as before


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    "asked,past",
    [
        ("When did we last service the boiler?", True),
        ("How many weeks ago was the team offsite?", True),
        ("Which came first, the move to Leeds or the new job?", True),
        ("Which of my plants died over the winter?", True),
        ("What's the name of the hotel we stayed at in Porto?", True),
        ("Is the boiler due for a service?", False),
        ("Should I renew the gym membership?", False),
        ("What do I drive these days?", False),
        ("Where am I flying next month?", False),
        ("Are the tickets booked?", False),
        ("How many half-marathons have I finished?", False),  # so far: as it stands now
        ("How long has Sam worked at the bakery?", False),
        ("What did I say I've been reading?", True),
    ],
)
def test_what_asks_about_the_past(asked, past):
    assert asks_about_the_past(asked) is past


def test_a_model_that_picks_everything_never_gets_the_past_for_a_question_about_now(
    fake_openai, lethe, clock
):
    """A served 0.5B model picked archived memories for "which laptop should I buy?": the
    engine asks the past only for a question about what was, whatever judge answers."""
    judge = Judge(select=lambda prompt: {"ids": [1]})  # the first it is shown, whatever it is
    mem = lethe(served(fake_openai, judge).base_url)
    ids = seeded(mem, clock)
    mem.forget(ids["kayak"], "not needed")  # nothing current: every select is the fallback's
    assert mem.recall("Which laptop should I buy for video editing?") == []
    assert mem.recall("Should I go to a festival this summer?") == []
    assert "select" not in judge.asked  # nothing current to pick from, and no past asked
    got = mem.recall("Who did I go to the Glastonbury festival with?")
    assert judge.asked.count("select") == 1 and got and all(m.status == "archived" for m in got)
    assert "None of these memories is current" in judge.last("select")
    assert ids["kayak"] not in [m.id for m in got]  # forgotten, whatever the model picks
