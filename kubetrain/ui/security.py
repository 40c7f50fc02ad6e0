"""Who may see the web view and who may act through it.

- **A token, always** (as Jupyter does): printed once when the server starts, in the address to open.
  Bound to loopback too: a machine has other users, and a page shows env values and can cancel jobs.
  `?token=...` on the first visit sets a cookie (HttpOnly, SameSite=Strict) and redirects to the same
  address without it, so the token does not stay in the address bar or the history; scripts may send
  `Authorization: Bearer <token>` instead. `--token` (or `KUBETRAIN_UI_TOKEN`) fixes it, so a bookmark
  outlives a restart; otherwise each start makes a fresh one.
- **Bound to loopback** (the default): the `Host` header must name a loopback address too, so a web page
  elsewhere cannot reach the server through a DNS name rebound to 127.0.0.1.
- **Actions** (cancel, suspend, resume, delete) are POSTs that must carry the per-session CSRF token (the
  HMAC of the session cookie under a key made at start) in `X-Kubetrain-CSRF`, and, when the browser
  says where the request came from (`Origin`, `Sec-Fetch-Site`), come from this very origin.

Pure functions over header values: the ASGI middleware in `app.py` applies them.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """`127.0.0.1`, `::1`, `localhost`: only this machine can connect."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name part of a `Host` header (`[::1]:8265` → `::1`, `localhost:8265` → `localhost`)."""
    value = host_header.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass
class Guard:
    """The server's secrets and rules, made once at start."""

    bind_host: str
    port: int
    token: str
    """Required from every client."""
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @classmethod
    def for_bind(cls, host: str, port: int, token: str | None = None) -> Guard:
        """The given token, or a fresh one."""
        return cls(bind_host=host, port=port, token=token or secrets.token_urlsafe(32))

    @property
    def loopback(self) -> bool:
        return is_loopback(self.bind_host)

    # -- cookies (named by port: two servers on one machine must not share sessions) -------------------

    @property
    def token_cookie(self) -> str:
        return f"kubetrain_token_{self.port}"

    @property
    def session_cookie(self) -> str:
        return f"kubetrain_session_{self.port}"

    # -- checks ------------------------------------------------------------------------------------------

    def host_allowed(self, host_header: str | None) -> bool:
        """Bound to loopback, only loopback names (no DNS rebinding); otherwise any (the token guards)."""
        if not self.loopback:
            return True
        return host_header is not None and is_loopback(host_name(host_header))

    def token_ok(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())

    def csrf_token(self, session: str) -> str:
        return hmac.new(self.key, session.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str | None, presented: str | None) -> bool:
        if not session or not presented:
            return False
        return hmac.compare_digest(self.csrf_token(session).encode(), presented.encode())

    @staticmethod
    def same_origin(origin: str | None, fetch_site: str | None, host_header: str | None) -> bool:
        """The browser's word on where a POST comes from: this origin, or no word at all (not a browser)."""
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return False
        if origin is None:
            return True
        if origin == "null" or host_header is None:
            return False
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and rest.lower() == host_header.lower()


def new_session() -> str:
    return secrets.token_urlsafe(24)


__all__ = ["Guard", "host_name", "is_loopback", "new_session"]
