"""Who may talk to the inspector: the bind rule, the token, and the Host and Origin checks.

- Bound to a loopback address (the default, 127.0.0.1) a token is made at start when none
  is given; bound anywhere else, the server refuses to start without one (`check_bind`).
- Every request carries the token: `?token=...` in the URL printed at start (answered with
  a cookie, so links need not repeat it) or that cookie. Without it: 401.
- The Host header must name the server (a loopback name on a loopback bind: a DNS
  rebinding page cannot reach it under its own name); any other: 403.
- A request that carries an Origin (a browser's form post, a script's fetch) must come
  from the server's own origin; any other: 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import urllib.parse

from engine.base.errors import LetheError

COOKIE = "lethe_ui_token"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    if host.strip("[]") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> str:
    """The token to require: the one given, or a new one on a loopback bind. Any other bind
    without a token is refused (LetheError): the inspector shows and edits every memory."""
    if token is not None and not re.fullmatch(r"[A-Za-z0-9._~-]{8,200}", token):
        raise LetheError(
            "--token must be 8 to 200 letters, digits or . _ ~ - (it travels in a URL and a cookie)"
        )
    if token:
        return token
    if not is_loopback(host):
        raise LetheError(
            f"lethe ui: bound to {host or 'every address'}, which is not loopback, "
            "it needs --token (or LETHE_UI_TOKEN): anyone who can reach the port "
            "could read and edit every memory"
        )
    return secrets.token_urlsafe(18)


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """The Host headers accepted; None: any (a wildcard bind, where only the token guards)."""
    if host in WILDCARDS:
        return None
    names = set(LOOPBACK_NAMES) | {host.strip("[]")}
    out = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        out.add(f"{shown}:{port}".lower())
        if port == 80:  # a browser leaves the default port out
            out.add(shown.lower())
    return out


class Guard:
    """ASGI middleware: token, Host and Origin checked before the app sees a request."""

    def __init__(self, app, token: str, host: str, port: int):
        self.app, self.token = app, token
        self.hosts = allowed_hosts(host, port)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if self.hosts is not None and host not in self.hosts:
            return await _refuse(send, 403, "this Host is not the inspector's (DNS rebinding?)")
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in (f"http://{host}", f"https://{host}"):
            return await _refuse(send, 403, "requests from another origin are refused")
        given = _query_token(scope) or _cookie_token(headers.get("cookie", ""))
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            return await _refuse(send, 401, "a token is needed: open the URL `lethe ui` printed")
        if _query_token(scope):  # remembered: links and forms need not carry it
            return await self.app(scope, receive, _with_cookie(send, self.token))
        return await self.app(scope, receive, send)


def _query_token(scope) -> str | None:
    values = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[-1] if values else None


def _cookie_token(cookie: str) -> str | None:
    for part in cookie.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def _with_cookie(send, token: str):
    async def sending(message):
        if message["type"] == "http.response.start":
            cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
            message = {
                **message,
                "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode("latin-1"))],
            }
        await send(message)

    return sending


async def _refuse(send, status: int, text: str) -> None:
    body = f"{status}: {text}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
