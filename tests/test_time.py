"""Time (docs/time.md): a memory is created at the time its turn was said, its events are
recorded at the clock's time, and a turn judged late never supersedes what was said after
it: it is stored superseded by the later memory, as if the turns had been judged in order."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import uuid

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import FixedClock, Memory
from engine.base.errors import LetheError
from engine.cli import main
from engine.run import timeline
from tests.helpers import START, run_sql, store_of, writer_of
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.judge import Judge, pick, policy_file, shown

pytestmark = pytest.mark.both_backends


def cli(*args, env=None):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, env=env)


def test_the_late_turn_is_superseded_by_what_was_said_after_it(tmp_path):
    """The issue's sequence: a turn left pending on 03-01 (no key), another said and
    judged on 03-02, the first judged on 03-03: VS Code ends superseded by Neovim, with
    the link and the event, and recall returns Neovim alone."""
    db = str(tmp_path / "a.db")
    first = cli(
        "remember",
        "I use VS Code for everything.",
        "--db",
        db,
        "--now",
        "2026-03-01T09:00:00",
        env={"OPENAI_API_KEY": ""},
    )
    assert "pending" in first.output
    assert (
        cli(
            "remember", "I switched to Neovim.", "--db", db, "--offline", "--now", "2026-03-02T09:00:00"
        ).exit_code
        == 0
    )
    ran = cli("run", "--db", db, "--offline", "--now", "2026-03-03T09:00:00")
    assert ran.exit_code == 0 and "pending: 1 changed" in ran.output, ran.output
    with Memory(db, offline=True, clock=FixedClock("2026-03-03T09:00:00")) as mem:
        vscode = next(m for m in mem.memories("all", None) if "VS Code" in m.content)
        neovim = next(m for m in mem.memories("all", None) if "Neovim" in m.content)
        assert (vscode.status, vscode.contradicted_by) == ("superseded", neovim.id)
        assert neovim.status == "active"
        assert vscode.created_at == "2026-03-01T09:00:00"  # said then, judged on 03-03
        events = {e["event_type"]: e for e in mem.history(vscode.id).events}
        assert events["created"]["occurred_at"] == "2026-03-03T09:00:00"
        assert events["created"]["said_at"] == "2026-03-01T09:00:00"
        assert f"superseded by #{neovim.id}" in events["superseded"]["detail"]
        assert events["superseded"]["said_at"] == "2026-03-02T09:00:00"
        assert [m.content for m in mem.recall("which editor do I use?")] == [neovim.content]
    why = cli("why", str(vscode.id), "--db", db)
    assert re.search(r"2026-03-03T09:00:00  2026-03-01T09:00:00  created", why.output), why.output
    assert re.search(r"2026-03-03T09:00:00  2026-03-02T09:00:00  superseded", why.output)


def test_said_at_is_the_created_at_and_the_clock_the_recording_time(memory, clock):
    mem = memory()
    said = START - dt.timedelta(days=3)
    [mid] = mem.remember("I live in Lisbon.", said_at=said)
    row = mem.get(mid)
    assert row.created_at == said.isoformat()
    [created] = [e for e in mem.history(mid).events if e["event_type"] == "created"]
    assert (created["occurred_at"], created["said_at"]) == (START.isoformat(), said.isoformat())
    with pytest.raises(LetheError, match="after now"):
        mem.remember("I live in Porto.", said_at=START + dt.timedelta(hours=1))
    with pytest.raises(LetheError, match="not an ISO-8601"):
        mem.remember("I live in Porto.", said_at="last week")


def test_a_late_turn_is_judged_on_the_day_it_was_said(db_path, clock, tmp_path):
    """The prompts of a turn judged late read its said day as "today" (a relative date in
    it resolves from then), and so does the question asked the other way round about a
    memory said after it; a turn judged as it arrives reads the clock's day."""
    judge = Judge(expiry={"expires_at": None})
    with FakeOpenAI(judge) as fake:
        with Memory(db_path, policy=policy_file(tmp_path, fake.base_url), clock=clock) as mem:
            said = START - dt.timedelta(days=14)
            mem.remember("I am in Berlin until Friday.", said_at=said)
            mem.remember("I live in Lisbon now.")
            late = store_of(mem).add_turn(mem.namespace, "I live in Porto.", "", said.isoformat())
            writer_of(mem).process(late)
    today = "Today is " + START.date().isoformat()
    then = "Today is " + said.date().isoformat()
    assert [then in p for p in judge.prompts["gate"]] == [True, False, True], judge.prompts["gate"]
    assert [today in p for p in judge.prompts["gate"]] == [False, True, False]
    assert then in judge.prompts["expiry"][0] and today in judge.prompts["expiry"][1]
    # the late Porto turn: its own contradiction on its day, Lisbon asked about on Lisbon's
    asked = judge.prompts["contradiction"]
    porto = [p for p in asked if re.search(r"^New memory: .*Porto", p, re.M)]
    lisbon = [p for p in asked if re.search(r"^New memory: .*Lisbon", p, re.M)]
    assert porto and all(then in p for p in porto), porto
    assert lisbon and all(today in p for p in lisbon), lisbon


