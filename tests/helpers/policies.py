"""Policy texts tests build on."""

from __future__ import annotations

BASE = """\
name: probe
models:
  cheap: {provider: openai, model: gpt-4o-mini}
  offline: {provider: rules}
params:
  half_life_days: 30
  archive_below: 0.1
scores:
  freshness: "exp(-0.693 * idle_days / half_life_days)"
write:
  - {step: gate, model: cheap, prompt: gate.j2}
passes:
  decay:
    every: 23h
    rules:
      - when: "status = 'active'"
        set: {decay_score: freshness}
      - when: "status = 'active' and decay_score < archive_below"
        set: {status: archived}
        event: archived
recall:
  where: "status = 'active'"
  order: "rank desc"
  limit: 10
  select: {model: cheap, prompt: pick.j2, top_n: 3}
"""
