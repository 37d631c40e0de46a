"""The validating builder: a merged policy document in, a typed `Policy` out.

Every key is checked against the schema of its section (`schema`: unknown and missing
keys, simple types, choices, defaults), every formula is compiled against the policy's
params and scores, every template is parsed and rendered with its step's example
variables. Every mistake in the file is collected: `build()` raises one PolicyErrors
listing them all, each at file:line:col naming the key. A param that nothing reads is a
warning (`Policy.warnings`), not an error.
"""

from __future__ import annotations

import os
import re
from typing import cast

from engine import prompts
from engine.base.errors import PolicyError, PolicyErrors
from engine.policy import expr as X
from engine.policy import schema as S
from engine.policy.build_checks import closest, quoted
from engine.policy.build_passes import PassBuilder
from engine.policy.types import (
    DEFAULT_RANK,
    Policy,
    Recall,
    WriteStep,
)
from engine.steps.kinds import KINDS


class Builder(PassBuilder):
    """Builds one `Policy` from its merged document, collecting every mistake: params and
    scores, the rank, the write steps, the passes and recall (the models and judgments in
    engine.policy.build_judgments, the checks in engine.policy.build_checks)."""

    def build(self) -> Policy:
        d = self.collect(self.keys, self.d, (), "policy")
        if d is None:  # no name: still check the rest of the file
            d = dict(self.d)
        name = d.get("name", "?")
        self.used = set()  # params some formula reads (filled as formulas compile)
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
            # the rank and recall are built below, in this policy's scope; a policy whose
            # rank or recall failed is never returned (its mistake is raised)
            rank=cast(X.Node, None),
            rank_text="",
            write=[],
            passes={},
            recall=cast(Recall, None),
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
            close = closest(name, self.used | set(S.ENGINE_PARAMS))
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
            self.fail(p + ("step",), f"unknown step {quoted(kind)}; known: {known}")
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
        if spec.get("fallback") is not None:
            past = spec["fallback"]
            past = {"where": S.PAST, **past} if isinstance(past, dict) else past
            rec.past = self.collect(self.candidates, past, p + ("fallback",), allow_relevance=False)
            if rec.select is None:  # asked when the select step picks nothing: never without one
                self.note(
                    p + ("fallback",), "a fallback needs a `select` step (it is asked when that picks none)"
                )
        return rec


def check_templates(policy: Policy) -> None:
    """Parse the templates a load with templates=False left unparsed, and check the
    variables each uses, as a full load does (a PolicyError, or PolicyErrors, naming file
    and line); then nothing is left to check. Returns at once when nothing is left."""
    if policy.unparsed:
        Builder(policy.doc).check_templates(policy)
