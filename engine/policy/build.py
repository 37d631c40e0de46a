"""The validating builder: a merged policy document in, a typed `Policy` out.

Every key is checked against the schema of its section (`schema`: unknown and missing
keys, simple types, choices, defaults), every formula is compiled against the policy's
params and scores, every template is parsed and rendered with its step's example
variables. Every mistake in the file is collected: `build()` raises one PolicyErrors
listing them all, each at file:line:col naming the key. A param that nothing reads is a
warning (`Policy.warnings`), not an error.
"""

from __future__ import annotations

import difflib
import os
import re

from engine import prompts
from engine.base import resources
from engine.base.errors import FormulaError, PolicyError, PolicyErrors
from engine.policy import expr as X
from engine.policy import schema as S
from engine.policy import variables, yamldoc
from engine.policy.build_passes import PassBuilder
from engine.policy.types import (
    DEFAULT_RANK,
    RESPONSE_FORMATS,
    Candidates,
    Embed,
    Judgment,
    Model,
    Policy,
    Recall,
    WriteStep,
)
from engine.steps.kinds import KINDS

_SIMPLE = {
    S.TEXT: ((str,), "text"),
    S.MODEL: ((str,), "a model name"),
    S.TEMPLATE: ((str,), "a template file name"),
    S.NUMBER: ((int, float), "a number"),
    S.VALUE: ((int, float, str), "a number or text"),
}


