"""The models a policy names, its embedding model, and its judgments (write steps,
cluster and merge, recall's select): each judgment's candidates, order and template,
checked against the step it serves. The passes (engine.policy.build_passes) take
judgments too, and build on this."""

from __future__ import annotations

import os
import re

from engine import prompts
from engine.base import resources
from engine.base.errors import PolicyError, PolicyErrors
from engine.policy import expr as X
from engine.policy import schema as S
from engine.policy import variables, yamldoc
from engine.policy.build_checks import Checks
from engine.policy.types import RESPONSE_FORMATS, Candidates, Embed, Judgment, Model, Policy
from engine.steps.kinds import KINDS


class JudgmentBuilder(Checks):
    """Models, the embedding model and judgments, with their candidates and templates."""

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
            if m is None:  # (.*?) takes any text: never, but said plainly if it were
                self.fail(path, f"cannot read the order term '{part.strip()}'")
            node = self.formula(
                m.group(1),
                path,
                self.scope(allow_relevance=allow_relevance, allow_similarity=allow_similarity),
            )
            if node.type not in (X.NUM, X.TIME, X.TEXT):
                self.fail(path, f"cannot order by {node.type}: '{m.group(1)}'")
            items.append((node, (m.group(2) or "desc").lower() == "desc"))
        return items


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
