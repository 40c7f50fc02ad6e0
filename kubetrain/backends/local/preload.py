"""Start Python replicas from a process that imported their heavy modules once (the client side).

:mod:`kubetrain.backends.local._preload_server` is the server and says what a
forked replica keeps from a fresh ``python`` and what it does not. This
module decides when a group of replicas can use one, starts it, and asks it
for replicas.

Protocol, over a Unix stream socket, length-prefixed JSON with descriptors
attached (``send_message``/``recv_message``):

- server → client once, after the imports: ``{"ok": true, "pid": P}`` or
  ``{"ok": false, "error": TRACEBACK, "output": TEXT}`` (then it exits);
- ``{"op": "spawn", "python", "target", "env", "cwd"}`` with the stdout and
  stderr pipe ends → ``{"pid": N}`` with a pidfd of the replica, or
  ``{"error": TEXT}``;
- ``{"op": "reap", "pid": N}`` → ``{"pid": N, "returncode": C}``. The server
  reaps a replica only when asked, so its pid, and the process group id
  the supervisor kills by, stay the replica's until the supervisor is done;
- end of file: the server SIGKILLs its remaining replicas and exits.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import _preload_server
from ._preload_server import recv_message, send_message

__all__ = ["PreloadError", "PreloadServer", "common_env", "fork_target", "is_python"]

READY_TIMEOUT = 120.0
"""Seconds to wait for the imports; past that the replicas are started the ordinary way."""

_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?$")

# Variables that shape how the interpreter starts: a replica forked from the server inherits the server's
# interpreter, so these must be the same for every replica (they then are the server's own).
_INTERPRETER_VARS = re.compile(r"PYTHON\w*|LD_PRELOAD|LD_LIBRARY_PATH|MALLOC_\w+")


class PreloadError(RuntimeError):
    """The server could not start, import the modules, or start a replica."""


def is_python(program: str) -> bool:
    """Whether the resolved program path names a CPython interpreter (``python``, ``python3.11``)."""
    return bool(_PYTHON_NAME.fullmatch(os.path.basename(program)))


def fork_target(argv: Sequence[str]) -> list[str] | None:
    """``argv`` after the interpreter when it is ``python SCRIPT ...`` or ``python -m MODULE ...``.

    None for anything else: interpreter options (``-u``, ``-X``, ``-c``)
    change how the interpreter starts, which a forked replica cannot redo.
    """
    if len(argv) < 2:
        return None
    first = argv[1]
    if first == "-m":
        return list(argv[1:]) if len(argv) > 2 and argv[2] else None
    if not first or first.startswith("-"):
        return None
    return list(argv[1:])


def common_env(envs: Sequence[Mapping[str, str]], skip: str) -> dict[str, str] | None:
    """The variables every environment has with the same value (``skip`` left out).

    None when a variable that shapes interpreter start-up (``PYTHON*``,
    ``LD_PRELOAD``...) differs between them: one server cannot serve both.
    """
    if not envs:
        return {}
    first, rest = envs[0], envs[1:]
    for key in set().union(*envs) - {skip}:
        if _INTERPRETER_VARS.fullmatch(key) and any(e.get(key) != first.get(key) for e in rest):
            return None
    return {k: v for k, v in first.items() if k != skip and all(e.get(k) == v for e in rest)}


@dataclass
class Spawned:
    pid: int
    pidfd: int


class PreloadServer:
    """One server process on interpreter ``python`` that imported ``modules``.

    :meth:`launch` starts it without waiting; :meth:`wait_ready` waits for the
    imports. Not thread-safe.
    """

    def __init__(self, python: str, modules: tuple[str, ...], popen: subprocess.Popen[bytes], sock: socket.socket):
        self.python = python
        self.modules = modules
        self._popen = popen
        self._sock: socket.socket | None = sock
        self.ready = False
        self.output = ""  #: what the imports printed (shown when they failed)

    @classmethod
    def launch(
        cls,
        python: str,
        modules: tuple[str, ...],
        env: Mapping[str, str],
        cwd: str | None,
        prefix: Sequence[str] = (),
    ) -> PreloadServer:
        """Start the server (``prefix``: e.g. setpriv's, so that it dies with the caller)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            popen = subprocess.Popen(
                [*prefix, python, _preload_server.__file__, str(theirs.fileno()), *modules],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as e:
            ours.close()
            raise PreloadError(f"cannot start {python}: {e.strerror}") from e
        finally:
            theirs.close()
        return cls(python, modules, popen, ours)

    @property
    def pid(self) -> int:
        return self._popen.pid

    def alive(self) -> bool:
        return self._sock is not None and self._popen.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Block until the imports are done. Raises PreloadError (and stops the server) if they failed."""
        if self.ready:
            return
        sock = self._require()
        sock.settimeout(timeout)
        try:
            reply, fds = recv_message(sock)
        except (EOFError, OSError) as e:
            self.close()
            raise PreloadError(f"the preload server ended before it was ready ({e})") from e
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)
        for fd in fds:
            os.close(fd)
        if not reply.get("ok"):
            self.output = str(reply.get("output", ""))
            self.close()
            raise PreloadError(str(reply.get("error", "the imports failed")).strip())
        self.ready = True

    def spawn(
        self, target: Sequence[str], env: Mapping[str, str], cwd: str | None, stdout: int, stderr: int
    ) -> Spawned:
        """Fork a replica running ``python TARGET...``; the caller keeps (and closes) ``stdout``/``stderr``."""
        sock = self._require()
        request = {"op": "spawn", "python": self.python, "target": list(target), "env": dict(env), "cwd": cwd}
        try:
            send_message(sock, request, [stdout, stderr])
            reply, fds = recv_message(sock)
        except (EOFError, OSError) as e:
            self.close()
            raise PreloadError(f"the preload server is gone ({e})") from e
        if "error" in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise PreloadError(str(reply.get("error", "no pidfd in the reply")))
        return Spawned(int(reply["pid"]), fds[0])

    def reap(self, pid: int) -> int:
        """The return code of replica ``pid``, which has exited (its pidfd was readable). Reaps it."""
        sock = self._require()
        try:
            send_message(sock, {"op": "reap", "pid": pid})
            reply, fds = recv_message(sock)
        except (EOFError, OSError) as e:
            self.close()
            raise PreloadError(f"the preload server is gone ({e})") from e
        for fd in fds:
            os.close(fd)
        return int(reply["returncode"])

    def close(self, timeout: float = 5.0) -> None:
        """Stop the server: end of file makes it SIGKILL any replica left, reap, and exit. Idempotent."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self._popen.kill()
            self._popen.wait()

    def _require(self) -> socket.socket:
        if self._sock is None:
            raise PreloadError("the preload server is closed")
        return self._sock
