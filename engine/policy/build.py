"""The validating builder: a merged policy document in, a typed `Policy` out.

Every key is checked against what its section allows, every formula is compiled against
the policy's params and scores, every template is parsed; the first mistake is a
PolicyError at file:line:col naming the key.
"""
from __future__ import annotations

import difflib
import os
import re

from .. import expr as X
from .. import prompts, resources, yamldoc
from ..clock import parse_duration
from ..errors import FormulaError, PolicyError
from .types import (DEFAULT_RANK, EMBED_PROVIDERS, PROVIDERS, Embed, SETTABLE, STATUSES, STEP_KINDS, Candidates,
                    Judgment, Model, Pass, Policy, Recall, Rule, WriteStep)

TOP_KEYS = {"name", "extends", "description", "db", "prompts", "models", "params", "scores",
            "write", "passes", "recall", "embed"}


class Builder:
    """Builds one `Policy` from its merged document; `build()` raises at the first mistake."""

    def __init__(self, doc: yamldoc.Doc):
        self.doc = doc
        self.d = doc.data

    # helpers -------------------------------------------------------------------------
    def fail(self, path, message, of_key=False):
        raise self.doc.error(path, message, of_key)

    def keys(self, value, path, allowed, required=()):
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        for k in value:
            if k not in allowed:
                close = _closest(k, allowed)
                hint = f" (did you mean '{close}'?)" if close else ""
                self.fail(path + (k,), f"unknown key '{k}'{hint}; known: {', '.join(sorted(allowed))}",
                          of_key=True)
        for k in required:
            if k not in value:
                self.fail(path, f"missing required key '{k}'")
        return value

    def mapping(self, value, path) -> dict:
        """A section whose keys are the author's own names (params, models, passes...)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        return value

    def typed(self, value, path, kinds, what):
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            self.fail(path, f"must be {what}, got {value!r}")
        return value

    def formula(self, text, path, scope, want=None):
        try:
            node = X.compile_formula(text, scope)
        except FormulaError as exc:
            self.fail(path, str(exc))
        if want and node.type not in (want, X.NULL) and not (want == X.TIME and node.type == X.TEXT):
            label = {X.BOOL: "a condition", X.NUM: "a number", X.TIME: "a time"}[want]
            self.fail(path, f"must be {label}, but '{text}' is {node.type}")
        return node

    # sections -------------------------------------------------------------------------
    def build(self) -> Policy:
        d = self.keys(self.d, (), TOP_KEYS, required=("name",))
        name = self.typed(d["name"], ("name",), (str,), "text")
        params = self.params()
        scores = self.scores(params)
        prompt_dirs = self.prompt_dirs()
        self.policy = Policy(
            name=name, path=self.doc.file, doc=self.doc, db=d.get("db"),
            models=self.models(), params=params, scores=scores, rank=None, rank_text="",
            write=[], passes={}, recall=None, prompt_dirs=prompt_dirs,
            description=str(d.get("description", "")))
        self.policy.embed = self.embed()
        self.policy.rank_text = str(scores.get("rank", DEFAULT_RANK))
        self.policy.rank = self.rank()
        self.policy.write = self.write()
        self.policy.passes = self.passes()
        self.policy.recall = self.recall()
        return self.policy

    def params(self) -> dict:
        params = self.mapping(self.d.get("params"), ("params",))
        for k, v in params.items():
            self.check_name(k, ("params", k))
            self.typed(v, ("params", k), (int, float, str), "a number or text")
        return params

    def scores(self, params) -> dict:
        scores = self.mapping(self.d.get("scores"), ("scores",))
        for k, v in scores.items():
            if k != "rank":
                self.check_name(k, ("scores", k))
            if k in params:
                self.fail(("scores", k), f"'{k}' is both a param and a score")
        for k, v in scores.items():
            self.formula(v, ("scores", k), X.Scope(params, scores, allow_relevance=True))
        return scores

    def check_name(self, name, path):
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            self.fail(path, f"'{name}' is not a valid name (lowercase letters, digits, _)", True)
        taken = X.COLUMNS.keys() | X.TIME_WORDS.keys() | X.SCALAR_FUNCS.keys() | {"relevance"}
        if name in taken or name in X.CONSTANT_NAMES:
            self.fail(path, f"'{name}' is already a column, time word or function", True)

    def rank(self) -> X.Node:
        path = ("scores", "rank")
        node = self.formula(self.policy.rank_text, path, self.policy.scope(allow_time=False),
                            X.NUM)
        if "rank" in X.columns_of(node):
            self.fail(path, "the stored rank cannot refer to itself")
        return node

    def prompt_dirs(self) -> tuple:
        """Where templates are looked for, in order: the policy's own `prompts:` folder,
        `prompts/` beside the policy's folder (policies/ next to prompts/) and inside it,
        then the templates that ship with the package."""
        here = os.path.dirname(os.path.abspath(self.doc.file))
        dirs = []
        if "prompts" in self.d:
            p = self.typed(self.d["prompts"], ("prompts",), (str,), "a folder path")
            dirs.append(os.path.normpath(os.path.join(here, p)))
        dirs += [os.path.normpath(os.path.join(here, "..", "prompts")),
                 os.path.join(here, "prompts"), resources.shipped_prompts_dir()]
        return tuple(dict.fromkeys(d for d in dirs))

    def models(self) -> dict:
        out = {"rules": Model("rules", "rules")}
        models = self.mapping(self.d.get("models"), ("models",))
        allowed = {"provider", "model", "temperature", "base_url", "api_key_env", "timeout",
                   "max_retries", "file"}
        for name, spec in models.items():
            p = ("models", name)
            self.keys(spec, p, allowed, required=("provider",))
            prov = spec["provider"]
            if prov not in PROVIDERS:
                self.fail(p + ("provider",), f"unknown provider '{prov}'; known: {', '.join(PROVIDERS)}")
            if prov == "openai" and not isinstance(spec.get("model"), str):
                self.fail(p, "an openai model needs 'model: <name>'")
            for k in ("temperature", "timeout"):
                if k in spec:
                    self.typed(spec[k], p + (k,), (int, float), "a number")
            if "max_retries" in spec:
                self.typed(spec["max_retries"], p + ("max_retries",), (int,), "a whole number")
            for k in ("model", "base_url", "api_key_env", "file"):
                if k in spec:
                    self.typed(spec[k], p + (k,), (str,), "text")
            out[name] = Model(name=name, **spec)
        return out

    def embed(self) -> Embed | None:
        spec = self.d.get("embed")
        if spec is None:
            return None
        p = ("embed",)
        self.keys(spec, p, {"provider", "model", "base_url", "api_key_env", "timeout",
                            "max_retries", "k"}, required=("provider", "model"))
        if spec["provider"] not in EMBED_PROVIDERS:
            self.fail(p + ("provider",), f"unknown embedding provider '{spec['provider']}'; "
                      f"known: {', '.join(EMBED_PROVIDERS)}")
        for k in ("model", "base_url", "api_key_env"):
            if k in spec:
                self.typed(spec[k], p + (k,), (str,), "text")
        if "timeout" in spec:
            self.typed(spec["timeout"], p + ("timeout",), (int, float), "a number")
        for k in ("max_retries", "k"):
            if k in spec and (isinstance(spec[k], bool) or not isinstance(spec[k], int)
                              or spec[k] < 0):
                self.fail(p + (k,), f"must be a whole number >= 0, got {spec[k]!r}")
        return Embed(**spec)

    def judgment(self, spec, path, extra=(), similar=True) -> Judgment:
        allowed = {"model", "prompt", "candidates", "fallback", *extra}
        self.keys(spec, path, allowed, required=("model", "prompt"))
        model = self.typed(spec["model"], path + ("model",), (str,), "a model name")
        if model not in self.policy.models:
            self.fail(path + ("model",), f"unknown model '{model}'; this policy defines: "
                      f"{', '.join(sorted(self.policy.models))}")
        prompt = self.typed(spec["prompt"], path + ("prompt",), (str,), "a template file name")
        try:
            prompts.check(prompt, self.policy.prompt_dirs)
        except PolicyError as exc:
            if exc.file:  # the template itself is broken: point there
                raise
            self.fail(path + ("prompt",), exc.message)
        fallback = spec.get("fallback", "rules")
        if fallback not in ("rules", "skip", "keep"):
            self.fail(path + ("fallback",), "fallback must be rules, skip or keep")
        cand = self.candidates(spec["candidates"], path + ("candidates",),
                               allow_similarity=similar) \
            if "candidates" in spec else None
        options = {k: spec[k] for k in extra if k in spec}
        return Judgment(model, prompt, cand, fallback, options)

    def candidates(self, spec, path, default_order=None, allow_relevance=False,
                   allow_similarity=True) -> Candidates:
        self.keys(spec, path, {"where", "order", "limit", "min", "k"})
        self._similar = allow_similarity and self.policy.embed is not None
        where = self.formula(spec.get("where", "status = 'active'"), path + ("where",),
                             self.policy.scope(allow_relevance=allow_relevance,
                                               allow_similarity=self._similar), X.BOOL)
        order = self.order(spec.get("order", default_order or "rank"), path + ("order",),
                           allow_relevance)
        ints = {}
        for k, default in (("limit", 60), ("min", 0), ("k", 20)):
            v = spec.get(k, default)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                self.fail(path + (k,), f"must be a whole number >= 0, got {v!r}")
            ints[k] = v
        return Candidates(where, order, ints["limit"], ints["min"], ints["k"], dict(spec))

    def order(self, text, path, allow_relevance=False) -> list:
        if not isinstance(text, str):
            text = str(text)
        items = []
        for part in _split_top(text):
            m = re.fullmatch(r"(.*?)(?:\s+(asc|desc|ASC|DESC))?", part.strip(), re.S)
            node = self.formula(m.group(1), path, self.policy.scope(
                allow_relevance=allow_relevance, allow_similarity=getattr(self, "_similar", False)))
            if node.type not in (X.NUM, X.TIME, X.TEXT):
                self.fail(path, f"cannot order by {node.type}: '{m.group(1)}'")
            items.append((node, (m.group(2) or "desc").lower() == "desc"))
        return items

    def write(self) -> list:
        steps = self.d.get("write") or []
        if not isinstance(steps, list):
            self.fail(("write",), "write must be a list of steps")
        out = []
        for i, spec in enumerate(steps):
            p = ("write", i)
            if not isinstance(spec, dict) or "step" not in spec:
                self.fail(p, "each write step needs 'step: <kind>'")
            kind = spec["step"]
            if kind not in STEP_KINDS:
                self.fail(p + ("step",), f"unknown step '{kind}'; known: {', '.join(STEP_KINDS)}")
            rest = {k: v for k, v in spec.items() if k != "step"}
            out.append(WriteStep(kind, self.judgment(rest, p, extra=("top_k",))))
        return out

    def passes(self) -> dict:
        passes = self.mapping(self.d.get("passes"), ("passes",))
        out = {}
        for name, spec in passes.items():
            p = ("passes", name)
            self.check_pass_name(name, p)
            self.keys(spec, p, {"every", "rules", "cluster", "merge", "description", "batch"})
            every = None
            if spec.get("every") is not None:
                try:
                    every = parse_duration(spec["every"])
                except (ValueError, OverflowError) as exc:
                    self.fail(p + ("every",), str(exc))
            ps = Pass(name, every)
            rules = spec.get("rules") or []
            if not isinstance(rules, list):
                self.fail(p + ("rules",), "rules must be a list")
            ps.rules = [self.rule(r, p + ("rules", i)) for i, r in enumerate(rules)]
            if ("cluster" in spec) != ("merge" in spec):
                self.fail(p, "a compression pass needs both 'cluster' and 'merge'")
            if "cluster" in spec:
                ps.cluster = self.judgment(spec["cluster"], p + ("cluster",), similar=False)
                ps.merge = self.judgment(spec["merge"], p + ("merge",), extra=("result",))
                ps.merge_result = self.merge_result(spec["merge"].get("result") or {},
                                                    p + ("merge", "result"))
            if not ps.rules and not ps.cluster:
                self.fail(p, "a pass needs rules, or cluster and merge")
            if spec.get("batch") is not None:
                b = spec["batch"]
                if isinstance(b, bool) or not isinstance(b, int) or b < 1:
                    self.fail(p + ("batch",), f"must be a whole number of rows >= 1, got {b!r}")
                ps.batch = b
            out[name] = ps
        return out

    def check_pass_name(self, name, path):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            self.fail(path, f"'{name}' is not a valid pass name", of_key=True)

    def rule(self, spec, path, need_when=True) -> Rule:
        self.keys(spec, path, {"when", "set", "event"}, required=("when",) if need_when else ())
        when = self.formula(spec["when"], path + ("when",), self.policy.scope(), X.BOOL) \
            if "when" in spec else None
        sets = self.mapping(spec.get("set"), path + ("set",))
        compiled = {c: self.set_value(c, v, path + ("set", c)) for c, v in sets.items()}
        event = spec.get("event")
        if event is not None and not (isinstance(event, str) and re.fullmatch(r"[a-z_][a-z0-9_-]*", event)):
            self.fail(path + ("event",), f"event must be a short lowercase word, got {event!r}")
        if not compiled and not event:
            self.fail(path, "a rule needs 'set' or 'event'")
        return Rule(when, compiled, event, dict(spec))

    def set_value(self, col, value, path) -> X.Node:
        if col not in SETTABLE:
            why = "cannot be set by a policy" if col in X.COLUMNS else "unknown column"
            self.fail(path, f"'{col}' {why}; settable: {', '.join(SETTABLE)}", of_key=True)
        kind = SETTABLE[col]
        if kind == "status":
            if value not in STATUSES:
                self.fail(path, f"status must be one of {', '.join(STATUSES)}, got {value!r}")
            return X.Const(X.TEXT, value)
        if kind == X.TEXT:
            if value is not None and not isinstance(value, str):
                self.fail(path, f"must be text, got {value!r}")
            return X.Const(X.TEXT if value is not None else X.NULL, value)
        return self.formula(value, path, self.policy.scope(), kind)

    def merge_result(self, spec, path) -> dict:
        allowed = {"importance", "confidence", "access_count", "decay_score"}
        self.keys(spec, path, allowed)
        scope = self.policy.scope(allow_aggregates=True, allow_time=False)
        return {c: self.formula(v, path + (c,), scope, X.NUM) for c, v in spec.items()}

    def recall(self) -> Recall:
        spec = self.d.get("recall") or {}
        p = ("recall",)
        self.keys(spec, p, {"where", "order", "limit", "select", "on_access", "match", "top_n"})
        cand = self.candidates({k: v for k, v in spec.items() if k in ("where", "order", "limit")},
                               p, allow_relevance=True)
        rec = Recall(cand)
        if "select" in spec:
            sel = spec["select"]
            rec.select = self.judgment(sel, p + ("select",), extra=("top_n",))
            top_n = sel.get("top_n", 6)
            if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
                self.fail(p + ("select", "top_n"), f"must be a whole number >= 1, got {top_n!r}")
            rec.top_n = top_n
        if "on_access" in spec:
            rec.on_access = self.rule(spec["on_access"], p + ("on_access",), need_when=False)
        rec.match = spec.get("match", "score")
        if rec.match not in ("score", "filter"):
            self.fail(p + ("match",), "match must be 'score' (rank every candidate by relevance) "
                      "or 'filter' (full-text matches only; the top candidates when none match)")
        if "top_n" in spec:
            top_n = spec["top_n"]
            if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
                self.fail(p + ("top_n",), f"must be a whole number >= 1, got {top_n!r}")
            rec.top_n = top_n
        return rec


def _split_top(text: str) -> list[str]:
    """Split 'a desc, max(b, c) asc' on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def _closest(word: str, options) -> str | None:
    found = difflib.get_close_matches(word, list(options), n=1, cutoff=0.7)
    return found[0] if found else None

