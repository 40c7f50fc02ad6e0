"""Logs kept on this machine of a job whose pods live elsewhere (Kubernetes), for when the cluster has them no more.

A pod's log lives as long as the pod: once a Job's pods are deleted (`cancel`, a TTL, a garbage collector, a
drained node), the API server has nothing to answer `kubetrain logs` with. What kubetrain read of a job's logs
while following it (an attached `run`, `logs -f`, the follower of `run --detach --keep-logs`) is therefore
written here as it is read, in the same CRI-format files as the local backend's replica logs, so `kubetrain logs`
reads them back with the same filters (`reader.merge_logs`).

Layout, under the state directory (`contract.state_dir`, beside the local backend's job store)::

    kept-logs/<context>/<namespace>/<job name>/<job uid>/
        job.json                   who saved them, and when (first and last save)
        <role>-<index>.log         one per replica, rotated (`.1`), what rotation removed counted (`.rotated`)

Keyed by the kubeconfig context, then namespace and uid, so two clusters' (or two runs') jobs of one name never
mix; the name level finds a job whose workload is gone too (the newest uid kept under that name).

Bounded: a job's kept logs take at most `max_bytes` (`KUBETRAIN_KEPT_LOGS_MAX_SIZE`, default 256 MiB), each
replica its share, the newest lines kept (two files rotated, as the kubelet keeps the newest); what rotation
removed is counted and shown as the first line read back, never lost unsaid. A write that finds the disk full
is counted and marked in the file the same way (`writer.LogWriter`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ...contract import env_names
from ...contract.logs import GrepPattern, LogRecord, TimeBound
from ...contract.state_dir import state_dir
from .format import human_size, parse_record
from .reader import complete_end, lines_backwards, log_files, merge_logs
from .writer import LogWriter, parse_size

KEPT_DIR = "kept-logs"
#: A job's kept logs take at most this much disk (the local backend's replica logs: 5 files of 10 MiB each).
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: A replica's share is never cut below this (a job of tens of thousands of replicas still keeps each one's last
#: lines): the bound is then this much per replica that printed anything.
MIN_REPLICA_BYTES = 16 * 1024
#: Each replica's share is split over this many files: the one being written and the one before it.
FILES = 2
#: Files a keeper holds open at once (the replicas written to most recently); another replica's is reopened.
MAX_OPEN = 16
INFO = "job.json"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def max_bytes_from_env() -> int:
    """`KUBETRAIN_KEPT_LOGS_MAX_SIZE` (`256Mi`, `1G`, bytes; 0 keeps nothing), else the default. A value that
    does not parse is said once and the default used: a log setting must not stop a run."""
    text = os.environ.get(env_names.KEPT_LOGS_MAX_SIZE, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(text)
    except ValueError as exc:
        print(f"kubetrain: {env_names.KEPT_LOGS_MAX_SIZE}: {exc}; using {human_size(DEFAULT_MAX_BYTES)}",
              file=sys.stderr)
        return DEFAULT_MAX_BYTES


def _part(text: str) -> str:
    """One path component: a Kubernetes name as it is, anything else (a context named `arn:...:cluster/x`,
    `..`) quoted so it can neither climb out of the folder nor collide with another."""
    if _SAFE.match(text) and text not in (".", ".."):
        return text
    return "%" + quote(text, safe="")


def job_root(context: str, namespace: str, name: str, root: Path | None = None) -> Path:
    """The folder of every kept run of the job ``name`` (one sub-folder per uid)."""
    base = (root or state_dir()) / KEPT_DIR
    return base / _part(context) / _part(namespace) / _part(name)


@dataclass(frozen=True)
class KeptJob:
    """One job's kept logs on disk."""

    path: Path
    name: str
    uid: str
    info: dict[str, object]

    def paths(self, role: str | None = None, index: int | None = None) -> dict[str, Path]:
        """Replica key → its log, replica order (role, then index as a number)."""
        found: dict[str, Path] = {}
        for p in self.path.glob("*.log"):
            r, _, i = p.stem.rpartition("-")
            if not i.isdigit() or (role is not None and r != role) or (index is not None and int(i) != index):
                continue
            found[p.stem] = p
        return dict(sorted(found.items(), key=lambda kv: (kv[0].rpartition("-")[0], int(kv[0].rpartition("-")[2]))))

    @property
    def saved(self) -> tuple[float, float]:
        """(when the first save began, when a line was last written): epoch seconds."""
        value = self.info.get("saved_from")
        first = float(value) if isinstance(value, int | float) else 0.0
        last = max((p.stat().st_mtime for p in self.path.glob("*.log*")), default=first)
        return first or last, last

    def describe(self) -> str:
        """`saved by kubetrain run from 16:20:01 to 16:25:03 UTC (2026-11-27)`, for the note a reader shows."""
        first, last = self.saved
        day = time.strftime("%Y-%m-%d", time.gmtime(first))
        when = f"from {time.strftime('%H:%M:%S', time.gmtime(first))} to {time.strftime('%H:%M:%S', time.gmtime(last))}"
        if time.strftime("%Y-%m-%d", time.gmtime(last)) != day:
            when = f"from {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(first))} to " \
                   f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(last))}"
            day = ""
        by = self.info.get("saved_by") or "kubetrain"
        return f"saved by {by} {when} UTC{f' ({day})' if day else ''}"

    def read(self, *, role: str | None = None, index: int | None = None, tail: int | None = None,
             since: TimeBound | None = None, until: TimeBound | None = None,
             grep: str | GrepPattern | None = None) -> Iterator[LogRecord]:
        """The kept records, merged in time order, filtered as the API's logs are (``tail`` per replica)."""
        return merge_logs(self.paths(role, index), since=since, until=until, tail=tail, grep=grep)


