"""A chat agent that uses its memory, in the shape of seed C's worker agent: recall for
the user's message, answer with a chat model whose prompt (`prompts/chat.j2`) holds the
recalled memories, then feed the exchange to `remember`.

The answering model is separate from the policy's judges: any OpenAI-compatible endpoint.
Without one (offline, no key, or `answer=False`) the agent still runs; each turn then
shows what was recalled and what was stored instead of an answer.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from engine import prompts
from engine.judges import Answer, JudgeUnavailable
from engine.judges.openai import OpenAIProvider
from engine.steps.answers import today

DEFAULT_MODEL = "gpt-4o-mini"
TEMPLATE = "chat.j2"


@dataclass
class Turn:
    """One exchange: what was recalled for it, the answer, and what remember stored."""

    user: str
    recalled: list  # MemoryRecord, as recall returned them
    answer: str | None  # None: no model answered
    stored: list  # MemoryRecord stored or reinforced by remember
    pending: int = 0  # turns waiting for a judge model (not lost)
    note: str | None = None  # why there is no answer, when there is none
    written: Any = None  # what remember did (engine.run.write.Written)
    superseded: list = field(default_factory=list)  # (old MemoryRecord, new id) pairs

    def as_dict(self) -> dict:
        done = self.written.as_dict() if self.written is not None else {}
        for entry, (old, _) in zip(done.get("superseded", []), self.superseded):
            entry["content"] = old.content
        return {
            "user": self.user,
            "recalled": [m.as_dict() for m in self.recalled],
            "answer": self.answer,
            "stored": [m.as_dict() for m in self.stored],
            "pending": self.pending,
            "note": self.note,
            **{k: done[k] for k in ("reinforced", "superseded", "expiring") if k in done},
        }


class ChatModel:
    """The answering model: plain text (no JSON mode) from an OpenAI-compatible endpoint."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        api_key_env: str | None = None,
        temperature: float = 0.3,
        timeout: float = 60.0,
        max_retries: int = 1,
    ):
        self.model = model
        self.provider = OpenAIProvider(
            model,
            temperature=temperature,
            base_url=base_url,
            api_key_env=api_key_env,
            timeout=timeout,
            max_retries=max_retries,
            json_mode=False,
        )

    def complete(self, system: str, user: str):
        return self.provider.complete(user, system=system)

    def close(self) -> None:
        self.provider.close()


def chat_model_for(
    model: str = DEFAULT_MODEL,
    base_url: str | None = None,
    offline: bool = False,
    answer: bool = True,
    api_key_env: str = "OPENAI_API_KEY",
) -> tuple[ChatModel | None, str | None]:
    """The chat model to answer with, or None and the reason there is none.

    `offline` keeps the judges on their rules and, unless `base_url` names a server,
    means no model answers either. Otherwise a model answers when it can be reached: a
    `base_url` (or $OPENAI_BASE_URL; local servers need no key) or a key in $OPENAI_API_KEY."""
    if not answer:
        return None, "answers are off"
    if offline and not base_url:
        return None, "offline: no chat model (give --base-url to answer from a local server)"
    if not (base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get(api_key_env)):
        return None, f"no {api_key_env} and no --base-url: no chat model"
    # the key goes where keys are scoped to go (engine/judges/endpoint.py): $OPENAI_API_KEY
    # only to the default endpoint or $OPENAI_BASE_URL, never to a --base-url of its own
    return ChatModel(model, base_url, None if api_key_env == "OPENAI_API_KEY" else api_key_env), None


class ChatSession:
    """Recall, answer, remember, one turn at a time; keeps the last `history` exchanges
    for the prompt (short-term memory; long-term memory is the store)."""

    def __init__(
        self,
        mem,
        model: ChatModel | None = None,
        template: str = TEMPLATE,
        top_n: int | None = None,
        history: int = 6,
        no_model_note: str | None = None,
    ):
        prompts.check(template, mem.policy.prompt_dirs)  # a missing template fails now, not mid-chat
        self.mem, self.model, self.template = mem, model, template
        self.top_n, self.keep = top_n, history
        self.no_model_note = no_model_note
        self.history: list[dict] = []

    def turn(self, user: str) -> Turn:
        recalled = self.mem.recall(user, self.top_n)
        answer, note = None, self.no_model_note
        if self.model is not None:
            try:
                answer = self.answer(user, recalled)
            except JudgeUnavailable as exc:
                note = f"the chat model did not answer: {exc}"
        written = self.mem.remember(user, answer or "")
        self.history = (self.history + [{"user": user, "assistant": answer or ""}])[-self.keep :]
        return Turn(
            user,
            recalled,
            answer,
            [self.mem.get(i) for i in written],
            len(self.mem.pending()),
            note if answer is None else None,
            written,
            [(self.mem.get(old), new) for old, new in written.superseded],
        )

    def prompt(self, user: str, recalled: list) -> str:
        """The system prompt the chat model gets for this turn."""
        now = self.mem.clock()
        variables = {
            "memories": [m.as_dict() for m in recalled],
            "history": self.history,
            "user": user,
            "now": now,
            "today": today(now),
        }
        return prompts.render(self.template, self.mem.policy.prompt_dirs, variables)

    def answer(self, user: str, recalled: list) -> str:
        if self.model is None:
            raise JudgeUnavailable("no chat model")
        system = self.prompt(user, recalled)
        start = time.perf_counter()
        try:
            c = self.model.complete(system, user)
        except JudgeUnavailable as exc:
            self.mem.log_model_call("answer", self.model.model, start, problem=str(exc))
            raise
        answer = Answer(c.text, c.model, "openai", c.prompt_tokens, c.completion_tokens, c.latency_ms)
        self.mem.log_model_call("answer", self.model.model, start, answer)
        return c.text.strip()

    def close(self) -> None:
        if self.model is not None:
            self.model.close()
