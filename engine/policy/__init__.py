"""Policies: load YAML (with `extends:`), validate every key, compile every formula.

Loading never touches a database. A loaded `Policy` holds typed IR for every formula, so
anything that does not compile is refused here, at load time, with file:line:col.
`types` says what a policy is, `load` finds and merges the files, `build` validates
(`passes` its passes and rules; `check_templates` what a load left for later).
"""

from engine.policy.build import check_templates
from engine.policy.load import is_path, load, resolve
from engine.policy.types import (
    DEFAULT_RANK,
    PROVIDERS,
    SETTABLE,
    STATUSES,
    STEP_KINDS,
    Candidates,
    Judgment,
    Model,
    Pass,
    Policy,
    Recall,
    Rule,
    WriteStep,
    find_judgment,
)

__all__ = [
    "DEFAULT_RANK",
    "PROVIDERS",
    "SETTABLE",
    "STATUSES",
    "STEP_KINDS",
    "Candidates",
    "Judgment",
    "Model",
    "Pass",
    "Policy",
    "Recall",
    "Rule",
    "WriteStep",
    "check_templates",
    "find_judgment",
    "is_path",
    "load",
    "resolve",
]
