"""The `rules` provider's answers: the same template variables a model sees, judged by
the deterministic functions of this package, returned in each step's answer shape."""

from __future__ import annotations

from datetime import date

from engine.judges.rules.compression import cluster, merge
from engine.judges.rules.expiring import expiry
from engine.judges.rules.gating import gate, memories
from engine.judges.rules.hedging import confidence
from engine.judges.rules.scenes import extract_cells, summarise_scene
from engine.judges.rules.selecting import select
from engine.judges.rules.superseding import contradiction
from engine.judges.rules.when import day_of


def _pairs(candidates) -> list[tuple[int, str]]:
    return [(c["n"], c.get("content") or c.get("summary") or "") for c in candidates or []]


def _similar(candidates) -> dict[int, float]:
    """Each candidate's similarity to the new memory or query, where embeddings gave one."""
    return {c["n"]: c["similarity"] for c in candidates or [] if c.get("similarity") is not None}


def _said(candidates) -> dict[int, date]:
    """The day each candidate was said, where it has one."""
    days = {c["n"]: day_of(c.get("created_at")) for c in candidates or []}
    return {n: d for n, d in days.items() if d is not None}


def _pair_similar(candidates) -> dict[tuple[int, int], float]:
    return {
        (min(c["n"], n), max(c["n"], n)): s
        for c in candidates or []
        for n, s in (c.get("similar") or {}).items()
    }


def _content(v: dict) -> str:
    mem = v.get("memory") or {}
    return mem.get("content") or v.get("content") or ""


def answer(step: str, v: dict) -> object:
    if step == "gate":
        return memories(v["user"], v["assistant"])
    if step == "confidence":
        return {"confidence": confidence(_content(v), v.get("user"))}
    if step == "contradiction":
        return contradiction(_content(v), _pairs(v.get("candidates")), _similar(v.get("candidates")))
    if step == "expiry":
        return {"expires_at": expiry(_content(v), v["now"])}
    if step == "fused":
        return _fused(v)
    if step == "cluster":
        return {"clusters": cluster(_pairs(v.get("candidates")), similar=_pair_similar(v.get("candidates")))}
    if step == "merge":
        return merge([m["content"] for m in v["memories"]])
    if step == "select":
        return {
            "ids": select(
                v["query"],
                _pairs(v.get("candidates")),
                v.get("top_n", 6),
                _similar(v.get("candidates")),
                _said(v.get("candidates")),
                day_of(v.get("now")),
            )
        }
    if step == "extract":
        return {"cells": extract_cells(v["user"], v["assistant"])}
    if step == "summarise":
        return {"summary": summarise_scene(v["cells"])}
    raise ValueError(f"the rules provider has no judge for step '{step}'")


def _fused(v: dict) -> dict:
    g = gate(v["user"], v["assistant"])
    if not g.get("save"):
        return {"save": False}
    c = contradiction(g["content"], _pairs(v.get("candidates")), _similar(v.get("candidates")))
    return {
        **g,
        "confidence": confidence(g["content"], v.get("user")),
        **c,
        "expires_at": expiry(g["content"], v["now"]),
    }
