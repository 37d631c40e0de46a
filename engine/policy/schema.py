"""The policy schema as data: every section, its keys, their types and defaults.

The builder checks a policy against this table (unknown keys, required keys, simple types,
choices and defaults all come from here) and `reference` renders it as docs/policy.md, so
the page cannot say something the validator does not do. Formulas, durations and
templates are checked by the builder itself; their keys are described here all the same.
"""

from __future__ import annotations

from engine.policy.schema_keys import (
    CHOICE,
    CONDITION,
    DURATION,
    LIST,
    MAPPING,
    MODEL,
    NUM_FORMULA,
    NUMBER,
    ORDER,
    REQUIRED,
    TEMPLATE,
    TEXT,
    WHOLE,
    Key,
    Section,
)
from engine.steps.kinds import KINDS

FALLBACKS = ("rules", "skip", "keep")
PROVIDERS = ("openai", "rules", "replay")
EMBED_PROVIDERS = ("openai", "local")
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
# what a judgment without `candidates:` is shown (plan.DEFAULT_CANDIDATES)
JUDGMENT_CANDIDATES = {"limit": 80, "k": 20}
MATCHES = ("score", "filter")
PAST = "status = 'archived' or status = 'expired'"  # recall.fallback's default `where`

# what every model call takes; the sections of model calls extend it
JUDGMENT = Section(
    "judgment",
    "A judgment",
    "What every model call takes: write steps, `cluster`, `merge` and `recall.select`.",
    (
        Key("model", MODEL, REQUIRED, "A name from `models` (or `rules`)."),
        Key(
            "prompt",
            TEMPLATE,
            REQUIRED,
            "The Jinja template to render, found in the prompt "
            "folders; `lethe render POLICY STEP --example` shows it rendered.",
        ),
        Key(
            "candidates",
            MAPPING,
            None,
            "Which other memories the prompt is shown (without "
            "it: active memories by rank, at most "
            f"{JUDGMENT_CANDIDATES['limit']}, the {JUDGMENT_CANDIDATES['k']} most like the new "
            "memory for a write step).",
            section="candidates",
        ),
        Key(
            "fallback",
            CHOICE,
            "rules",
            "What answers when the model's answer is unusable twice: "
            "the rules judges, nothing (`skip`), or leave things as they are (`keep`).",
            choices=FALLBACKS,
        ),
    ),
)

