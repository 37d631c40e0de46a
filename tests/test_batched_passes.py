"""`batch:` passes commit in id ranges, resume where they stopped, and end up exactly
where one transaction would have."""

import datetime as dt
import shutil
import sqlite3

import pytest

from bench import seed_article
from engine import Memory
from tests.helpers import POLICIES, START, store_of
from tests.helpers.batched import batched_policy, state

T = START + dt.timedelta(days=1)


@pytest.fixture
def pair(tmp_path):
    a, b = str(tmp_path / "one.db"), str(tmp_path / "batched.db")
    seed_article.generate(a, 5000, START, seed=3)
    shutil.copy(a, b)
    return a, b


@pytest.mark.parametrize("base", ["lifecycle", "scheduled-sql"])
def test_batched_equals_one_transaction(tmp_path, pair, base):
    a, b = pair
    with Memory(a, policy=f"{POLICIES}/{base}.yaml", clock=lambda: T, offline=True) as one:
        one.run(["expiry", "decay"])
    with Memory(b, policy=batched_policy(tmp_path, base), clock=lambda: T, offline=True) as many:
        results = many.run(["expiry", "decay"])
    assert state(a) == state(b)
    assert results[1].changed > 0


def test_an_interrupted_batched_pass_resumes_with_its_own_now(tmp_path, pair):
    """scheduled-sql's x0.9 decay is not idempotent: a batch run twice would show."""
    a, b = pair
    later = T + dt.timedelta(hours=5)
    ref_clock = {"now": T}
    with Memory(
        a, policy=f"{POLICIES}/scheduled-sql.yaml", clock=lambda: ref_clock["now"], offline=True
    ) as one:
        one.run(["decay"])  # the reference: decay at T, then expiry (also due) later
        ref_clock["now"] = later
        one.run(["expiry"])
    clock = {"now": T}
    mem = Memory(
        b, policy=batched_policy(tmp_path, "scheduled-sql"), clock=lambda: clock["now"], offline=True
    )
    # fail in the middle: the batches before the failing one stay committed
    store_of(mem).db.execute("""CREATE TRIGGER boom BEFORE UPDATE OF decay_score ON memory_rows
                            WHEN old.id > 2500 BEGIN SELECT RAISE(ABORT, 'power cut'); END""")
    with pytest.raises(sqlite3.IntegrityError):
        mem.run(["decay"])
    cursor = store_of(mem).db.execute("SELECT cursor FROM pass_progress").fetchone()[0]
    assert 1 < cursor <= 2501
    assert "decay" in mem.due()
    store_of(mem).db.execute("DROP TRIGGER boom")
    clock["now"] = later  # the resume happens later...
    (result,) = [r for r in mem.run_due() if r.name == "decay"]
    assert result.ran_at == T.isoformat() and result.notes == ["resumed an interrupted run"]
    mem.close()
    assert state(a) == state(b)  # ...and still equals one run at T: no batch twice
    assert sqlite3.connect(b).execute("SELECT count(*) FROM pass_progress").fetchone()[0] == 0


def test_batch_must_be_a_positive_whole_number(tmp_path):
    from engine.base.errors import PolicyError
    from engine.policy import load

    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\nextends: {POLICIES}/lifecycle.yaml\npasses:\n  decay:\n    batch: 0\n")
    with pytest.raises(PolicyError, match=r"bad.yaml:5:\d+: passes.decay.batch: must be a whole number"):
        load(str(path))
