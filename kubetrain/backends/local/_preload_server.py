"""The preloading fork server: import the heavy modules once, then fork each Python replica from that state.

Eight replicas that each ``import torch`` spend about 1 s of CPU apiece doing
it; on two cores that alone is 4 s before the first ``init_process_group``.
This program, run by the supervisor on the *replicas'* interpreter, imports
the modules it is given (``torch``) once and then forks a replica per request
(PyTorch's DataLoader workers are forked from the same state, so this is a
path torch supports). It talks to the supervisor over a Unix socket it gets
as a file descriptor; see :mod:`kubetrain.backends.local.preload` for the
client and the protocol.

A forked replica is made to look like ``python SCRIPT ARGS`` (or ``python -m
MODULE ARGS``) started afresh:

- its own session and process group, stdin from /dev/null, stdout and stderr
  on the pipes the supervisor sent, the working directory, ``os.environ``,
  ``sys.argv``, ``sys.path[0]`` and a fresh ``__main__`` module as Python
  sets them for a script or ``-m``;
- PR_SET_PDEATHSIG=SIGKILL, so it dies with this server, which itself dies
  with the supervisor;
- whatever the preload printed (a warning from an import) is written to its
  stderr first, as a fresh process would have printed it;
- the exit status Python would give: ``sys.exit`` codes, 1 after an uncaught
  exception (printed through ``sys.excepthook``), death by SIGINT after an
  uncaught KeyboardInterrupt, 120 when flushing stdout fails.

How it ends differs, on purpose. Python's own shutdown of an interpreter
holding torch takes 0.3-0.4 s per process, most of it copying the pages that
finalisation touches, since the forked child shares them with this server
(8 replicas: 2.7 s of 3.6 s in all). A replica therefore ends as
multiprocessing's workers do, but more completely: it waits for its
non-daemon threads, runs its ``atexit`` handlers, clears its ``__main__``
module and collects garbage (so the script's objects are finalised and its
open files flushed), flushes stdout and stderr, and calls ``os._exit``.
Objects held only by preloaded modules are not finalised; Python does not
promise that either. ``gc.freeze()`` before the first fork keeps the
collector from touching (and so copying) the preloaded objects.

Also inherited, not fresh: the hash seed (``PYTHONHASHSEED``) and whatever
the preloaded modules read from the environment when they were imported: the
server starts with the environment common to all replicas, so only a
variable that differs between replicas and is read at import time (none of
torch's per-rank variables are) would be seen differently. ``random`` reseeds
itself after a fork; NumPy's global generator is reseeded here.

Standard library only, and Python 3.9 syntax: it runs on the replicas'
interpreter, which need not be kubetrain's.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import importlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import traceback
import types
from collections.abc import Sequence
from typing import Any, NoReturn

_HEADER = struct.Struct("!I")
_MAX_FDS = 4


# --------------------------------------------------------------------------- framing, shared with the client


def send_message(sock: socket.socket, obj: Any, fds: Sequence[int] = ()) -> None:
    """Send one JSON message, with file descriptors attached, over a stream socket."""
    payload = json.dumps(obj, separators=(",", ":")).encode()
    data = _HEADER.pack(len(payload)) + payload
    # The descriptors ride on the first bytes; the rest follows with sendall.
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def recv_message(sock: socket.socket) -> tuple[Any, list[int]]:
    """Receive one message and its descriptors. Raises EOFError when the peer has gone."""
    header, fds = _recv_exactly(sock, _HEADER.size, want_fds=True)
    (size,) = _HEADER.unpack(header)
    payload, more = _recv_exactly(sock, size, want_fds=False)
    return json.loads(payload), fds + more


def _recv_exactly(sock: socket.socket, size: int, *, want_fds: bool) -> tuple[bytes, list[int]]:
    chunks: list[bytes] = []
    fds: list[int] = []
    got = 0
    while got < size:
        if want_fds and not fds:
            data, new_fds, _flags, _addr = socket.recv_fds(sock, size - got, _MAX_FDS)
            fds.extend(new_fds)
        else:
            data = sock.recv(size - got)
        if not data:
            for fd in fds:
                os.close(fd)
            raise EOFError("the peer closed the socket")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks), fds


# --------------------------------------------------------------------------- the server


def _preload(modules: list[str]) -> tuple[str | None, bytes]:
    """Import ``modules``; return (an error's traceback or None, everything printed meanwhile)."""
    capture = os.memfd_create("kubetrain-preload-output")
    saved = os.dup(1), os.dup(2)
    os.dup2(capture, 1)
    os.dup2(capture, 2)
    error = None
    try:
        for name in modules:
            importlib.import_module(name)
    except BaseException:
        error = traceback.format_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
    size = os.lseek(capture, 0, os.SEEK_END)
    output = os.pread(capture, size, 0) if size else b""
    os.close(capture)
    return error, output


def serve(sock: socket.socket, modules: list[str]) -> NoReturn:
    error, output = _preload(modules)
    if error is not None:
        send_message(sock, {"ok": False, "error": error, "output": output.decode("utf-8", "replace")})
        _quick_exit(1)
    # Everything imported so far is shared with the replicas: the collector must not touch it.
    gc.collect()
    gc.freeze()
    send_message(sock, {"ok": True, "pid": os.getpid(), "modules": modules})
    children: set[int] = set()
    while True:
        try:
            request, fds = recv_message(sock)
        except (EOFError, OSError):
            break
        op = request.get("op")
        if op == "spawn":
            _spawn(sock, request, fds, output, children)
        elif op == "reap":
            pid = int(request["pid"])
            _, status = os.waitpid(pid, 0)
            children.discard(pid)
            send_message(sock, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
        else:
            for fd in fds:
                os.close(fd)
            send_message(sock, {"error": f"unknown request {op!r}"})
    # The supervisor is gone or done: no replica outlives its server.
    for pid in children:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
    _quick_exit(0)


def _spawn(sock: socket.socket, request: dict[str, Any], fds: list[int], output: bytes, children: set[int]) -> None:
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        send_message(sock, {"error": f"spawn needs 2 descriptors (stdout, stderr), got {len(fds)}"})
        return
    server_pid = os.getpid()
    # The child closes its end once it leads its own process group and has its death signal set: only
    # then may the supervisor signal the group (a SIGTERM sent earlier would find no group and be lost).
    settled_r, settled_w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:
        for fd in (*fds, settled_r, settled_w):
            os.close(fd)
        send_message(sock, {"error": f"fork failed: {e.strerror}"})
        return
    if pid == 0:
        try:
            os.close(settled_r)
            _become_replica(sock, request, fds, output, server_pid, settled_w)
        finally:
            os._exit(70)  # only if becoming the replica itself broke (EX_SOFTWARE)
    for fd in (*fds, settled_w):
        os.close(fd)
    while os.read(settled_r, 1):  # end of file: settled, or died trying (then the reap tells)
        pass
    os.close(settled_r)
    children.add(pid)
    # The child is unreaped, so this pidfd is certain to name it.
    pidfd = os.pidfd_open(pid)
    try:
        send_message(sock, {"pid": pid}, [pidfd])
    finally:
        os.close(pidfd)


# --------------------------------------------------------------------------- in the forked replica


def _become_replica(
    sock: socket.socket, request: dict[str, Any], fds: list[int], output: bytes, server_pid: int, settled: int
) -> NoReturn:
    sock.close()
    os.setsid()
    _set_pdeathsig()
    if os.getppid() != server_pid:  # the server died before the line above took effect
        os._exit(128 + signal.SIGKILL)
    os.close(settled)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    if output:
        os.write(2, output)
    env: dict[str, str] = request["env"]
    os.environ.clear()
    os.environ.update(env)
    target: list[str] = request["target"]
    cwd = request.get("cwd")
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as e:
            os.write(2, f"kubetrain: cannot start {request['python']} in {cwd}: {e.strerror}\n".encode())
            os._exit(126)
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # a fresh process seeds it from the OS; forked ones would all share one stream
    sys.orig_argv = [request["python"], *target]
    _quick_exit(_run_main(request["python"], target))


def _set_pdeathsig() -> None:
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(70)


def _run_main(python: str, target: list[str]) -> int:
    """Run ``python TARGET...`` in this process; return the exit status Python would have."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    interrupted = False
    try:
        try:
            if target[0] == "-m":
                import runpy

                sys.argv = ["-m", *target[2:]]
                sys.path.insert(0, os.getcwd())
                runpy._run_module_as_main(target[1], alter_argv=True)  # type: ignore[attr-defined]
            else:
                code = _compile_script(python, target[0], main)
                if code is None:
                    return 2
                sys.argv = list(target)
                exec(code, main.__dict__)
            status = 0
        except SystemExit as e:
            status = _exit_status(e)
        except KeyboardInterrupt:
            _print_exception(*sys.exc_info())
            interrupted = True
            status = 1
        except BaseException:
            _print_exception(*sys.exc_info())
            status = 1
        status = _shutdown(main, status)
    except SystemExit as e:  # from a thread join or an atexit handler's sys.exit
        status = _exit_status(e)
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status


def _compile_script(python: str, path: str, main: types.ModuleType) -> types.CodeType | None:
    full = os.path.abspath(path)
    try:
        with open(full, "rb") as f:
            source = f.read()
    except OSError as e:
        print(f"{python}: can't open file {full!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
        return None
    from importlib.machinery import SourceFileLoader

    main.__dict__.update(
        __file__=full,
        __cached__=None,
        __loader__=SourceFileLoader("__main__", full),
        __spec__=None,
        __package__=None,
    )
    sys.path.insert(0, os.path.dirname(os.path.realpath(full)))
    return compile(source, full, "exec", dont_inherit=True)


def _print_exception(etype: Any, value: Any, tb: Any) -> None:
    # Drop this module's frames: the traceback starts, as Python's would, in the user's program (or runpy).
    while tb is not None and tb.tb_frame.f_globals is globals():
        tb = tb.tb_next
    if isinstance(value, BaseException):
        value.__traceback__ = tb  # the hook prints the exception's own traceback, not the argument
    try:
        sys.excepthook(etype, value, tb)
    except BaseException:
        traceback.print_exception(etype, value, tb)


def _exit_status(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _shutdown(main: types.ModuleType, status: int) -> int:
    """What Python's exit does that matters to a program, without finalising the shared preload."""
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as Py_FinalizeEx waits for them
    atexit._run_exitfuncs()
    _clear_module(main)
    gc.collect()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream in (sys.stdout, sys.__stdout__) and status == 0:
                status = 120  # as Python exits when it cannot flush stdout
    return status


def _clear_module(module: types.ModuleType) -> None:
    """Drop the script's objects so that they are finalised, in the order Python's own shutdown uses."""
    namespace = module.__dict__
    for private in (True, False):
        for name in list(namespace):
            if name != "__builtins__" and name.startswith("_") == private:
                namespace[name] = None


def _quick_exit(status: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def main(argv: list[str]) -> NoReturn:
    if len(argv) < 2 or not argv[1].isdigit():
        print("usage: _preload_server.py FD [MODULE...]  (FD: a connected Unix stream socket)", file=sys.stderr)
        sys.exit(2)
    # Run as a script, Python put this file's folder first on sys.path; the replicas must not import from it.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sock = socket.socket(fileno=int(argv[1]))
    # Replicas run with Python's default handlers; the supervisor stops this server by closing the socket.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    serve(sock, argv[2:])


if __name__ == "__main__":
    main(sys.argv)
