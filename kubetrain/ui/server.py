"""Serving the web view with uvicorn: in the foreground for `kubetrain ui`, or on a thread (tests, benchmarks,
the screenshot script)."""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

from ..contract.errors import KubetrainError, interrupted_status
from ..contract.pause import pause_point
from .app import WebView
from .connections import (
    ACCEPT_BATCH,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_LOG_READERS,
    DEFAULT_LOG_VIEWERS,
    ConnectionLimits,
    Listener,
    effective_limits,
    protocol_class,
)
from .metrics_tracker import MetricLimits
from .security import Guard
from .sources import Source

if TYPE_CHECKING:
    import uvicorn

    from ..backends.base import Backend


def _config(view: WebView, limits: ConnectionLimits) -> uvicorn.Config:
    import uvicorn

    return uvicorn.Config(
        view.app(),
        log_level="warning",
        access_log=False,
        lifespan="on",
        # Open event streams end at once on shutdown instead of holding it for their keepalive.
        timeout_graceful_shutdown=1,
        # h11, pinned and bounded (`connections.py`): an idle timeout that a trickle of bytes does not reset,
        # after a response too, and a cap on connections below the open-file limit.
        http=protocol_class(limits),
        # Typed int by uvicorn, used as a delay for call_later: a float works.
        timeout_keep_alive=limits.idle_timeout,  # type: ignore[arg-type]
        backlog=ACCEPT_BATCH,
    )


class PortTaken(KubetrainError):
    """The address to listen on is taken (or not this machine's): said before anything is announced."""


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the address is printed: a taken port is an error, not an address
    announced and then abandoned."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = Listener(family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortTaken(
                f"port {port} on {host} is in use (another kubetrain ui?): give another with --port, "
                "or open the one already running"
            ) from None
        raise PortTaken(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def address(host: str, port: int, token: str) -> str:
    """The address to open: the token after `#`, which a browser keeps to itself (the page's script takes it
    from there); it reaches no server and no server's log."""
    shown = f"[{host}]" if ":" in host else host
    if shown in ("0.0.0.0", "[::]"):
        shown = socket.gethostname()
    return f"http://{shown}:{port}/#token={token}"


def _server(config: uvicorn.Config, view: WebView) -> uvicorn.Server:
    """uvicorn's server, made to end the view's event streams as soon as it is asked to stop, so that Ctrl-C
    stops at once and quietly (no stream is left to be cancelled mid-write by the shutdown timeout)."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            view.close_streams()
            super().handle_exit(sig, frame)

    return Server(config)


def serve(
    backends: Sequence[Backend],
    host: str,
    port: int,
    *,
    token: str | None = None,
    max_connections: int | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    log_viewers: int = DEFAULT_LOG_VIEWERS,
    log_readers: int = DEFAULT_LOG_READERS,
    metric_limits: MetricLimits | None = None,
) -> int:
    """Serve until interrupted; the exit status: 130 after Ctrl-C, 143 after SIGTERM (as any command those
    signals end; under the CLI's handlers, `cli.signals`), 0 when stopped otherwise. The port is bound
    first, then the address (with its token) is printed once. At most
    `max_connections` at once (default: `DEFAULT_MAX_CONNECTIONS`, lowered below the open-file limit), at
    most `log_viewers` of them with a log at once, `log_readers` reader threads reading at once."""
    limits, lowered = effective_limits(max_connections, idle_timeout, log_viewers, log_readers)
    sock = listen(host, port)
    guard = Guard.for_bind(host, port, token)
    view = WebView(
        [Source(b) for b in backends], guard, log_viewers=limits.log_viewers, log_readers=limits.log_readers,
        metric_limits=metric_limits,
    )
    server = _server(_config(view, limits), view)
    print(
        f"kubetrain ui: serving {', '.join(b.name for b in backends)} jobs at {address(host, port, guard.token)}",
        flush=True,
    )
    print("kubetrain ui: the token in this address is the key to the page; keep it private", flush=True)
    if lowered:
        print(lowered, file=sys.stderr, flush=True)
    if not guard.loopback:
        # As Jupyter warns: plain HTTP, so the token and every page cross the network readable by anyone on
        # the way. kubetrain serves no TLS; an SSH tunnel to 127.0.0.1 keeps it on this machine.
        print(
            f"warning: serving on {host}: the token and the pages travel unencrypted (plain HTTP); "
            f"prefer the default 127.0.0.1 and an SSH tunnel (ssh -L {port}:127.0.0.1:{port} HOST)",
            file=sys.stderr,
            flush=True,
        )
    # uvicorn re-raises the signal that stopped it once it has shut down, under the handlers that were in
    # force before it: the CLI's raise `Interrupted` (a KeyboardInterrupt) for SIGINT and SIGTERM alike.
    try:
        pause_point("ui:serving")  # a test hook (env_names.PAUSE_AT): announced, uvicorn not started yet
        server.run(sockets=[sock])
    except KeyboardInterrupt as exc:
        return interrupted_status(exc)
    finally:
        sock.close()
    return 0


class Background:
    """The web view on a thread of this process: `with Background([backend]) as bg: bg.url`."""

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        import uvicorn

        self.sock = listen(host, port)
        self.host, self.port = host, int(self.sock.getsockname()[1])
        self.guard = Guard.for_bind(host, self.port, token)
        limits = limits or ConnectionLimits()
        self.view = WebView(
            [Source(b) for b in backends], self.guard, log_viewers=limits.log_viewers, log_readers=limits.log_readers
        )
        self.server = uvicorn.Server(_config(self.view, limits))
        self._thread = threading.Thread(target=self._run, name="kubetrain-ui", daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    @property
    def url(self) -> str:
        """The server's root, without the token (requests need it: `address`, or a bearer header)."""
        return f"http://{self.host}:{self.port}"

    def address(self, path: str = "/") -> str:
        """`path` with the token in its fragment, as the printed address carries it (the page's script keeps it
        in the origin's storage and removes it from the address bar)."""
        return f"{self.url}{path}#token={self.guard.token}"

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
        self.sock.close()

    def __enter__(self) -> Background:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["Background", "PortTaken", "address", "listen", "serve"]
