"""The inspector: `lethe ui`, a local web app over one store (the `ui` extra: Starlette and
uvicorn). See what the agent believes, why, and what it cost; forget, restore and correct
from the page, each an event.

    guard    the bind rule, the token, the Host and Origin checks (ASGI middleware)
    pages    what each page shows, read through `Memory`
    charts   SVG drawn on the server (timeline, supersession chain, bars)
    app      routes, templates (autoescaped), edits
    server   start-up: the URL with its token, uvicorn
"""