_SECTIONS = (
    Section(
        "policy",
        "A policy file",
        "The top level of `policies/NAME.yaml`.",
        (
            Key("name", TEXT, REQUIRED, "The policy's name, as experiments and `lethe why` show it."),
            Key(
                "extends",
                TEXT,
                None,
                "Another policy (a path, or a bare name looked up beside this "
                "file, then in ./policies, then among the shipped ones) whose keys this one starts "
                "from; see *How `extends` merges*.",
            ),
            Key("description", TEXT, "", "One line saying what the policy is for."),
            Key(
                "db",
                TEXT,
                None,
                "The database file commands use when no --db or LETHE_DB is given; "
                "a relative path is relative to this policy file's folder. Not a server: a policy is "
                "not trusted with your PostgreSQL credentials (give a DSN with --db or LETHE_DB).",
            ),
            Key(
                "prompts",
                TEXT,
                None,
                "A folder of templates, relative to this file, looked in before "
                "`prompts/` beside the policy's folder and the shipped templates. A template is a "
                "`.j2`, `.jinja` or `.jinja2` file of at most 1 MB, no part of its name starting "
                "with `.`; a render is bounded in loops, sizes and time.",
            ),
            Key(
                "models",
                MAPPING,
                {},
                "The models judgments name; `rules` (the built-in rules judges) is always there.",
                section="model",
            ),
            Key(
                "params",
                MAPPING,
                {},
                "Named values formulas read (numbers or text), bound as SQL "
                "parameters; see *Params the engine reads*.",
                section="params",
            ),
            Key(
                "scores",
                MAPPING,
                {},
                "Named formulas other formulas use by name; `rank` is the stored rank recall orders by.",
                section="scores",
            ),
            Key(
                "write",
                LIST,
                [],
                "The remember pipeline: write steps, run in order on every turn "
                "(a child's list replaces its parent's whole list).",
                section="write step",
            ),
            Key(
                "passes",
                MAPPING,
                {},
                "Set-based passes over the store, each on its own schedule.",
                section="pass",
            ),
            Key("recall", MAPPING, {}, "How recall finds candidates and picks among them.", section="recall"),
            Key(
                "embed",
                MAPPING,
                None,
                "An embedding model: candidates become full-text matches "
                "plus nearest neighbours, and `similarity` is a formula word.",
                section="embed",
            ),
        ),
    ),
    Section(
        "model",
        "models.NAME",
        "A model a judgment can name. The settings below are "
        "sent to the endpoint as given; `docs/models.md` says what each server takes.",
        (
            Key(
                "provider",
                CHOICE,
                REQUIRED,
                "Who answers: an OpenAI-compatible endpoint, the "
                "built-in rules, or answers recorded in `file`.",
                choices=PROVIDERS,
            ),
            Key("model", TEXT, "", "The model's name at the endpoint (needed for `openai`)."),
            Key(
                "temperature",
                "number or null",
                0.0,
                "Sampling temperature; null: not sent (reasoning models refuse it).",
            ),
            Key(
                "base_url",
                TEXT,
                None,
                "An OpenAI-compatible endpoint of the entry's own (default "
                "$OPENAI_BASE_URL, then api.openai.com).",
            ),
            Key(
                "api_key_env",
                TEXT,
                None,
                "The environment variable holding the key. Unset: "
                "$OPENAI_API_KEY for the default endpoint or $OPENAI_BASE_URL, and no key at all "
                "for a `base_url` of the entry's own.",
            ),
            Key(
                "timeout",
                "seconds, more than 0 and less than a day",
                30.0,
                "A wall-clock bound on one call, the client's retries included.",
            ),
            Key(
                "max_retries",
                "whole number from 0 to 10",
                2,
                "The client's retries of a failed "
                "request before the model counts as unreachable (the turn then stays pending).",
            ),
            Key(
                "retries",
                "whole number from 0 to 5",
                1,
                "How often a refused answer is asked again before the step's fallback answers.",
            ),
            Key(
                "concurrency",
                "whole number from 1 to 64",
                None,
                "How many calls this process "
                "sends the model at once (null: every call at once; 1 for a server that runs one "
                "request at a time). Time waiting for a turn is not counted in `timeout`.",
            ),
            Key(
                "response_format",
                "one of " + ", ".join(f"`{f}`" for f in RESPONSE_FORMATS),
                "json_schema",
                "What is asked for: the step's JSON schema, any JSON object, or "
                "nothing (stepped down when a server refuses).",
            ),
            Key(
                "max_completion_tokens",
                "whole number from 0 to 10000000",
                None,
                "A cap on the answer's tokens (not with `max_tokens`).",
            ),
            Key(
                "max_tokens",
                "whole number from 0 to 10000000",
                None,
                "The older name of that cap, for servers that want it.",
            ),
            Key("reasoning_effort", TEXT, None, "Sent as is to reasoning models (`low`, `medium`, `high`)."),
            Key("seed", "whole number", None, "Sent as is, for servers that honour it."),
            Key("headers", MAPPING, None, "Extra HTTP headers: names and values, both text."),
            Key("extra_body", MAPPING, None, "Extra fields merged into the request body."),
            Key(
                "file",
                TEXT,
                None,
                "For `replay`: the JSON-lines file of recorded answers, relative to the policy.",
            ),
        ),
    ),
    Section(
        "embed",
        "embed",
        "An embedding model (optional; needs the `embed` extra, or "
        "`local` for a local model). Vectors are stored with each memory; without the "
        "model (an outage, `--offline` for `openai`) steps fall back to full-text.",
        (
            Key(
                "provider",
                CHOICE,
                REQUIRED,
                "Who embeds: an OpenAI-compatible `/v1/embeddings`, or a local sentence-transformers model.",
                choices=EMBED_PROVIDERS,
            ),
            Key(
                "model",
                TEXT,
                REQUIRED,
                "The model's name at the endpoint; for `local`, a path or "
                "`package:NAME` for a model a Python package ships.",
            ),
            Key("base_url", TEXT, None, "An OpenAI-compatible endpoint of the entry's own."),
            Key(
                "api_key_env",
                TEXT,
                None,
                "The environment variable holding the key. Unset: "
                "$OPENAI_API_KEY for the default endpoint or $OPENAI_BASE_URL, and no key at all "
                "for a `base_url` of the entry's own (as a model entry's).",
            ),
            Key("timeout", NUMBER, 30.0, "A wall-clock bound on one call, in seconds."),
            Key("max_retries", WHOLE, 2, "The client's retries of a failed request.", minimum=0),
            Key(
                "k",
                WHOLE,
                20,
                "How many nearest neighbours join each step's full-text candidates.",
                minimum=0,
            ),
        ),
    ),
    JUDGMENT,
    Section(
        "write step",
        "write[N]",
        "One step of the remember pipeline: a judgment plus its kind.",
        (
            Key(
                "step",
                CHOICE,
                REQUIRED,
                "What the step judges.",
                choices=tuple(k for k, v in KINDS.items() if v.phase == "write"),
            ),
            Key(
                "top_k",
                WHOLE,
                None,
                "Accepted and kept in the step's options; no shipped step reads it.",
                minimum=0,
            ),
        ),
        extends=(JUDGMENT,),
    ),
    Section(
        "candidates",
        "candidates",
        "Which memories a step is shown (or recall considers): "
        "the rows passing `where`, in `order`, at most `limit`; a write step shows the `k` "
        "most like the new memory.",
        (
            Key("where", CONDITION, "status = 'active'", "Which memories qualify."),
            Key("order", ORDER, "rank", "Comma-separated formulas, each `asc` or `desc` (default desc)."),
            Key("limit", WHOLE, 60, "At most this many rows.", minimum=0),
            Key("min", WHOLE, 0, "A compression pass runs only when at least this many qualify.", minimum=0),
            Key(
                "k",
                WHOLE,
                20,
                "A write step shows at most this many, the most like the new memory.",
                minimum=0,
            ),
        ),
    ),
    Section(
        "pass",
        "passes.NAME",
        "A pass: rules (one UPDATE each, in one transaction) or compression (`cluster` then `merge`).",
        (
            Key(
                "every",
                DURATION,
                None,
                "How often it is due (`1h`, `23h`, `6d`); without it, only when run by name.",
            ),
            Key("rules", LIST, [], "Rules, applied in order.", section="rule"),
            Key(
                "cluster",
                MAPPING,
                None,
                "A judgment grouping similar memories (compression).",
                section="judgment",
            ),
            Key(
                "merge",
                MAPPING,
                None,
                "A judgment writing one memory per group (compression).",
                section="merge",
            ),
            Key("description", TEXT, "", "What the pass is for."),
            Key("batch", WHOLE, None, "Commit every N ids instead of once (very large stores).", minimum=1),
            Key(
                "atomic",
                CHOICE,
                False,
                "Stay one transaction even while writers wait for it "
                "(SQLite). Without it a pass that finds a writer waiting rolls back and runs its "
                "rules in ranges of ids, a few milliseconds each, with the same results; readers "
                "may then see it half done.",
                choices=(False, True),
            ),
        ),
    ),
    Section(
        "rule",
        "rules[N]",
        "One set-based UPDATE: the rows matching `when` get `set`, and each changed row an `event`.",
        (
            Key(
                "when",
                CONDITION,
                REQUIRED,
                "Which memories the rule changes (optional in "
                "`recall.on_access`, where it is the recalled ones).",
            ),
            Key("set", MAPPING, {}, "Column: formula. Settable columns are listed below."),
            Key("event", TEXT, None, "An event written for each changed memory (a lowercase word)."),
        ),
    ),
    Section(
        "merge",
        "merge",
        "The judgment that writes a merged memory, and the merged memory's fields.",
        (
            Key(
                "result",
                MAPPING,
                {},
                "Column: formula over the merged memories (aggregates allowed).",
                section="merge result",
            ),
        ),
        extends=(JUDGMENT,),
    ),
    Section(
        "merge result",
        "merge.result",
        "The merged memory's fields, as formulas over the "
        "memories merged (`avg max min sum count` allowed; no time words).",
        (
            Key("importance", NUM_FORMULA, "max(importance)", "The merged memory's importance."),
            Key("confidence", NUM_FORMULA, "avg(confidence)", "Its confidence."),
            Key("access_count", NUM_FORMULA, "max(access_count)", "Its access count."),
            Key("decay_score", NUM_FORMULA, "1.0", "Its decay score."),
        ),
    ),
    Section(
        "recall",
        "recall",
        "How recall picks what an agent should know.",
        (
            Key("where", CONDITION, "status = 'active'", "Which memories are candidates."),
            Key("order", ORDER, "rank", "Their order (`relevance` allowed here)."),
            Key("limit", WHOLE, 60, "At most this many candidates.", minimum=0),
            Key(
                "select",
                MAPPING,
                None,
                "A judgment picking among the candidates; without it, the first `top_n`.",
                section="select",
            ),
            Key(
                "on_access",
                MAPPING,
                None,
                "A rule applied to the memories recalled (no `when` needed).",
                section="rule",
            ),
            Key(
                "match",
                CHOICE,
                "score",
                "`score` ranks every candidate by relevance to the query; "
                "`filter` keeps full-text matches only (the top candidates when none match).",
                choices=MATCHES,
            ),
            Key("top_n", WHOLE, 6, "At most this many recalled (wins over `select.top_n`).", minimum=1),
            Key(
                "fallback",
                MAPPING,
                None,
                "When the select step picks none of the candidates and the query asks about what "
                f"was: the memories searched next (`where`, default {PAST!r}), their `k` best "
                "matches shown to it; what it picks is recalled with its status, no access recorded.",
                section="candidates",
            ),
        ),
    ),
    Section(
        "select",
        "recall.select",
        "The judgment that picks among recall's candidates.",
        (Key("top_n", WHOLE, 6, "At most this many picked.", minimum=1),),
        extends=(JUDGMENT,),
    ),
    Section("params", "params", "Named values, each a number or text.", of_names="param"),
    Section("scores", "scores", "Named formulas; a score may use params and other scores.", of_names="score"),
)
SECTIONS: dict[str, Section] = {s.name: s for s in _SECTIONS}

# params the engine itself reads (not only formulas): never reported as unused
ENGINE_PARAMS = {
    "reinforce_bump": (0.1, "How much a confirmation raises a memory's confidence (at most 1)."),
    "salience_scale": (10, "Seed C: a cell's salience (0-1) times this is its importance."),
    "max_supersedes": (
        3,
        "At most this many memories one new memory may supersede (an answer naming more is refused).",
    ),
}


def section(name: str) -> Section:
    return SECTIONS[name]


def allowed(name: str) -> set[str]:
    """The keys a section takes, for the validator's unknown-key check."""
    return SECTIONS[name].allowed()


def default(name: str, key: str):
    """A key's default when the policy leaves it out."""
    return SECTIONS[name].default(key)