class Builder(PassBuilder):
    """Builds one `Policy` from its merged document, collecting every mistake."""

    def __init__(self, doc: yamldoc.Doc, templates: bool = True):
        self.doc = doc
        self.d = doc.data
        self.errors: list[PolicyError] = []
        # False: each template is found now, and parsed by check_templates below (Jinja
        # is then imported only by what renders one): see engine.policy.load
        self.templates = templates

    # helpers -------------------------------------------------------------------------
    def fail(self, path, message, of_key=False):
        raise self.doc.error(path, message, of_key)

    def note(self, path, message, of_key=False) -> None:
        """A mistake that does not stop the check of the rest of the file."""
        self.errors.append(self.doc.error(path, message, of_key))

    def collect(self, fn, *args, fallback=None, **kw):
        """Run one independent check; a mistake is noted and `fallback` stands in for it."""
        try:
            return fn(*args, **kw)
        except PolicyError as exc:
            self.errors.append(exc)
            return fallback

    def keys(self, value, path, section: str) -> dict:
        """The mapping `value`, checked against its section's schema: each unknown key and
        each simple value of the wrong type is noted (the default stands in for it); a
        missing required key stops this mapping's check."""
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        sec = S.section(section)
        allowed = sec.allowed()
        for k in value:
            if k not in allowed:
                close = _closest(k, allowed)
                hint = f" (did you mean '{close}'?)" if close else ""
                self.note(
                    path + (k,), f"unknown key '{k}'{hint}; known: {', '.join(sorted(allowed))}", of_key=True
                )
        out = {k: v for k, v in value.items() if k in allowed}
        for key in sec.all_keys():
            if key.name in out and not self.collect(
                self.simple, out[key.name], path + (key.name,), key, fallback=False
            ):
                out.pop(key.name)
        missing = [k.name for k in sec.all_keys() if k.required and k.name not in value]
        if missing:
            self.fail(path, f"missing required key '{missing[0]}'")
        return out

    def simple(self, value, path, key: S.Key) -> bool:
        """A value of a simple kind (text, number, whole number, choice); others pass."""
        if value is None and key.default is None:
            return True
        if key.kind in _SIMPLE:
            self.typed(value, path, *_SIMPLE[key.kind])
        elif key.kind == S.WHOLE:
            low = key.minimum or 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                self.fail(path, f"must be a whole number >= {low}, got {value!r}")
        elif key.kind == S.CHOICE and key.choices == (False, True):
            if not isinstance(value, bool):  # 1 == True: say it as YAML does
                self.fail(path, f"must be true or false, got {value!r}")
        elif key.kind == S.CHOICE and value not in key.choices:
            self.fail(path, f"unknown {key.name} {_quoted(value)}; known: {', '.join(key.choices)}")
        elif key.kind == S.MAPPING and value is not None and not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        elif key.kind == S.LIST and value is not None and not isinstance(value, list):
            self.fail(path, f"{key.name} must be a list")
        return True

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
            if exc.param and ("params", exc.param) in self.doc.values:
                # the mistake is the param's value: say so where it is written (perhaps a
                # file that extends the one holding this formula), and name the formula
                used = self.doc.mark(path)
                at = f", {os.path.basename(used.file)}:{used.line}" if used else ""
                self.fail(("params", exc.param), f"{exc} ({yamldoc.dotted(path)} reads it{at})")
            self.fail(path, str(exc))
        if want and node.type not in (want, X.NULL) and not (want == X.TIME and node.type == X.TEXT):
            label = {X.BOOL: "a condition", X.NUM: "a number", X.TIME: "a time"}[want]
            self.fail(path, f"must be {label}, but '{text}' is {node.type}")
        return node

    # sections -------------------------------------------------------------------------
    def build(self) -> Policy:
        d = self.collect(self.keys, self.d, (), "policy")
        if d is None:  # no name: still check the rest of the file
            d = dict(self.d)
        name = d.get("name", "?")
        self.used: set[str] = set()  # params some formula reads (filled as formulas compile)
        params = self.params()
        scores = self.scores(params)
        self.policy = Policy(
            name=name,
            path=self.doc.file,
            doc=self.doc,
            db=self.database(d.get("db")),
            models=self.models(),
            params=params,
            scores=scores,
            rank=None,
            rank_text="",
            write=[],
            passes={},
            recall=None,
            prompt_dirs=self.prompt_dirs(),
            description=str(d.get("description") or ""),
        )
        self.policy.embed = self.collect(self.embed)
        self.policy.rank_text = str(scores.get("rank", DEFAULT_RANK))
        self.policy.rank = self.collect(self.rank)
        self.policy.write = self.collect(self.write, fallback=[])
        self.policy.passes = self.collect(self.passes, fallback={})
        self.policy.recall = self.collect(self.recall)
        unread = self.unread_params()
        # a param this file writes and nothing reads is its typo: an error, as an unknown
        # key is; one an extended file writes (a formula here replaced its reader) warns
        mine = [e for e in unread if e.file == self.doc.file]
        self.errors += mine
        warnings = [e for e in unread if e not in mine]
        if self.errors:  # one mistake reads as it always did; several, one after another
            exc = self.errors[0] if len(self.errors) == 1 else PolicyErrors(self.errors)
            exc.warnings = warnings  # `lethe validate` shows them beside the errors
            raise exc
        self.policy.warnings = warnings
        return self.policy

    def params(self) -> dict:
        params = self.collect(self.mapping, self.d.get("params"), ("params",), fallback={})
        out = {}
        for k, v in params.items():
            ok = self.collect(self.check_name, k, ("params", k), fallback=False) is not False
            ok = (
                ok
                and self.collect(
                    self.typed, v, ("params", k), (int, float, str), "a number or text", fallback=False
                )
                is not False
            )
            out[k] = v if ok else 0  # a stand-in, so formulas reading it are not blamed too
        return out

    def scores(self, params) -> dict:
        """Each score compiles; a broken one is reported where it is written and stands
        in as 0, so formulas using it are not blamed for it too."""
        scores = dict(self.collect(self.mapping, self.d.get("scores"), ("scores",), fallback={}))
        for k in list(scores):
            if k != "rank":
                self.collect(self.check_name, k, ("scores", k))
            if k in params:
                self.note(("scores", k), f"'{k}' is both a param and a score")
        for k, v in scores.items():
            scope = X.Scope(params, scores, used=self.used, allow_relevance=True)
            if self.collect(self.formula, v, ("scores", k), scope) is None:
                scores[k] = 0
        return scores

    def database(self, db):
        """`db:` as commands open it: a relative path is relative to the folder of the file
        that says it, as `prompts:` and `extends:` are (not to wherever a command runs, which
        would make a second, empty store), and must lie in that policy's project (the folder
        above its own), as its templates do: a policy handed to you cannot point Lethe at
        another application's database. A DSN or `:memory:` as written."""
        if not isinstance(db, str) or not db or "://" in db or db == ":memory:":
            return db
        written = self.doc.mark(("db",))
        here = os.path.dirname(os.path.abspath(written.file if written else self.doc.file))
        if os.path.isabs(db) or db.startswith(("~", "file:")):
            self.fail(
                ("db",),
                f"must be a file inside the policy's project, given relative "
                f"to the policy file; {db!r} is refused (give another file with --db)",
            )
            return None
        path = os.path.normpath(os.path.join(here, db))
        if not prompts.inside(os.path.dirname(path), os.path.dirname(here)):
            self.fail(
                ("db",),
                f"'{db}' leads out of the policy's project "
                f"({os.path.dirname(here)}): refused (give another file with --db)",
            )
            return None
        return path

    def scope(self, **kw) -> X.Scope:
        """The names formulas may use; params they read are noted in `self.used`."""
        return X.Scope(self.policy.params, self.policy.scores, used=self.used, **kw)

    def check_name(self, name, path):
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            self.fail(path, f"'{name}' is not a valid name (lowercase letters, digits, _)", True)
        taken = X.COLUMNS.keys() | X.TIME_WORDS.keys() | X.SCALAR_FUNCS.keys() | {"relevance", "similarity"}
        if name in taken or name in X.CONSTANT_NAMES:
            self.fail(path, f"'{name}' is already a column, time word or function", True)

    def unread_params(self) -> list[PolicyError]:
        """Params no formula reads and the engine does not read either: most often a typo
        (`half_life_dayz`) that silently leaves the intended value in force."""
        out = []
        for name in self.policy.params:
            if (
                name in self.used or name in S.ENGINE_PARAMS or (self.errors and self.mentioned(name))
            ):  # a formula that failed may read it
                continue
            if any(getattr(e, "path", None) == f"params.{name}" for e in self.errors):
                continue  # its own mistake is said already
            close = _closest(name, self.used | set(S.ENGINE_PARAMS))
            hint = f" (did you mean '{close}'?)" if close else ""
            out.append(
                self.doc.error(
                    ("params", name), f"unknown param '{name}': no formula reads it{hint}", of_key=True
                )
            )
        return out

    def mentioned(self, name: str) -> bool:
        """Whether `name` is written as a word anywhere outside `params:` (a formula that
        failed to compile never said which params it reads)."""

        def words(value):
            if isinstance(value, dict):
                return any(words(v) for v in value.values())
            if isinstance(value, list):
                return any(words(v) for v in value)
            return isinstance(value, str) and re.search(rf"\b{re.escape(name)}\b", value)

        return any(words(v) for k, v in self.d.items() if k != "params")

    def rank(self) -> X.Node:
        path = ("scores", "rank")
        node = self.formula(self.policy.rank_text, path, self.scope(allow_time=False), X.NUM)
        if "rank" in X.columns_of(node):
            self.fail(path, "the stored rank cannot refer to itself")
        return node

    def prompt_dirs(self) -> tuple:
        """Where templates are looked for, in order: the policy's own `prompts:` folder,
        `prompts/` beside the policy's folder (policies/ next to prompts/) and inside it,
        then the templates that ship with the package. All but the shipped ones must lie
        in the policy's project (its folder and the folder above): `prompts:` given as an
        absolute path, climbing out, or a link leading out is refused; a default folder
        that is a link out of the project is not used."""
        here = os.path.dirname(os.path.abspath(self.doc.file))
        project = os.path.dirname(here)
        dirs = []
        if "prompts" in self.d:
            p = self.typed(self.d["prompts"], ("prompts",), (str,), "a folder path")
            if os.path.isabs(p) or p.startswith("~"):
                self.fail(
                    ("prompts",),
                    f"must be a folder inside the policy's project, given "
                    f"relative to the policy file; an absolute path ({p!r}) is refused",
                )
            target = os.path.normpath(os.path.join(here, p))
            if not prompts.inside(target, project):
                self.fail(
                    ("prompts",),
                    f"'{p}' leads out of the policy's project ({project}, "
                    f"to {os.path.realpath(target)}): refused",
                )
            dirs.append(os.path.realpath(target))
        for default in (os.path.join(here, "..", "prompts"), os.path.join(here, "prompts")):
            if prompts.inside(default, project):
                dirs.append(os.path.realpath(default))
        dirs.append(resources.shipped_prompts_dir())
        return tuple(dict.fromkeys(d for d in dirs))

    def models(self) -> dict:
        out = {"rules": Model("rules", "rules")}
        models = self.collect(self.mapping, self.d.get("models"), ("models",), fallback={})
        for name, spec in models.items():
            # a broken model still answers to its name: judgments naming it are not blamed
            out[name] = self.collect(self.model, name, spec, fallback=Model(name, "rules"))
        return out

    def model(self, name, spec) -> Model:
        p = ("models", name)
        spec = self.keys(spec, p, "model")
        if spec.get("provider") == "openai" and not isinstance(spec.get("model"), str):
            self.fail(p, "an openai model needs 'model: <name>'")
        self.model_settings(spec, p)
        spec.setdefault("provider", "rules")  # a refused provider (noted) stands in as rules
        return Model(name=name, **spec)

    def model_settings(self, spec: dict, p: tuple) -> None:
        """Types and ranges of a model entry's settings (engine/judges/openai.py reads them)."""
        if spec.get("temperature") is not None:
            self.typed(spec["temperature"], p + ("temperature",), (int, float), "a number or null")
        if "timeout" in spec:
            t = self.typed(spec["timeout"], p + ("timeout",), (int, float), "a number of seconds")
            if not 0 < t < 86400:
                self.fail(p + ("timeout",), f"must be more than 0 and less than a day, got {t!r}")
        for k, lo, hi in (
            ("max_retries", 0, 10),
            ("retries", 0, 5),
            ("concurrency", 1, 64),
            ("max_completion_tokens", 0, 10**7),
            ("max_tokens", 0, 10**7),
            ("seed", 0, 2**63 - 1),
        ):
            if spec.get(k) is not None:
                v = self.typed(spec[k], p + (k,), (int,), "a whole number")
                if not lo <= v <= hi:
                    self.fail(p + (k,), f"must be a whole number from {lo} to {hi}, got {v!r}")
        if spec.get("max_completion_tokens") is not None and spec.get("max_tokens") is not None:
            self.fail(p, "give max_completion_tokens or max_tokens, not both")
        for k in ("model", "base_url", "api_key_env", "file", "reasoning_effort"):
            if spec.get(k) is not None:
                self.typed(spec[k], p + (k,), (str,), "text")
        if spec.get("response_format", "json_schema") not in RESPONSE_FORMATS:
            self.fail(
                p + ("response_format",),
                f"must be one of {', '.join(RESPONSE_FORMATS)}, got {spec['response_format']!r}",
            )
        if spec.get("headers") is not None:
            headers = self.mapping(spec["headers"], p + ("headers",))
            for k, v in headers.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    self.fail(p + ("headers", k), "headers are names and values, both text")
        if spec.get("extra_body") is not None:
            self.mapping(spec["extra_body"], p + ("extra_body",))

    def embed(self) -> Embed | None:
        """The embedding model, when the policy declares one (engine/judges/embeddings.py)."""
        if self.d.get("embed") is None:
            return None
        spec = self.keys(self.d["embed"], ("embed",), "embed")
        # a refused provider has been noted; the policy is not built without one
        return Embed(**spec) if "provider" in spec and "model" in spec else None

    def judgment(self, spec, path, section="judgment") -> Judgment:
        spec = self.keys(spec, path, section)
        model = spec.get("model")
        if model is not None and model not in self.policy.models:
            self.note(
                path + ("model",),
                f"unknown model '{model}'; this policy defines: {', '.join(sorted(self.policy.models))}",
            )
        prompt = spec.get("prompt")
        if prompt is not None:
            self.collect(self.template, prompt, path + ("prompt",), section, path)
        cand = (
            self.collect(self.candidates, spec["candidates"], path + ("candidates",))
            if spec.get("candidates") is not None
            else None
        )
        # the section's own keys (select.top_n, merge.result), kept as the judgment's options
        options = {
            k.name: spec[k.name] for k in S.section(section).keys if k.name in spec and k.name != "step"
        }
        return Judgment(
            model or "rules",
            prompt or "",
            cand,
            spec.get("fallback", S.default("judgment", "fallback")),
            options,
        )

    def template(self, prompt, path, section, step_path) -> None:
        """The template exists, parses, and uses only the variables its step provides
        (those two now, or when check_templates below is called)."""
        try:
            prompts.locate(prompt, self.policy.prompt_dirs)
        except PolicyError as exc:
            self.fail(path, exc.message)
        if self.templates:
            self.parsed(prompt, path, section, step_path)
        else:
            self.policy.unparsed.append((prompt, path, section, step_path))

    def parsed(self, prompt, path, section, step_path) -> None:
        """A template found by `template` parses and uses only its step's variables."""
        try:
            prompts.parse(prompt, self.policy.prompt_dirs)
        except PolicyError as exc:
            if exc.file:  # the template itself is broken: point there
                raise
            self.fail(path, exc.message)
        step = self.step_kind(section, step_path)
        if step is not None:
            try:
                prompts.check_variables(prompt, self.policy.prompt_dirs, variables.example(step), step)
            except PolicyError as exc:
                raise PolicyError(
                    f"{exc.message} (used by {yamldoc.dotted(step_path)})",
                    exc.file,
                    exc.line,
                    exc.col,
                    excerpt=exc.excerpt,
                ) from None

    def check_templates(self, policy: Policy) -> None:
        """The checks `template` left for later (templates=False), on `policy`, which this
        document built: every mistake raised together, as loading would have."""
        self.policy = policy
        for args in policy.unparsed:
            self.collect(self.parsed, *args)
        if self.errors:
            raise self.errors[0] if len(self.errors) == 1 else PolicyErrors(self.errors)
        policy.unparsed = []

    def step_kind(self, section, path) -> str | None:
        """Which step kind a judgment at `path` serves: its variables depend on it."""
        if section == "select":
            return "select"
        if path and path[-1] in ("cluster", "merge"):
            return path[-1]
        if path and path[0] == "write":
            kind = (self.d.get("write") or [])[path[1]].get("step")
            return kind if kind in KINDS else None
        return None

    def candidates(self, spec, path, allow_relevance=False) -> Candidates:
        spec = self.keys(spec, path, "candidates")
        d = lambda k: S.default("candidates", k)  # noqa: E731
        # `similarity` needs a vector to compare with: a new memory's or a query's, which
        # clustering has not (it compares memories with each other)
        similar = self.policy.embed is not None and "cluster" not in path
        scope = self.scope(allow_relevance=allow_relevance, allow_similarity=similar)
        where = self.collect(self.formula, spec.get("where", d("where")), path + ("where",), scope, X.BOOL)
        order = self.collect(
            self.order,
            spec.get("order", d("order")),
            path + ("order",),
            allow_relevance,
            similar,
            fallback=[],
        )
        return Candidates(
            where,
            order,
            spec.get("limit", d("limit")),
            spec.get("min", d("min")),
            spec.get("k", d("k")),
            dict(spec),
        )

    def order(self, text, path, allow_relevance=False, allow_similarity=False) -> list:
        if not isinstance(text, str):
            text = str(text)
        items = []
        for part in _split_top(text):
            m = re.fullmatch(r"(.*?)(?:\s+(asc|desc|ASC|DESC))?", part.strip(), re.S)
            node = self.formula(
                m.group(1),
                path,
                self.scope(allow_relevance=allow_relevance, allow_similarity=allow_similarity),
            )
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
            step = self.collect(self.write_step, spec, ("write", i))
            if step is not None:
                out.append(step)
        return out

    def write_step(self, spec, p) -> WriteStep:
        if not isinstance(spec, dict) or "step" not in spec:
            self.fail(p, "each write step needs 'step: <kind>'")
        kind = spec["step"]
        if not isinstance(kind, str) or kind not in KINDS or KINDS[kind].phase != "write":
            known = ", ".join(S.section("write step").key("step").choices)
            self.fail(p + ("step",), f"unknown step {_quoted(kind)}; known: {known}")
        return WriteStep(kind, self.judgment(spec, p, "write step"))

    def recall(self) -> Recall:
        p = ("recall",)
        spec = self.keys(self.d.get("recall") or {}, p, "recall")
        cand = self.candidates(
            {k: v for k, v in spec.items() if k in ("where", "order", "limit")}, p, allow_relevance=True
        )
        rec = Recall(cand, match=spec.get("match", S.default("recall", "match")))
        if spec.get("select") is not None:
            rec.select = self.collect(self.judgment, spec["select"], p + ("select",), "select")
            if rec.select is not None:
                rec.top_n = rec.select.options.get("top_n", S.default("select", "top_n"))
        if "top_n" in spec:  # recall.top_n wins over select.top_n
            rec.top_n = spec["top_n"]
        if spec.get("on_access") is not None:
            rec.on_access = self.collect(self.rule, spec["on_access"], p + ("on_access",), need_when=False)
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


def _quoted(value) -> str:
    return f"'{value}'" if isinstance(value, str) else repr(value)


def _closest(word: str, options) -> str | None:
    found = difflib.get_close_matches(word, list(options), n=1, cutoff=0.7)
    return found[0] if found else None


def check_templates(policy: Policy) -> None:
    """Parse the templates a load with templates=False left unparsed, and check the
    variables each uses, as a full load does (a PolicyError, or PolicyErrors, naming file
    and line); then nothing is left to check. Returns at once when nothing is left."""
    if policy.unparsed:
        Builder(policy.doc).check_templates(policy)
