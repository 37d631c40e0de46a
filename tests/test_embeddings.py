"""Embeddings as an optional model kind: vectors at write time (never blocking it), a
backfill after an outage, hybrid candidates, `similarity` in formulas, `--offline`.

The `openai` provider talks HTTP to the local test server (tests/helpers/fake_openai.py), whose
/v1/embeddings answers with vectors a test chooses; the real local model has its own file
(tests/test_local_model.py)."""

from __future__ import annotations

import random
from array import array

import pytest

from engine import FixedClock, Memory, PolicyError, load_policy
from engine.judges.embeddings import cosine, pack
from engine.plan import compile_policy, render_plan
from engine.run.write import Judged
from engine.store.sqlite import vectors as store_vectors
from tests.helpers import context_of, store_of, writer_of
from tests.helpers.embeddings import embedding_policy, topic_vector
from tests.helpers.fake_openai import FakeOpenAI, word_vector

pytest.importorskip("sqlite_vec", reason="the embed extra (sqlite-vec) is not installed")


@pytest.fixture
def fake():
    with FakeOpenAI(embedder=topic_vector) as server:
        yield server


def memory(tmp_path, policy, offline=False) -> Memory:
    return Memory(
        str(tmp_path / "m.db"), policy=policy, offline=offline, clock=FixedClock("2026-03-02T09:00:00")
    )


