"""Starting the inspector: check the bind, make or take the token, print the URL, serve."""

from __future__ import annotations

import urllib.parse

import uvicorn

from engine.apps.inspector.app import Inspector, build
from engine.integrations.httpguard import LINK, check_bind


def url(host: str, port: int, token: str) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}/memories?{urllib.parse.urlencode({'token': token})}"


def prepare(inspector: Inspector, host: str, port: int, token: str | None):
    """The app and the token it requires (refused, LetheError, on a non-loopback bind with
    no token)."""
    token, _ = check_bind(host, token, LINK)
    return build(inspector, token, host, port), token


def serve(app, host: str, port: int) -> None:
    """Serve until interrupted (Ctrl-C)."""
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
