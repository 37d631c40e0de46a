"""What a loaded policy is: the typed sections the builder produces, and the words a policy
may use (statuses, providers, step kinds, settable columns).

Every formula in these dataclasses is already compiled IR (`expr.Node`): a `Policy` that
exists has passed validation.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from engine.base.errors import PolicyError
from engine.policy import expr as X
from engine.policy import schema as S
from engine.policy import yamldoc
from engine.steps.kinds import WRITE_KINDS

STATUSES = ("active", "archived", "superseded", "expired", "compressed")
PROVIDERS = S.PROVIDERS
EMBED_PROVIDERS = S.EMBED_PROVIDERS
STEP_KINDS = WRITE_KINDS
DEFAULT_RANK = "importance * confidence * decay_score"
# columns a policy may write, and how their values are read
SETTABLE = {
    "importance": X.NUM,
    "confidence": X.NUM,
    "access_count": X.NUM,
    "decay_score": X.NUM,
    "status": "status",
    "last_accessed": X.TIME,
    "expires_at": X.TIME,
    "kind": X.TEXT,
    "scene": X.TEXT,
}


@dataclass
class Model:
    """A model entry. `api_key_env` None: $OPENAI_API_KEY for the default endpoint or
    $OPENAI_BASE_URL, no key for a `base_url` of the entry's own (engine/judges/endpoint.py).
    `temperature` None: not sent. `retries`: how often a refused answer is asked again.
    `timeout`: seconds, a wall-clock bound on one call, the client's `max_retries` included,
    not counting the wait for one of the model's `concurrency` slots."""

    name: str
    provider: str
    model: str = ""
    temperature: float | None = 0.0
    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = 30.0
    max_retries: int = 2
    file: str | None = None
    retries: int = 1
    concurrency: int | None = None  # calls sent at once (None: no bound)
    response_format: str = "json_schema"
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    seed: int | None = None
    headers: dict | None = None
    extra_body: dict | None = None


RESPONSE_FORMATS = S.RESPONSE_FORMATS
MODEL_KEYS = S.section("model").allowed()  # the schema's, for callers that list them


@dataclass
class Embed:
    """An embedding model: `openai` (any OpenAI-compatible /v1/embeddings) or `local`
    (sentence-transformers: a path, a hub name, or `package:NAME` for a model a Python
    package ships). `k` nearest neighbours join the full-text candidates of each step."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None  # as a Model's: no key for a base_url of its own
    timeout: float = 30.0
    max_retries: int = 2
    k: int = 20

    @property
    def name(self) -> str:
        """What the stored vectors are tagged with: a change of model re-embeds."""
        return f"{self.provider}:{self.model}"


@dataclass
class Rule:
    when: X.Node | None
    set: dict[str, X.Node]
    event: str | None
    source: dict = field(default_factory=dict)


@dataclass
class Candidates:
    where: X.Node
    order: list[tuple[X.Node, bool]]  # (formula, descending)
    limit: int
    min: int = 0
    k: int = 20
    source: dict = field(default_factory=dict)


@dataclass
class Judgment:
    """A model call a step or pass makes: which model, which template, over which rows."""

    model: str
    prompt: str
    candidates: Candidates | None = None
    fallback: str = "rules"
    options: dict = field(default_factory=dict)


@dataclass
class WriteStep:
    step: str
    judgment: Judgment


@dataclass
class Pass:
    name: str
    every: dt.timedelta | None
    rules: list[Rule] = field(default_factory=list)
    cluster: Judgment | None = None
    merge: Judgment | None = None
    merge_result: dict[str, X.Node] = field(default_factory=dict)
    batch: int | None = None  # commit every N ids instead of once (huge stores)
    atomic: bool = False  # one transaction even while a writer waits (never gives way)


@dataclass
class Recall:
    candidates: Candidates
    select: Judgment | None = None
    top_n: int = 6
    on_access: Rule | None = None
    match: str = "score"  # score: every candidate, scored by relevance; filter: matches only
    past: Candidates | None = None  # `fallback`: searched when the select step picks nothing


@dataclass
class Policy:
    name: str
    path: str
    doc: yamldoc.Doc
    db: str | None
    models: dict[str, Model]
    params: dict[str, object]
    scores: dict[str, str]
    rank: X.Node
    rank_text: str
    write: list[WriteStep]
    passes: dict[str, Pass]
    recall: Recall
    prompt_dirs: tuple[str, ...]
    description: str = ""
    warnings: list = field(default_factory=list)  # PolicyErrors that do not stop loading
    embed: Embed | None = None
    # templates found but not parsed yet (engine.policy.load with templates=False): what
    # engine.policy.check_templates parses, before anything renders one
    unparsed: list = field(default_factory=list, repr=False, compare=False)

    def scope(self, **kw) -> X.Scope:
        return X.Scope(params=self.params, scores=self.scores, **kw)


def find_judgment(policy: Policy, step: str) -> Judgment:
    """A step's judgment by name: a write step kind, `cluster`/`merge` (of the first
    compression pass, or `PASS.cluster`), or `select`."""
    for w in policy.write:
        if w.step == step:
            return w.judgment
    pass_name, _, part = step.rpartition(".")
    for name, p in policy.passes.items():
        if p.cluster and (not pass_name or pass_name == name) and part in ("cluster", "merge"):
            judgment = p.cluster if part == "cluster" else p.merge
            if judgment is not None:
                return judgment
    if step == "select" and policy.recall.select:
        return policy.recall.select
    known = [w.step for w in policy.write] + [
        f"{n}.{k}" for n, p in policy.passes.items() if p.cluster for k in ("cluster", "merge")
    ]
    known += ["select"] if policy.recall.select else []
    raise PolicyError(f"policy '{policy.name}' has no step '{step}'; it has: {', '.join(known) or '(none)'}")
