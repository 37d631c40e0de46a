"""Judges: a step renders its template, asks its model, and gets a checked answer back.

Providers answer a rendered prompt, registered by name (engine/judges/providers.py):
`openai` (any OpenAI-compatible endpoint), `rules` (built-in deterministic judges, offline),
`replay` (answers recorded earlier, looked up by step and prompt hash). `Judges.ask` checks
every answer strictly (engine/steps/answers.py). A refused answer is asked again, with the
refused answer and the reason it was refused, up to the model entry's `retries` (default
1); then the step's fallback answers. An unreachable model raises `JudgeUnavailable` so the
caller can keep the work pending.

Every call is logged in `model_calls` with one outcome: `ok`; `repaired` (accepted after a
repair, the detail says which); `bad_answer` (refused, the detail says why); `unavailable`;
`fallback` (the rules judge answered instead); `failed` (nothing answered: a `skip` or
`keep` fallback, or a rules judge that failed too). `attempt` counts retries, and
`tokens_estimated` marks a call whose server sent no usable token counts.
"""

from __future__ import annotations

import threading
import time
from typing import cast

from engine import prompts
from engine.base import tracing
from engine.judges import invariants as guards
from engine.judges.openai import JudgeUnavailable, KeyMissing
from engine.judges.providers import (
    PROVIDERS,
    RULES,
    SYSTEM,
    Answer,
    Provider,
    Recorder,
    ReplayProvider,
    prompt_hash,
    register_provider,
    registered,
    request_hash,
)
from engine.policy import Judgment, Model, Policy, check_templates
from engine.steps import answers
from engine.steps import kinds as steps
from engine.steps.answers import BadAnswer
from engine.store.protocol import ModelLog

RETRY = "That answer was refused: {problem}. Answer again with only the JSON object the instructions ask for."
RETRY_ECHO_CHARS = 2000  # how much of a refused answer is shown back to the model


def check(step: str, a: Answer, found: answers.Check) -> object:
    """An answer's checked value; anything unusable about it is a BadAnswer, whatever it
    is made of (model text can be hostile: treat every failure of reading it as refusal)."""
    answers.finished(a.finish_reason, a.refusal)
    if a.reasoning:
        found.notes.append(f"reasoning field set aside ({len(a.reasoning)} characters)")
    try:
        return steps.parse(step, a.value, found)
    except BadAnswer:
        raise
    except Exception as exc:  # a checker bug must not wedge the queue
        raise BadAnswer(f"unreadable answer ({type(exc).__name__}: {str(exc)[:80]})") from None


def retry_messages(a: Answer | None, problem: str) -> list[dict]:
    """What the model is told on a retry: its refused answer, and why it was refused
    (at temperature 0 the same prompt alone would get the same answer)."""
    out = []
    if a is not None and isinstance(a.value, str) and a.value.strip():
        out.append({"role": "assistant", "content": a.value[:RETRY_ECHO_CHARS]})
    out.append({"role": "user", "content": RETRY.format(problem=problem)})
    return out


COPIED = (
    "it is the example answer the instructions show, not a judgment of this input; judge the input itself"
)


def _changes_nothing(value) -> bool:
    """An answer that leaves everything as it is (nothing superseded or confirmed, no
    cluster, no end date): copying the prompt's way to say so loses nothing."""
    if isinstance(value, dict):
        return not value.get("supersedes") and not value.get("confirms") and "save" not in value
    return value is None or value == []


def copies_example(step: str, value, prompt: str, variables: dict) -> bool:
    """Is this checked answer one of the example answers the prompt shows (one the checks
    would accept)? A small model copies them: the gate's "nothing to save", contradiction's
    example supersession, expiry's example date. An answer that changes nothing is allowed."""
    if _changes_nothing(value):
        return False
    for example in guards.example_answers(prompt):
        try:
            if steps.parse(step, example, steps.check_for(step, variables)) == value:
                return True
        except Exception:  # an example the checks refuse cannot be copied
            continue
    return False


def screened(
    step: str, value, prompt: str, variables: dict, found: answers.Check
) -> tuple[object, str | None]:
    """A model's checked answer with what the guards refuse taken out, and why the whole
    answer is refused (None when it stands). A gate's memories are screened one by one:
    a copied example or a memory that is not what the user said is dropped and the call's
    log says so; the answer is refused only when none is left."""
    if step == "gate" and isinstance(value, dict) and value.get("memories"):
        return _screened_memories(value, prompt, variables, found)
    if copies_example(step, value, prompt, variables):
        return value, COPIED
    return value, ungrounded(step, value, variables)


