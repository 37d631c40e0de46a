"""Finding a policy file and loading it: paths, bare names, `extends:` chains.

A path (it has a folder part or ends in .yaml/.yml) is used as given, relative to the
working directory. A bare name is ./policies/NAME.yaml in the working directory at call
time, then the policy of that name that ships with the package (`engine.base.resources`);
`extends: NAME` first looks beside the extending file. Loading never touches a database.
"""

from __future__ import annotations

import os

from engine.base import resources
from engine.base.errors import PolicyError
from engine.policy import schema, yamldoc
from engine.policy.build import Builder
from engine.policy.types import Policy
from engine.prompts import inside

POLICY_FILES = (".yaml", ".yml")
POLICY_KEYS = frozenset(schema.allowed("policy"))


def is_path(ref: str) -> bool:
    """A reference that names a file rather than a policy by its bare name."""
    return "/" in ref or os.sep in ref or ref.endswith((".yaml", ".yml"))


def resolve(ref: str, relative_to: str | None = None) -> str:
    """The file a policy reference names; `relative_to` is the file whose `extends:` it is.
    Not found: a PolicyError listing where it looked (and the shipped names, for a name)."""
    candidates = list(dict.fromkeys(_candidates(ref, relative_to)))
    for c in candidates:
        if os.path.isfile(c):
            return c
    names = resources.shipped_policy_names()
    shipped = "" if is_path(ref) else f"; shipped policies: {', '.join(names) or '(none)'}"
    stem = os.path.basename(ref).removesuffix(resources.POLICY_SUFFIX)
    if is_path(ref) and stem in names:  # `policies/lifecycle.yaml` outside the repository
        shipped = f"; the shipped policy of that name is '{stem}', without a path"
    raise PolicyError(f"policy not found: {ref!r} (looked in {', '.join(candidates)}{shipped})")


def _candidates(ref: str, relative_to: str | None) -> list[str]:
    beside = [os.path.dirname(relative_to)] if relative_to else []
    if is_path(ref):
        return [os.path.join(d, ref) for d in beside] + [ref]
    dirs = beside + [os.path.join(os.getcwd(), "policies"), resources.shipped_policies_dir()]
    return [os.path.join(d, ref + resources.POLICY_SUFFIX) for d in dirs]


def load(ref: str, templates: bool = True) -> Policy:
    """Load, merge `extends:`, validate and compile a policy. Raises PolicyError.

    `templates=False` finds each template but leaves parsing it, and checking the
    variables it uses, to `check_templates(policy)`, which whatever renders one calls
    first: for a caller that runs passes of rules alone (`lethe run --pass decay`), which
    then never imports Jinja or compiles a template it does not use."""
    path = resolve(ref)
    doc = _load_doc(path, (), project_of(path))
    return Builder(doc, templates).build()


def project_of(path: str) -> str:
    """A policy's project: the folder above its own (policies/ beside prompts/), as for its
    templates; what its `extends:` and `db:` may name lies inside it."""
    return os.path.dirname(os.path.dirname(os.path.abspath(path)))


def _confined(base: str, project: str) -> str | None:
    """Why `extends:` may not name `base`, or None: only a policy (a .yaml or .yml file)
    that ships or lies in the extending policy's project, so a hostile policy cannot make
    Lethe read (and quote) a .env, a key or /etc/shadow."""
    if not base.endswith(POLICY_FILES):
        return "names a file that is not a policy (a policy is a .yaml or .yml file)"
    if (
        inside(base, resources.shipped_policies_dir())
        or inside(base, project)
        or inside(base, os.path.join(os.getcwd(), "policies"))
    ):
        return None
    return (
        f"names a policy outside the policy's project ({project}): extends names a "
        "shipped policy or a .yaml file in the project"
    )


def _load_doc(path: str, chain: tuple, project: str) -> yamldoc.Doc:
    real = os.path.realpath(path)
    if real in chain:
        raise PolicyError(f"'extends' goes round in a circle: {' -> '.join(chain + (real,))}", path, 1, 1)
    if not path.endswith(POLICY_FILES):
        raise PolicyError(
            "not a policy: a policy is a .yaml or .yml file; nothing of it is shown",
            os.path.relpath(path) if not os.path.isabs(path) else path,
            1,
            1,
        )
    doc = yamldoc.load(path, POLICY_KEYS)
    if not isinstance(doc.data, dict):
        raise doc.error((), "a policy must be a mapping of keys (name, models, passes, ...)")
    parent = doc.data.get("extends")
    if parent is None:
        return doc
    if not isinstance(parent, str):
        raise doc.error(("extends",), "extends must be a policy path or name")
    try:
        base_path = resolve(parent, relative_to=path)
    except PolicyError as exc:
        raise doc.error(("extends",), exc.message) from None
    refused = _confined(base_path, project)
    if refused:
        raise doc.error(("extends",), f"extends {parent!r} {refused}")
    if os.path.realpath(base_path) in chain + (real,):
        circle = " -> ".join(chain + (real, os.path.realpath(base_path)))
        raise doc.error(("extends",), f"'extends' goes round in a circle: {circle}")
    base = _load_doc(base_path, chain + (real,), project)
    merged = yamldoc.merge(base, doc)
    if isinstance(merged.data, dict):  # a merge of two mappings
        merged.data.pop("extends", None)
    return merged
