"""The `rules` provider's answers: the same template variables a model sees, judged by
the deterministic functions in `rules.py`, returned in each step's answer shape."""
from __future__ import annotations

from . import rules


def _pairs(candidates) -> list[tuple[int, str]]:
    return [(c["n"], c.get("content") or c.get("summary") or "") for c in candidates or []]


def _content(v: dict) -> str:
    mem = v.get("memory") or {}
    return mem.get("content") or v.get("content") or ""


def answer(step: str, v: dict) -> object:
    if step == "gate":
        return rules.gate(v["user"], v["assistant"])
    if step == "confidence":
        return {"confidence": rules.confidence(_content(v))}
    if step == "contradiction":
        return rules.contradiction(_content(v), _pairs(v.get("candidates")))
    if step == "expiry":
        return {"expires_at": rules.expiry(_content(v), v["now"])}
    if step == "fused":
        return _fused(v)
    if step == "cluster":
        return {"clusters": rules.cluster(_pairs(v.get("candidates")))}
    if step == "merge":
        return rules.merge([m["content"] for m in v["memories"]])
    if step == "select":
        return {"ids": rules.select(v["query"], _pairs(v.get("candidates")), v.get("top_n", 6))}
    if step == "extract":
        return {"cells": rules.extract_cells(v["user"], v["assistant"])}
    if step == "summarise":
        return {"summary": rules.summarise_scene(v["cells"])}
    raise ValueError(f"the rules provider has no judge for step '{step}'")


def _fused(v: dict) -> dict:
    g = rules.gate(v["user"], v["assistant"])
    if not g.get("save"):
        return {"save": False}
    c = rules.contradiction(g["content"], _pairs(v.get("candidates")))
    return {**g, "confidence": rules.confidence(g["content"]), **c,
            "expires_at": rules.expiry(g["content"], v["now"])}
