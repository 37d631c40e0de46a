"""What each page shows, read through `Memory` (no SQL, no HTTP): plain dicts the
templates render."""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

from engine import policy as policy_mod
from engine.apps.inspector import charts
from engine.base.errors import LetheError
from engine.memory import Memory
from engine.policy import STATUSES, variables
from engine.prompts import render as render_template
from engine.run.audit import SORTS

PAGE = 50
FILTERS = ("status", "kind", "scene", "tag", "text")
# the event columns every store has; any other (a said-time, a recorded-time) is shown too
EVENT_BASE = ("id", "memory_id", "event_type", "detail", "occurred_at")
CHAIN_DEPTH = 8


def keyset(text: str | None) -> tuple | None:
    """`after` from a URL: JSON [sort value, id]; anything else is the first page."""
    if not text:
        return None
    try:
        value, last_id = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(last_id, int) or isinstance(value, (list, dict)):
        return None
    return value, last_id


def memories(mem: Memory, query: dict, overview: dict) -> dict:
    """A page of memories under the query's filters and order; `overview` holds the
    counts per status, the kinds and the scenes (kept a while by the app)."""
    filters = {k: (query.get(k) or "").strip() for k in FILTERS}
    filters = {k: v for k, v in filters.items() if v}
    if filters.get("status") not in (*STATUSES, None):
        raise LetheError(f"unknown status {filters['status']!r}")
    sort = str(query.get("sort")) if query.get("sort") in SORTS else "id"
    descending = query.get("dir") != "asc"
    similar_to = (query.get("similar") or "").strip() if mem.policy.embed else ""
    similar = mem.similar(similar_to, PAGE) if similar_to else None
    records, nxt = (
        ([], None)
        if similar is not None
        else mem.browse(filters, sort, descending, keyset(query.get("after")), PAGE)
    )
    return {
        "records": records,
        "filters": {k: filters.get(k, "") for k in FILTERS},
        "sort": sort,
        "descending": descending,
        "next": json.dumps(list(nxt)) if nxt else None,
        "counts": overview["counts"],
        "counted_at": overview["at"],
        "statuses": STATUSES,
        "sorts": SORTS,
        "paged": bool(query.get("after")),
        "kinds": overview["kinds"],
        "scenes": overview["scenes"],
        "embeds": mem.policy.embed is not None,
        "similar_to": similar_to,
        "similar": similar,
    }


def memory(mem: Memory, memory_id: int) -> dict:
    h = mem.history(memory_id)
    around = mem.neighbours(h)
    m = h.memory
    events = h.events
    times = (
        "occurred_at",
        *sorted({k for e in events for k in e if k not in EVENT_BASE and k.endswith(("_at", "_time"))}),
    )
    before = [
        {
            "id": r["id"],
            "status": r["status"],
            "text": r["summary"] or r["content"],
            "how": f"{r['how']} by #{m.id}",
        }
        for r in around["replaced"]
    ]
    after: list[dict] = []
    seen, cur = {m.id}, m
    while len(after) < CHAIN_DEPTH:
        nxt_id = cur.contradicted_by or cur.merged_into
        if not nxt_id or nxt_id in seen:
            break
        nxt = mem.get(nxt_id)
        if nxt is None:
            break
        how = "superseded it" if cur.contradicted_by else "absorbed it"
        after.append(
            {
                "id": nxt.id,
                "status": nxt.status,
                "text": nxt.summary or nxt.content,
                "how": f"#{nxt.id} {how}",
            }
        )
        seen.add(nxt.id)
        cur = nxt
    nodes = (
        before
        + [
            {
                "id": m.id,
                "status": m.status,
                "text": m.summary or m.content,
                "how": "this memory",
                "current": True,
            }
        ]
        + after
    )
    merged_from = [
        i
        for e in events
        if e["event_type"] == "merged"
        for i in _detail(e).get("merged_from", [])
        if isinstance(i, int)
    ]
    decay = mem.decay_curve(m.id)
    curve = (
        charts.curve(
            decay["points"],
            decay["now"],
            decay["threshold"],
            f"decay_score as the {decay['pass']} pass would set it",
        )
        if decay
        else ""
    )
    return {
        "m": m,
        "fields": m.as_dict(),
        "events": events,
        "times": times,
        "decay": curve,
        "extra_times": times[1:],
        "timeline": charts.timeline(events, times),
        "nodes": nodes,
        "before": before,
        "after": after,
        "turn": around["turn"],
        "calls": around["calls"],
        "merged_from": merged_from,
        "superseded_by": h.superseded_by,
        "merged_into": h.merged_into,
    }


def _detail(event: dict) -> dict:
    try:
        value = json.loads(event.get("detail") or "")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def takes_as_of(method) -> bool:
    """Whether a Memory method reads as of a past time (`as_of=`, the time issue's API)."""
    return "as_of" in inspect.signature(method).parameters


