"""Facts remembered while the model is down are all kept when the rules judge them later
(issue 40): turns that differ in one key word (a tool, a name, an order number, a room)
are distinct facts, never repeats of each other, and never supersede an item with
another identifier."""

from __future__ import annotations

import pytest

from engine import Memory
from tests.helpers.fake_openai import FakeOpenAI, Reply, closed_port_url
from tests.helpers.rows import memories

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

TOOLS = [
    "Terraform",
    "Pulumi",
    "Ansible",
    "Chef",
    "Puppet",
    "SaltStack",
    "Docker",
    "Podman",
    "Kubernetes",
    "Nomad",
    "Helm",
    "Kustomize",
    "Jenkins",
    "CircleCI",
    "Buildkite",
    "Bazel",
    "Gradle",
    "Maven",
    "Poetry",
    "Pipenv",
    "Conda",
    "Vim",
    "Emacs",
    "Neovim",
    "Postgres",
    "MySQL",
    "Redis",
    "Kafka",
    "RabbitMQ",
    "Grafana",
]


def test_thirty_distinct_facts_said_during_an_outage_are_thirty_memories(lethe, db_path, clock):
    down = lethe(closed_port_url())
    turns = [f"From now on I always use {tool} for this kind of work." for tool in TOOLS]
    for text in turns:
        assert down.remember(text, "Noted.") == []  # the model is down: pending
    assert len(down.pending()) == 30
    with Memory(db_path, policy=down.policy, offline=True, clock=clock) as mem:
        mem.run_due()
        assert mem.pending() == []
        rows = memories(mem)
    # each fact is a memory of its own, and no turn only reinforced another's memory
    assert len(rows) == 30
    for tool in TOOLS:
        assert sum(tool in r["content"] for r in rows.values()) == 1, tool


ITEMS = [  # (what is stored, what is said later): another item, never a repeat or an update
    ("Order 1001 is delayed.", "Order 1003 is delayed."),
    ("Room A holds 12 people.", "Room B holds 30 people."),
    ("The March invoice is 1200 euros.", "The April invoice is 1300 euros."),
    ("The meeting with Alice is on Tuesday.", "The meeting with Bob is on Tuesday."),
    ("We deploy with Terraform for this kind of work.", "We deploy with Pulumi for that kind of job."),
    ("Ticket OPS-12 is blocked on the vendor.", "Ticket OPS-19 is blocked on the vendor."),
]


@pytest.mark.parametrize("old,new", ITEMS)
def test_another_item_is_stored_and_leaves_the_first_active(db_path, clock, old, new):
    with Memory(db_path, policy="lifecycle", offline=True, clock=clock) as mem:
        first = mem.add(old, judged=False)
        written = mem.remember(new, "Noted.")
        assert written.stored and not written.reinforced, written.as_dict()
        assert mem.get(first).status == "active"


UPDATES = [  # a running count or a moved value of the same thing: still an update
    (
        "User has completed 4 painting projects since starting classes.",
        "I just finished my 5th painting project since starting classes.",
    ),
    ("User has read 12 books this year.", "I've now read 13 books this year."),
    ("The report deadline is March 15.", "The report deadline moved to April 1."),
    ("Order 1001 ships on May 3.", "Order 1001 was delayed to May 9."),
]


@pytest.mark.parametrize("old,new", UPDATES)
def test_a_count_or_value_of_the_same_thing_still_supersedes(db_path, clock, old, new):
    with Memory(db_path, policy="lifecycle", offline=True, clock=clock) as mem:
        first = mem.add(old, judged=False)
        written = mem.remember(new, "Noted.")
        assert written.superseded == [(first, written.stored[0])], written.as_dict()


def test_a_fact_told_in_passing_inside_a_request_is_kept(db_path, clock):
    turn = (
        "Can you give me some tips on varnishing acrylic paintings? By the way, I'm now at "
        "600 followers on Instagram, which is a nice milestone! Also, how many coats?"
    )
    with Memory(db_path, policy="lifecycle", offline=True, clock=clock) as mem:
        [mid] = mem.remember(turn, "Sure.")
        assert "600 followers" in mem.get(mid).content
        assert "varnish" not in mem.get(mid).content  # the requests are not memories


