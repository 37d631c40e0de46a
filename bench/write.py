"""Write-path benchmarks: remember() through a local OpenAI-compatible server.

Row 3 - wall time per turn (``latency``):

* one call   - one bare ``OpenAIProvider.complete`` round trip to the fake server (the
               unit the goal is stated in; the server answers after DELAY_S).
* sequential - ``Memory.remember`` with policies/lifecycle.yaml: the seed's four calls, in
               two round trips (the gate, then confidence, contradiction and expiry at
               once: they read only the gate's answer). Goal <= 2.2x one call.
* fused      - ``Memory.remember`` with policies/fused.yaml: one call. Goal <= 1.3x one call.
* +embed     - both again with an OpenAI embedding model (``embed:``) on the same server,
               as slow as the chat model: lifecycle still two round trips (the turn's
               embeddings are asked beside the gate), fused two (embed, then its call).

Row 4 - prompt tokens per remember() (``tokens``) at 100, 10k and 1M stored memories,
lifecycle policy through the fake server (no delay), summed from ``model_calls``; the
fake server counts tokens as len(text) // 4 + 1 over system + user message. Baseline:
the same turn with the seed's contradiction prompt - the index of the top 80 active
memories by importance desc, created_at desc (their summaries) - in place of Lethe's K
relevance-chosen candidates; the gate, confidence and expiry prompts are the same.

Every model answer is valid for its step (the responder routes by prompt text), and the
benchmark checks that no call fell back or was retried: a fallback would make the
figures meaningless.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.helpers import context_of, store_of, writer_of

from . import datasets as D

DELAY_S = 0.3
LIFECYCLE_GOAL = 2.2  # issue 13: two round trips, not four
FUSED_GOAL = 1.3  # fused remember / one call
TOKENS_FLAT_GOAL = 1.1  # tokens per remember at N / at the smallest N
TURNS = 8  # timed turns per mode (after one warm-up turn)
TOKEN_TURNS = 6
TOKEN_SIZES = (100, 10_000, 1_000_000)
SEED_INDEX = 80  # the seed's contradiction index: top 80 by importance, created_at

# Conversation turns worth remembering; they name tools and tasks the generated memories
# also use, so full-text search finds related candidates at every N.
TURNS_TEXT = [
    (
        "We moved the billing service from PostgreSQL to MySQL last week.",
        "Noted: the billing service now runs on MySQL.",
    ),
    (
        "Please always run ruff before committing changes to the CLI.",
        "Will do: ruff before every commit to the CLI.",
    ),
    (
        "The deadline for the mobile app is now April 1, it was pushed from March 15.",
        "Got it, the mobile app is due April 1.",
    ),
    (
        "I prefer pytest over unittest for unit tests in the auth module.",
        "Understood, pytest for the auth module's unit tests.",
    ),
    (
        "Priya owns the search index now and reviews the Redis changes.",
        "Thanks, Priya is the owner of the search index.",
    ),
    (
        "Never use Docker for local development on this project, it is too slow on my laptop.",
        "Okay, no Docker for local development.",
    ),
    (
        "The bug in nightly reports was fixed by pinning pandas to 2.1.",
        "Good to know: pinning pandas fixed the nightly reports.",
    ),
    (
        "We are blocked on Omar for the deployment until the v2 release.",
        "Noted, deployment waits on Omar until v2.",
    ),
    (
        "Keep answers about database migrations short, just the commands.",
        "Short answers for database migrations, understood.",
    ),
    (
        "We decided to use DuckDB for the data pipelines instead of Polars.",
        "DuckDB for the data pipelines, noted.",
    ),
]
QUERIES = [
    "what database does the billing service use",
    "who owns the search index",
    "when is the mobile app due",
    "how do we run unit tests",
    "deployment blockers",
    "which tool for data pipelines",
]


# -- the fake model --------------------------------------------------------------------
def _said(prompt: str, who: str) -> str:
    m = re.search(who + r' said: (".*?")\n', prompt)
    return json.loads(m.group(1)) if m else ""


def _memory(prompt: str) -> str:
    m = re.search(r'(?:New memory|Memory): (".*?")\n', prompt)
    return json.loads(m.group(1)) if m else ""


def _candidates_shown(prompt: str) -> int:
    return len(re.findall(r"(?m)^\d+: ", prompt))


class Responder:
    """Answers each step's prompt with a valid answer for that step (routed by the
    prompt's text); counts requests per step and the candidates each contradiction or
    fused prompt showed."""

    def __init__(self):
        self.steps: dict[str, int] = {}
        self.shown: list[int] = []

    def step_of(self, prompt: str) -> str:
        if "Judge this conversation turn in one go" in prompt:
            return "fused"
        if "Decide whether this conversation turn holds something" in prompt:
            return "gate"
        if "How sure can we be that this memory is true" in prompt:
            return "confidence"
        if "A new memory is about to be stored" in prompt:
            return "contradiction"
        if "natural end date" in prompt:
            return "expiry"
        return "other"

    def __call__(self, request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        step = self.step_of(prompt)
        self.steps[step] = self.steps.get(step, 0) + 1
        if step in ("gate", "fused"):
            user = _said(prompt, "User") or "the user said something durable"
            ans = {"save": True, "content": user, "summary": user[:120], "tags": ["bench"], "importance": 6}
            if step == "fused":
                self.shown.append(_candidates_shown(prompt))
                ans.update({"confidence": 0.9, "supersedes": [], "confirms": [], "expires_at": None})
            return json.dumps(ans)
        if step == "confidence":
            return json.dumps({"confidence": 0.9})
        if step == "contradiction":
            self.shown.append(_candidates_shown(prompt))
            return json.dumps({"supersedes": [], "confirms": []})
        if step == "expiry":
            return json.dumps({"expires_at": None})
        return "{}"


class RealLike(Responder):
    """As a real model answers: the gate states the turn in its own words, as two facts
    (each then judged on its own: 1 + 2 x 3 calls a turn); nothing of them is the user's
    text, so their vectors are not the one asked beside the gate."""

    def __call__(self, request: dict) -> str:
        out = super().__call__(request)
        if self.step_of(request["messages"][-1]["content"]) != "gate":
            return out
        said = json.loads(out)["content"].rstrip(".")
        memories = [
            {"content": f"The user says: {said}.", "summary": said[:120], "tags": ["bench"], "importance": 6},
            {
                "content": f"Noted from the user: {said}.",
                "summary": said[:120],
                "tags": ["bench"],
                "importance": 5,
            },
        ]
        return json.dumps({"save": True, "memories": memories})


def policy_file(tmp: Path, parent: str, base_url: str, embed: bool = False) -> Path:
    """A policy in ``tmp`` that extends ``parent`` with every model at ``base_url`` (and,
    with ``embed``, an OpenAI embedding model there too)."""
    path = tmp / f"bench-{parent}{'-embed' if embed else ''}.yaml"
    path.write_text(
        f"extends: {json.dumps(str(D.ROOT / 'policies' / (parent + '.yaml')))}\n"
        "models:\n"
        f"  cheap: {{provider: openai, model: gpt-4o-mini, temperature: 0, base_url: {base_url}, "
        "timeout: 10, max_retries: 0}\n"
        f"  strong: {{provider: openai, model: gpt-4o, temperature: 0, base_url: {base_url}, "
        "timeout: 10, max_retries: 0}\n"
        + (
            f"embed: {{provider: openai, model: text-embedding-3-small, base_url: {base_url}, "
            "timeout: 10, max_retries: 0}\n"
            if embed
            else ""
        ),
        encoding="utf-8",
    )
    return path


def calls_since(mem, after_id: int) -> list[dict]:
    return [
        dict(r)
        for r in store_of(mem).db.execute(
            "SELECT id, step, provider, prompt_tokens, outcome FROM model_calls WHERE id > ? ORDER BY id",
            (after_id,),
        )
    ]


def last_call_id(mem) -> int:
    return store_of(mem).db.execute("SELECT coalesce(max(id), 0) FROM model_calls").fetchone()[0]


def fallbacks_since(mem, after_event: int) -> int:
    return (
        store_of(mem)
        .db.execute(
            "SELECT count(*) FROM memory_events WHERE id > ? AND event_type = 'judge_fallback'",
            (after_event,),
        )
        .fetchone()[0]
    )


def last_event_id(mem) -> int:
    return store_of(mem).db.execute("SELECT coalesce(max(id), 0) FROM memory_events").fetchone()[0]


def _timed_ask(provider, step, prompt, variables):
    start = time.perf_counter()
    return provider.ask(step, prompt, variables), start


# -- row 3 -----------------------------------------------------------------------------
def _time_turns(fn, turns: int) -> list[float]:
    out = []
    fn(*TURNS_TEXT[-1])  # warm-up: client creation, imports, first connection
    for i in range(turns):
        user, assistant = TURNS_TEXT[i % (len(TURNS_TEXT) - 1)]
        t0 = time.perf_counter()
        fn(user, assistant)
        out.append(time.perf_counter() - t0)
    return out


def latency(
    turns: int = TURNS, log=print, big: int | None = 1_000_000, big_turns: int = 4
) -> tuple[list[dict], list[str]]:
    """Row 3 at 10k stored memories; with ``big``, the fused mode again at that size."""
    from engine import FixedClock, Memory
    from tests.helpers.fake_openai import FakeOpenAI

    rows, problems = [], []
    n = 10_000
    responder = Responder()
    with (
        FakeOpenAI(responder=responder, delay=DELAY_S) as fake,
        tempfile.TemporaryDirectory(prefix="lethe-bench-") as tmp,
    ):
        fake.embed_delay = DELAY_S  # an embedding model as slow as the chat model
        seq_policy = policy_file(Path(tmp), "lifecycle", fake.base_url)
        fused_policy = policy_file(Path(tmp), "fused", fake.base_url)
        results: dict[str, list[float]] = {}
        expect = {"sequential": 4, "fused": 1, "sequential+embed": 4, "fused+embed": 1, "real-like": 7}
        seq_embed = policy_file(Path(tmp), "lifecycle", fake.base_url, True)
        runs = [
            ("sequential", seq_policy, n),
            ("fused", fused_policy, n),
            ("sequential+embed", seq_embed, n),
            ("fused+embed", policy_file(Path(tmp), "fused", fake.base_url, True), n),
            ("real-like", seq_embed, n),
        ]
        if big:
            runs.append(("fused@big", fused_policy, big))
        for mode, pol, size in runs:
            fake.responder = RealLike() if mode == "real-like" else responder
            copy = D.work_copy(D.adopted(size, log), f"write-{mode}")
            mem = Memory(str(copy), policy=str(pol), clock=FixedClock(D.T))
            pool = ThreadPoolExecutor(max_workers=4)
            try:
                c0, e0 = last_call_id(mem), last_event_id(mem)
                fn = mem.remember
                k = big_turns if mode == "fused@big" else turns
                results[mode] = _time_turns(fn, k)
                calls = calls_since(mem, c0)
                bad = [c for c in calls if c["outcome"] != "ok" or c["provider"] != "openai"]
                per_turn = len(calls) / (k + 1)
                fb = fallbacks_since(mem, e0)
                if bad or fb or per_turn != expect[mode.split("@")[0]]:
                    problems.append(
                        f"remember {mode}: {len(bad)} call(s) not ok, {fb} fallback "
                        f"event(s), {per_turn:g} calls a turn (expected "
                        f"{expect[mode]})"
                    )
                if mode == "sequential":  # one bare round trip, the goal's unit
                    provider = context_of(mem).judges.provider("cheap")
                    one = []
                    for _ in range(turns):
                        t0 = time.perf_counter()
                        provider.ask("other", "Answer with {}.", {})
                        one.append(time.perf_counter() - t0)
                    results["one call"] = one
            finally:
                pool.shutdown()
                mem.close()
                D.drop(copy)
        med = {k: statistics.median(v) for k, v in results.items()}
        log(
            f"remember through a {DELAY_S * 1000:.0f} ms server (median of {turns} turns): "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in med.items())
        )
    one = med["one call"]
    rows.append(
        dict(
            measure="remember: one model call (s)",
            n="-",
            value=one,
            baseline=DELAY_S,
            note=f"one OpenAIProvider.complete round trip; the fake server answers "
            f"after {DELAY_S * 1000:.0f} ms (baseline: that delay)",
        )
    )
    rows.append(
        dict(
            measure="remember: lifecycle, 4 calls in 2 round trips (s)",
            n=n,
            value=med["sequential"],
            baseline=one,
            goal=LIFECYCLE_GOAL,
            note="Memory.remember, policies/lifecycle.yaml: the gate, then confidence, "
            "contradiction and expiry at once; baseline: one call",
        )
    )
    rows.append(
        dict(
            measure="remember: fused, 1 call (s)",
            n=n,
            value=med["fused"],
            baseline=one,
            goal=FUSED_GOAL,
            note="Memory.remember, policies/fused.yaml; baseline: one call",
        )
    )
    if big:
        rows.append(
            dict(
                measure="remember: fused, 1 call (s)",
                n=big,
                value=med["fused@big"],
                baseline=one,
                goal=FUSED_GOAL,
                note=f"the same at {D.label(big)} stored memories, median of {big_turns} "
                "turns: the engine's own per-turn cost grows with N (see the "
                "'remember wall, 0 ms server' row)",
            )
        )
    for mode, name in (("sequential+embed", "lifecycle"), ("fused+embed", "fused")):
        rows.append(
            dict(
                measure=f"remember: {name}, embedding model as slow (s)",
                n=n,
                value=med[mode],
                baseline=one,
                goal=LIFECYCLE_GOAL if name == "lifecycle" else FUSED_GOAL * 2,
                note=f"as above, with policy embed: an OpenAI embedding model on the "
                f"same server, also answering after {DELAY_S * 1000:.0f} ms; "
                "the embeddings a turn wants are asked beside the gate (fused: "
                "before its one call, so two round trips)",
            )
        )
    rows.append(
        dict(
            measure="remember: lifecycle, a real model's turn (s)",
            n=n,
            value=med["real-like"],
            baseline=one,
            goal=LIFECYCLE_GOAL,
            note="as 'lifecycle, embedding model as slow', answered as a real model answers: "
            "the gate states the turn in its own words, as two memories (7 calls); both "
            "memories' questions go in one round trip, their candidates found with the turn's "
            "vector (asked beside the gate) and their own vectors asked beside the second wave",
        )
    )
    rows.append(
        dict(
            measure="remember: fused vs lifecycle (s)",
            n=n,
            value=med["fused"],
            baseline=med["sequential"],
            speedup=True,
        )
    )
    return rows, problems


# -- row 4 -----------------------------------------------------------------------------
def _small_db(n: int, log) -> Path:
    """An adopted database of n rows (n small: generated into the work folder)."""
    from .seed_article import generate

    path = D.WORK / f"article-{n}.tokens.db"
    D.drop(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    generate(path, n, D.GEN_NOW, seed=D.SEED)
    D.adopt(path)
    return path


def seed_contradiction_tokens(mem, content: str) -> int:
    """Tokens of the seed's contradiction prompt for a new memory: the same template and
    system message, with the index of the top 80 active memories (importance desc,
    created_at desc), by their summaries."""
    from engine import prompts
    from engine.judges import SYSTEM
    from engine.run.write import Judged
    from tests.helpers.fake_openai import estimate_tokens

    rows = (
        store_of(mem)
        .db.execute(
            "SELECT id, coalesce(summary, substr(content, 1, 120)) AS s FROM memories "
            "WHERE status = 'active' ORDER BY importance DESC, created_at DESC LIMIT ?",
            (SEED_INDEX,),
        )
        .fetchall()
    )
    shown = [{"n": r["id"], "content": r["s"]} for r in rows]
    step = next(s for s in mem.policy.write if s.step == "contradiction")
    variables = writer_of(mem).judging.variables(Judged(content=content), {}, shown)
    prompt = prompts.render(step.judgment.prompt, mem.policy.prompt_dirs, variables)
    return estimate_tokens(SYSTEM + "\n" + prompt)


def tokens(sizes=TOKEN_SIZES, turns: int = TOKEN_TURNS, log=print) -> tuple[list[dict], list[str]]:
    from engine import FixedClock, Memory
    from tests.helpers.fake_openai import FakeOpenAI

    rows, problems = [], []
    first = None
    responder = Responder()
    with (
        FakeOpenAI(responder=responder, delay=0.0) as fake,
        tempfile.TemporaryDirectory(prefix="lethe-bench-") as tmp,
    ):
        pol = policy_file(Path(tmp), "lifecycle", fake.base_url)
        for n in sizes:
            copy = _small_db(n, log) if n < 10_000 else D.work_copy(D.adopted(n, log), "tokens")
            mem = Memory(str(copy), policy=str(pol), clock=FixedClock(D.T))
            try:
                per_turn, seed_turn, shown, walls, unasked = [], [], [], [], 0
                e0 = last_event_id(mem)
                for user, assistant in TURNS_TEXT[:turns]:
                    c0 = last_call_id(mem)
                    s0 = len(responder.shown)
                    t0 = time.perf_counter()
                    mem.remember(user, assistant)
                    walls.append(time.perf_counter() - t0)
                    calls = calls_since(mem, c0)
                    # 4 calls; 3 when the contradiction step found no candidate to show
                    # (at 1M every word of these generated turns is in over 2,000 memories)
                    steps = sorted(c["step"] for c in calls)
                    unasked += steps == ["confidence", "expiry", "gate"]
                    if (len(calls) != 4 and steps != ["confidence", "expiry", "gate"]) or any(
                        c["outcome"] != "ok" for c in calls
                    ):
                        problems.append(f"tokens N={D.label(n)}: calls {calls}")
                    total = sum(c["prompt_tokens"] for c in calls)
                    contra = sum(c["prompt_tokens"] for c in calls if c["step"] == "contradiction")
                    per_turn.append(total)
                    # the seed's turn: same gate, confidence, expiry; its 80-summary index
                    seed_turn.append(total - contra + seed_contradiction_tokens(mem, user))
                    shown += responder.shown[s0:]
                if fallbacks_since(mem, e0):
                    problems.append(f"tokens N={D.label(n)}: a judge fell back")
            finally:
                mem.close()
                D.drop(copy)
            value, base = statistics.mean(per_turn), statistics.mean(seed_turn)
            log(
                f"prompt tokens per remember at N={D.label(n)}: {value:.0f} (seed 80-summary "
                f"index: {base:.0f}); contradiction candidates shown {shown}; remember "
                f"{statistics.median(walls) * 1000:.0f} ms median with a 0 ms server"
            )
            rows.append(
                dict(
                    measure="prompt tokens / remember",
                    n=n,
                    value=value,
                    baseline=base,
                    note="lifecycle policy, 4 calls, mean over "
                    f"{turns} turns, from model_calls (fake server: len/4+1; "
                    f"{unasked} turn(s) had no contradiction candidate, so "
                    "3 calls); "
                    "baseline: the seed's contradiction prompt with its 80-summary "
                    "index instead of K=20 relevant candidates",
                )
            )
            rows.append(
                dict(
                    measure="remember wall, 0 ms server (ms)",
                    n=n,
                    value=statistics.median(walls) * 1000,
                    baseline=None,
                    note="median; the engine's own cost per turn with 4 instant calls "
                    "(candidates query, 4 renders, HTTP, apply)",
                )
            )
            if first is None:
                first = (n, value)
            else:
                rows.append(
                    dict(
                        measure=f"tokens flat (at N / at {D.label(first[0])})",
                        n=n,
                        value=value / first[1],
                        baseline=None,
                        goal=TOKENS_FLAT_GOAL,
                        absolute_goal=True,
                    )
                )
    return rows, problems
