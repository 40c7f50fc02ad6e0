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
import select
import socket
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _preload_server
from ._preload_server import CMDLINE_ROOM, recv_message, send_message

__all__ = ["PreloadError", "PreloadServer", "common_env", "fork_target", "is_python"]

READY_TIMEOUT = 120.0
"""Seconds to wait for the imports; past that the replicas are started the ordinary way."""
REQUEST_TIMEOUT = 30.0
"""Seconds a fork or a reap may take before the server is given up for hung (a fork takes milliseconds)."""

_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?$")

# Variables read when the interpreter or a preloaded library starts (libgomp reads OMP_NUM_THREADS when it
# is loaded): a replica forked from the server has the server's values, so they must be the same for every
# replica.
_INTERPRETER_VARS = re.compile(
    r"PYTHON\w*|LD_\w+|MALLOC_\w+|OMP_\w+|GOMP_\w+|KMP_\w+|MKL_\w+|OPENBLAS_\w+|LC_\w+|LANG|LANGUAGE"
)


class PreloadError(RuntimeError):
    """The server could not start, import the modules, or start a replica."""


def is_python(program: str) -> bool:
    """Whether the resolved program path names a CPython interpreter (``python``, ``python3.11``)."""
    return bool(_PYTHON_NAME.fullmatch(os.path.basename(program)))


def fork_target(argv: Sequence[str], cwd: str | None = None) -> list[str] | None:
    """``argv`` after the interpreter when it is ``python SCRIPT ...`` or ``python -m MODULE ...``.

    None for anything else: interpreter options (``-u``, ``-X``, ``-c``)
    change how the interpreter starts, which a forked replica cannot redo,
    and a SCRIPT that is not a source file in ``cwd`` (a folder, a zip
    application, a ``.pyc``, or missing: then Python's own message is wanted).
    """
    if len(argv) < 2:
        return None
    first = argv[1]
    if first == "-m":
        return list(argv[1:]) if len(argv) > 2 and argv[2] else None
    if not first or first.startswith("-") or first.endswith((".pyc", ".pyo")):
        return None
    path = os.path.join(cwd or os.getcwd(), first)
    try:
        if not os.path.isfile(path) or zipfile.is_zipfile(path):
            return None
    except OSError:
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

    def __init__(
        self, python: str, modules: tuple[str, ...], popen: subprocess.Popen[bytes], sock: socket.socket, out: int
    ) -> None:
        self.python = python
        self.modules = modules
        self._popen = popen
        self._sock: socket.socket | None = sock
        self._out = out
        self.ready = False
        #: What the server set up with; one built for other values cannot serve (see ProcessGroup).
        self.key: object = None

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
        # Its stdout and stderr: a pipe, as the replicas' are (Python caches whether they are seekable at
        # start-up, and forked replicas inherit that), kept to tell why the server died if it does.
        out_r, out_w = os.pipe()
        try:
            popen = subprocess.Popen(
                # The last argument is room for each replica to write its own command line into.
                [*prefix, python, _preload_server.__file__, str(theirs.fileno()), *modules, " " * CMDLINE_ROOM],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=out_w,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as e:
            ours.close()
            os.close(out_r)
            raise PreloadError(f"cannot start {python}: {e.strerror}") from e
        finally:
            theirs.close()
            os.close(out_w)
        os.set_blocking(out_r, False)
        return cls(python, modules, popen, ours, out_r)

    @property
    def pid(self) -> int:
        return self._popen.pid

    def alive(self) -> bool:
        return self._sock is not None and self._popen.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT, wake_fd: int = -1) -> bool:
        """Block until the imports are done; False, at once, if ``wake_fd`` turns readable first (left unread).

        Raises PreloadError (and stops the server) if the imports failed or took over ``timeout`` s.
        """
        if self.ready:
            return True
        sock = self._require()
        watched = [sock] + ([wake_fd] if wake_fd >= 0 else [])
        readable, _, _ = select.select(watched, [], [], timeout)
        if wake_fd in readable:
            return False
        if sock not in readable:
            self.close()
            raise PreloadError(f"importing {', '.join(self.modules)} took over {timeout:.0f} s")
        sock.settimeout(REQUEST_TIMEOUT)
        try:
            reply, fds = recv_message(sock)
        except (EOFError, OSError) as e:
            raise self._broken(f"the preload server ended before it was ready ({e})") from e
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)
        for fd in fds:
            os.close(fd)
        if not reply.get("ok"):
            self.close()
            raise PreloadError(str(reply.get("error", "the imports failed")).strip())
        self.ready = True
        return True

    def spawn(
        self, target: Sequence[str], env: Mapping[str, str], cwd: str | None, stdout: int, stderr: int
    ) -> Spawned:
        """Fork a replica running ``python TARGET...``; the caller keeps (and closes) ``stdout``/``stderr``."""
        request = {"op": "spawn", "python": self.python, "target": list(target), "env": dict(env), "cwd": cwd}
        reply, fds = self._ask(request, [stdout, stderr])
        if "error" in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise PreloadError(str(reply.get("error", "no pidfd in the reply")))
        return Spawned(int(reply["pid"]), fds[0])

    def reap(self, pid: int) -> int:
        """The return code of replica ``pid``, which has exited (its pidfd was readable). Reaps it."""
        reply, fds = self._ask({"op": "reap", "pid": pid})
        for fd in fds:
            os.close(fd)
        return int(reply["returncode"])

    def _ask(self, request: Mapping[str, object], fds: Sequence[int] = ()) -> tuple[Any, list[int]]:
        """One request and its reply. Any failure on the way (a hung or dead server, an interrupt between
        the two) leaves the protocol out of step, so the server is closed."""
        sock = self._require()
        sock.settimeout(REQUEST_TIMEOUT)
        try:
            send_message(sock, request, fds)
            return recv_message(sock)
        except (EOFError, OSError) as e:
            raise self._broken(f"the preload server did not answer ({e or type(e).__name__})") from e
        except BaseException:
            self.close()
            raise
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)

    def _broken(self, message: str) -> PreloadError:
        output = self._read_output()
        self.close()
        if self._popen.returncode is not None and self._popen.returncode < 0:
            message += f"; it was killed by signal {-self._popen.returncode}"
        return PreloadError(message + (f"; it said: {output.strip()[-500:]}" if output.strip() else ""))

    def _read_output(self) -> str:
        chunks = []
        with contextlib.suppress(OSError):
            while self._out >= 0 and (chunk := os.read(self._out, 65536)):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

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
        if self._out >= 0:
            os.close(self._out)
            self._out = -1

    def _require(self) -> socket.socket:
        if self._sock is None:
            raise PreloadError("the preload server is closed")
        return self._sock