def _info(path: Path) -> dict[str, object]:
    try:
        data = json.loads((path / INFO).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _saved_from(path: Path) -> float:
    value = _info(path).get("saved_from")
    return float(value) if isinstance(value, int | float) else 0.0


def find(context: str, namespace: str, name: str, uid: str | None = None, *,
         root: Path | None = None) -> KeptJob | None:
    """The logs kept of job ``name`` in ``namespace`` of ``context``: of the run ``uid`` if given (a job
    re-created under the same name is another run), else of the newest run kept. None: nothing kept."""
    base = job_root(context, namespace, name, root)
    runs: list[Path] = []
    if uid is not None:
        runs = [base / _part(uid)]
    else:
        with contextlib.suppress(OSError):
            runs = sorted(base.iterdir(), key=_saved_from, reverse=True)
    for run in runs:
        if run.is_dir() and any(run.glob("*.log")):
            info = _info(run)
            return KeptJob(run, name, str(info.get("uid") or run.name), info)
    return None


def _last_records(path: Path) -> tuple[int, int]:
    """(the time of the newest record kept in ``path``'s log, how many records carry exactly that time):
    what a new save skips, so that reading a job's log again (another `logs -f`, a re-attached run) appends
    only what is new. (0, 0) when nothing is kept."""
    for file in reversed(log_files(path)):
        try:
            f = open(file, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            continue
        with f:
            end = complete_end(f, os.fstat(f.fileno()).st_size)
            last, count = 0, 0
            for raw in lines_backwards(f, 0, end):
                rec = parse_record(raw)
                if rec is None or (rec.stream == "stderr" and rec.text.startswith("kubetrain: ")):
                    continue  # not a record, or a marker of ours (a gap on a full disk, stamped when written)
                if not last:
                    last = rec.time_ns
                if rec.time_ns != last:
                    break
                count += 1
            if last:
                return last, count
    return 0, 0


@dataclass
class _Replica:
    path: Path
    max_size: int  #: the replica's share, per file: fixed when it is first seen
    writer: LogWriter | None = None  #: open while among the keeper's `MAX_OPEN` most recently written
    #: the last record read (its time, and its place among the records of that time): a record is known by the
    #: two, whoever reads the log (another follower of the same job reads the same records in the same order)
    seen_ns: int = 0
    seen_count: int = 0
    pending: list[tuple[LogRecord, int]] = field(default_factory=list)
    #: the file as this keeper last left it ((inode, size), and its last record's time and place): unchanged
    #: since, nobody else appended, and it need not be read again to know what is kept
    left: tuple[tuple[int, int], int, int] | None = None

    def kept_until(self) -> tuple[int, int]:
        """(time, place) of the last record kept: remembered if the file is as this keeper left it, else read."""
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_ino, st.st_size)
        except FileNotFoundError:
            now = None
        if self.left is not None and now == self.left[0]:
            return self.left[1], self.left[2]
        return _last_records(self.path)

    def wrote(self, last: tuple[int, int]) -> None:
        st = os.stat(self.path)
        self.left = ((st.st_ino, st.st_size), *last)


class Keeper:
    """Saves the records a follower reads into the kept logs of one job (see the module docstring).

    ``uid_of`` names the job's run (its workload's uid), asked once, at the first record: a job just submitted
    may not be watched yet when the keeper is made. ``replicas`` is the job's replica count as last seen, each
    replica's share of ``max_bytes`` taken from it when its file is first opened.

    Several followers may keep the same job at once (an attached run and a `logs -f`, two `logs -f`), or one
    after the other: each `flush` takes the job's lock, looks at the last record kept, and appends only what
    comes after it, so every line is kept once. Thread-safe: a follower's records and a caller's `close` may
    come from two threads."""

    def __init__(self, context: str, namespace: str, name: str, uid_of: Callable[[], str | None], *, by: str,
                 max_bytes: int | None = None, root: Path | None = None) -> None:
        self.context, self.namespace, self.name = context, namespace, name
        self.by = by
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes
        self.replicas = 1
        self._uid_of = uid_of
        self._root = root
        self._dir: Path | None = None
        self._replicas: dict[str, _Replica] = {}
        self._open: OrderedDict[str, None] = OrderedDict()
        """The replicas whose writer is open, least recently written first (at most `MAX_OPEN`)."""
        self._lock = threading.Lock()
        self._failed: str | None = None

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0 and self._failed is None

    def _folder(self) -> Path | None:
        if self._dir is None:
            uid = self._uid_of()
            if not uid:
                return None
            path = job_root(self.context, self.namespace, self.name, self._root) / _part(uid)
            path.mkdir(parents=True, exist_ok=True, mode=0o700)  # replicas print credentials too
            with self._job_lock(path):
                info = _info(path)
                info.update({"context": self.context, "namespace": self.namespace, "name": self.name, "uid": uid,
                             "saved_by": self.by, "max_bytes": self.max_bytes})
                info.setdefault("saved_from", time.time())
                tmp = path / (INFO + ".tmp")
                tmp.write_text(json.dumps(info))
                os.replace(tmp, path / INFO)
            self._dir = path
        return self._dir

    @staticmethod
    @contextlib.contextmanager
    def _job_lock(folder: Path) -> Iterator[None]:
        """The job's lock, across processes: one keeper at a time looks at what is kept and appends to it."""
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def share(self) -> int:
        """One replica's part of ``max_bytes``, split over ``FILES`` files: the size a file rotates at."""
        return max(MIN_REPLICA_BYTES, self.max_bytes // max(1, self.replicas)) // FILES

    def _replica(self, key: str) -> _Replica | None:
        rep = self._replicas.get(key)
        if rep is None:
            folder = self._folder()
            if folder is None:
                return None
            rep = self._replicas[key] = _Replica(folder / f"{_part(key)}.log", self.share())
        return rep

    def _writer(self, key: str, rep: _Replica) -> LogWriter:
        """``rep``'s writer, opened if need be; the least recently written one closed past `MAX_OPEN`, so a job
        of thousands of replicas that fail (each one's last lines read) holds a few files open, not thousands."""
        if rep.writer is None:
            why = (f"kubetrain keeps at most {human_size(self.max_bytes)} of a job's logs on this machine, the newest "
                   f"lines of each replica; {env_names.KEPT_LOGS_MAX_SIZE} sets that")
            rep.writer = LogWriter(rep.path, max_size=rep.max_size, max_files=FILES, rotation_why=why)
        self._open[key] = None
        self._open.move_to_end(key)
        while len(self._open) > MAX_OPEN:
            oldest, _ = self._open.popitem(last=False)
            closing = self._replicas[oldest]
            if closing.writer is not None:
                closing.writer.close()
                closing.writer, closing.left = None, None
        return rep.writer

    def add(self, rec: LogRecord) -> None:
        """Keep ``rec`` (its ``key`` names the replica) at the next `flush`, unless it is kept by then."""
        if not self.enabled or not rec.key:
            return
        with self._lock:
            try:
                rep = self._replica(rec.key)
            except OSError as exc:
                self._give_up(exc)
                return
            if rep is None:
                return
            if rec.time_ns == rep.seen_ns:
                rep.seen_count += 1
            elif rec.time_ns > rep.seen_ns:
                rep.seen_ns, rep.seen_count = rec.time_ns, 1
            else:
                # Older than a line read before it: another pod's clock (a replaced pod on another node). Kept
                # as it comes (0: whatever is kept already), as its own pod wrote it: better twice than lost.
                rep.pending.append((rec, 0))
                return
            rep.pending.append((rec, rep.seen_count))

    def flush(self) -> None:
        """Write what was added and is not kept yet (a follower calls it whenever it has nothing more to read
        for now, and at its end)."""
        with self._lock:
            ready = [(key, rep) for key, rep in self._replicas.items() if rep.pending]
            if not ready or self._dir is None or not self.enabled:
                return
            try:
                with self._job_lock(self._dir):
                    for key, rep in ready:
                        kept = rep.kept_until()
                        last = kept
                        writer = self._writer(key, rep)
                        for rec, place in rep.pending:
                            if place == 0 or (rec.time_ns, place) > kept:
                                writer.add(rec.time_ns, rec.stream, rec.text.encode("utf-8", "replace"), rec.partial)
                                if place:
                                    last = max(last, (rec.time_ns, place))
                        rep.pending.clear()
                        writer.flush()
                        if writer.gaps:
                            rep.left = None  # a full disk: what is in the file is read again next time
                        else:
                            rep.wrote(last)
            except OSError as exc:
                self._give_up(exc)

    def close(self) -> None:
        self.flush()
        with self._lock:
            for rep in self._replicas.values():
                if rep.writer is not None:
                    with contextlib.suppress(OSError):
                        rep.writer.close()
            self._replicas.clear()
            self._open.clear()

    def _give_up(self, exc: OSError) -> None:
        """The state directory cannot be written: say so once, and go on following (the logs are still shown)."""
        self._failed = str(exc)
        where = self._dir or job_root(self.context, self.namespace, self.name, self._root)
        print(f"kubetrain: cannot keep the logs of job {self.name} in {where}: {exc.strerror or exc}; they are "
              "shown, not kept", file=sys.stderr)


__all__ = ["DEFAULT_MAX_BYTES", "KEPT_DIR", "Keeper", "KeptJob", "find", "job_root", "max_bytes_from_env"]
