"""The preloading fork server: import the heavy modules once, then fork each Python replica from that state.

Eight replicas that each ``import torch`` spend about a second of CPU apiece doing it, 4 s on two cores
before the first ``init_process_group``. This program, run by the supervisor on the *replicas'* interpreter,
imports the modules it is given once and forks a replica per request (PyTorch's DataLoader workers are
forked from the same state, so it is a path torch supports). A forked replica is made to look and end like
``python SCRIPT ARGS`` started afresh (`_Replica`), because the program, ``ps`` and kubetrain's own process
sweeps must not tell the difference; only where a fresh start costs what preloading saves (Python's own
shutdown, `_shutdown`) does it differ, on purpose. The client and the protocol are `preload`'s. Standard
library only, and Python 3.9 syntax: it runs on the replicas' interpreter, which need not be kubetrain's.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import importlib
import io
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

TAG_VAR = "KUBETRAIN_LOCAL_TAG"  # as in _watchdog (not imported: this file runs outside the package)
_TAG_PREFIX = TAG_VAR.encode() + b"="
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
    """Receive one message and its descriptors (close-on-exec). Raises EOFError when the peer has gone."""
    header, fds = _recv_exactly(sock, _HEADER.size, want_fds=True)
    try:
        (size,) = _HEADER.unpack(header)
        payload, _ = _recv_exactly(sock, size, want_fds=False)
        return json.loads(payload), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _recv_exactly(sock: socket.socket, size: int, *, want_fds: bool) -> tuple[bytes, list[int]]:
    chunks: list[bytes] = []
    fds: list[int] = []
    got = 0
    while got < size:
        if want_fds and not fds:
            data, new_fds, _flags, _addr = socket.recv_fds(sock, size - got, _MAX_FDS, socket.MSG_CMSG_CLOEXEC)
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

#: Bytes of room left in this server's command line and tag variable, for a replica to write its own
#: into (``ps`` then shows the replica's command; sweeps by tag find it by its own spawn serial).
CMDLINE_ROOM = 512
TAG_ROOM = 32


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


class _Server:
    def __init__(self, sock: socket.socket, output: bytes) -> None:
        import ctypes

        self.sock = sock
        self.output = output  #: what the preload printed, replayed to each replica
        self.pid = os.getpid()
        self.children: set[int] = set()
        # Looked up now: a forked child must not dlopen or import before it has settled (a lock held by
        # another thread at fork time would hang it there).
        self.prctl = ctypes.CDLL(None, use_errno=True).prctl
        self.memmove = ctypes.memmove
        self.preloaded = frozenset(sys.modules)

    def serve(self) -> None:
        try:
            while True:
                try:
                    request, fds = recv_message(self.sock)
                except (EOFError, OSError):
                    return
                op = request.get("op")
                if op == "spawn":
                    self.spawn(request, fds)
                elif op == "reap":
                    pid = int(request["pid"])
                    _, status = os.waitpid(pid, 0)
                    self.children.discard(pid)
                    send_message(self.sock, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
                else:
                    for fd in fds:
                        os.close(fd)
                    send_message(self.sock, {"error": f"unknown request {op!r}"})
        finally:
            # The supervisor is gone or done (or this loop broke): no replica outlives its server.
            for pid in self.children:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            for pid in self.children:
                with contextlib.suppress(OSError):
                    os.waitpid(pid, 0)

    def spawn(self, request: dict[str, Any], fds: list[int]) -> None:
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            send_message(self.sock, {"error": f"spawn needs 2 descriptors (stdout, stderr), got {len(fds)}"})
            return
        # The child closes its end once it leads its own session and has its death signal set: only then
        # may the supervisor signal its group (a SIGTERM sent earlier would find no group and be lost).
        settled_r, settled_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            for fd in (*fds, settled_r, settled_w):
                os.close(fd)
            send_message(self.sock, {"error": f"fork failed: {e.strerror}"})
            return
        if pid == 0:
            try:
                os.close(settled_r)
                _Replica(self, request, fds, settled_w).run()
            finally:
                _quick_exit(70)  # only if becoming the replica itself broke (EX_SOFTWARE)
        for fd in (*fds, settled_w):
            os.close(fd)
        while os.read(settled_r, 1):  # end of file: settled, or died trying (then the reap tells)
            pass
        os.close(settled_r)
        self.children.add(pid)
        # The child is unreaped, so this pidfd is certain to name it.
        pidfd = os.pidfd_open(pid)
        try:
            send_message(self.sock, {"pid": pid}, [pidfd])
        finally:
            os.close(pidfd)


# --------------------------------------------------------------------------- in the forked replica


class _Replica:
    """What a forked child does to become ``python TARGET...`` and to end like it.

    As Python sets them for a fresh process: its own session and process group, stdin from /dev/null,
    stdout and stderr on the pipes the supervisor sent, its role's working directory, ``os.environ``,
    ``sys.argv``, ``sys.path[0]`` (unless ``PYTHONSAFEPATH``) and a fresh ``__main__`` (also as
    ``__mp_main__``, so spawned multiprocessing children find the script's classes). In ``ps`` and
    ``/proc/<pid>/cmdline`` its own command line, in ``/proc/<pid>/environ`` its own
    ``KUBETRAIN_LOCAL_TAG`` (both rewritten in place, in room the server reserves), so ``pkill -f train.py``
    and kubetrain's sweeps find it. Fresh random state (`_fresh_process_state`), PR_SET_PDEATHSIG=SIGKILL
    (it dies with the server, which dies with the supervisor), whatever the preload printed written to its
    stderr first, and the exit status Python would give (``sys.exit`` codes, 1 after an uncaught exception,
    death by SIGINT after an uncaught KeyboardInterrupt, 120 when flushing stdout fails).

    Inherited, not fresh: the hash seed, the modules already imported (a ``queue.py`` beside the script
    does not shadow the standard library's if a preloaded module imported it), and what the preloaded
    modules read from the environment when imported: the server starts with the environment common to all
    replicas, and the client refuses to share one among replicas whose start-up variables differ.
    """

    def __init__(self, server: _Server, request: dict[str, Any], fds: list[int], settled: int) -> None:
        self.server = server
        self.python: str = request["python"]
        self.target: list[str] = request["target"]
        self.env: dict[str, str] = request["env"]
        self.cwd: str | None = request.get("cwd")
        self.fds = fds
        self.settled = settled

    def run(self) -> None:
        server = self.server
        server.sock.close()
        os.setsid()
        pr_set_pdeathsig = 1
        if server.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
            _quick_exit(70)
        if os.getppid() != server.pid:  # the server died before the line above took effect
            os._exit(128 + signal.SIGKILL)
        os.close(self.settled)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(self.fds[0], 1)
        os.dup2(self.fds[1], 2)
        for fd in self.fds:
            os.close(fd)
        _write_all(2, server.output)
        os.environ.clear()
        os.environ.update(self.env)
        self._rewrite_proc_identity()
        if self.cwd:
            try:
                os.chdir(self.cwd)
            except OSError as e:
                _write_all(2, f"kubetrain: cannot start {self.python} in {self.cwd}: {e.strerror}\n".encode())
                os._exit(126)
        _fresh_process_state()
        sys.orig_argv = [self.python, *self.target]
        _quick_exit(self._run_main())

    def _rewrite_proc_identity(self) -> None:
        """Write this replica's command line and tag over the server's, in the memory /proc reads them from."""
        try:
            with open("/proc/self/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            # Fields 48-51 of proc(5), counted from 3 after the ")" that ends the command name.
            arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
            with open("/proc/self/environ", "rb") as f:
                environ = f.read()
        except (OSError, ValueError, IndexError):
            return
        cmdline = b"\0".join(os.fsencode(a) for a in (self.python, *self.target)) + b"\0"
        room = arg_end - arg_start
        if room > 1:
            cmdline = cmdline[: room - 1] + b"\0" * max(1, room - len(cmdline[: room - 1]))
            self.server.memmove(arg_start, cmdline, room)
        tag = self.env.get(TAG_VAR)
        where = environ.find(b"\0" + _TAG_PREFIX)
        where = 0 if environ.startswith(_TAG_PREFIX) else (where + 1 if where >= 0 else -1)
        if tag is None or where < 0:
            return
        start = where + len(_TAG_PREFIX)
        end = environ.find(b"\0", start)
        end = len(environ) if end < 0 else end
        value = os.fsencode(tag)
        # Sweeps split the value on whitespace, so padding with spaces is harmless.
        if len(value) <= end - start and env_start + end <= env_end:
            self.server.memmove(env_start + start, value.ljust(end - start), end - start)

    def _run_main(self) -> int:
        """Run the program in this process; return the exit status Python would have."""
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        if "__mp_main__" in sys.modules:  # multiprocessing's alias: spawned children unpickle against it
            sys.modules["__mp_main__"] = main
        interrupted = False
        try:
            if self.target[0] == "-m":
                import runpy

                sys.argv = ["-m", *self.target[2:]]
                _add_path0(os.getcwd())
                runpy._run_module_as_main(self.target[1], alter_argv=True)  # type: ignore[attr-defined]
            else:
                code = _compile_script(self.python, self.target[0], main)
                if code is None:
                    return 2
                sys.argv = list(self.target)
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
        status = _shutdown(main, status, self.server.preloaded)
        if interrupted:  # as Python does: die by SIGINT, so the parent sees how it ended
            _flush_all()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return status


def _fresh_process_state() -> None:
    """Give the replica what a fresh process has and a forked one would share with its siblings: ``random``
    (reseeded by Python after a fork), torch's default generator, NumPy's global one, and multiprocessing's
    authentication key."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "seed"):
        torch.seed()  # CPU generator now; CUDA's is only queued, so CUDA stays uninitialised
    mp_process = sys.modules.get("multiprocessing.process")
    if mp_process is not None:
        mp_process.current_process().authkey = os.urandom(32)
        mp_process.ORIGINAL_DIR = os.getcwd()  # type: ignore[attr-defined]


def _add_path0(path: str) -> None:
    if not getattr(sys.flags, "safe_path", False):  # PYTHONSAFEPATH / -P (3.11+)
        sys.path.insert(0, path)


def _compile_script(python: str, path: str, main: types.ModuleType) -> types.CodeType | None:
    full = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
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
    _add_path0(os.path.dirname(os.path.realpath(full)))
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


def _ignored(what: str) -> None:
    """Report an exception during shutdown as Python does: printed, and the exit status kept."""
    with contextlib.suppress(BaseException):
        print(f"Exception ignored {what}:", file=sys.stderr)
        traceback.print_exc()


def _shutdown(main: types.ModuleType, status: int, preloaded: frozenset[str]) -> int:
    """What Python's exit does that matters to a program, without finalising the shared preload.

    Python's own shutdown of an interpreter holding torch takes 0.3-0.4 s per process, most of it copying
    the pages finalisation touches, which a forked child shares with the server (8 replicas: 2.7 s of 3.6 s
    in all). So a replica ends as multiprocessing's workers do, more completely: it waits for its non-daemon
    threads, runs its ``atexit`` handlers, clears ``__main__`` and the modules the script imported (newest
    first, as Python does; skipped while daemon threads run, which would see them cleared) and collects
    garbage, so the script's objects are finalised; then it flushes every open file, and the caller calls
    ``os._exit``. Objects held only by preloaded modules are not finalised (Python does not promise that
    either); ``gc.freeze()`` before the first fork keeps the collector from copying the preloaded ones."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as Py_FinalizeEx waits for them
    except BaseException:
        _ignored("on threading shutdown")
    try:
        atexit._run_exitfuncs()  # 3.10+ prints a handler's error itself; 3.9 re-raises the last one
    except BaseException:
        _ignored("in atexit callback")
    try:
        if threading.active_count() == 1:  # daemon threads would run on with their modules cleared
            _clear_module(main)
            for name in reversed(list(sys.modules)):
                module = sys.modules.get(name)
                if name not in preloaded and module is not None and module is not main:
                    _clear_module(module)
            gc.collect()
    except BaseException:
        _ignored("while finalising the program's objects")
    return status if _flush_all() else 120  # as Python exits when it cannot flush stdout


def _clear_module(module: types.ModuleType) -> None:
    """Drop a module's objects so that they are finalised, in the order Python's own shutdown uses."""
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, dict):
        return
    for private in (True, False):
        for name in list(namespace):
            if name != "__builtins__" and name.startswith("_") == private:
                namespace[name] = None


def _flush_all() -> bool:
    """Flush stdio and every file still open (finalisation would have); False if stdout could not be."""
    ok = True
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                ok = False
    with contextlib.suppress(BaseException):
        for obj in gc.get_objects():
            if isinstance(obj, io.IOBase) and not obj.closed and obj.writable():
                with contextlib.suppress(Exception):
                    obj.flush()
    return ok


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _quick_exit(status: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def main(argv: list[str]) -> NoReturn:
    if len(argv) < 2 or not argv[1].isdigit():
        print("usage: _preload_server.py FD [MODULE...]  (FD: a connected Unix stream socket)", file=sys.stderr)
        sys.exit(2)
    # Run as a script, Python put this file's folder (resolved) first on sys.path; no replica may import
    # from it (its `output`, `store`... would shadow the user's modules).
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
    sock = socket.socket(fileno=int(argv[1]))
    modules = [m for m in argv[2:] if m.strip()]  # the last argument is blank room (CMDLINE_ROOM)
    # Replicas run with Python's default handlers, and the server reaps its children itself.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if sys.version_info < (3, 9):  # noqa: UP036 - replicas may run an older interpreter than kubetrain
        send_message(sock, {"ok": False, "error": f"Python {sys.version.split()[0]} is older than 3.9"})
        _quick_exit(1)
    error, output = _preload(modules)
    if error is not None:
        send_message(sock, {"ok": False, "error": error, "output": output.decode("utf-8", "replace")})
        _quick_exit(1)
    server = _Server(sock, output)
    # Everything imported so far is shared with the replicas: the collector must not touch it.
    gc.collect()
    gc.freeze()
    send_message(sock, {"ok": True, "pid": server.pid, "modules": modules})
    try:
        server.serve()
    finally:
        _quick_exit(0)  # never Python's shutdown with torch loaded: 0.4 s for nothing


if __name__ == "__main__":
    main(sys.argv)
