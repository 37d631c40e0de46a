"""Experiments: every scenario under every policy, each on a fresh store, compared.

`run_experiment(scenarios, policies, offline=...)` is the one function behind `lethe
experiment` and `make demo`. Per run it keeps the scenario's checks and recalls, the memory
counts by status at the end and over simulated time, what the policy superseded, archived,
expired and compressed, and the model calls and tokens logged in `model_calls`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field

from engine import policy as policy_mod
from engine.apps import scenario as scenario_mod
from engine.apps.scenario import Playback, Scenario, Script
from engine.base.clock import FixedClock
from engine.base.errors import LetheError
from engine.judges.keys import missing_key
from engine.memory import Memory
from engine.policy import STATUSES, Policy
from engine.run.write import pending_reasons


@dataclass
class Run:
    """One scenario played under one policy."""

    scenario: Scenario
    policy: Policy
    playback: Playback
    counts: dict[str, int] = field(default_factory=dict)
    changes: list[dict] = field(default_factory=list)
    model: dict = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    @property
    def met(self) -> int:
        return sum(1 for c in self.playback.checks if c.ok)

    @property
    def total(self) -> int:
        return self.scenario.expectations()

    @property
    def ok(self) -> bool:
        return self.error is None and self.met == self.total

    def missed(self) -> list[dict]:
        out = [
            {
                "file": self.scenario.file,
                "line": c.line,
                "scenario": self.scenario.name,
                "policy": self.policy.name,
                "what": c.what,
                "detail": c.detail,
            }
            for c in self.playback.checks
            if not c.ok
        ]
        if self.error:
            out.append(
                {
                    "file": self.scenario.file,
                    "line": 0,
                    "scenario": self.scenario.name,
                    "policy": self.policy.name,
                    "what": "the run stopped",
                    "detail": self.error,
                }
            )
        return out

    def as_dict(self) -> dict:
        pb = self.playback
        return {
            "scenario": self.scenario.name,
            "policy": self.policy.name,
            "ok": self.ok,
            "met": self.met,
            "total": self.total,
            "counts": self.counts,
            "stale_recalls": pb.stale_recalls,
            "recalls": pb.recalls,
            "checks": [c.as_dict() for c in pb.checks],
            "changes": self.changes,
            "pass_runs": pb.pass_runs,
            "model": self.model,
            "timeline": pb.timeline,
            "notes": pb.notes,
            "error": self.error,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Experiment:
    scenarios: list[Scenario]
    policies: list[Policy]
    runs: list[Run]
    offline: bool = False

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    def run(self, scenario: Scenario, policy: Policy) -> Run:
        return next(r for r in self.runs if r.scenario is scenario and r.policy is policy)

    def matrix(self) -> dict:
        """scenario name -> policy name -> {met, total}."""
        return {
            s.name: {
                p.name: {"met": self.run(s, p).met, "total": self.run(s, p).total} for p in self.policies
            }
            for s in self.scenarios
        }

    def summary(self) -> dict:
        """Per policy, over all scenarios: expectations, end counts, stale recalls, model use."""
        out = {}
        for p in self.policies:
            runs = [r for r in self.runs if r.policy is p]
            counts = {s: sum(r.counts.get(s, 0) for r in runs) for s in STATUSES}
            out[p.name] = {
                "met": sum(r.met for r in runs),
                "total": sum(r.total for r in runs),
                "counts": counts,
                "recalls": sum(len(r.playback.recalls) for r in runs),
                "stale_recalls": sum(r.playback.stale_recalls for r in runs),
                # the built-in rules answer offline: their calls are not a model's
                "model_calls": sum(r.model.get("calls", 0) - _rules(r) for r in runs),
                "rules_calls": sum(_rules(r) for r in runs),
                "tokens": sum(r.model.get("tokens", 0) for r in runs),
                "fallbacks": sum(r.model.get("fallbacks", 0) for r in runs),
            }
        return out

    def missed(self) -> list[dict]:
        return [m for r in self.runs for m in r.missed()]

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "offline": self.offline,
            "scenarios": [
                {"name": s.name, "file": s.file, "steps": len(s.steps), "expectations": s.expectations()}
                for s in self.scenarios
            ],
            "policies": [{"name": p.name, "file": _shown(p.path)} for p in self.policies],
            "matrix": self.matrix(),
            "summary": self.summary(),
            "missed": self.missed(),
            "runs": [r.as_dict() for r in self.runs],
        }


# ---- running ------------------------------------------------------------------------
def run_experiment(
    scenarios: list[str], policies: list[str], offline: bool = False, keep: str | None = None, progress=None
) -> Experiment:
    """Play every scenario file under every policy, each on a fresh store. `keep` is a
    directory to leave the stores in (for `lethe why` afterwards); otherwise they go.
    `progress(done, total, run)` is called after each run."""
    if not scenarios or not policies:
        raise LetheError("an experiment needs at least one scenario and one policy")
    loaded = [scenario_mod.load(path) for path in scenarios]
    pols = [policy_mod.load(ref) for ref in policies]
    _unique_names(loaded, pols)
    if not offline:
        for p in pols:
            _check_keys(p)
    runs, total, taken = [], len(loaded) * len(pols), set[str]()
    with tempfile.TemporaryDirectory(prefix="lethe-experiment-") as tmp:
        folder = keep or tmp
        os.makedirs(folder, exist_ok=True)
        for s in loaded:
            for p in pols:
                path = os.path.join(folder, _db_name(f"{_slug(s.name)}--{_slug(p.name)}", taken))
                runs.append(run_one(s, p, path, offline))
                if progress is not None:
                    progress(len(runs), total, runs[-1])
    return Experiment(loaded, pols, runs, offline)


def progress_line(done: int, total: int, run: Run) -> str:
    """One finished run, as the experiment's progress on a terminal shows it."""
    width = len(str(total))
    verdict = "ok" if run.ok else ("stopped" if run.error else "missed some")
    return (
        f"[{done:>{width}}/{total}] {run.scenario.name} under {run.policy.name}: "
        f"{run.met}/{run.total} ({verdict}, {run.seconds:.1f}s)"
    )


