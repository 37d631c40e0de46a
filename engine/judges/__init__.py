"""Judges: providers that answer a rendered prompt (openai, rules, replay)."""