def test_a_late_turn_asks_about_the_memories_said_after_it_up_to_the_first_that_replaces_it(
    db_path, clock, tmp_path
):
    """A late turn's judges are asked, the other way round, whether each memory said after
    it replaces it, in said order: the earliest that does is the one that counts, so none
    after it is asked. Before: every memory said after it was asked (up to 20 model calls
    a turn), which kept a runner judging a backlog long after the soak's faults ended."""

    def contradiction(prompt):
        if re.search(r"^New memory: .*Porto", prompt, re.M):
            return {"supersedes": [], "confirms": []}  # the late turn's own question: no
        return {"supersedes": pick(prompt, "Porto"), "confirms": []}  # any later one: yes

    judge = Judge(contradiction=contradiction, expiry={"expires_at": None})
    with FakeOpenAI(judge) as fake:
        with Memory(db_path, policy=policy_file(tmp_path, fake.base_url), clock=clock) as mem:
            said = START - dt.timedelta(days=14)
            [lisbon] = mem.remember("I live in Lisbon now.", said_at=START - dt.timedelta(days=10))
            mem.remember("I live in Madrid now.", said_at=START - dt.timedelta(days=5))
            late = store_of(mem).add_turn(mem.namespace, "I live in Porto.", "", said.isoformat())
            writer_of(mem).process(late)
            porto = next(m for m in mem.memories("all", None) if "Porto" in m.content)
            assert (porto.status, porto.contradicted_by) == ("superseded", lisbon)
    asked = [p for p in judge.prompts["contradiction"] if pick(p, "Porto")]
    assert len(asked) == 1 and "Lisbon" in asked[0], asked


def test_a_late_turn_asks_about_a_bounded_number_of_the_memories_said_after_it(db_path, clock, tmp_path):
    """However many memories were said after a late turn, its judges ask about the first
    ASKED of them (a model call each). Before: up to 20 calls a turn, and after the soak's
    faults the daemon could not judge the turns left by killed agents within a minute."""

    def contradiction(prompt):
        return {"supersedes": [], "confirms": []}  # no later memory replaces it

    judge = Judge(contradiction=contradiction, expiry={"expires_at": None})
    with FakeOpenAI(judge) as fake:
        with Memory(db_path, policy=policy_file(tmp_path, fake.base_url), clock=clock) as mem:
            for day in range(12, 0, -1):
                mem.remember(f"I live in city number {day} now.", said_at=START - dt.timedelta(days=day))
            late = store_of(mem).add_turn(
                mem.namespace, "I live in Porto.", "", (START - dt.timedelta(days=14)).isoformat()
            )
            writer_of(mem).process(late)
    asked = [
        p
        for p in judge.prompts["contradiction"]
        if pick(p, "Porto") and not re.search(r"^New memory: .*Porto", p, re.M)
    ]
    assert 1 <= len(asked) <= timeline.ASKED, len(asked)


def test_the_rules_judges_resolve_a_late_turns_dates_from_its_day(memory, clock):
    """Offline, "until Friday" said on Monday 2025-12-22 and judged on 2026-01-05 ends on
    Friday 2025-12-26 (and so expires at the next pass), not on the Friday after judging."""
    mem = memory()
    said = dt.datetime(2025, 12, 22, 9, 0)
    [mid] = mem.remember("I am in Berlin until Friday.", said_at=said)
    assert mem.get(mid).expires_at.startswith("2025-12-26"), mem.get(mid).expires_at
    [now] = mem.remember("I am in Madrid until Friday.")
    assert mem.get(now).expires_at.startswith("2026-01-09"), mem.get(now).expires_at


def test_an_add_is_said_when_it_is_recorded(memory):
    mem = memory()
    mid = mem.add("User prefers tabs", judged=False)
    [created] = mem.history(mid).events
    assert mem.get(mid).created_at == created["occurred_at"] and created["said_at"] is None


def test_pending_turns_are_judged_in_the_order_said(memory, clock):
    """Turns queued out of order (a caller giving each its time) are judged oldest said
    first: the later saying wins, whatever order they reached the inbox in."""
    mem = memory()
    store = store_of(mem)
    store.add_turn(mem.namespace, "I switched to Neovim.", "", (START - dt.timedelta(days=1)).isoformat())
    store.add_turn(
        mem.namespace, "I use VS Code for everything.", "", (START - dt.timedelta(days=2)).isoformat()
    )
    mem.run_due()
    active = [m.content for m in mem.memories("active", None)]
    assert active == ["User switched to Neovim."], active


# ---- the property: judging order does not change what is believed ---------------------
SLOTS = ("editor", "shell", "browser", "database", "terminal")


def turns(n: int = 20) -> list[str]:
    rng = random.Random(41)
    return [f"My {rng.choice(SLOTS)} is now tool{i}." for i in range(n)]


