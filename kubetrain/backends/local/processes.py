"""The replicas of one local job as OS processes: spawned, watched, stopped, and never one left behind.

One `ProcessGroup` owns the replicas of one job, so that a supervisor sees each exit the moment it
happens, stops them the way Kubernetes stops a pod's containers (SIGTERM, a grace period with output
still pumped, SIGKILL), and leaves no process behind whatever happens to it: how a replica is spawned so
it can always be found and dies with its supervisor is `spawning`'s, finding and killing stray processes
by their environment tag `_watchdog`'s, forking Python replicas from a preloading server `preload`'s, and
their log files `replica_logs`'. Everything the group waits for goes through one epoll selector (a pidfd
per replica, readable the moment it exits; its stdout and stderr pipes; an eventfd that `wake` writes),
so an exit is seen within a select round, with no polling and no SIGCHLD handler. Every line is written
to the replica's log first, then to the live output, which a thread of its own feeds to the sink
(`live_output`): a terminal that stops reading never holds up the log files or this loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...contract.logs import LogSink
from ..logfiles.writer import LineAssembler, LogWriter, append_note, rotation_from_env
from ._watchdog import TAG_VAR, add_tag, kill_tagged, make_tag, signal_tagged
from .live_output import LiveOutput
from .preload import ForkServerSlot, PreloadError, PreloadServer, fork_target
from .procfs import proc_start_time
from .replica_logs import LogNotice, ReplicaLogs
from .spawning import EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, Watchdog, find_program, pdeathsig_prefix

__all__ = ["ExitEvent", "LaunchSpec", "ProcessGroup"]

_READ_SIZE = 1 << 16
# A bigger pipe lets a replica write a burst while the supervisor is busy
# (writing to a slow terminal) without blocking. Kept modest: pipes beyond
# the per-user soft limit (fs.pipe-user-pages-soft, 64 MiB) shrink to one
# page for every program of the user.
_PIPE_SIZE = 1 << 18
# How long to wait for SIGKILLed processes to be gone. Only a process stuck in
# uninterruptible sleep (a hung NFS or GPU driver call) takes this long.
_KILL_WAIT = 5.0
# The longest single `select`: epoll refuses timeouts past a C int of
# milliseconds (about 24.8 days); a longer wait is made of several.
_MAX_SELECT = 3600.0
# How long to wait, once every replica is gone, for their pipes to reach end
# of file (a process outside the tag, e.g. started with ``env -i``, can hold them).
_DRAIN_WAIT = 1.0


@dataclass(frozen=True)
class LaunchSpec:
    """How to start one replica."""

    key: str  #: unique in the group; the output prefix, e.g. "worker-1"
    argv: Sequence[str]  #: program and arguments; never a shell string
    env: Mapping[str, str]  #: the complete environment of the replica
    cwd: str | None  #: working directory (None: the supervisor's)
    log_path: Path  #: the replica's log file, appended to
    #: Modules to import once in a preloading fork server that then forks this replica; only for
    #: ``python SCRIPT ...`` and ``python -m MODULE ...``, and only when every replica of the group asks
    #: for the same (see ``preload``). Empty: spawn it the ordinary way.
    preload: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.key or "\n" in self.key:
            raise ValueError(f"invalid replica key {self.key!r}")
        if not self.argv or not self.argv[0]:
            raise ValueError(f"replica {self.key}: empty argv")


@dataclass(frozen=True)
class ExitEvent:
    """A replica ended."""

    key: str
    pid: int  #: 0 when the replica could not be started
    returncode: int  #: negative: killed by signal -N; 127/126: program not found / not executable
    time: float  #: wall clock (time.time()) when the exit was seen


@dataclass(eq=False)
class _Stream:
    name: str  # "stdout" or "stderr"
    fd: int
    lines: LineAssembler = field(default_factory=LineAssembler)


@dataclass(eq=False)
class _Replica:
    spec: LaunchSpec
    serial: int
    log: LogWriter
    popen: subprocess.Popen[bytes] | None = None  #: None when forked by the preload server
    pid: int = 0
    start_time: int = 0
    pidfd: int = -1
    streams: list[_Stream] = field(default_factory=list)
    returncode: int | None = None

    @property
    def live(self) -> bool:
        return self.pidfd >= 0


class ProcessGroup:
    """The replicas of one job. No process is left behind, by path:

    - *a replica exits* (any code): its whole process group is SIGKILLed before it is reaped (the unreaped
      leader keeps the group id ours), as Kubernetes kills a container's processes when its main process
      ends; descendants that left the group (torchrun's workers, in sessions of their own) are found by
      their tag and killed too;
    - *terminate()* (cancel, Ctrl-C): SIGTERM to every replica's group, the grace period with output still
      pumped, SIGKILL, then a tag sweep until every tagged process is gone;
    - *the supervisor dies*, even by SIGKILL: the group's watchdog kills every tagged process, and each
      replica leader dies with it anyway (PR_SET_PDEATHSIG; `spawning`);
    - *another shell* (`kubetrain cancel` after the supervisor died): the (pid, start time) pairs `start`
      returns and `token` reach them (`job_processes.kill_recorded`, `_watchdog.kill_tagged`).

    What escapes, all outside what a process group can see: a descendant that clears its environment
    (``env -i``) or runs set-uid survives a crash of the supervisor; a child the supervisor *forks* (not
    spawns) keeps the watchdog pipe open until it exits; the supervisor must not reap children itself
    (``os.wait()``, SIGCHLD set to SIG_IGN). Replicas forked by a preloading server keep every path above:
    each leads its own session, carries its own tag, and dies with the server, which dies with the
    supervisor. Measured on 2 busy cores for 8 replicas: `start` returns in 30-60 ms, an exit is seen by
    `wait_exit` within 20 ms, and `terminate` has the rest stopped and their output written 10-30 ms later.

    Typical supervisor loop::

        with ProcessGroup(specs, sink=OutputSink()) as group:
            group.start()
            events = group.wait_exit(timeout=None)    # returns on the first exit, or wake()
            rest = group.terminate(grace=5.0)
            group.start()                               # gang restart, same (or new) specs

    Usable as a context manager; leaving it calls :meth:`close`. Not thread-safe, except :meth:`wake` and
    :meth:`hurry`.
    """

    def __init__(
        self,
        specs: Sequence[LaunchSpec],
        sink: LogSink | None = None,
        *,
        job: str | None = None,
        on_log_notice: Callable[[LogNotice], None] | None = None,
        log_rotation: tuple[int, int] | None = None,
    ) -> None:
        """``sink``: where the live output goes, fed by a thread (``live_output``); ``job``: the job id its
        notes name (``kubetrain logs ID``). ``log_rotation``: (max size, max files) of each replica's
        log (default: ``KUBETRAIN_LOG_MAX_SIZE``/``_FILES``, else the kubelet's 10Mi and 5)."""
        self._specs = self._check_specs(specs)
        self._sink = LiveOutput(sink, job=job) if sink is not None else None
        self._logs = ReplicaLogs(job, on_log_notice, log_rotation if log_rotation is not None else rotation_from_env())
        #: Names this group's processes in their environment (``KUBETRAIN_LOCAL_TAG``).
        self.token = secrets.token_hex(8)
        self._serial = 0
        self._replicas: dict[str, _Replica] = {}
        self._draining: set[_Replica] = set()  # exited, pipes still open
        self._pending: list[ExitEvent] = []
        self._woken = False
        self._hurry = False
        self._closed = False
        self._sel = selectors.DefaultSelector()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._sel.register(self._wake_fd, selectors.EVENT_READ, None)
        self._watchdog = Watchdog(self.token)
        self._forks = ForkServerSlot(self.token)
        #: The modules the replicas of the last start were forked with; () when spawned the ordinary way.
        self.preloaded: tuple[str, ...] = ()

    @property
    def preload_note(self) -> str | None:
        """Why the last start did not use a preload server although its replicas asked for one."""
        return self._forks.note

    @staticmethod
    def _check_specs(specs: Iterable[LaunchSpec]) -> list[LaunchSpec]:
        specs = list(specs)
        keys = [s.key for s in specs]
        dup = {k for k in keys if keys.count(k) > 1}
        if dup:
            raise ValueError(f"duplicate replica keys: {sorted(dup)}")
        return specs

    # ------------------------------------------------------------------ public

    def start(self, specs: Sequence[LaunchSpec] | None = None) -> dict[str, tuple[int, int]]:
        """Spawn every replica (of ``specs`` if given, replacing the group's; else the same again).

        Returns key -> (pid, start time) for the replicas that started. A
        replica whose program cannot be found or executed is not started: it
        gets a log line saying why and an :class:`ExitEvent` with code 127
        (not found) or 126 (cannot execute) from the next :meth:`wait_exit`.
        Raises RuntimeError if replicas of the previous start still run.
        """
        if self._closed:
            raise RuntimeError("process group is closed")
        if self.running():
            raise RuntimeError(f"replicas still running: {sorted(self.running())}")
        if specs is not None:
            self._specs = self._check_specs(specs)
        self._finish_streams(0.0)
        self._logs.mark_gaps()
        self._watchdog.ensure()
        prefix = pdeathsig_prefix()
        if self._sink is not None:
            self._sink.add_keys([s.key for s in self._specs])
        # Every log file opens before anything is spawned: an unwritable log
        # directory fails the start with nothing to clean up.
        logs: list[LogWriter] = []
        try:
            for spec in self._specs:
                logs.append(self._logs.writer(spec.key, spec.log_path))
        except OSError:
            for log in logs:
                log.close()
            raise
        server = self._forks.for_start(self._specs, prefix, self._wake_fd)
        self._replicas = {}
        started: dict[str, tuple[int, int]] = {}
        for spec, log in zip(self._specs, logs, strict=True):
            r = self._spawn(spec, log, prefix, server)
            if r.live:
                started[spec.key] = (r.pid, r.start_time)
        self.preloaded = server.modules if server is not None and self._forks.server is server else ()
        self._flush()
        return started

    def add(self, specs: Sequence[LaunchSpec]) -> dict[str, tuple[int, int]]:
        """Spawn more replicas beside the running ones (an elastic job's replacement, or a scale up); a spec
        whose key the group knows replaces that replica's spec, which must not be running. Spawned the
        ordinary way, never by the preload server (whose set-up was made for the group's first start).

        Returns key -> (pid, start time) of those that started, as :meth:`start`.
        """
        if self._closed:
            raise RuntimeError("process group is closed")
        busy = sorted(s.key for s in specs if s.key in self.running())
        if busy:
            raise RuntimeError(f"replicas still running: {busy}")
        keys = {s.key for s in specs}
        self._specs = self._check_specs([s for s in self._specs if s.key not in keys] + list(specs))
        self._watchdog.ensure()
        prefix = pdeathsig_prefix()
        if self._sink is not None:
            self._sink.add_keys([s.key for s in specs])
        logs = [self._logs.writer(spec.key, spec.log_path) for spec in specs]
        started: dict[str, tuple[int, int]] = {}
        for spec, log in zip(specs, logs, strict=True):
            old = self._replicas.get(spec.key)
            if old is not None:
                self._logs.close(old.spec.key, old.log)
            r = self._spawn(spec, log, prefix, None)
            if r.live:
                started[spec.key] = (r.pid, r.start_time)
        self._flush()
        return started

    def stop(self, keys: Iterable[str], grace: float = 5.0) -> list[ExitEvent]:
        """Stop some replicas and leave the rest running (an elastic job scaled down): SIGTERM, up to
        ``grace`` seconds with output pumped, then SIGKILL. Returns their exits; the exits of other replicas
        seen meanwhile stay for the next :meth:`wait_exit`. Their specs leave the group."""
        wanted = set(keys)
        self._stop([r for k, r in self._replicas.items() if k in wanted and r.live], grace, hurried=False)
        self._specs = [s for s in self._specs if s.key not in wanted]
        mine = [e for e in self._pending if e.key in wanted]
        self._pending = [e for e in self._pending if e.key not in wanted]
        return mine

    def wait_exit(self, timeout: float | None = None) -> list[ExitEvent]:
        """Pump output until at least one replica exits; return those exits.

        Returns [] when ``timeout`` seconds pass, when :meth:`wake` was called
        (now or since the last return), or at once when no replica is running.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        polled = False
        while True:
            if self._pending:
                return self._take_pending()
            if self._woken:
                self._woken = False
                return []
            if not self.running():
                return []
            left = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 and polled:
                    return []
                left = min(max(0.0, left), _MAX_SELECT)
            self._round(left)
            polled = True

    def wake(self) -> None:
        """Make a blocked (or the next) :meth:`wait_exit` return. Safe from signal handlers and threads."""
        fd = self._wake_fd
        if fd >= 0:
            # OSError: the counter is saturated (already woken) or the group was closed meanwhile.
            with contextlib.suppress(OSError):
                os.eventfd_write(fd, 1)

    def hurry(self) -> None:
        """Make a running (or the next) :meth:`terminate` skip the rest of its grace and SIGKILL at once.

        For a second Ctrl-C. Safe from signal handlers and threads.
        """
        self._hurry = True
        self.wake()

    def running(self) -> set[str]:
        """Keys of the replicas that have not exited (or not been seen to exit)."""
        return {k for k, r in self._replicas.items() if r.live}

    def pids(self) -> dict[str, tuple[int, int]]:
        """key -> (pid, start time) of the running replicas."""
        return {k: (r.pid, r.start_time) for k, r in self._replicas.items() if r.live}

    def note(self, key: str, text: str) -> None:
        """Add a supervisor message (``kubetrain: ...``) to a replica's log and the live output."""
        r = self._replicas.get(key)
        path = r.spec.log_path if r else next((s.log_path for s in self._specs if s.key == key), None)
        if path is None:
            raise KeyError(key)
        data = f"kubetrain: {text}"
        if r is not None and r.log.is_open:
            for line in data.splitlines():
                r.log.add(time.time_ns(), "stderr", line.encode("utf-8", "replace"))
            r.log.flush()
        else:
            append_note(path, data)
        if self._sink is not None:
            for line in data.splitlines():
                self._sink.line(key, "stderr", line)
            self._sink.flush()

    def terminate(self, grace: float = 5.0) -> list[ExitEvent]:
        """Stop every replica: SIGTERM to each process group, up to ``grace`` seconds, then SIGKILL.

        Output is pumped throughout. Returns the exits not yet returned by
        :meth:`wait_exit` (those seen now and any still pending). On return no
        process of the group remains (save one stuck in uninterruptible
        sleep for more than 5 s) and all output has been written.
        """
        self._stop([r for r in self._replicas.values() if r.live], grace, hurried=True)
        # Whatever escaped both the groups and the per-replica sweeps at exit
        # (a child forked while its parent was being killed) goes now; the
        # preload server, tagged too, stays for the next start.
        kill_tagged(self.token, wait=_KILL_WAIT, spare=self._forks.pids())
        self._finish_streams(_DRAIN_WAIT)
        return self._take_pending()

    def _stop(self, targets: list[_Replica], grace: float, *, hurried: bool) -> None:
        """SIGTERM to each of `targets`' process groups, up to `grace` seconds with output pumped (cut short by
        :meth:`hurry` when `hurried`), then SIGKILL to those left and to their tagged descendants."""
        for r in targets:
            self._killpg(r, signal.SIGTERM)
        deadline = time.monotonic() + max(0.0, grace)
        while not (hurried and self._hurry) and any(r.live for r in targets) and (
            left := deadline - time.monotonic()
        ) > 0:
            self._round(left)
        if hurried:
            self._hurry = False
        stubborn = [r for r in targets if r.live]
        if stubborn:
            for r in stubborn:
                self._killpg(r, signal.SIGKILL)
            signal_tagged(self.token, signal.SIGKILL, [r.serial for r in stubborn])
            deadline = time.monotonic() + _KILL_WAIT
            while any(r.live for r in stubborn) and (left := deadline - time.monotonic()) > 0:
                self._round(left)

    def close(self) -> None:
        """SIGKILL whatever still runs, write out all output, stop the watchdog. Idempotent."""
        if self._closed:
            return
        try:
            if self.running():
                self.terminate(grace=0.0)
            self._finish_streams(0.0)
        finally:
            self._closed = True
            for r in self._replicas.values():
                if r.pidfd >= 0:  # only a replica stuck past the SIGKILL wait
                    os.close(r.pidfd)
                    r.pidfd = -1
                self._logs.close(r.spec.key, r.log)
            self._logs.mark_gaps()
            if self._sink is not None:
                self._sink.close()
            self._sel.close()
            fd, self._wake_fd = self._wake_fd, -1
            os.close(fd)
            self._forks.stop()
            self._watchdog.stop()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ spawning

    def _spawn(self, spec: LaunchSpec, log: LogWriter, prefix: list[str], server: PreloadServer | None) -> _Replica:
        self._serial += 1
        r = _Replica(spec, self._serial, log)
        self._replicas[spec.key] = r
        try:
            program = find_program(spec.argv[0], spec.env, spec.cwd)
        except FileNotFoundError as e:
            self._spawn_failed(r, EXIT_NOT_FOUND, f"program not found: {spec.argv[0]} ({e.strerror})")
            return r
        except PermissionError:
            self._spawn_failed(r, EXIT_CANNOT_EXECUTE, f"cannot execute {spec.argv[0]}: not executable")
            return r
        env = dict(spec.env)
        env[TAG_VAR] = add_tag(spec.env.get(TAG_VAR), make_tag(self.token, r.serial))
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        target = fork_target(spec.argv, spec.cwd) if server is not None else None
        if server is not None and target is not None:
            try:
                forked = server.spawn(target, env, spec.cwd, out_w, err_w)
            except PreloadError as e:
                self._forks.failed(server.key, e)  # this one and the rest: the ordinary way
                server = None
            else:
                os.close(out_w)
                os.close(err_w)
                r.pid, r.pidfd = forked.pid, forked.pidfd
                return self._watch(r, out_r, err_r)
        try:
            r.popen = subprocess.Popen(
                [*prefix, program, *spec.argv[1:]] if prefix else list(spec.argv),
                executable=None if prefix else program,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
            )
        except OSError as e:
            for fd in (out_r, err_r):
                os.close(fd)
            where = f" in {spec.cwd}" if spec.cwd and e.filename == spec.cwd else ""
            self._spawn_failed(r, EXIT_CANNOT_EXECUTE, f"cannot start {spec.argv[0]}{where}: {e.strerror}")
            return r
        finally:
            os.close(out_w)
            os.close(err_w)
        r.pid = r.popen.pid
        try:
            # The child is ours and unreaped, so the pid cannot have been reused yet.
            r.pidfd = os.pidfd_open(r.pid)
        except OSError:  # out of file descriptors: do not leave an unwatched replica
            self._killpg(r, signal.SIGKILL)
            r.popen.wait()
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        return self._watch(r, out_r, err_r)

    def _watch(self, r: _Replica, out_r: int, err_r: int) -> _Replica:
        r.start_time = proc_start_time(r.pid) or 0
        self._sel.register(r.pidfd, selectors.EVENT_READ, r)
        for name, fd in (("stdout", out_r), ("stderr", err_r)):
            os.set_blocking(fd, False)
            # Over the per-user pipe budget the default size works too.
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            s = _Stream(name, fd)
            r.streams.append(s)
            self._sel.register(fd, selectors.EVENT_READ, (r, s))
        return r

    def _spawn_failed(self, r: _Replica, code: int, message: str) -> None:
        r.returncode = code
        self._emit(r, "stderr", [(f"kubetrain: {message}".encode(), False)], time.time_ns())
        self._logs.close(r.spec.key, r.log)
        self._pending.append(ExitEvent(r.spec.key, 0, code, time.time()))

    # ------------------------------------------------------------------ the loop

    def _round(self, timeout: float | None) -> None:
        """One select round: read ready pipes, handle exits, write out what was read."""
        exited: list[_Replica] = []
        for key, _ in self._sel.select(timeout):
            data = key.data
            if data is None:
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(self._wake_fd)
                self._woken = True
            elif isinstance(data, _Replica):
                exited.append(data)
            else:
                self._read(*data)
        if exited:
            self._on_exit(exited)
        self._flush()

    def _on_exit(self, exited: list[_Replica]) -> None:
        now = time.time()
        for r in exited:
            # Before reaping: the zombie leader keeps the group id from being reused.
            self._killpg(r, signal.SIGKILL)
        # Descendants that left the group; no wait, the exit is reported first.
        signal_tagged(self.token, signal.SIGKILL, [r.serial for r in exited])
        for r in exited:
            r.returncode = self._reap(r)
            self._sel.unregister(r.pidfd)
            os.close(r.pidfd)
            r.pidfd = -1
            # The last lines before the exit belong in the log before the event.
            for s in list(r.streams):
                for _ in range(16):
                    if not self._read(r, s):
                        break
            if r.streams:
                self._draining.add(r)
            else:
                self._logs.close(r.spec.key, r.log)
            self._pending.append(ExitEvent(r.spec.key, r.pid, r.returncode, now))

    def _reap(self, r: _Replica) -> int:
        if r.popen is not None:
            return r.popen.wait()
        server = self._forks.server
        if server is not None:
            try:
                return server.reap(r.pid)
            except PreloadError as e:
                self._forks.failed(server.key, e)
        # The server died, and its replicas with it (PR_SET_PDEATHSIG): their statuses are lost with it.
        with contextlib.suppress(KeyError):
            why = self.preload_note or "the preload server is gone"
            self.note(r.spec.key, f"{why}; this replica died with it and its exit status is lost")
        return -signal.SIGKILL

    def _read(self, r: _Replica, s: _Stream) -> bool:
        """Read once from a ready pipe. False when nothing more is there (would block, or end of file)."""
        try:
            data = os.read(s.fd, _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._close_stream(r, s)
            return False
        self._emit(r, s.name, s.lines.feed(data), time.time_ns())
        return True

    def _close_stream(self, r: _Replica, s: _Stream) -> None:
        self._emit(r, s.name, s.lines.finish(), time.time_ns())
        self._sel.unregister(s.fd)
        os.close(s.fd)
        r.streams.remove(s)
        if not r.streams and not r.live:
            self._logs.close(r.spec.key, r.log)
            self._draining.discard(r)

    def _emit(self, r: _Replica, stream: str, lines: list[tuple[bytes, bool]], time_ns: int) -> None:
        if not lines:
            return
        for line, partial in lines:
            r.log.add(time_ns, stream, line, partial)
        if self._sink is not None:
            for line, _ in lines:
                self._sink.line(r.spec.key, stream, line.decode("utf-8", "replace"))

    def _flush(self) -> None:
        for r in self._replicas.values():
            r.log.flush()
        for r in self._draining:
            r.log.flush()
        if self._sink is not None:
            self._sink.flush()

    def _finish_streams(self, timeout: float) -> None:
        """Read the pipes of exited replicas to end of file (up to ``timeout`` s), then close them."""
        deadline = time.monotonic() + timeout
        while self._draining and (left := deadline - time.monotonic()) > 0:
            self._round(left)
        for r in list(self._draining):
            for s in list(r.streams):
                for _ in range(64):  # bounded: an untagged writer may never stop
                    if not self._read(r, s):
                        break
                if s in r.streams:
                    self._close_stream(r, s)
        self._flush()

    def _take_pending(self) -> list[ExitEvent]:
        events, self._pending = self._pending, []
        return events

    def _killpg(self, r: _Replica, sig: int) -> None:
        # Only called while the leader is unreaped, so the group id is still ours. A forked replica is
        # the preload server's to reap: once the server is gone, init may have reaped it and its pid be
        # another's, so only its pidfd (certain to name it) is used.
        if r.popen is None and (self._forks.server is None or not self._forks.server.alive()):
            if r.pidfd >= 0:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(r.pidfd, sig)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(r.pid, sig)
