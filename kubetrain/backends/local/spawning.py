"""Spawning a replica so that it can always be found, and never outlives its supervisor.

A local job's replicas must not be left behind, whatever happens to the supervisor that started them: a
replica is exec'd as the shell would find its program in its own PATH (`find_program`), dies with the
supervisor (`pdeathsig_prefix`), and a watchdog process in a session of its own, which outlives a
supervisor killed by SIGKILL, then kills every process the group tagged (`Watchdog`, `_watchdog`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping

from . import _watchdog
from ._watchdog import TAG_VAR

#: Exit codes for replicas that could not be started, as a shell reports them.
EXIT_NOT_FOUND = 127
EXIT_CANNOT_EXECUTE = 126
_KILL_WAIT = 5.0


def find_program(argv0: str, env: Mapping[str, str], cwd: str | None = None) -> str:
    """The path ``argv0`` runs as in a child with environment ``env`` in ``cwd``, as execvp would find it.

    Raises FileNotFoundError (nothing found) or PermissionError (found, not
    executable). A name without ``/`` is looked up in the child's PATH (or the
    system default path when it has none), not in ours.
    """
    base = cwd or os.getcwd()
    if "/" in argv0:
        path = os.path.join(base, argv0)
        if not os.path.isfile(path):
            raise FileNotFoundError(2, f"no such file: {path}", argv0)
        if not os.access(path, os.X_OK):
            raise PermissionError(13, "program is not executable", argv0)
        return path
    denied = None
    for d in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(base, d or ".", argv0)
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return path
            denied = denied or path
    if denied:
        raise PermissionError(13, "program is not executable", denied)
    raise FileNotFoundError(2, f"searched PATH={env.get('PATH', os.defpath)}", argv0)


_setpriv_lock = threading.Lock()
_setpriv: list[str] | None = None


def pdeathsig_prefix() -> list[str]:
    """The argv prefix that makes a replica die with the supervisor; [] if setpriv is unusable.

    PR_SET_PDEATHSIG set by util-linux's ``setpriv --pdeathsig KILL`` as the replica is exec'd, not by a
    ``preexec_fn``: that one makes ``subprocess`` fork instead of vfork, which copies the page tables of a
    parent holding torch (270 ms against 45 ms for 8 spawns; docs/design-decisions.md). Probed once per
    process: util-linux before 2.33 has no ``--pdeathsig``, and without setpriv the watchdog alone covers
    a supervisor's crash. One visible effect: a replica's ``argv[0]`` is its program's resolved path.
    PR_SET_PDEATHSIG fires when the *thread* that spawned the child exits: spawn from one that outlives
    the replicas (the main thread)."""
    global _setpriv
    with _setpriv_lock:
        if _setpriv is None:
            _setpriv = []
            found = shutil.which("setpriv", path=os.pathsep.join(["/usr/bin", "/bin", os.defpath]))
            if found:
                try:
                    # util-linux before 2.33 has no --pdeathsig.
                    probe = subprocess.run(
                        [found, "--pdeathsig", "KILL", "--", found, "--version"],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        timeout=10,
                        check=False,
                    )
                    if probe.returncode == 0:
                        _setpriv = [found, "--pdeathsig", "KILL", "--"]
                except (OSError, subprocess.SubprocessError):
                    pass
        return _setpriv


class Watchdog:
    """The watchdog process of one process group (``python -I -S _watchdog.py TOKEN``): it blocks reading a
    pipe whose only writer is this process, and at end of file, however this process ended, SIGKILLs
    every process tagged with the group's token."""

    def __init__(self, token: str) -> None:
        self.token = token
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe = -1

    def ensure(self) -> None:
        """Started, unless it runs already."""
        if self._process is not None and self._process.poll() is None:
            return
        self.stop()
        r, w = os.pipe()
        try:
            self._process = subprocess.Popen(
                # -I -S: no site, no user paths, no PYTHON* variables: nothing
                # that can fail or slow the start of the one process that must run.
                [sys.executable, "-I", "-S", _watchdog.__file__, self.token],
                stdin=r,
                stdout=subprocess.DEVNULL,
                # Not our stderr: a caller reading it through a pipe would wait
                # for the watchdog too.
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={k: v for k, v in os.environ.items() if k != TAG_VAR},
                start_new_session=True,
            )
        finally:
            os.close(r)
        self._pipe = w

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        """Its pipe closed: it sweeps (nothing is left by then) and exits; waited for."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        if self._process is not None:
            try:
                self._process.wait(_KILL_WAIT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
