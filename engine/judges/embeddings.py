"""Embedding models: text -> a unit-length float32 vector, as bytes (what sqlite-vec reads).

Two providers, both optional: `openai` (any OpenAI-compatible `/v1/embeddings`: OpenAI,
Ollama, vLLM, llama.cpp server) and `local` (sentence-transformers, the `local` extra).
`--offline` skips `openai` (no network) but keeps `local`, which makes no network call.
A local model is loaded once per process and shared by every store that names it.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sqlite3
import threading
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.base.distribution import extra_error, install, is_missing
from engine.base.errors import LetheError
from engine.judges import endpoint
from engine.policy.types import Embed


class EmbeddingUnavailable(LetheError):
    """The embedding model could not answer: the write goes on without a vector."""


def pack(values) -> bytes:
    """A vector as unit-length float32 bytes (zero vectors stay zero)."""
    floats = [float(v) for v in values]
    norm = math.sqrt(sum(v * v for v in floats)) or 1.0
    return array("f", (v / norm for v in floats)).tobytes()


def cosine(a: bytes, b: bytes) -> float:
    """Cosine of two packed (unit-length) vectors."""
    return sum(x * y for x, y in zip(array("f", a), array("f", b)))


class OpenAIEmbedder:
    """`POST /v1/embeddings` through the openai client; failures are EmbeddingUnavailable."""

    remote = True  # a vector is a round trip away

    def __init__(self, spec: Embed):
        self.spec, self.name = spec, spec.name
        self.recent: dict[str, object] = {}
        # keys as a chat model's (engine/judges/endpoint.py): $OPENAI_API_KEY goes only to
        # $OPENAI_BASE_URL or OpenAI's own endpoint, never to a base_url the policy chose
        self.endpoint = endpoint.resolve(spec.base_url, spec.api_key_env)
        self._client: Any = None

    def embed(self, texts: list[str]) -> list[bytes]:
        import openai

        if self._client is None:
            try:
                self._client = endpoint.openai_client(
                    self.endpoint,
                    self.spec.model,
                    timeout=self.spec.timeout,
                    max_retries=self.spec.max_retries,
                )
            except endpoint.NoKey as exc:
                raise EmbeddingUnavailable(str(exc)) from None
        try:
            reply = self._client.embeddings.create(model=self.spec.model, input=list(texts))
        except (openai.OpenAIError, ValueError) as err:  # its words without the base URL's
            # secrets; ValueError: the client's own 'No embedding data received'
            said = endpoint.scrub(str(err), self.endpoint.base_url)
            raise EmbeddingUnavailable(f"embeddings from {self.spec.model}: {said}") from err
        data = sorted(reply.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise EmbeddingUnavailable(f"{self.spec.model} gave {len(data)} vectors for {len(texts)} texts")
        for d in data:  # a hostile or broken server's answer: refused, never packed
            values = d.embedding
            if (
                not isinstance(values, list)
                or not values
                or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values
                )
            ):
                raise EmbeddingUnavailable(
                    f"{self.spec.model} gave an embedding that is not a list of finite numbers"
                )
        return [pack(d.embedding) for d in data]


_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _local_model(where: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(where, device="cpu")


def model_path(model: str) -> str:
    """Where a local model is: `package:NAME` is the model folder a Python package ships
    (its `get_model_path()`, or a `model/` folder inside it); anything else is a path or a
    name sentence-transformers resolves (from its cache when HF_HUB_OFFLINE=1)."""
    if not model.startswith("package:"):
        return model
    name = model.split(":", 1)[1]
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        if not is_missing(exc, (name.split(".")[0],)):
            raise LetheError(
                f"embedding model {model}: package '{name}' does not import: {type(exc).__name__}: {exc}"
            ) from None
        raise LetheError(
            f"embedding model {model}: no Python package '{name}' ({install('local')})"
        ) from None
    found = getattr(module, "get_model_path", None)
    return str(found() if found else Path(module.__file__ or ".").parent / "model")


def missing_extras(spec: Embed | None) -> list[tuple[str, str]]:
    """What an embedding spec needs that is not installed, as (extra, module) pairs:
    `lethe validate` fails on them where the first write would."""
    if spec is None:
        return []
    need = [("embed", "numpy")]  # where no extension loads, sqlite-vec's functions are Python's
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        need.append(("embed", "sqlite_vec"))
    if spec.provider == "local":
        need.append(("local", "sentence_transformers"))
        if spec.model.startswith("package:"):
            need.append(("local", spec.model.split(":", 1)[1]))
    return [(extra, module) for extra, module in need if not _installed(module)]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class LocalEmbedder:
    """sentence-transformers on the CPU, loaded once per process per model."""

    remote = False

    def __init__(self, spec: Embed):
        self.spec, self.name = spec, spec.name
        self.recent: dict[str, object] = {}
        try:
            import sentence_transformers  # noqa: F401
        except ImportError as exc:
            raise extra_error(
                exc,
                "local",
                "a local embedding model (sentence-transformers)",
                ("sentence_transformers", "torch", "transformers"),
                install_line=install("local").replace("install ", "install torch==2.13.0 "),
            ) from None
        self.where = model_path(spec.model)

    def embed(self, texts: list[str]) -> list[bytes]:
        with _LOCK:  # one model, shared by every thread of the process
            vectors = _local_model(self.where).encode(
                list(texts), normalize_embeddings=True, show_progress_bar=False
            )
        return [pack(v) for v in vectors]


def make_embedder(spec: Embed | None, offline: bool = False):
    """The policy's embedder, or None (no `embed:`, or an `openai` one while offline)."""
    if spec is None or (offline and spec.provider == "openai"):
        return None
    return LocalEmbedder(spec) if spec.provider == "local" else OpenAIEmbedder(spec)
