"""One bad turn never wedges the queue (issue 12, finding 6): whatever goes wrong judging
a turn is recorded on it (attempts, last error, next try after a backoff on the injected
clock); after three such failures it is parked as `failed`, shown by `lethe pending` and
retried by hand; meanwhile other turns, passes and recall go on."""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory, PolicyError
from engine.cli import main
from tests.helpers import START, run_sql, store_of
from tests.helpers.fake_openai import FakeOpenAI

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

# the gate's template fails on a turn that names quasar: text inside a turn that breaks
# judging, as an obedient model answering hostile text would
FRAGILE = """name: fragile
prompts: prompts
models: {m: {provider: rules}}
write: [{step: gate, model: m, prompt: gate.j2}]
passes:
  expiry:
    every: 1h
    rules:
      - {when: "status = 'active' and expires_at < now", set: {status: expired}, event: expired}
"""


@pytest.fixture
def fragile(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "gate.j2").write_text("{{ 1 / (0 if 'quasar' in user else 1) }} {{ user }}\n")
    policy = tmp_path / "fragile.yaml"
    policy.write_text(FRAGILE)
    return str(policy)


def turns(mem) -> dict:
    return {t["user_text"]: t for t in mem.pending()}


def stale(mem) -> int:
    """A memory whose expiry has passed but no expiry pass has run yet (`add()` refuses an
    expiry in the past, so it is dated back as an old row would be)."""
    mid = mem.add("The 2020 offsite is in Lisbon", judged=False)
    run_sql(store_of(mem), "UPDATE memories SET expires_at = ? WHERE id = ?", ("2020-01-01T23:59:59", mid))
    return mid


def test_a_turn_that_fails_is_recorded_backed_off_then_parked(fragile, db_path):
    clock = FixedClock(START)
    mem = Memory(db_path, policy=fragile, offline=True, clock=clock)
    old = stale(mem)
    with pytest.raises(PolicyError, match="ZeroDivisionError"):
        mem.remember("I use quasar dashboards every day.", "ok")  # the caller hears of a broken policy...
    bad = turns(mem)["I use quasar dashboards every day."]  # ...and the turn keeps what happened
    assert (bad["status"], bad["attempts"], bad["failures"]) == ("pending", 1, 1)
    assert "ZeroDivisionError" in bad["last_error"]
    assert bad["next_retry_at"] == "2026-01-05T09:01:00"

    assert len(mem.remember("I use Python for scripts.", "ok")) == 1  # the queue goes on
    [pending, expiry] = mem.run_due()  # the bad turn waits out its backoff; passes run
    assert (pending.name, pending.changed, expiry.events) == ("pending", 0, {"expired": 1})
    assert mem.get(old).status == "expired"
    assert turns(mem)["I use quasar dashboards every day."]["attempts"] == 1

    clock.advance(dt.timedelta(minutes=1))
    mem.run_due()
    assert (
        turns(mem)["I use quasar dashboards every day."]["failures"],
        turns(mem)["I use quasar dashboards every day."]["next_retry_at"],
    ) == (2, "2026-01-05T09:05:00")
    clock.advance(dt.timedelta(minutes=4))
    mem.run_due()
    parked = turns(mem)["I use quasar dashboards every day."]
    assert (parked["status"], parked["attempts"], parked["next_retry_at"]) == ("failed", 3, None)
    clock.advance(dt.timedelta(days=1))
    mem.run_due()  # parked: never tried again by itself
    assert turns(mem)["I use quasar dashboards every day."]["attempts"] == 3
    assert [m.content for m in mem.recall("python")] == ["User uses Python for scripts."]
    mem.close()


