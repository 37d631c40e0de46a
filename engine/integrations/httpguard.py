"""Who may talk to a Lethe server over HTTP (`lethe mcp --transport http`; reusable by any
ASGI app): a bearer token, and the Host and Origin allow-list, both always on.

- `check_bind(host, token)`: the token to require. The one given (`--token`, or the
  environment), else a new one on a loopback bind (printed at start); on any other bind the
  server refuses to start without one: anyone who reaches the port could read, add and
  forget memories.
- `BearerGuard`: ASGI middleware. Every request carries `Authorization: Bearer TOKEN`
  (401 otherwise, compared in constant time); its Host must be the bound host, a loopback
  name or, on a wildcard bind, this machine's name or an IP literal (a DNS-rebinding page
  reaches the server only under a name its attacker controls: 403); a request with an
  Origin must come from that same host (403). The MCP SDK's own check is on only for
  127.0.0.1, localhost and ::1; this one is on for every bind.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket

from engine.base.errors import LetheError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,200}")


def is_loopback(host: str) -> bool:
    """A loopback name or address (127.0.0.0/8, ::1, localhost)."""
    name = host.strip("[]")
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(
    host: str, token: str | None, what: str = "lethe mcp", env: str = "LETHE_MCP_TOKEN"
) -> tuple[str, bool]:
    """(the token to require, whether it was made here). A token given must be 16 to 200
    URL-safe characters; none given: a new one on a loopback bind, a LetheError on any other."""
    if token:
        if not TOKEN.fullmatch(token):
            raise LetheError(f"{what}: a token must be 16 to 200 letters, digits or . _ ~ + / = -")
        return token, False
    if not is_loopback(host):
        raise LetheError(
            f"{what}: bound to {host or 'every address'}, which is not loopback, "
            f"it needs --token (or {env}): anyone who can reach the port could "
            "read, add and forget memories"
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


class BearerGuard:
    """ASGI middleware: the Host, the Origin and the bearer token are checked before the app
    sees an HTTP request."""

    def __init__(self, app, token: str, host: str, port: int):
        self.app, self.token = app, token.encode()
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
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token):
            return await refuse(
                send,
                401,
                "a bearer token is needed (Authorization: Bearer "
                "TOKEN, the one the server printed or was given)",
            )
        return await self.app(scope, receive, send)


async def refuse(send, status: int, text: str) -> None:
    body = f"{status}: {text}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
