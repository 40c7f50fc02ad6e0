"""Start Python replicas from a process that imported their heavy modules once (the client side).

:mod:`kubetrain.backends.local._preload_server` is the server and says what a
forked replica keeps from a fresh ``python`` and what it does not. This
module decides when a group of replicas can use one (`ForkServerSlot`), starts it, and asks it
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
from typing import Any, Protocol

from . import _preload_server
from ._preload_server import CMDLINE_ROOM, TAG_ROOM, recv_message, send_message
from ._watchdog import TAG_VAR, add_tag, make_tag
from .errors import LocalError
from .spawning import find_program

__all__ = ["ForkServerSlot", "PreloadError", "PreloadServer", "common_env", "fork_target", "is_python"]

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


class PreloadError(LocalError):
    """The server could not start, import the modules, or start a replica (a `LocalError`: under the root of
    kubetrain's errors, said to the user without a traceback)."""


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
        #: What the server set up with; one built for other values cannot serve (`ForkServerSlot`).
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


class ReplicaStart(Protocol):
    """What a fork server is chosen by: a replica's start (`processes.LaunchSpec`)."""

    @property
    def key(self) -> str: ...
    @property
    def argv(self) -> Sequence[str]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def preload(self) -> tuple[str, ...]: ...


class ForkServerSlot:
    """The preloading server one process group forks its Python replicas from, at most one at a time: started
    for a start's replicas when all of them can share one, kept across gang restarts while what it was set
    up with still holds, and given up for the group once it failed (the replicas then start the ordinary
    way, and meet an import error themselves)."""

    def __init__(self, token: str) -> None:
        """`token`: the process group's, which the server's tag carries."""
        self.server: PreloadServer | None = None
        self._token = token
        self._failed: set[object] = set()
        #: Why the last start did not use a server although its replicas asked for one.
        self.note: str | None = None

    def for_start(self, specs: Sequence[ReplicaStart], prefix: list[str], wake_fd: int) -> PreloadServer | None:
        """A ready server for this start's replicas, or None (they are then spawned the ordinary way).
        `prefix`: the argv prefix it is started with (`spawning.pdeathsig_prefix`); `wake_fd` cuts the wait for
        its imports short."""
        self.note = None
        modules = specs[0].preload if specs else ()
        if not modules or any(s.preload != modules for s in specs):
            self.stop()
            return None
        why_not = None
        programs = set()
        for s in specs:
            try:
                programs.add(find_program(s.argv[0], s.env, s.cwd))
            except OSError:
                why_not = f"{s.key}: {s.argv[0]} not found"
                break
            if fork_target(s.argv, s.cwd) is None:
                why_not = f"{s.key}: not `python SCRIPT` (a source file) or `python -m MODULE`"
                break
        python = programs.pop() if len(programs) == 1 else ""
        env = common_env([s.env for s in specs], skip=TAG_VAR)
        if why_not is None and not python:
            why_not = "the replicas run different programs"
        elif why_not is None and not is_python(python):
            why_not = f"{python} is not a python interpreter"
        elif why_not is None and env is None:
            why_not = "the replicas' start-up variables (PYTHON*, LD_*, OMP_*, locale...) differ"
        if why_not is not None or env is None:
            self.note = why_not
            self.stop()
            return None
        # Each forked replica changes into its own folder (roles may each have a workingDir); the server
        # starts in theirs when they share one, so what its imports read from the current folder is theirs.
        cwds = {s.cwd for s in specs}
        cwd = cwds.pop() if len(cwds) == 1 else None
        # Everything the server was set up with: a server imported under other values cannot serve.
        key = (python, modules, cwd, tuple(sorted(env.items())))
        server = self.server
        if server is not None and server.key == key and server.alive():
            return server
        self.stop()
        if key in self._failed:
            return None
        # Room after the tag: each replica writes its own serial over the server's (see _preload_server).
        tag = add_tag(specs[0].env.get(TAG_VAR), make_tag(self._token, 0))
        env[TAG_VAR] = tag + " " * TAG_ROOM
        try:
            server = PreloadServer.launch(python, modules, env, cwd, prefix)
            server.key = key
            self.server = server
            if not server.wait_ready(wake_fd=wake_fd):
                # Woken (Ctrl-C, cancel) while importing: start the ordinary way, which is quick, and
                # let the caller's next wait_exit() see the wake and stop them.
                self.stop()
                return None
        except PreloadError as e:
            self.failed(key, e)
            return None
        return server

    def failed(self, key: object, error: PreloadError) -> None:
        """Give up on the server set up as `key` for this group."""
        self._failed.add(key)
        self.stop()
        lines = str(error).strip().splitlines()
        self.note = f"preloading failed, replicas start without it: {lines[-1] if lines else error}"

    def pids(self) -> list[int]:
        return [self.server.pid] if self.server is not None else []

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.close()
