"""A scripted model for tests: which step a request is for (read from the prompt's own
wording), a Judge answering per step through FakeOpenAI, and policies pointing a shipped
policy's models at the fake server. The `lethe` fixture (tests/conftest.py) opens them."""

from __future__ import annotations

import json
import os
import re

from tests.helpers import POLICIES
from tests.helpers.fake_openai import FakeOpenAI, Reply, prompt_text

LIFECYCLE = os.path.join(POLICIES, "lifecycle.yaml")
FUSED = os.path.join(POLICIES, "fused.yaml")

# ---------------------------------------------------------------------------------------
# a scripted model: which step a request is for, read from the prompt's own wording

MARKS = {
    "gate": "Decide whether this conversation turn holds something worth remembering",
    "confidence": "How sure can we be that this memory is true",
    "contradiction": "A new memory is about to be stored",
    "expiry": "Does this memory have a natural end date",
    "cluster": "Group the memories below that say the same thing",
    "merge": "These memories say the same thing. Write them as one memory",
    "select": "Pick the memories that help answer the query",
    "fused": "Judge this conversation turn in one go",
    "extract": "Turn this exchange into",
    "summarise": "Write the summary of the scene",
}


def step_of(request: dict) -> str | None:
    text = prompt_text(request)
    found = [step for step, mark in MARKS.items() if mark in text]
    assert len(found) <= 1, f"a prompt matched several steps: {found}"
    return found[0] if found else None


def user_prompt(request: dict) -> str:
    """The rendered template (the first user message), without the system message or, on
    a retry, the refused answer and the reason that follow it."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def shown(prompt: str) -> dict[int, str]:
    """Candidate numbers shown in a prompt and their text: `N: [date] "text"` lines
    (contradiction, fused), `N: "text"` (cluster) and `[N] (conf:.. fresh:..) "summary"`
    lines (select)."""
    out = {}
    for m in re.finditer(r'^(?:(\d+):(?: \[[\w-]+\])?|\[(\d+)\] \(conf:[^)]*\)) (".*")$', prompt, re.M):
        out[int(m.group(1) or m.group(2))] = json.loads(m.group(3))
    return out


def pick(prompt: str, *words: str) -> list[int]:
    """Shown numbers whose text contains any of the words (case-insensitive)."""
    return [n for n, text in shown(prompt).items() if any(w.lower() in text.lower() for w in words)]


DEFAULTS = {
    "gate": lambda p: {
        "save": True,
        "content": json.loads(re.search(r"^User said: (.*)$", p, re.M).group(1)),
        "summary": None,
        "tags": ["test"],
        "importance": 5,
    },
    "confidence": {"confidence": 1.0},
    "contradiction": {"supersedes": [], "confirms": []},
    "expiry": {"expires_at": None},
    "cluster": {"clusters": []},
    "merge": lambda p: {"content": "merged", "summary": "merged", "tags": []},
    "select": lambda p: {"ids": sorted(shown(p))[:6]},
    "fused": lambda p: {
        "save": True,
        "content": json.loads(re.search(r"^User said: (.*)$", p, re.M).group(1)),
        "importance": 5,
        "confidence": 1.0,
        "supersedes": [],
        "confirms": [],
        "expires_at": None,
    },
}


class Judge:
    """The fake server's responder: one answer per step.

    An answer is a str (sent as is), a Reply (an HTTP error, a delay...), a dict (sent as
    JSON), a callable(prompt) returning any of these, or a list: one element per call, the
    last one repeating. `asked` lists the steps in the order they were asked."""

    def __init__(self, **answers):
        self.answers = {**DEFAULTS, **answers}
        self.asked: list[str | None] = []
        self.prompts: dict[str, list[str]] = {}
        self._calls: dict[str, int] = {}

    def __call__(self, request: dict):
        step = step_of(request)
        self.asked.append(step)
        prompt = user_prompt(request)
        self.prompts.setdefault(step, []).append(prompt)
        answer = self.answers.get(step, Reply(status=400, content=f"no answer for step {step}"))
        if isinstance(answer, list):
            i = self._calls.get(step, 0)
            self._calls[step] = i + 1
            answer = answer[min(i, len(answer) - 1)]
        if callable(answer) and not isinstance(answer, Reply):
            answer = answer(prompt)
        if isinstance(answer, dict):
            answer = json.dumps({k: v for k, v in answer.items() if v is not None or k == "expires_at"})
        return answer

    def last(self, step: str) -> str:
        return self.prompts[step][-1]


# ---------------------------------------------------------------------------------------
# policies pointed at the fake server


def policy_file(
    tmp_path,
    base_url: str,
    *,
    base: str = LIFECYCLE,
    timeout: float = 2,
    max_retries: int = 0,
    extra: str = "",
    name: str = "policy.yaml",
) -> str:
    """A policy that extends a shipped one with both models on `base_url`."""
    path = tmp_path / name
    model = (
        f'{{provider: openai, model: MODEL, base_url: "{base_url}", '
        f"max_retries: {max_retries}, timeout: {timeout}}}"
    )
    path.write_text(
        f"name: test-{os.path.basename(base)[:-5]}\n"
        f"extends: {base}\n"
        "models:\n"
        f"  cheap: {model.replace('MODEL', 'm-cheap')}\n"
        f"  strong: {model.replace('MODEL', 'm-strong')}\n" + extra
    )
    return str(path)


def served(fake: FakeOpenAI, judge: Judge) -> FakeOpenAI:
    """`fake`, now answering with `judge`."""
    fake.responder = judge
    return fake