def supersede_same_slot(prompt: str) -> dict:
    """The scripted contradiction answer: the new memory supersedes every shown memory
    about the same slot (the thing a reasonable model says of 'my editor is now X')."""
    new = json.loads(re.search(r"^New memory: (.*)$", prompt, re.M).group(1))
    slot = next(s for s in SLOTS if s in new)
    return {
        "supersedes": [{"n": n, "reason": "replaced"} for n, text in shown(prompt).items() if slot in text],
        "confirms": [],
    }


@pytest.fixture(scope="module")
def scripted_server():
    with FakeOpenAI(Judge(contradiction=supersede_same_slot)) as fake:
        yield fake


def judge_in(order: list[int], db_path, policy: str) -> set[str]:
    """Queue the turns said an hour apart, judge them in `order`; the active contents."""
    clock = FixedClock(START)
    with Memory(db_path, policy=policy, namespace=f"n{uuid.uuid4().hex[:8]}", clock=clock) as mem:
        texts = turns()
        ids = [
            store_of(mem).add_turn(
                mem.namespace, t, "", (START - dt.timedelta(hours=len(texts) - i)).isoformat()
            )
            for i, t in enumerate(texts)
        ]
        for i in order:
            written = writer_of(mem).process(ids[i])
            assert written.pending is None, written.pending
        active = {m.content for m in mem.memories("active", None)}
        superseded = run_sql(
            store_of(mem),
            "SELECT count(*) FROM memories WHERE namespace = ? "
            "AND status = 'superseded' AND contradicted_by IS NOT NULL",
            (mem.namespace,),
        ).fetchone()[0]
        assert len(active) + superseded == len(texts)  # none lost, each replaced one linked
        return active


@pytest.fixture(scope="module")
def in_order(tmp_path_factory, scripted_server):
    path = str(tmp_path_factory.mktemp("inorder") / "m.db")
    pol = policy_file(tmp_path_factory.mktemp("pol"), scripted_server.base_url)
    return judge_in(list(range(20)), path, pol)


@pytest.mark.sqlite_only  # the property needs many stores; the mechanism is the store's own
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(list(range(20))))
def test_any_judging_order_ends_in_the_beliefs_of_the_order_said(
    order, in_order, scripted_server, tmp_path_factory
):
    assert len(in_order) == len({t.split()[1] for t in turns()})  # the last of each slot
    path = str(tmp_path_factory.mktemp("shuffled") / "m.db")
    pol = policy_file(tmp_path_factory.mktemp("pol"), scripted_server.base_url)
    assert judge_in(order, path, pol) == in_order


# ---- clock sanity -----------------------------------------------------------------------
def test_a_pass_that_last_ran_in_the_future_is_due_and_says_the_clock_went_back(memory, clock):
    """A run once at 2099 (a --now typo) left every pass 'not due' for 73 years: the next
    run on the right clock found nothing due and nothing expired again."""
    mem = memory()
    mem.run_due()
    clock.set(dt.datetime(2099, 1, 1))
    mem.run_due()
    clock.set(START + dt.timedelta(days=1))
    mid = mem.add(
        "The deploy freeze lasts until Friday",
        judged=False,
        expires_at=(START + dt.timedelta(days=5)).isoformat(),
    )
    clock.set(START + dt.timedelta(days=6))
    assert set(mem.due()) >= {"expiry", "decay"}
    results = {r.name: r for r in mem.run_due()}
    assert mem.get(mid).status == "expired"
    assert "the clock went back: it last ran at 2099-01-01T00:00:00" in results["expiry"].notes
    assert "the clock went back: it last ran at 2099-01-01T00:00:00" in results["decay"].notes
    assert mem.run_due() == []  # its runs now read the clock's time again: nothing due


def test_a_far_future_now_is_refused_on_a_store_run_on_the_wall_clock(tmp_path):
    db = str(tmp_path / "live.db")
    assert cli("add", "User prefers tabs", "--db", db, "--offline").exit_code == 0
    assert cli("run", "--db", db, "--offline").exit_code == 0  # on the wall clock
    refused = cli("run", "--db", db, "--offline", "--now", "2099-01-01T00:00:00")
    assert refused.exit_code == 2
    assert refused.output.count("\n") == 1 and "--force-time" in refused.output, refused.output
    assert "days ahead of the clock" in refused.output
    with Memory(db) as mem:  # nothing ran at 2099
        assert max(store_of(mem).last_runs(mem.namespace).values()) < "2099"
    forced = cli("run", "--db", db, "--offline", "--now", "2099-01-01T00:00:00", "--force-time")
    assert forced.exit_code == 0 and "decay:" in forced.output
    back = cli("run", "--db", db, "--offline")
    assert "the clock went back: it last ran at 2099-01-01T00:00:00" in back.output
    # reading is not refused, and a store on simulated time only (a scenario's) never is
    assert cli("ls", "--db", db, "--now", "2099-01-01T00:00:00").exit_code == 0
    sim = str(tmp_path / "sim.db")
    assert cli("run", "--db", sim, "--offline", "--now", "2026-03-01T00:00:00").exit_code == 0
    assert cli("run", "--db", sim, "--offline", "--now", "2099-01-01T00:00:00").exit_code == 0
