"""QA accuracy: a reader model answers from the recalled context, a judge model grades
the answer against the gold with a per-type rubric modelled on LongMemEval's published
judge prompts (our wording). Only with an OpenAI-compatible endpoint configured; offline
the bench prints "not run" and makes up nothing."""

from __future__ import annotations

import dataclasses
import os

READER = """You are a chat assistant with a memory of earlier conversations with this user.
Today is {date}. What you remember (may be incomplete or out of date; later facts replace
earlier ones):
{context}

Answer the user's question briefly, from what you remember. If it does not say, say you do
not know.
Question: {question}
Answer:"""

_BASE = (
    "You grade a model's answer. Given a question, the correct answer and the model's "
    "response, say yes if the response contains the correct answer or is equivalent to "
    "it, or gives every intermediate step that leads to it; say no if it gives only part "
    "of what the answer needs, or something else."
)
_EXTRA = {
    "temporal-reasoning": " Do not count an off-by-one error in a number of days, weeks or "
    "months against it (18 days for 19 is still correct).",
    "knowledge-update": " When the response mentions earlier information as well as the "
    "updated answer, it is correct as long as the updated answer is the "
    "one it gives as the answer.",
    "single-session-preference": " The correct answer is a rubric for a personalised "
    "response: say yes if the response uses the user's personal "
    "information correctly; it need not cover every point.",
}
_ABSTAIN = (
    "You grade a model's answer to a question that cannot be answered from what the "
    "user said. Given the question, an explanation and the response, say yes if the "
    "response says it cannot answer (the information is missing or incomplete), no "
    "if it gives an answer."
)
JUDGE = (
    "{rubric}\n\nQuestion: {question}\n\nCorrect answer: {answer}\n\nResponse: {response}\n\n"
    "Is the response correct? Answer yes or no only."
)


@dataclasses.dataclass(frozen=True)
class QASettings:
    base_url: str
    reader: str
    judge: str
    key_env: str = "OPENAI_API_KEY"


def settings(base_url: str | None, reader: str | None, judge: str | None) -> QASettings | None:
    """The QA settings given on the command line or in LETHE_LME_BASE_URL, LETHE_LME_READER,
    LETHE_LME_JUDGE; None (QA not run) without a base URL and a reader model."""
    base_url = base_url or os.environ.get("LETHE_LME_BASE_URL")
    reader = reader or os.environ.get("LETHE_LME_READER")
    judge = judge or os.environ.get("LETHE_LME_JUDGE") or reader
    if not base_url or not reader:
        return None
    return QASettings(base_url, reader, judge)


def judge_prompt(qtype: str, qid: str, question: str, answer: str, response: str) -> str:
    rubric = _ABSTAIN if qid.endswith("_abs") else _BASE + _EXTRA.get(qtype, "")
    return JUDGE.format(rubric=rubric, question=question, answer=answer, response=response)


class QA:
    def __init__(self, s: QASettings):
        from openai import OpenAI

        self.s = s
        self.client = OpenAI(
            base_url=s.base_url, api_key=os.environ.get(s.key_env) or "none", timeout=120, max_retries=2
        )

    def _ask(self, model: str, prompt: str, max_tokens: int) -> str:
        r = self.client.chat.completions.create(
            model=model, temperature=0, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
        )
        return (r.choices[0].message.content or "").strip()

    def grade(self, case, gold, context: str) -> tuple[bool, str]:
        """The reader's answer from `context` and the judge's verdict on it."""
        response = self._ask(
            self.s.reader,
            READER.format(
                date=case.asked_at.strftime("%Y-%m-%d (%a) %H:%M"),
                context=context or "(nothing)",
                question=case.question,
            ),
            200,
        )
        verdict = self._ask(
            self.s.judge, judge_prompt(case.qtype, case.qid, case.question, gold.answer, response), 10
        )
        return "yes" in verdict.lower(), response
