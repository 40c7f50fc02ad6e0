"""The web view's ASGI guard: the token on every route but the page addresses and `/static/`, the Host and
Origin checks, and the security headers on every answer (`security.Guard` decides; this applies it)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from .security import Guard

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


PAGE_PATH = re.compile(r"/|/jobs/[^/]+/[^/]+")
"""The addresses a person opens: they answer anyone with `pages.SHELL`, which holds no job data."""
UNAUTHORIZED = (
    "kubetrain ui: this needs the page's token: open the address kubetrain ui printed at start "
    "(it ends with #token=...), or send Authorization: Bearer <token>"
)


def is_public(scope: Scope) -> bool:
    """What answers without the token: the page layout (a browser opening an address sends no header of the
    page's own) and kubetrain's own script and stylesheet. Nothing of a job."""
    if scope["method"] not in ("GET", "HEAD"):
        return False
    path = scope["path"]
    return path.startswith("/static/") or PAGE_PATH.fullmatch(path) is not None


class GuardMiddleware:
    """Host check, the token (`Authorization: Bearer`, never a cookie) and the same-origin check for actions
    (`security.Guard`), and the response headers that keep pages from being framed, cached or running
    anything not served here."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        g = self.guard
        host = _header(scope, b"host")
        if not g.host_allowed(host):
            await _plain(send, 403, "kubetrain ui answers only to localhost addresses (Host header refused)")
            return
        public = is_public(scope)
        if not public and not g.authorized(_header(scope, b"authorization")):
            # 401, not 403: the page's script tells a refused token (its server restarted with a new one)
            # from a refused request. A bearer challenge makes no browser ask for a password.
            await _plain(send, 401, UNAUTHORIZED, [(b"www-authenticate", b'Bearer realm="kubetrain ui"')])
            return
        if scope["method"] not in ("GET", "HEAD") and not g.same_origin(
            _header(scope, b"origin"), _header(scope, b"sec-fetch-site"), host
        ):
            await _plain(send, 403, "cross-site request refused")
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not public and not any(k == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))  # a job's data stays out of caches
                headers += SECURITY_HEADERS
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


async def _plain(send: Send, status: int, text: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


