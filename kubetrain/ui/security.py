"""Who may see the web view and who may act through it.

- **A token, always** (as Jupyter does), loopback included: a machine has other users, and a page shows env
  values and can cancel jobs. It travels only in a header, `Authorization: Bearer <token>`, which a browser
  never sends by itself: no cookie authorizes anything. Cookies are not separated by port (RFC 6265), so a
  browser sends a cookie of 127.0.0.1 to every server on 127.0.0.1, another user's included; and a request
  with a header of the page's own cannot be sent across sites without a CORS preflight, which this server
  never grants, so no CSRF token is needed either.
- **The address carries the token in its fragment** (`http://127.0.0.1:8265/#token=...`): a browser never
  sends the part after `#`, so it reaches no server and no log. The page's script takes it from there,
  keeps it in the origin's storage (an origin is scheme, host and port) and removes it from the address bar.
  The page addresses themselves answer without the token with a layout that holds no job data; the script
  asks for the rest with the header.
- **Bound to loopback** (the default): the `Host` header must name a loopback address too, so a web page
  elsewhere cannot reach the server through a DNS name rebound to 127.0.0.1. Actions (POSTs) must come from
  this very origin when the browser says where they come from (`Origin`, `Sec-Fetch-Site`).
- **A token is at least `MIN_TOKEN_LENGTH` characters of the URL-safe alphabet** (`check_token`): a fresh one
  per start (`secrets.token_urlsafe(32)`: 43 characters), or one the user keeps (a token file, or
  `KUBETRAIN_UI_TOKEN`) so the address outlives a restart.

Pure functions over header values and token text: the ASGI middleware in `app.py` applies them.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
import string
from dataclasses import dataclass
from pathlib import Path

from ..contract.errors import UsageError

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})
MIN_TOKEN_LENGTH = 32
"""Characters a token needs at least: 32 of the 64-letter alphabet are 192 bits."""
TOKEN_ALPHABET = frozenset(string.ascii_letters + string.digits + "-_")
"""The URL-safe alphabet (RFC 4648 §5): a token goes in an address and a header as it is, unencoded."""
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
"""A command that prints a good token."""


class BadToken(UsageError):
    """A token that cannot be the key to the page: says what is wrong (never the token) and how to make one."""


def check_token(token: str, source: str) -> str:
    """`token` if it can be the key to the page; else `BadToken` naming `source` (where it came from: a flag,
    a file, a variable) and what is wrong with it. The token itself is never said: it may be nearly right."""
    how = f"make one with: {MAKE_ONE}"
    if len(token) < MIN_TOKEN_LENGTH:
        raise BadToken(
            f"{source}: a token needs at least {MIN_TOKEN_LENGTH} characters (this one has {len(token)}): {how}"
        )
    for position, char in enumerate(token, 1):
        if char not in TOKEN_ALPHABET:
            what = "a space" if char == " " else "a control character" if not char.isprintable() else repr(char)
            raise BadToken(
                f"{source}: character {position} is {what}; a token takes only A-Z, a-z, 0-9, '-' and '_' "
                f"(it goes in the address unencoded): {how}"
            )
    return token


def read_token_file(path: Path) -> tuple[str, str | None]:
    """The token in `path` (its first line, without the line end) and a warning when other users may read the
    file (None if they may not). Raises `BadToken` for a file that is not there, not readable, or empty."""
    source = f"--token-file {path}"
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline(4096)
            mode = os.fstat(f.fileno()).st_mode
    except FileNotFoundError:
        raise BadToken(f"{source}: no such file; write a token into it first ({MAKE_ONE} > {path})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadToken(f"{source}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    token = first.rstrip("\r\n")
    if not token:
        raise BadToken(f"{source}: the file's first line is empty; write a token into it ({MAKE_ONE} > {path})")
    warning = None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warning = (
            f"warning: {path} may be read by other users of this machine (mode {stat.S_IMODE(mode):o}), and the "
            f"token in it opens the page: chmod 600 {path}"
        )
    return check_token(token, source), warning


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
    """The server's key and rules, made once at start."""

    bind_host: str
    port: int
    token: str
    """Required from every client, in `Authorization: Bearer <token>`."""

    @classmethod
    def for_bind(cls, host: str, port: int, token: str | None = None) -> Guard:
        """The given token (checked: `BadToken`), or a fresh one."""
        if token is None:
            token = secrets.token_urlsafe(32)
        return cls(bind_host=host, port=port, token=check_token(token, "the token"))

    @property
    def loopback(self) -> bool:
        return is_loopback(self.bind_host)

    # -- checks ------------------------------------------------------------------------------------------

    def host_allowed(self, host_header: str | None) -> bool:
        """Bound to loopback, only loopback names (no DNS rebinding); otherwise any (the token guards)."""
        if not self.loopback:
            return True
        return host_header is not None and is_loopback(host_name(host_header))

    def authorized(self, authorization: str | None) -> bool:
        """An `Authorization` header that presents this server's token as a bearer token."""
        if authorization is None:
            return False
        scheme, _, presented = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(presented.strip().encode(), self.token.encode())

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


__all__ = [
    "MIN_TOKEN_LENGTH",
    "BadToken",
    "Guard",
    "check_token",
    "host_name",
    "is_loopback",
    "read_token_file",
]