def _db_name(stem: str, taken: set[str]) -> str:
    """A file name no other run of this experiment has: names that slug alike ("Poetry to
    uv" and "poetry-to-uv") get -2, -3, ... instead of overwriting each other's store."""
    name, n = f"{stem}.db", 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.db"
    taken.add(name)
    return name


def run_one(scenario: Scenario, policy: Policy, db_path: str, offline: bool = False) -> Run:
    """Play one scenario under one policy on a fresh store at `db_path`."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db_path + suffix):
            os.remove(db_path + suffix)
    clock, script = FixedClock(scenario.start), Script()
    started = time.perf_counter()
    with Memory(db_path, policy=policy, offline=offline, clock=clock, scripted=script) as mem:
        player = scenario_mod.Player(scenario, mem, clock, script)
        error = None
        try:
            player.play()
        except LetheError as exc:  # e.g. a model outage mid-pass: the run failed, others go on
            error = f"{type(exc).__name__}: {exc}"
        for why, n in pending_reasons(mem.pending()).items():
            player.out.notes.append(f"{n} turn(s) still pending: {why}")
        run = Run(scenario, policy, player.out, counts(mem), changes(mem), model_use(mem), error)
    run.seconds = time.perf_counter() - started
    return run


def counts(mem: Memory) -> dict[str, int]:
    out = {s: 0 for s in STATUSES}
    out.update(mem.counts())
    return out


def changes(mem: Memory) -> list[dict]:
    """Every memory no longer active: its status, when, and what replaced or absorbed it."""
    return [
        {"status": r["status"], "content": r["content"], "at": r["at"], "by": r["replaced_by"]}
        for r in mem.changes()
    ]


def _rules(run: Run) -> int:
    return run.model.get("by_provider", {}).get("rules", 0)


def model_use(mem: Memory) -> dict:
    """Model calls and tokens from `model_calls`: totals, and calls by step."""
    return mem.model_use()


def _check_keys(p: Policy) -> None:
    """Without --offline, a policy's openai models need a key (or a local endpoint)."""
    m = missing_key(p)
    if m is not None:
        raise LetheError(
            f"policy '{p.name}' asks model '{m.name}' ({m.model}) and "
            f"{m.api_key_env or 'OPENAI_API_KEY'} is not set: set it, or pass --offline to use "
            "the rules judges"
        )


def _unique_names(scenarios: list[Scenario], policies: list[Policy]) -> None:
    for what, items in (
        ("scenario", [(s.name, s.file) for s in scenarios]),
        ("policy", [(p.name, p.path) for p in policies]),
    ):
        seen: dict[str, str] = {}
        for name, where in items:
            if name in seen and seen[name] != where:
                raise LetheError(
                    f"two {what} files are both named '{name}': {seen[name]} and "
                    f"{where}; give one another name"
                )
            seen[name] = where
    if len({s.file for s in scenarios}) < len(scenarios) or len({p.path for p in policies}) < len(policies):
        raise LetheError("the same scenario or policy is given twice")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "x"


def _shown(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


# ---- text ---------------------------------------------------------------------------
def text_lines(exp: Experiment, missed: bool = True) -> list[str]:
    """The matrix, the per-policy summary, and (with `missed`) every missed expectation."""
    names = [p.name for p in exp.policies]
    width = max([len(s.name) for s in exp.scenarios] + [len("expectations met")]) + 2
    cols = [max(len(n), 9) + 2 for n in names]
    head = "scenario".ljust(width) + "".join(n.rjust(c) for n, c in zip(names, cols))
    lines = [head, "-" * len(head)]
    matrix, summary = exp.matrix(), exp.summary()
    for s in exp.scenarios:
        cells = [f"{matrix[s.name][n]['met']}/{matrix[s.name][n]['total']}" for n in names]
        lines.append(s.name.ljust(width) + "".join(v.rjust(c) for v, c in zip(cells, cols)))
    lines.append("-" * len(head))
    totals = [f"{summary[n]['met']}/{summary[n]['total']}" for n in names]
    lines.append("expectations met".ljust(width) + "".join(v.rjust(c) for v, c in zip(totals, cols)))
    lines += ["", _summary_table(summary)]
    shown = exp.missed() if missed else []
    if shown:
        lines += ["", f"missed expectations ({len(shown)}):"]
        for m in shown:
            lines.append(f"  {m['file']}:{m['line']}: [{m['policy']}] {m['what']}")
            if m["detail"]:
                lines.append(f"      {m['detail']}")
    if missed:
        lines += [
            "",
            "ok: every expectation holds" if exp.ok else f"FAILED: {len(exp.missed())} expectation(s) missed",
        ]
    return lines


def _summary_table(summary: dict) -> str:
    head = ("policy", *STATUSES, "stale recalls", "model calls", "rules calls", "fallbacks", "tokens")
    rows = [head]
    for name, s in summary.items():
        rows.append(
            (
                name,
                *[str(s["counts"][st]) for st in STATUSES],
                f"{s['stale_recalls']}/{s['recalls']}",
                str(s["model_calls"]),
                str(s["rules_calls"]),
                str(s["fallbacks"]),
                str(s["tokens"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths)))
        for r in rows
    )


def dumps(exp: Experiment) -> str:
    return json.dumps(exp.as_dict(), indent=2, ensure_ascii=False)
