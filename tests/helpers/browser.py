"""Whether the inspector's browser tests can run: Playwright (the test extra) and a
Chromium to point it at (Debian's /usr/bin/chromium, or $LETHE_CHROMIUM). Playwright's own
browsers are never downloaded (`playwright install` is not run)."""

from __future__ import annotations

import importlib.util
import os
import shutil

CHROMIUM = os.environ.get("LETHE_CHROMIUM", "/usr/bin/chromium")
HOW_TO_ENABLE = (
    "apt-get install chromium and pip install -e '.[test]' (Playwright, pointed "
    "at that Chromium), or set LETHE_CHROMIUM to a Chromium"
)
REQUIRE = "LETHE_REQUIRE_BROWSER"


def missing() -> str | None:
    """What is missing to run them, or None."""
    for module in ("playwright", "starlette", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            return f"no {module}"
    if not shutil.which(CHROMIUM):
        return f"no Chromium at {CHROMIUM}"
    return None
