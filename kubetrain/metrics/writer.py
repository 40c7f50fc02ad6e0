"""`log(step=..., **values)`: the call a training script makes, cheap and never raising into its loop.

Where a record goes is decided by the environment, looked at on every call (a few dict lookups) so a script
that sets `KUBETRAIN_METRICS_FILE` itself, or a test, is obeyed at once:

| environment | where |
|---|---|
| `KUBETRAIN_METRICS=off` | nowhere |
| `KUBETRAIN_METRICS_FILE=path` | a JSON line per call appended to `path` (the local backend sets one per process) |
| `KUBETRAIN_METRICS=stdout`, or `KUBETRAIN_JOB` and no file | a `MARKER` line on stdout (the container log) |
| none of them (no kubetrain around) | nowhere: the call costs a few lookups |

A file is appended with one `write(2)` per record through an `O_APPEND` descriptor: a reader sees whole lines
as soon as they are written, and processes that share the file (ranks started by mpirun or the deepspeed
launcher inside one replica) never tear each other's lines.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Mapping
from operator import index as as_int

from ..contract import env_names
from .wire import MARKER, format_record, lost_record

_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JAX_PROCESS_ID")
"""Where a process's global rank is, by framework: torch (and DeepSpeed), Open MPI, MPICH, JAX."""

_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"kubetrain.metrics: {message}", RuntimeWarning, stacklevel=3)


def _env_int(environ: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        text = environ.get(name)
        if text is not None:
            try:
                return int(text)
            except ValueError:
                continue
    return None


class _Identity:
    """The logging process's replica and rank, read from the env contract once per destination."""

    __slots__ = ("index", "rank", "role")

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.role = environ.get(env_names.ROLE)
        self.index = _env_int(environ, env_names.REPLICA_INDEX)
        self.rank = _env_int(environ, *_RANK_VARS)


class _FileSink:
    """Appends one record per `write(2)`. On a full disk a write fails, or writes only part of a record and
    leaves a fragment with no newline at the end of the file. The rest of that record is never written by a
    second call (another process appending to the same file could come between the two halves); instead the
    next record that can be written starts on a line of its own and is preceded by a record saying how many
    were lost and why (`lost_record`), so a reader finds every later record whole and the gap marked."""

    def __init__(self, path: str) -> None:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.who = _Identity(os.environ)
        self.torn = False
        """The file ends in a fragment of a record: the next write starts with a newline."""
        self.lost = 0
        self.why = ""

    def write(self, line: str) -> None:
        data = (line + "\n").encode()
        if self.lost:
            data = (lost_record(self.lost, self.why, time.time()) + "\n").encode() + data
        if self.torn:
            data = b"\n" + data
        try:
            written = os.write(self.fd, data)
        except OSError as exc:
            self.lost += 1
            self.why = exc.strerror or str(exc)
            raise
        if written < len(data):
            self.torn = True
            self.lost += 1
            self.why = "the disk took only part of the record (full?)"
            raise OSError(f"{self.why}: {written} of {len(data)} bytes written")
        self.torn = False
        self.lost = 0


class _StdoutSink:
    def __init__(self) -> None:
        self.who = _Identity(os.environ)

    def write(self, line: str) -> None:
        out = sys.stdout
        if out is not None:
            # One write then a flush: the marker line reaches the container log whole and at once.
            out.write(f"{MARKER}{line}\n")
            out.flush()


_Sink = _FileSink | _StdoutSink
_current: tuple[tuple[str | None, str | None, bool], _Sink | None] | None = None


def _destination() -> _Sink | None:
    """The sink the environment names now; opened once and reused while the environment says the same."""
    global _current
    environ = os.environ
    key = (environ.get(env_names.METRICS_FILE), environ.get(env_names.METRICS), env_names.JOB in environ)
    if _current is not None and _current[0] == key:
        return _current[1]
    if _current is not None and isinstance(_current[1], _FileSink):
        os.close(_current[1].fd)  # the environment names another file now
    path, mode, under_kubetrain = key
    sink: _Sink | None = None
    if mode == "off":
        sink = None
    elif path:
        try:
            sink = _FileSink(path)
        except OSError as exc:
            _warn_once(f"open:{path}", f"cannot write metrics to {path} ({exc.strerror or exc}); they are dropped")
    elif mode == "stdout" or under_kubetrain:
        sink = _StdoutSink()
    if mode not in (None, "", "off", "stdout"):
        _warn_once(f"mode:{mode}", f"{env_names.METRICS}={mode!r} is not stdout or off; ignored")
    _current = (key, sink)
    return sink


def log(step: int | None = None, **values: float) -> None:
    """Record metric values, e.g. `log(step=100, loss=0.31, samples_per_s=812.5)`.

    Safe anywhere: with no kubetrain around it does nothing (unless `KUBETRAIN_METRICS_FILE` names a file);
    it never raises into the training loop. A value that is not a number (a string, a boolean, a tensor of
    several elements, an integer too large for a float) or has an empty name is skipped with one warning per
    metric name, and the call's other values are kept; a `step` that is not an integer (a boolean included)
    skips the call with one warning. Numbers of any kind that convert with `float()` are taken (numpy scalars,
    one-element tensors). Names other than Python identifiers: `log(step=1, **{"train/loss": 0.3})`."""
    try:
        sink = _destination()
        if sink is None or not values:
            return
        if step is not None and type(step) is not int:
            try:
                # A boolean is an int to Python, but `step=True` is a mistake, not step 1 (as a boolean value).
                if isinstance(step, bool) or type(step).__name__ == "bool_":
                    raise TypeError
                step = as_int(step)
            except TypeError:
                _warn_once("step", f"step={step!r} is not an integer; this call's values are skipped")
                return
        checked: dict[str, float] = {}
        for name, value in values.items():
            if not name:
                # Readers drop a nameless value (nothing could show it), so it is refused here, where it is said.
                _warn_once("name:", "a metric with an empty name; skipped")
                continue
            kind = type(value)
            try:
                if kind is float:
                    checked[name] = value
                elif kind is str or kind is bytes or kind is bool:
                    _warn_once(f"value:{name}", f"{name}={value!r} is not a number; skipped")
                else:  # int: float() overflows beyond ±1.8e308; others: numpy scalars, one-element tensors
                    checked[name] = float(value)
            except OverflowError:
                _warn_once(f"value:{name}", f"{name} is an integer too large for a float; skipped")
            except (TypeError, ValueError, RuntimeError):
                _warn_once(f"value:{name}", f"{name} of type {kind.__name__} is not a number; skipped")
        if not checked:
            return
        who = sink.who
        sink.write(format_record(checked, step, time.time(), who.role, who.index, who.rank))
    except Exception as exc:  # a full disk, a closed stdout: the training goes on without its metrics
        _warn_once(f"error:{type(exc).__name__}", f"metrics not written: {type(exc).__name__}: {exc}")


def _reset() -> None:
    """Forget the open destination and the warnings given (for tests that change the environment)."""
    global _current
    if _current is not None and isinstance(_current[1], _FileSink):
        os.close(_current[1].fd)
    _current = None
    _warned.clear()


__all__ = ["log"]
