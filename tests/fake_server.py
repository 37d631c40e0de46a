"""Pytest fixtures around :class:`tests.fake_openai.FakeOpenAI`.

Use in a test module with ``from tests.fake_server import fake_openai  # noqa: F401``.
"""

from __future__ import annotations

import socket

import pytest

from tests.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai():
    """A started FakeOpenAI (answers ``"{}"``); script it with ``.script(...)`` or set ``.responder``."""
    with FakeOpenAI() as fake:
        yield fake


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
