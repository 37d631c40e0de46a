"""Who may talk to a Lethe server over HTTP (`lethe ui`, `lethe mcp --transport http`;
reusable by any ASGI app): a token, and the Host and Origin allow-list, always on.

- `check_bind(host, token, source)`: the token to require. The one given (`--token`, or the
  environment), else a new one on a loopback bind (printed at start); on any other bind the
  server refuses to start without one: anyone who reaches the port could read and change
  memories.
- `Guard`: ASGI middleware. Every request carries the token where its `TokenSource` says
  (401 otherwise, compared in constant time): `BEARER` reads `Authorization: Bearer TOKEN`
  (MCP clients); `LINK` reads `?token=...` in the URL printed at start, answered with a
  cookie so links need not repeat it, or that cookie (the inspector's browser pages). Its
  Host must be the bound host, a loopback name or, on a wildcard bind, this machine's name
  or an IP literal (a DNS-rebinding page reaches the server only under a name its attacker
  controls: 403); a request with an Origin must come from that same host (403).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
import urllib.parse
from dataclasses import dataclass

from engine.base.errors import LetheError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class TokenSource:
    """Where a request's token travels, and what a token given at start may be."""

    name: str  # "bearer" or "link"
    what: str  # the command, for messages
    env: str  # the environment variable that may give the token
    pattern: re.Pattern[str]
    rule: str  # the pattern in words
    exposes: str  # what anyone reaching the port could do
    needed: str  # the 401's text


BEARER = TokenSource(
    "bearer",
    "lethe mcp",
    "LETHE_MCP_TOKEN",
    re.compile(r"[A-Za-z0-9._~+/=-]{16,200}"),
    "lethe mcp: a token must be 16 to 200 letters, digits or . _ ~ + / = -",
    "read, add and forget memories",
    "a bearer token is needed (Authorization: Bearer TOKEN, the one the server printed or was given)",
)
LINK = TokenSource(
    "link",
    "lethe ui",
    "LETHE_UI_TOKEN",
    re.compile(r"[A-Za-z0-9._~-]{8,200}"),  # it travels in a URL and a cookie
    "--token must be 8 to 200 letters, digits or . _ ~ - (it travels in a URL and a cookie)",
    "read and edit every memory",
    "a token is needed: open the URL `lethe ui` printed",
)
COOKIE = "lethe_ui_token"


def is_loopback(host: str) -> bool:
    """A loopback name or address (127.0.0.0/8, ::1, localhost)."""
    name = host.strip("[]")
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, source: TokenSource = BEARER) -> tuple[str, bool]:
    """(the token to require, whether it was made here). A token given must match the
    source's rule; none given: a new one on a loopback bind, a LetheError on any other."""
    if token and not source.pattern.fullmatch(token):
        raise LetheError(source.rule)
    if token:
        return token, False
    if not is_loopback(host):
        raise LetheError(
            f"{source.what}: bound to {host or 'every address'}, which is not loopback, "
            f"it needs --token (or {source.env}): anyone who can reach the port could {source.exposes}"
        )
    return secrets.token_urlsafe(24), True


def allowed_hosts(host: str, port: int) -> set[str]:
    """The Host header values accepted for a server bound to host:port (lower case)."""
    names = set(LOOPBACK_NAMES) | {host.strip("[]").lower()}
    if host in WILDCARDS:
        names.discard(host)
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    out = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        out.add(f"{shown}:{port}")
        if port in (80, 443):  # a client leaves the default port out
            out.add(shown)
    return out


def host_allowed(given: str, allowed: set[str], wildcard: bool) -> bool:
    """Whether a request's Host header names this server."""
    given = given.lower()
    if given in allowed:
        return True
    if not wildcard:
        return False
    name = given.rsplit(":", 1)[0] if not given.endswith("]") else given
    try:  # bound to every address: any of this machine's addresses, as an IP literal
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        return False


class Guard:
    """ASGI middleware: the Host, the Origin and the token (read where `source` says) are
    checked before the app sees an HTTP request."""

    def __init__(self, app, token: str, host: str, port: int, source: TokenSource = BEARER):
        self.app, self.token, self.source = app, token.encode(), source
        self.hosts, self.wildcard = allowed_hosts(host, port), host in WILDCARDS

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not host_allowed(host, self.hosts, self.wildcard):
            return await refuse(send, 403, "this Host is not the server's (DNS rebinding?)")
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in (f"http://{host.lower()}", f"https://{host.lower()}"):
            return await refuse(send, 403, "requests from another origin are refused")
        in_link = _query_token(scope) if self.source is LINK else None
        given = (
            (in_link or _cookie_token(headers.get("cookie", "")))
            if self.source is LINK
            else _bearer_token(headers.get("authorization", ""))
        )
        if not given or not hmac.compare_digest(given.encode(), self.token):
            return await refuse(send, 401, self.source.needed, bearer=self.source is BEARER)
        if in_link:  # remembered: links and forms need not carry it
            return await self.app(scope, receive, _with_cookie(send, self.token.decode()))
        return await self.app(scope, receive, send)


def _bearer_token(authorization: str) -> str | None:
    scheme, _, given = authorization.partition(" ")
    return given.strip() if scheme.lower() == "bearer" else None


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


async def refuse(send, status: int, text: str, bearer: bool = False) -> None:
    body = f"{status}: {text}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if status == 401 and bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