def test_lethe_pending_shows_a_parked_turn_and_retry_requeues_it(fragile, db_path, tmp_path):
    clock = FixedClock(START)
    with Memory(db_path, policy=fragile, offline=True, clock=clock) as mem:
        for minutes in (0, 1, 4):
            clock.advance(dt.timedelta(minutes=minutes))
            try:
                mem.remember("I use quasar dashboards every day.", "ok") if minutes == 0 else mem.run_due()
            except PolicyError:
                pass
        [turn] = mem.pending()
        assert turn["status"] == "failed"
    args = ["--db", db_path, "--policy", fragile, "--offline"]
    out = CliRunner().invoke(main, ["pending", *args])
    assert out.exit_code == 0, out.output
    assert f"turn {turn['id']} FAILED (3 attempts, last error: PolicyError" in out.output
    assert f"retry with `lethe pending --retry {turn['id']}`" in out.output

    # the policy is fixed; the turn goes back in the queue, and the next run judges it
    (tmp_path / "prompts" / "gate.j2").write_text("{{ user }}\n")
    out = CliRunner().invoke(main, ["pending", *args, "--retry", str(turn["id"]), "--json"])
    assert out.exit_code == 0, out.output
    [again] = json.loads(out.output)
    assert (again["status"], again["failures"], again["next_retry_at"]) == ("pending", 0, None)
    out = CliRunner().invoke(main, ["run", *args, "--now", "2026-01-05T09:10:00"])
    assert out.exit_code == 0, out.output
    assert "pending: 1 changed" in out.output
    assert CliRunner().invoke(main, ["pending", *args]).output.strip() == "nothing pending"


def test_run_retry_failed_judges_parked_turns_now(fragile, db_path, tmp_path):
    clock = FixedClock(START)
    with Memory(db_path, policy=fragile, offline=True, clock=clock) as mem:
        for minutes in (0, 1, 4):
            clock.advance(dt.timedelta(minutes=minutes))
            try:
                mem.remember("I use quasar dashboards every day.", "ok") if minutes == 0 else mem.run_due()
            except PolicyError:
                pass
        (tmp_path / "prompts" / "gate.j2").write_text("{{ user }}\n")
        mem.run_due()
        assert mem.pending()[0]["status"] == "failed"
        [pending, *_] = mem.run_due(retry_failed=True)
        assert (pending.name, pending.changed) == ("pending", 1)
        assert mem.pending() == [] and mem.counts() == {"active": 1}


# the answers from the issue: valid JSON that raised something other than a bad answer
HOSTILE_CONTRADICTIONS = [
    '{"supersedes": [NaN], "confirms": []}',
    '{"supersedes": [1e999], "confirms": []}',
    "[" * 100_000 + "]" * 100_000,
]


@pytest.mark.parametrize("answer", HOSTILE_CONTRADICTIONS, ids=["nan", "1e999", "deep"])
def test_a_hostile_answer_never_wedges_the_queue(tmp_path, db_path, answer):
    """Before: an internal error, the turn pending with 0 attempts, and every later run
    crashing on it, so no pass ran again. Now the turn is judged (the answer refused) or
    recorded, and `lethe run` goes on to the passes."""

    def responder(request):
        prompt = json.dumps(request["messages"])
        if "supersedes" in prompt and "confirms" in prompt:
            return answer
        if "save" in prompt:
            return '{"save": true, "content": "We use MySQL now", "importance": 5}'
        return '{"confidence": 0.8, "expires_at": null}'

    with FakeOpenAI(responder=responder) as fake:
        policy = tmp_path / "p.yaml"
        model = f'{{provider: openai, model: m, base_url: "{fake.base_url}", max_retries: 0, timeout: 5}}'
        policy.write_text(f"name: p\nextends: lifecycle\nmodels: {{cheap: {model}, strong: {model}}}\n")
        clock = FixedClock(START)
        with Memory(db_path, policy=str(policy), clock=clock) as mem:
            mem.add("We use PostgreSQL", judged=False)
            old = stale(mem)
            mem.remember("We moved from PostgreSQL to MySQL.", "Noted.")
            for turn in mem.pending():
                assert turn["attempts"] >= 1 and turn["last_error"]
        out = CliRunner().invoke(
            main, ["run", "--db", db_path, "--policy", str(policy), "--now", "2026-01-05T10:00:00"]
        )
        assert out.exit_code == 0, out.output
        with Memory(db_path, policy=str(policy), clock=clock) as mem:
            assert mem.get(old).status == "expired"
            for turn in mem.pending():
                assert turn["attempts"] >= 1 and turn["last_error"]
            assert all(math.isfinite(m.confidence) for m in mem.memories("all"))