def recall(mem: Memory, query: dict) -> dict:
    text = (query.get("q") or "").strip()
    as_of = (query.get("as_of") or "").strip()
    explains_then, recalls_then = takes_as_of(mem.explain), takes_as_of(mem.recall)
    out: dict[str, Any] = {
        "q": text,
        "as_of": as_of,
        "as_of_supported": explains_then or recalls_then,
        "top_n": query.get("top_n") or "",
        "explanation": None,
        "recalled_then": None,
    }
    if not text:
        return out
    top_n = int(out["top_n"]) if out["top_n"].isdigit() and int(out["top_n"]) > 0 else None
    if as_of and explains_then:
        out["explanation"] = mem.explain(text, top_n, as_of=as_of)
    else:
        if as_of and recalls_then:  # what recall returned then; the why is for now
            out["recalled_then"] = mem.recall(text, top_n, as_of=as_of)
        out["explanation"] = mem.explain(text, top_n)
    return out


def memory_then(mem: Memory, memory_id: int, as_of: str) -> dict:
    """The memory as it stood at `as_of`, when `Memory.get` reads as of a time."""
    if not as_of or not takes_as_of(mem.get):
        return {"as_of": as_of, "as_of_supported": takes_as_of(mem.get), "then": None}
    then = mem.get(memory_id, as_of=as_of)
    return {
        "as_of": as_of,
        "as_of_supported": True,
        "then": then,
        "then_fields": then.as_dict() if then is not None else None,
    }


def turns(mem: Memory) -> dict:
    rows = mem.pending()
    return {"turns": rows, "failed": sum(1 for r in rows if r["status"] == "failed")}


def costs(mem: Memory) -> dict:
    act = mem.activity()
    by_step = [
        {"day": r["day"], "step": f"{r['step']} ({r['model']})", "calls": r["calls"]}
        for r in act["calls_by_day"]
    ]
    by_outcome = [
        {"day": r["day"], "outcome": r["outcome"], "calls": r["calls"]} for r in act["calls_by_day"]
    ]
    tokens = [{"day": r["day"], "step": r["step"], "tokens": r["tokens"]} for r in act["calls_by_day"]]
    return {
        **act,
        "passes": _passes(mem.policy, act),
        "calls_chart": charts.stacked_bars(
            by_step, "day", "step", "calls", "model calls per day, by step and model"
        ),
        "outcome_chart": charts.stacked_bars(
            by_outcome, "day", "outcome", "calls", "model calls per day, by outcome"
        ),
        "tokens_chart": charts.stacked_bars(tokens, "day", "step", "tokens", "tokens per day, by step"),
        "events_chart": charts.stacked_bars(
            act["events_by_day"], "day", "event_type", "n", "lifecycle events per day"
        ),
    }


def policy(mem: Memory) -> dict:
    pol = mem.policy
    try:
        with open(pol.path, encoding="utf-8") as f:
            source = f.read()
    except OSError as exc:
        source = f"(cannot read {pol.path}: {exc})"
    prompts = []
    for step in _judged_steps(pol):
        judgment = policy_mod.find_judgment(pol, step)
        values = {**variables.example(step.rpartition(".")[2]), "today": "2026-01-05"}
        try:
            text = render_template(judgment.prompt, pol.prompt_dirs, values)
        except LetheError as exc:
            text = f"(cannot render: {exc})"
        prompts.append({"step": step, "model": judgment.model, "template": judgment.prompt, "text": text})
    return {
        "name": pol.name,
        "path": os.path.abspath(pol.path),
        "source": source,
        "sql": mem.compiled_sql(),
        "prompts": prompts,
    }


def _judged_steps(pol) -> list[str]:
    steps = [w.step for w in pol.write if w.judgment is not None]
    steps += [f"{n}.{k}" for n, p in pol.passes.items() if p.cluster for k in ("cluster", "merge")]
    return steps + (["select"] if pol.recall.select else [])


def _passes(pol, act: dict) -> list[dict]:
    """Each pass of the policy: its schedule, its last run and the rows it changed then, and
    the events its rules write with how many the store holds of each."""
    runs = {r["pass"]: r for r in act["pass_runs"]}
    totals: dict[str, int] = {}
    for r in act["events_by_day"]:
        totals[r["event_type"]] = totals.get(r["event_type"], 0) + r["n"]
    out = []
    for name, p in pol.passes.items():
        events = [r.event for r in p.rules if r.event] + (["merged", "compressed"] if p.cluster else [])
        run = runs.get(name, {})
        out.append(
            {
                "pass": name,
                "every": _every(p.every),
                "last_run_at": run.get("last_run_at"),
                "rows_changed": run.get("rows_changed"),
                "events": {e: totals.get(e, 0) for e in dict.fromkeys(events)},
            }
        )
    return out


def _every(delta) -> str:
    """A pass's schedule as the policy writes it (6d, 23h, 15m), or 'on demand'."""
    if not delta:
        return "on demand"
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
