"""Serving the web view with uvicorn: in the foreground for `kubetrain ui`, or on a thread (tests, benchmarks,
the screenshot script)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .app import WebView
from .security import Guard
from .sources import Source

if TYPE_CHECKING:
    import uvicorn

    from ..backends.base import Backend


def _config(view: WebView, host: str, port: int, sock: socket.socket | None = None) -> uvicorn.Config:
    import uvicorn

    return uvicorn.Config(
        view.app(),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        # Open event streams end at once on shutdown instead of holding it for their keepalive.
        timeout_graceful_shutdown=1,
    )


def address(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    if shown in ("0.0.0.0", "[::]"):
        shown = socket.gethostname()
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(backends: Sequence[Backend], host: str, port: int, *, token: str | None = None) -> None:
    """Serve until interrupted (Ctrl-C). The address, with the token when one is required, is printed once."""
    import uvicorn

    guard = Guard.for_bind(host, port, token)
    view = WebView([Source(b) for b in backends], guard)
    server = uvicorn.Server(_config(view, host, port))
    server.config.callback_notify = None
    print(
        f"kubetrain ui: serving {', '.join(b.name for b in backends)} jobs at {address(host, port, guard.token)}",
        flush=True,
    )
    if guard.token is not None:
        print("kubetrain ui: the token in this address is the key to the page; keep it private", flush=True)
    server.run()


class Background:
    """The web view on a thread of this process: `with Background([backend]) as bg: bg.url`."""

    def __init__(
        self, backends: Sequence[Backend], *, host: str = "127.0.0.1", port: int = 0, token: str | None = None
    ) -> None:
        import uvicorn

        if port == 0:
            with socket.socket() as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
        self.host, self.port = host, port
        self.guard = Guard.for_bind(host, port, token)
        self.view = WebView([Source(b) for b in backends], self.guard)
        self.server = uvicorn.Server(_config(self.view, host, port))
        self._thread = threading.Thread(target=self._run, name="kubetrain-ui", daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve())

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> Background:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the web view did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.view.close_streams()
        self.server.should_exit = True
        self._thread.join(10)

    def __enter__(self) -> Background:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["Background", "address", "serve"]