def test_a_write_stores_the_memorys_vector(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        mem.add("User eats chicken most days.", judged=False)
        mem.remember("I use Linear for bugs.", "Noted.")
        assert store_of(mem).vector_count("default", "openai:text-embedding-3-small") == (2, 0)
    assert fake.embedding_requests[0]["model"] == "text-embedding-3-small"


def test_an_embedding_server_of_the_policys_own_never_gets_the_developers_key(tmp_path, fake, monkeypatch):
    """Before: `embed:` built its own client, and OPENAI_API_KEY and OPENAI_ORG_ID went to
    whatever base_url the policy named (chat models had kept them at home since the
    keys round). Now embeddings follow engine/judges/endpoint.py as chat models do."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-developer")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-developer")
    monkeypatch.delenv("LETHE_MODEL_KEYS", raising=False)
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        mem.add("User eats chicken most days.", judged=False)
    assert fake.embedding_headers, "no embedding request was made"
    for headers in fake.embedding_headers:
        assert "sk-developer" not in str(headers) and "openai-organization" not in headers


def test_a_bad_or_resized_embedding_never_blocks_a_write_nor_breaks_recall(tmp_path, fake):
    """Before: a server answering vectors of 3 or 0 numbers made `add` fail ('Binary
    quantization...') and store nothing; one answering 16 numbers after 8 left a store
    whose every recall failed ('Vector dimension mismatch'), even once the server was
    back to 8. Now such a vector is not stored and the step goes on with full text."""
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        for bad in ([0.5, 0.5, 0.5], [], [float("nan")] * 8, ["x"] * 8):
            fake.embedder = lambda text, bad=bad: bad
            assert mem.add(f"User likes {len(bad)} tea.", judged=False)
        fake.embedder = lambda text: word_vector(text, 8)
        mem.add("User eats chicken most days.", judged=False)
        fake.embedder = lambda text: word_vector(text, 16)
        mem.add("User cooks chicken on Sundays.", judged=False)
        assert [r.content for r in mem.recall("chicken")]  # the query's 16 numbers: full text
        fake.embedder = lambda text: word_vector(text, 8)
        assert [r.content for r in mem.recall("chicken")]
        assert store_of(mem).vector_size("default", mem.policy.embed.name) == 8 * 4
        assert store_of(mem).vector_count("default", mem.policy.embed.name)[0] == 1


def test_an_embedding_outage_never_blocks_a_write_and_backfill_fills_it(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        fake.embeddings_down = True
        written = mem.remember("I use Linear for bugs.", "Noted.")
        assert written.stored and not mem.pending()
        assert store_of(mem).vector_count("default", mem.policy.embed.name)[0] == 0
        fake.embeddings_down = False
        results = mem.run_due()
        assert results[0].name == "embeddings" and results[0].changed == 1
        assert store_of(mem).vector_count("default", mem.policy.embed.name)[0] == 1


def test_contradiction_candidates_include_neighbours_sharing_no_word(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        old = mem.add("User eats chicken or beef most days.", judged=False)
        mem.add("The team tracks bugs in Jira.", judged=False)
        judged = writer_of(mem).judging.judge_turn("I'm vegan now.", "Noted.")  # shares no word
        step = next(s for s in mem.policy.write if s.step == "contradiction")
        shown = writer_of(mem).judging.candidates(step, judged[0], {"user": "I'm vegan now."})
        assert [c["id"] for c in shown][0] == old
        assert shown[0]["similarity"] > 0.9


def test_offline_skips_openai_embeddings_and_stays_full_text(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake), offline=True) as mem:
        mem.add("User eats chicken most days.", judged=False)
        mem.remember("I use Linear for bugs.", "Noted.")
        assert mem.recall("chicken")
        assert store_of(mem).vector_count("default", mem.policy.embed.name)[0] == 0
    assert fake.embedding_requests == []


def test_recall_candidates_add_the_querys_nearest_neighbours(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        food = mem.add("User eats chicken or beef most days.", judged=False)
        mem.add("The team tracks bugs in Jira.", judged=False)
        shown, _ = __import__("engine.run.recall", fromlist=["choose"]).choose(context_of(mem), "diet")
        assert food in [c.id for c in shown]


def test_similarity_is_a_formula_word_in_recall_and_candidates(tmp_path, fake):
    extra = """recall:
  where: "status = 'active' and decay_score > recall_floor and (similarity > 0.5 or relevance > 0)"
  order: "similarity desc, rank"
  limit: 10
"""
    path = embedding_policy(tmp_path, fake, extra)
    assert "vec_distance_cosine" in render_plan(compile_policy(load_policy(path)))
    with memory(tmp_path, path) as mem:
        food = mem.add("User eats chicken or beef most days.", judged=False)
        mem.add("The team tracks bugs in Jira.", judged=False)
        assert [c.id for c in mem.candidates("vegan diet", scored=True)] == [food]


def test_similarity_needs_an_embedding_model(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nextends: lifecycle\nrecall: {order: 'similarity desc'}\n")
    with pytest.raises(PolicyError, match="similarity.*embedding model"):
        load_policy(str(path))


def test_an_unknown_embedding_provider_is_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nextends: lifecycle\nembed: {provider: magic, model: x}\n")
    with pytest.raises(PolicyError, match="unknown provider 'magic'; known: openai, local"):
        load_policy(str(path))


def test_compression_reads_pair_similarity(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        ids = [
            mem.add(t, judged=False)
            for t in (
                "User eats chicken most days.",
                "User's diet is beef and chicken.",
                "The team tracks bugs in Jira.",
                "Bugs live in the Jira tracker.",
                "User is tall.",
            )
        ]
        pairs = store_of(mem).pair_similarities(mem.policy.embed.name, ids)
        assert pairs[(ids[0], ids[1])] > 0.9 and pairs[(ids[0], ids[2])] < 0.5


def random_vectors(mem, n: int, seed: int) -> dict[int, bytes]:
    """n memories with random 32-dimension vectors, in one transaction: id -> vector."""
    rng, model, vecs = random.Random(seed), mem.policy.embed.name, {}
    with store_of(mem).transaction():
        for _ in range(n):
            v = pack([rng.gauss(0, 1) for _ in range(32)])
            mid = store_of(mem).insert_memory({"content": "x", "namespace": "default"})
            store_of(mem).save_vector(mid, "default", model, v)
            vecs[mid] = v
    return vecs


def test_the_vector_index_finds_the_nearest_after_a_reindex(tmp_path, monkeypatch, fake):
    monkeypatch.setattr(store_vectors, "CELL_SIZE", 16)
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        model = mem.policy.embed.name
        vecs = random_vectors(mem, 400, seed=5)
        assert store_of(mem).reindex("default", model) == 25
        assert store_of(mem).vector_count("default", model) == (400, 25)
        hits = 0
        for mid, v in list(vecs.items())[:50]:
            near = array("f", v)
            near[0] += 0.05
            hits += mid in store_of(mem).nearest("default", model, pack(near), 2)
        assert hits >= 45  # an approximate index: nearly always the true neighbour


def test_a_reindex_by_another_connection_is_seen_by_a_search(tmp_path, monkeypatch, fake):
    # the centroids are kept in memory: another store's reindex must make them stale
    monkeypatch.setattr(store_vectors, "CELL_SIZE", 16)
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        model = mem.policy.embed.name
        vecs = random_vectors(mem, 200, seed=6)
        assert all(
            mid in store_of(mem).nearest("default", model, v, 1) for mid, v in list(vecs.items())[:5]
        )  # one cell, scanned whole: exact
        with memory(tmp_path, embedding_policy(tmp_path, fake)) as other:
            assert store_of(other).reindex("default", model) == 12
        hits = sum(mid in store_of(mem).nearest("default", model, v, 2) for mid, v in list(vecs.items())[:40])
        assert hits >= 36  # with the old (no) cells it would probe only cell 0, now empty


def test_the_search_beside_runs_on_its_own_connection_and_finds_the_same(tmp_path, monkeypatch, fake):
    # the vector index is searched on a second connection, in a thread, while the caller
    # runs its full-text query; it must find what the store's own connection finds, see
    # another connection's reindex, and inside a transaction see that transaction's rows
    monkeypatch.setattr(store_vectors, "CELL_SIZE", 16)
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        store, model = store_of(mem), mem.policy.embed.name
        vecs = list(random_vectors(mem, 300, seed=8).values())
        with memory(tmp_path, embedding_policy(tmp_path, fake)) as other:
            store_of(other).reindex("default", model)
        futures = [store.nearest_beside("default", model, v, 3) for v in vecs[:30]]
        assert [f.result() for f in futures] == [store.nearest("default", model, v, 3) for v in vecs[:30]]
        db, pool = store._beside
        assert db is not store.db
        # this store's own commits (a write, a recall's access) keep the cells read
        held = store._centroid_cache[("default", model)]
        with store.transaction():
            store.insert_memory({"content": "z", "namespace": "default"})
        store.nearest_beside("default", model, vecs[2], 3).result()
        assert store._centroid_cache[("default", model)] is held
        with memory(tmp_path, embedding_policy(tmp_path, fake)) as other:  # another's: read again
            store_of(other).reindex("default", model)
        assert store.nearest_beside("default", model, vecs[2], 3).result() == store.nearest(
            "default", model, vecs[2], 3
        )
        assert store._centroid_cache[("default", model)] is not held
        with store.transaction():
            mid = store.insert_memory({"content": "y", "namespace": "default"})
            store.save_vector(mid, "default", model, vecs[0])
            assert mid in store.nearest_beside("default", model, vecs[0], 2).result()
        store.close_beside()
        assert store._beside is None
        assert store.nearest_beside("default", model, vecs[1], 3).result() == store.nearest(
            "default", model, vecs[1], 3
        )


def test_hybrid_candidates_are_the_same_with_the_search_beside_or_not(tmp_path, fake):
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        for text in (
            "User eats vegan food.",
            "User eats beef on Sundays.",
            "The team tracks bugs in Jira.",
            "User keeps a chicken diet.",
            "Bugs go to Linear now.",
        ):
            mem.add(text)
        step = next(s for s in mem.policy.write if s.step == "contradiction")
        new = "User went on a beef diet."
        beside = writer_of(mem).judging.candidates(step, Judged(content=new), {"user": new})
        store_of(mem).nearest_beside = None  # the store offers no second connection
        alone = writer_of(mem).judging.candidates(step, Judged(content=new), {"user": new})
        assert beside == alone and len(alone) >= 3
        assert store_of(mem)._beside is not None  # the first call did search beside


def test_pack_is_unit_length_and_cosine_reads_it():
    v = pack([3.0, 4.0])
    assert cosine(v, v) == pytest.approx(1.0)
    assert cosine(pack(word_vector("deploy the app")), pack(word_vector("deploy the app"))) == pytest.approx(
        1.0
    )


# -- vectors that cannot be compared, and embedding failures (issue 42, findings 5 and 6)
def _embed_calls(mem) -> list:
    return [
        dict(r)
        for r in store_of(mem).db.execute(
            "SELECT step, outcome, detail FROM model_calls WHERE step = 'embed'"
        )
    ]


def _every_path_works(mem) -> None:
    """A judged add, a remember, a recall and a compression all go on (full text)."""
    assert mem.add("User eats chicken and beef most days.", importance=5)
    written = mem.remember("I track bugs in Linear now.", "Noted.")
    assert not mem.pending(), mem.pending()
    assert written.stored or written.reinforced or written.superseded
    assert [r.content for r in mem.recall("chicken")]
    results = mem.run(["compression"])
    assert results[0].name == "compression"


def test_a_zero_vector_is_never_stored_and_never_wedges_a_write(tmp_path, fake):
    """Before: sqlite-vec's cosine with an all-zero vector is NULL; `round(similarity)`
    raised, every judged add was an internal error and every remember was parked."""
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        for text in (
            "User eats chicken most days.",
            "User's diet is beef and chicken.",
            "The team tracks bugs in Jira.",
            "Bugs live in the Jira tracker.",
            "User is tall.",
        ):
            mem.add(text, judged=False)
        fake.embedder = lambda text: [0.0] * 8
        mem.add("User likes zero tea.", judged=False)
        assert store_of(mem).vector_count("default", mem.policy.embed.name)[0] == 5
        _every_path_works(mem)


@pytest.mark.parametrize(
    "corrupt",
    [
        "vector = zeroblob(32)",
        "vector = randomblob(32)",
        "vector = randomblob(7)",
        "bits = randomblob(3)",
        "vector = X'0000C07F0000C07F0000C07F0000C07F0000C07F0000C07F0000C07F0000C07F'",
    ],
)
def test_a_corrupt_vector_row_never_wedges_writes_recall_or_compression(tmp_path, fake, corrupt):
    """Before: a zeroed or random blob in memory_vectors made every judged add, recall and
    compression fail (NULL similarity, 'Unknown type for bitvector')."""
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        for text in (
            "User eats chicken most days.",
            "User's diet is beef and chicken.",
            "The team tracks bugs in Jira.",
            "Bugs live in the Jira tracker.",
            "User is tall.",
        ):
            mem.add(text, judged=False)
        store_of(mem).db.execute(f"UPDATE memory_vectors SET {corrupt}")
        store_of(mem).db.commit()
        _every_path_works(mem)


def test_an_embedding_server_that_returns_no_vectors_is_an_outage_logged_in_model_calls(tmp_path, fake):
    """Before: `ValueError: No embedding data received` from the client made add and
    recall internal errors. Now it is an embedding failure: the step goes on with full
    text and the failure is a row of model_calls (step embed, outcome unavailable)."""
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:
        mem.add("User eats chicken most days.", judged=False)
        fake.embeddings_empty = True
        assert mem.add("User's diet is beef and chicken.")
        assert [r.content for r in mem.recall("chicken")]
        written = mem.remember("I track bugs in Linear now.", "Noted.")
        assert not mem.pending() and (written.stored or written.reinforced)
        calls = _embed_calls(mem)
        assert calls and {c["outcome"] for c in calls} == {"unavailable"}
        assert all(c["detail"] for c in calls)
        fake.embeddings_empty = False
        fake.embeddings_down = True
        mem.add("User is tall.")
        assert len(_embed_calls(mem)) > len(calls)


def test_an_embedder_that_raises_anything_is_an_outage(tmp_path, fake):
    """Any failure inside an embedder (a local model's own exception too) is an outage."""
    with memory(tmp_path, embedding_policy(tmp_path, fake)) as mem:

        def broken(texts):
            raise RuntimeError("CUDA out of memory")

        context_of(mem).embedder.embed = broken
        assert mem.add("User eats chicken most days.")
        assert [r.content for r in mem.recall("chicken")]
        assert _embed_calls(mem)[0]["outcome"] == "unavailable"
