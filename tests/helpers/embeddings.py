"""Embeddings for tests: vectors that point by topic whatever the words, and a policy
whose embedding model is a FakeOpenAI."""

from __future__ import annotations

TOPICS = {
    "food": ("vegan", "beef", "chicken", "eat", "eats", "diet"),
    "bugs": ("jira", "linear", "bugs", "tracker"),
}


def topic_vector(text: str) -> list[float]:
    """Texts on one topic point the same way, whatever words they use."""
    words = set(text.lower().replace(",", " ").replace(".", " ").split())
    vec = [0.0] * 8
    for i, cue in enumerate(TOPICS.values()):
        vec[i] = float(len(words & set(cue)))
    vec[7] = 0.2  # never a zero vector
    return vec


def embedding_policy(tmp_path, fake, extra: str = "") -> str:
    """A policy extending lifecycle whose embeddings come from `fake` (rules judges)."""
    path = tmp_path / "embedded.yaml"
    path.write_text(
        f"""name: embedded
extends: lifecycle
models:
  cheap: {{provider: rules}}
  strong: {{provider: rules}}
embed: {{provider: openai, model: text-embedding-3-small, base_url: "{fake.base_url}",
         max_retries: 0, timeout: 5}}
{extra}""",
        encoding="utf-8",
    )
    return str(path)