def _screened_memories(value: dict, prompt: str, variables: dict, found: answers.Check):
    user = str(variables.get("user") or "")
    shown = _example_contents(prompt)
    kept, refused = [], []
    for n, memory in enumerate(value["memories"], 1):
        content = memory["content"]
        why = COPIED if content.casefold() in shown else guards.content_refusal(content, user)
        if why:
            refused.append(f"memory {n} ({content[:60]!r}) refused: {why}")
        else:
            kept.append(memory)
    if not kept:
        return value, refused[0].split(" refused: ", 1)[1]
    if refused:
        found.repaired("; ".join(refused))
    return {**value, "memories": kept}, None


def _example_contents(prompt: str) -> set[str]:
    """The memory contents a prompt's example answers show (an answer, or one memory)."""
    out = set()
    for example in guards.example_answers(prompt):
        if not isinstance(example, dict):
            continue
        for shape in (example, {"save": True, **example}):
            try:
                checked = steps.parse("gate", shape)
            except Exception:  # an example the checks refuse cannot be copied
                continue
            if isinstance(checked, dict):
                out |= {m["content"].casefold() for m in checked.get("memories", [])}
            break
    return out


def ungrounded(step: str, value, variables: dict) -> str | None:
    """Why this answer has nothing to stand on in the turn (engine/judges/invariants.py): an end date
    the turn does not give, a memory that is not what the user said."""
    user = str(variables.get("user") or "")
    shown = variables.get("memory")
    memory = shown if isinstance(shown, dict) else {}
    if step in ("gate", "fused") and isinstance(value, dict) and value.get("save"):
        problem = guards.content_refusal(str(value.get("content") or ""), user)
        if problem:
            return problem
    expires = (
        value
        if step == "expiry"
        else value.get("expires_at")
        if step == "fused" and isinstance(value, dict)
        else None
    )
    return guards.expiry_refusal(expires, variables.get("today"), user, str(memory.get("content") or ""))


def _detail(found: answers.Check) -> str | None:
    return "; ".join(found.repairs + found.notes)[:500] or None


