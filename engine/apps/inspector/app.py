"""The inspector's web app (Starlette): routes, the Jinja environment (autoescape on for
every template), the edits and the guard around it all.

Handlers are `async` and call `Memory` directly: the server is one event loop on the thread
that opened the store, and one person's clicks need no pool of threads (a SQLite
connection stays on the thread that made it).
"""

from __future__ import annotations

import os
import time
import urllib.parse
from typing import Callable

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from engine import store
from engine.apps.inspector import charts, pages
from engine.base.clock import iso
from engine.base.errors import LetheError
from engine.integrations.httpguard import LINK, Guard
from engine.memory import Memory

HERE = os.path.dirname(os.path.abspath(__file__))
SECURITY_HEADERS = {
    # nothing from elsewhere: no CDN, no inline script, no framing by another site;
    # same-origin referrers (with no-referrer a browser posts forms with `Origin: null`)
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class Inspector:
    """One store seen through `Memory`: one per namespace, opened on first use."""

    # counts per status and the kinds and scenes of a namespace read its every row (at 1M,
    # several hundred ms): kept this long, and dropped at each edit made here
    OVERVIEW_SECONDS = 60.0

    def __init__(self, open_memory: Callable[[str], Memory], namespace: str, read_only: bool = False):
        self.open_memory, self.namespace, self.read_only = open_memory, namespace, read_only
        self.memories: dict[str, Memory] = {}
        self.namespaces = sorted({namespace, *self.memory(namespace).namespaces()})
        self._overviews: dict[str, dict] = {}

    def overview(self, mem: Memory) -> dict:
        """The namespace's counts per status, kinds and scenes, and when they were read."""
        got = self._overviews.get(mem.namespace)
        if got is None or time.monotonic() - got["taken"] > self.OVERVIEW_SECONDS:
            got = {
                "counts": mem.counts(),
                "kinds": mem.facets("kind"),
                "scenes": mem.facets("scene"),
                "taken": time.monotonic(),
                "at": iso(mem.clock()),
            }
            self._overviews[mem.namespace] = got
        return got

    def changed(self, mem: Memory) -> None:
        self._overviews.pop(mem.namespace, None)

    def memory(self, namespace: str | None) -> Memory:
        name = namespace or self.namespace
        if name not in self.memories:
            if name != self.namespace and name not in self.namespaces:
                raise LetheError(f"no namespace {name!r} in this store")
            self.memories[name] = self.open_memory(name)
        return self.memories[name]

    def close(self) -> None:
        for mem in self.memories.values():
            mem.close()
        self.memories.clear()


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v, d=2: (
        "-" if v is None else (f"{v:.{d}f}" if isinstance(v, (int, float)) else str(v))
    )
    env.filters["when"] = lambda v: "-" if not v else str(v).replace("T", " ")
    env.globals["chain_svg"] = lambda nodes, link: charts.chain(nodes, lambda i: link(f"/memory/{int(i)}"))
    return env


def build(inspector: Inspector, token: str, host: str, port: int):
    """The ASGI app: the routes behind the token, Host and Origin guard."""
    env = environment()

    def page(request: Request, template: str, status: int = 200, **data) -> HTMLResponse:
        ns = request.query_params.get("ns") or inspector.namespace

        def link(path: str, **params) -> str:
            params = {k: v for k, v in params.items() if v not in (None, "")}
            if ns != inspector.namespace:
                params.setdefault("ns", ns)
            return path + ("?" + urllib.parse.urlencode(params) if params else "")

        html = env.get_template(template).render(
            request=request,
            ns=ns,
            namespaces=inspector.namespaces,
            link=link,
            read_only=inspector.read_only,
            **data,
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def handler(template: str, read):
        async def handle(request: Request) -> Response:
            try:
                mem = inspector.memory(request.query_params.get("ns"))
                return page(request, template, **read(mem, request))
            except LetheError as exc:
                return page(request, "error.html", 404 if "no memory" in str(exc) else 400, message=str(exc))
            except store.database_errors() as exc:  # locked too long, corrupt, full
                return page(request, "error.html", 503, message=f"the database failed: {exc}")

        return handle

    def edit(action):
        async def handle(request: Request) -> Response:
            if inspector.read_only:
                return PlainTextResponse("403: the inspector was started with --read-only\n", status_code=403)
            form = await request.form()
            try:
                mem = inspector.memory(request.query_params.get("ns"))
                inspector.changed(mem)
                target = action(mem, request, form)
            except LetheError as exc:
                return page(request, "error.html", 400, message=str(exc))
            return RedirectResponse(target, status_code=303)

        return handle

    routes = [
        Route("/", lambda request: RedirectResponse(_keep_ns(request, "/memories"))),
        Route(
            "/memories",
            handler("memories.html", lambda m, r: pages.memories(m, r.query_params, inspector.overview(m))),
        ),
        Route(
            "/memory/{id:int}",
            handler(
                "memory.html",
                lambda m, r: {
                    **pages.memory(m, r.path_params["id"]),
                    **pages.memory_then(m, r.path_params["id"], r.query_params.get("as_of", "").strip()),
                },
            ),
        ),
        Route("/recall", handler("recall.html", lambda m, r: pages.recall(m, r.query_params))),
        Route("/turns", handler("turns.html", lambda m, r: pages.turns(m))),
        Route("/costs", handler("costs.html", lambda m, r: pages.costs(m))),
        Route("/policy", handler("policy.html", lambda m, r: pages.policy(m))),
        Route("/memory/{id:int}/forget", edit(_forget), methods=["POST"]),
        Route("/memory/{id:int}/restore", edit(_restore), methods=["POST"]),
        Route("/memory/{id:int}/correct", edit(_correct), methods=["POST"]),
        Route("/turns/retry", edit(_retry), methods=["POST"]),
        Mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    return Guard(app, token, host, port, LINK)


def _keep_ns(request: Request, path: str) -> str:
    ns = request.query_params.get("ns")
    return path + (f"?{urllib.parse.urlencode({'ns': ns})}" if ns else "")


def _reason(form) -> str:
    reason = str(form.get("reason") or "").strip()
    if not reason:
        raise LetheError("say why (the reason is kept in the event)")
    return reason[:500]


def _forget(mem: Memory, request: Request, form) -> str:
    mem.forget(request.path_params["id"], f"from the inspector: {_reason(form)}")
    return _keep_ns(request, f"/memory/{request.path_params['id']}") + "#events"


def _restore(mem: Memory, request: Request, form) -> str:
    mem.restore(request.path_params["id"], f"from the inspector: {_reason(form)}")
    return _keep_ns(request, f"/memory/{request.path_params['id']}") + "#events"


def _correct(mem: Memory, request: Request, form) -> str:
    content = str(form.get("content") or "").strip()
    new_id = mem.correct(request.path_params["id"], content, f"from the inspector: {_reason(form)}")
    return _keep_ns(request, f"/memory/{new_id}")


def _retry(mem: Memory, request: Request, form) -> str:
    ids = form.getlist("id")
    try:
        chosen = [int(i) for i in ids]
    except ValueError:
        raise LetheError("a turn id is a whole number") from None
    mem.retry_turns(chosen or None)
    return _keep_ns(request, "/turns") + "#retried"
