"""Scenarios: simulated weeks or months of conversation, with expectations. Loading
(`load.py`) validates a file and never touches a database; playing (`play.py`) runs a
loaded scenario on an open Memory."""

from engine.apps.scenario.loader import ACTIONS, ADD_FIELDS, DEFAULT_START, REPLACED, Scenario, Step, load
from engine.apps.scenario.play import Check, Playback, Player, Script, play

__all__ = [
    "load",
    "play",
    "Scenario",
    "Step",
    "Script",
    "Check",
    "Playback",
    "Player",
    "ACTIONS",
    "ADD_FIELDS",
    "REPLACED",
    "DEFAULT_START",
]