class Judges:
    """Asks the policy's models for judgments, checks the answers, logs every call."""

    def __init__(
        self,
        policy: Policy,
        store: ModelLog,
        namespace: str,
        offline: bool = False,
        record: str | None = None,
        replay: str | None = None,
        scripted=None,
    ):
        self.policy, self.store, self.namespace = policy, store, namespace
        self.offline, self.record, self.replay = offline, record, replay
        self.scripted = scripted  # an object with .take(step) -> answer | None (scenarios)
        self._providers: dict[str, Provider] = {}
        self._lock = threading.Lock()
        self.rules = RULES
        # models asked without the key they need: how often, and the variable last named
        # (`Memory` compares the count around a call to warn once)
        self.keyless_asks, self.keyless_env = 0, cast(str | None, None)
        # judgments the rules made because a model did not answer, and the last reason
        # (`Memory` warns once, as for a missing key)
        self.fallbacks, self.fallback_reason = 0, cast(str | None, None)

    def provider(self, model_name: str):
        with self._lock:  # steps asked at once share one provider per model
            if model_name not in self._providers:
                self._providers[model_name] = self._make(self.policy.models[model_name])
            return self._providers[model_name]

    def remote(self, *model_names: str) -> bool:
        """Whether any of these models is asked over the network (then asking several steps
        at once saves round trips; the rules and replayed answers come at no wait)."""
        return not (self.offline or self.replay) and any(
            registered(self.policy.models[m].provider).remote for m in model_names
        )

    def _make(self, spec: Model) -> Provider:
        inner: Provider
        if self.replay:  # a session replaying a recording: every model answers from it
            inner = ReplayProvider(self.replay)
        elif self.offline:
            inner = self.rules
        else:
            inner = registered(spec.provider).make(spec, self.policy, self.store)
        return Recorder(inner, self.record) if self.record else inner

    def retries(self, model_name: str) -> int:
        """How many times a refused answer is asked again (the model entry's `retries`)."""
        return getattr(self.policy.models.get(model_name), "retries", 1)

    def ask(self, step: str, judgment: Judgment, variables: dict) -> tuple[object, str | None]:
        """The checked answer, and a note when the fallback answered instead of the model.
        Raises JudgeUnavailable when the model cannot be reached; never anything else for
        anything a model or server sends."""
        check_templates(self.policy)  # a policy loaded with templates=False: parse them now
        scripted = self.scripted.take(step) if self.scripted else None
        # the rules read the variables, never the prompt: rendering it for them was half
        # the CPU of an offline recall (the select prompt over 60 candidates). A write or
        # pass step renders it still, so a broken or hostile template is an error there
        # (the turn stays pending) whoever judges
        kind = steps.KINDS.get(step)
        read = kind is not None and kind.phase == "recall"
        unread = read and scripted is None and self.provider(judgment.model) is self.rules
        prompt = "" if unread else prompts.render(judgment.prompt, self.policy.prompt_dirs, variables)
        retry: list[dict] = []
        problem = "no answer"
        for attempt in range(self.retries(judgment.model) + 1):
            ok, value, a, problem = self._attempt(step, judgment, prompt, variables, scripted, retry, attempt)
            if ok:
                return value, None
            if problem.startswith(answers.UNDECIDED):
                break  # an undecided model, asked again, only makes its answer agree with itself
            retry, scripted = retry_messages(a, problem), None
        return self.fallback(step, judgment, variables, problem), f"{step}: {problem}"

    def _attempt(self, step, judgment, prompt, variables, scripted, retry, attempt):
        """One request and its check, logged: (accepted, value, answer, problem)."""
        start = time.perf_counter()
        try:
            a = (
                Answer(scripted, "scripted", "scripted")
                if scripted is not None
                else self.provider(judgment.model).ask(step, prompt, variables, retry)
            )
        except JudgeUnavailable as exc:
            if isinstance(exc, KeyMissing):
                with self._lock:
                    self.keyless_asks, self.keyless_env = self.keyless_asks + 1, exc.env
            self.log(step, judgment.model, None, "unavailable", str(exc), start, attempt)
            raise
        except BadAnswer as exc:  # the response held no answer at all
            self.log(step, judgment.model, None, "bad_answer", str(exc), start, attempt)
            return False, None, None, str(exc)
        found = steps.check_for(step, variables)
        found.notes.extend(a.notes)  # a step-down is said in the call's log, with its reason
        if a.learned:
            with self._lock:  # kept for the next process (per model and endpoint)
                self.store.learn_support(*a.learned)
        if a.provider == "rules":
            found.max_supersedes = None  # the cap guards against a model's sweep, not the rules'
        try:
            value = check(step, a, found)
        except BadAnswer as exc:
            self.log(step, judgment.model, a, "bad_answer", str(exc), start, attempt)
            return False, None, a, str(exc)
        problem = None
        if a.provider != "rules":
            value, problem = screened(step, value, prompt, variables, found)
        if problem:
            self.log(step, judgment.model, a, "bad_answer", problem, start, attempt)
            return False, None, a, problem
        self.log(
            step, judgment.model, a, "repaired" if found.repairs else "ok", _detail(found), start, attempt
        )
        return True, value, a, None

    def fallback(self, step: str, judgment: Judgment, variables: dict, problem: str):
        """The step's fallback answer (None for skip/keep, or when the rules fail too)."""
        start = time.perf_counter()
        if judgment.fallback != "rules":
            self.log(
                step, judgment.model, None, "failed", f"{problem} (fallback: {judgment.fallback})", start
            )
            return None  # skip / keep: the caller leaves things as they are
        try:
            found = steps.check_for(step, variables)
            found.max_supersedes = None  # the cap guards against a model's sweep, not the rules'
            value = steps.parse(step, self.rules.ask(step, "", variables).value, found)
        except Exception as exc:  # the rules judge must not wedge the queue
            self.log(
                step,
                "rules",
                None,
                "failed",
                f"{problem}; the rules judge failed too: {type(exc).__name__}: {str(exc)[:200]}",
                start,
            )
            return None
        self.log(step, "rules", None, "fallback", problem, start)
        with self._lock:
            self.fallbacks, self.fallback_reason = self.fallbacks + 1, f"{step}: {problem}"
        return value

    def log(self, step, model, a: Answer | None, outcome, detail, start, attempt: int = 0) -> None:
        latency = a.latency_ms if a and a.latency_ms else (time.perf_counter() - start) * 1000
        provider = a.provider if a else ("rules" if model == "rules" else None)  # a fallback
        with self._lock:  # one connection, steps asked at once
            self.store.log_call(
                self.namespace,
                step,
                a.model if a else model,
                provider,
                a.prompt_tokens if a else 0,
                a.completion_tokens if a else 0,
                round(latency, 3),
                outcome,
                detail,
                attempt=attempt,
                estimated=bool(a and a.estimated),
            )
        entry = self.policy.models.get(model)
        tracing.model_call(
            step,
            getattr(entry, "model", model),
            a.model if a else None,
            provider or getattr(entry, "provider", None),
            a.prompt_tokens if a else 0,
            a.completion_tokens if a else 0,
            latency,
            outcome,
            self.namespace,
            attempt,
            bool(a and a.estimated),
        )


__all__ = [
    "Judges",
    "Provider",
    "PROVIDERS",
    "register_provider",
    "registered",
    "ReplayProvider",
    "SYSTEM",
    "request_hash",
    "JudgeUnavailable",
    "KeyMissing",
    "BadAnswer",
    "Answer",
    "prompt_hash",
]