def test_a_lasting_fact_beside_a_plan_does_not_expire_with_the_plan(db_path, clock):
    turn = (
        "I'm going to the mall this weekend, any sales at H&M? By the way, I've already "
        "got five tops from H&M so far."
    )
    with Memory(db_path, policy="lifecycle", offline=True, clock=clock) as mem:
        written = mem.remember(turn, "Sure.")
        [mid] = [m for m in written.stored if "five tops" in mem.get(m).content]
        assert mem.get(mid).expires_at is None
        assert "weekend" not in mem.get(mid).content  # each fact a memory of its own
        [plan] = mem.remember("I'm going to the mall this weekend.", "Sure.")
        assert mem.get(plan).expires_at is not None  # a plan alone still ends


@pytest.mark.parametrize(
    "text,today,end",
    [
        ("The permit form is due the 3rd.", "2026-04-10", "2026-05-03"),
        ("The free trial ends the 30th.", "2026-04-10", "2026-04-30"),
        ("We have 12 servers in the rack.", "2026-04-10", None),
    ],
)
def test_a_bare_day_after_due_or_ends_is_the_next_such_day(text, today, end):
    from engine.judges.rules import expiry

    assert expiry(text, today) == end


@pytest.mark.parametrize(
    "text,end",
    [
        # when a past event happened (at or before the turn was said) is no end date
        ("I just got back from a pottery class at the community center today.", None),
        ("We had lunch with the new hire on Friday, she is great.", None),
        ("I ran my first half marathon this weekend, finishing in 2 hours.", None),
        ("Finally fixed the leaking tap today, it took three hours.", None),
        # a time ahead still ends the memory, past tense or not
        ("The office is closed today.", "2026-04-10"),
        ("I have a dentist appointment today.", "2026-04-10"),
        ("The retro was moved to Friday.", "2026-04-17"),
        ("I booked a table for tonight.", "2026-04-10"),
        ("I'm going to the lake this weekend.", "2026-04-12"),
        ("I paused the gym membership for two weeks.", "2026-04-24"),
    ],
)
def test_the_day_a_past_event_happened_is_no_end_date(text, end):
    from engine.judges.rules import expiry

    assert expiry(text, "2026-04-10") == end  # a Friday


# one word apart, each about another thing: a person, an order, a room, an invoice, a ticket
ONE_WORD_APART = (
    [f"The meeting with {name} is on Tuesday." for name in ("Alice", "Bob", "Carol", "Dmitri", "Esther")]
    + [f"Order {n} is delayed." for n in (1001, 1002, 1003, 1017, 2040)]
    + [f"Room {room} holds 12 people." for room in "ABCDE"]
    + [f"The {month} invoice is paid." for month in ("March", "April", "May", "June", "July")]
    + [f"Ticket OPS-{n} is blocked on the vendor." for n in (12, 19, 23, 31, 40)]
    + [f"The {name} project is due in May." for name in ("Apollo", "Gemini", "Kepler", "Vega", "Orion")]
)


def test_thirty_facts_one_word_apart_said_while_the_server_fails_are_thirty_memories(lethe, db_path, clock):
    """The model's server answers every request with a 503 (the OpenAI client over HTTP):
    each turn stays pending, and judged afterwards by the rules each becomes a memory of
    its own, still active: none is taken for a repeat of another, none retires another."""
    assert len(set(ONE_WORD_APART)) == 30
    with FakeOpenAI(lambda request: Reply(status=503, content="the model is loading")) as fake:
        down = lethe(fake.base_url)
        for text in ONE_WORD_APART:
            assert down.remember(text, "Noted.") == []
        assert len(down.pending()) == 30 and fake.requests
    with Memory(db_path, policy=down.policy, offline=True, clock=clock) as mem:
        mem.run_due()
        assert mem.pending() == []
        rows = memories(mem)
    gone = sorted(r["content"] for r in rows.values() if r["status"] != "active")
    assert len(rows) == 30 and gone == []
    for text in ONE_WORD_APART:
        assert sum(r["content"].rstrip(".") in text for r in rows.values()) <= 1
