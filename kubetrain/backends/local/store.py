"""The local backend's job store: SQLite under the user's state directory, logs beside it.

Layout of the state directory (:func:`state_dir`)::

    jobs.db                         jobs, replicas, conditions, requests
    logs/<job_id>/<role>-<index>.log

Several processes use the store at once: the supervisor of each running job writes,
any number of CLI invocations read, cancel and delete. That is why:

- the database is in WAL mode, so readers never block the writer and see a
  consistent snapshot;
- every write is one short ``BEGIN IMMEDIATE`` transaction, which takes the write
  lock up front (a deferred transaction that upgrades to a writer can fail with
  SQLITE_BUSY without waiting), and a busy timeout makes a second writer wait
  instead of failing;
- ``synchronous=NORMAL``: in WAL mode a killed process never corrupts the database
  or loses a committed transaction; only a power cut can lose the last few, which a
  job record can afford in exchange for not fsyncing on every replica update.

Commanding a supervisor: the CLI records a request (cancel, suspend, resume) in the
``requests`` table and may then signal the supervisor to wake it up. The row is the
durable intent: a signal can arrive before the supervisor installed its handlers,
or find the supervisor dead, and it carries no reason or time. The supervisor marks
a request handled once it acted on it, so ``describe`` can tell "cancel requested"
from "cancelled".

Liveness: a pid alone does not identify a process for long; pids are reused. Every
pid stored here comes with the process's start time from ``/proc/<pid>/stat``, and
a process counts as ours only if both match (:func:`pid_alive`).
"""

from __future__ import annotations

import enum
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from kubetrain.backends.local.procfs import pid_alive, proc_start_time
from kubetrain.status import (
    Condition,
    ConditionStatus,
    ConditionType,
    FailureSummary,
    JobPhase,
    JobStatus,
    ReplicaPhase,
    ReplicaStatus,
)

from ...contract import env_names
from ...contract.errors import KubetrainError

#: Overrides the state directory (tests, several independent installations, shared scratch disks).
ENV_HOME = env_names.HOME
DB_NAME = "jobs.db"
LOGS_DIR = "logs"
#: How long a writer waits for another writer's transaction before giving up.
BUSY_TIMEOUT_MS = 5000
#: Space kept for the store's own writes on a disk that fills up: a job's final status must be
#: recorded even when its replicas (their checkpoints, their output) filled the disk. A file of this
#: size, created with each job, is removed as soon as a write finds less than RESERVE_LOW free.
RESERVE_NAME = "jobs.db.reserve"
RESERVE_BYTES = 256 * 1024
RESERVE_LOW = 128 * 1024

# kubectl's generateName alphabet: no vowels (no accidental words), no 0/1/3 (no o/l/e look-alikes).
_ID_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_ID_SUFFIX_LEN = 5
# A job id is a DNS-1123 label (63 chars), so the same id can name Kubernetes objects.
_ID_BASE_MAX = 63 - 1 - _ID_SUFFIX_LEN
_ROLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StoreError(KubetrainError):
    """The job store cannot do what was asked."""


class JobNotFoundError(StoreError, LookupError):
    pass


class AmbiguousJobIdError(StoreError, LookupError):
    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


class RequestKind(enum.StrEnum):
    CANCEL = "cancel"
    SUSPEND = "suspend"
    RESUME = "resume"
    SCALE = "scale"
    """An elastic job's launch record changed its replica count (`LocalBackend.scale`): start or stop the
    difference. The supervisor is woken with SIGUSR1, which, unlike SIGTERM, never means cancel."""


@dataclass(frozen=True)
class Request:
    id: int
    job_id: str
    kind: RequestKind
    created_at: float


@dataclass(frozen=True)
class ReplicaRecord:
    """What the backend needs to act on a replica's process; JobStatus deliberately hides it."""

    role: str
    index: int
    phase: ReplicaPhase
    pid: int | None
    pid_start_time: int | None
    log_path: Path | None


class _Unset(enum.Enum):
    UNSET = 0


_UNSET = _Unset.UNSET


# --- locations ----------------------------------------------------------------------------------


def state_dir() -> Path:
    """``$KUBETRAIN_HOME``, else ``$XDG_STATE_HOME/kubetrain``, else ``~/.local/state/kubetrain``."""
    home = os.environ.get(ENV_HOME)
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    # The XDG spec says a relative path is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "kubetrain"
    return Path.home() / ".local" / "state" / "kubetrain"


def _writable(path: Path) -> bool:
    """Writable by this user: the mode's owner write bit (which even root honours here), and access(2)."""
    return bool(path.stat().st_mode & 0o200) and os.access(path, os.W_OK)


def _is_full(exc: sqlite3.DatabaseError) -> bool:
    return "disk is full" in str(exc) or getattr(exc, "sqlite_errorcode", None) == 13  # SQLITE_FULL


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return "not a database" in text or "malformed" in text or "corrupt" in text


# --- process identity ---------------------------------------------------------------------------


# --- helpers --------------------------------------------------------------------------------------


def _id_base(name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    base = re.sub(r"-{2,}", "-", base).strip("-")
    return base[:_ID_BASE_MAX].rstrip("-") or "job"


def _new_job_id(name: str) -> str:
    # os.urandom rather than the secrets module: that one pulls in hashlib and random, a few
    # milliseconds on every CLI start. Bytes past the last multiple of the alphabet size are
    # skipped so each character stays uniformly likely.
    usable = 256 - 256 % len(_ID_ALPHABET)
    chars: list[str] = []
    while len(chars) < _ID_SUFFIX_LEN:
        chars += [_ID_ALPHABET[b % len(_ID_ALPHABET)] for b in os.urandom(8) if b < usable]
    return f"{_id_base(name)}-{''.join(chars[:_ID_SUFFIX_LEN])}"


def _check_role(role: str) -> None:
    # The role names a log file; it must not be able to point outside the job's log directory.
    if not _ROLE_RE.match(role):
        raise ValueError(f"role {role!r} must be letters, digits, '-', '_' or '.', starting with a letter/digit")


def _check_json(label: str, text: str) -> None:
    try:
        json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{label} is not valid JSON: {exc}") from None


# --- schema ---------------------------------------------------------------------------------------

# Each entry moves the schema from version N-1 to N; append, never edit, once released.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """
        CREATE TABLE jobs (
            id                    TEXT PRIMARY KEY,
            name                  TEXT NOT NULL,
            backend               TEXT NOT NULL,
            namespace             TEXT,
            phase                 TEXT NOT NULL,
            spec_json             TEXT NOT NULL,
            plan_json             TEXT,
            supervisor_pid        INTEGER,
            supervisor_start_time INTEGER,
            backoff_count         INTEGER NOT NULL DEFAULT 0,
            backoff_limit         INTEGER,
            reason                TEXT,
            message               TEXT,
            created_at            REAL NOT NULL,
            started_at            REAL,
            finished_at           REAL,
            first_failure_json    TEXT
        )
        """,
        "CREATE INDEX jobs_created ON jobs (created_at)",
        """
        CREATE TABLE replicas (
            job_id         TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            role           TEXT NOT NULL,
            idx            INTEGER NOT NULL,
            pos            INTEGER NOT NULL,
            phase          TEXT NOT NULL,
            pid            INTEGER,
            pid_start_time INTEGER,
            host           TEXT,
            exit_code      INTEGER,
            signal         INTEGER,
            restarts       INTEGER NOT NULL DEFAULT 0,
            started_at     REAL,
            finished_at    REAL,
            log_path       TEXT,
            reason         TEXT,
            message        TEXT,
            PRIMARY KEY (job_id, role, idx)
        )
        """,
        """
        CREATE TABLE conditions (
            job_id  TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            seq     INTEGER NOT NULL,
            type    TEXT NOT NULL,
            status  TEXT NOT NULL,
            reason  TEXT,
            message TEXT,
            time    REAL NOT NULL,
            PRIMARY KEY (job_id, seq)
        )
        """,
        """
        CREATE TABLE requests (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            kind       TEXT NOT NULL,
            created_at REAL NOT NULL,
            handled_at REAL
        )
        """,
        "CREATE INDEX requests_job ON requests (job_id, handled_at)",
    ),
    # runPolicy.ttlSecondsAfterFinished: a finished job is deleted this long after it finished.
    2: ("ALTER TABLE jobs ADD COLUMN ttl_seconds_after_finished INTEGER",),
}
SCHEMA_VERSION = max(_MIGRATIONS)

_JOB_COLUMNS = (
    "id, name, backend, namespace, phase, backoff_count, backoff_limit, reason, message, "
    "created_at, started_at, finished_at, first_failure_json"
)
_REPLICA_COLUMNS = (
    "job_id, role, idx, phase, exit_code, signal, restarts, pid, host, started_at, finished_at, reason, message"
)
_CONDITION_COLUMNS = "job_id, type, status, reason, message, time"

# Connections inherited through fork() are kept referenced, never closed: closing one in the
# child could act on locks and WAL files the parent still uses.
_INHERITED: list[sqlite3.Connection] = []


class JobStore:
    """The job records of the local backend. One SQLite connection per store object.

    ``path`` is the state directory (default :func:`state_dir`), or a ``*.db`` file whose
    directory then holds the logs. A store object may be shared by threads; after
    ``fork()`` the child transparently opens its own connection.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        p = Path(path) if path is not None else state_dir()
        if p.suffix == ".db":
            self.root = p.parent
            self.db_path = p
        else:
            self.root = p
            self.db_path = p / DB_NAME
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._connection()

    # --- connection and transactions --------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:
            _INHERITED.append(self._conn)
        self._pid = os.getpid()
        self._prepare_files()
        try:
            conn = self._open()
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise self._store_error(exc) from None
            self._move_aside(exc)
            try:
                conn = self._open()
            except sqlite3.DatabaseError as again:
                raise self._store_error(again) from None
        self._conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        created = not self.db_path.exists()
        conn = sqlite3.connect(
            self.db_path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # guarded by self._lock
        )
        try:
            if created:
                # SQLite creates the file (and later its -wal and -shm, with the same mode) per the umask.
                # Job specs hold env values, credentials among them: private to the user.
                os.chmod(self.db_path, 0o600)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare_files(self) -> None:
        """The state directory, created private; problems with it or the database file as `StoreError`s."""
        root = self.root
        hint = f"point ${ENV_HOME} at a directory kubetrain can write"
        for parent in (root, *root.parents):
            if parent.exists() and not parent.is_dir():
                raise StoreError(f"{parent}: exists and is not a directory — remove it, or {hint}")
            if parent.exists():
                break
        try:
            # Job specs and logs can hold credentials passed as env: keep the directory private.
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"{root}: cannot create the state directory: {exc.strerror} — {hint}") from None
        if not _writable(root):
            raise StoreError(f"{root}: the state directory is read-only — make it writable (chmod u+w), or {hint}")
        if self.db_path.is_dir():
            raise StoreError(f"{self.db_path}: is a directory, not a job store — remove or rename it")
        if self.db_path.exists():
            if not _writable(self.db_path):
                raise StoreError(
                    f"{self.db_path}: the job store is read-only — make it writable (chmod u+w {self.db_path}),"
                    f" or {hint}"
                )
            # A -shm or -wal left read-only (by a read-only database, SQLite gives them its mode) fails every
            # later open once the database is writable again: give them the database's mode.
            mode = self.db_path.stat().st_mode & 0o777
            for suffix in ("-wal", "-shm"):
                side = self.db_path.with_name(self.db_path.name + suffix)
                try:
                    if not _writable(side):
                        os.chmod(side, mode)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StoreError(f"{side}: is read-only and cannot be fixed ({exc.strerror}) — remove it") from None

    def _store_error(self, exc: sqlite3.DatabaseError) -> StoreError:
        cause = str(exc)
        if "readonly" in cause or "read-only" in cause:
            todo = f"make {self.db_path} and its directory writable, or point ${ENV_HOME} elsewhere"
        elif "unable to open" in cause:
            todo = f"check that {self.root} exists and is writable, or point ${ENV_HOME} elsewhere"
        elif "locked" in cause or "busy" in cause:
            todo = "another kubetrain holds it; try again"
        elif _is_full(exc):
            todo = f"no space left on the disk of {self.root}: free some (df {self.root}), then try again"
        else:
            todo = f"move {self.db_path} aside to start an empty store"
        return StoreError(f"{self.db_path}: {cause} — {todo}")

    def _move_aside(self, exc: sqlite3.DatabaseError) -> None:
        """A corrupted database is renamed `jobs.db.corrupt-<timestamp>` (with its -wal and -shm), and said."""
        import sys

        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        backup = self.db_path.with_name(f"{self.db_path.name}.corrupt-{stamp}")
        n = 1
        while backup.exists():
            n += 1
            backup = self.db_path.with_name(f"{self.db_path.name}.corrupt-{stamp}-{n}")
        try:
            os.rename(self.db_path, backup)
            for suffix in ("-wal", "-shm"):
                side = self.db_path.with_name(self.db_path.name + suffix)
                if side.exists():
                    os.rename(side, backup.with_name(backup.name + suffix))
        except OSError as err:
            raise StoreError(
                f"{self.db_path}: {exc}, and it cannot be moved aside ({err.strerror}) — move it aside yourself"
            ) from None
        print(
            f"kubetrain: {self.db_path}: {exc}; moved it to {backup} and started an empty job store"
            " (the jobs recorded there are no longer listed; their logs stay in"
            f" {self.root / LOGS_DIR})",
            file=sys.stderr,
            flush=True,
        )

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching the journal mode needs a moment of exclusive access; when several
        # processes open a fresh store at once, one of them can see "locked" briefly.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
                continue
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"cannot put {self.db_path} in WAL mode (got {mode!r}); is it on a network filesystem?"
                )
            return

    def _migrate(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process may have migrated meanwhile.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.db_path} has schema version {version}, newer than this kubetrain "
                    f"understands ({SCHEMA_VERSION}); upgrade kubetrain"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _tx(self, write: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            if write:
                self._keep_room()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                self._commit(conn)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.DatabaseError as exc:
                if conn.in_transaction:
                    with suppress(sqlite3.DatabaseError):
                        conn.execute("ROLLBACK")
                # A store damaged, made read-only or out of space after it was opened: a message, not a traceback.
                raise self._store_error(exc) from None

    def _commit(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            # A full disk fails the COMMIT with the transaction still open: with the reserve freed it fits.
            if not (_is_full(exc) and conn.in_transaction and self.release_reserve()):
                raise
            conn.execute("COMMIT")

    # --- room on a filling disk ---------------------------------------------------------------------

    @property
    def reserve_path(self) -> Path:
        return self.root / RESERVE_NAME

    def _keep_room(self) -> None:
        """Before a write: on a disk nearly full, give the reserve back so that this write fits."""
        try:
            st = os.statvfs(self.root)
        except OSError:
            return
        if st.f_blocks and st.f_bavail * st.f_frsize < RESERVE_LOW:
            self.release_reserve()

    def release_reserve(self) -> bool:
        """Remove the reserve file; True if there was one."""
        try:
            os.unlink(self.reserve_path)
        except OSError:
            return False
        return True

    def ensure_reserve(self) -> None:
        """Create the reserve file where there is none (and room for it); never fails."""
        path = self.reserve_path
        if path.exists():
            return
        try:
            st = os.statvfs(self.root)
            if st.f_blocks and st.f_bavail * st.f_frsize < RESERVE_BYTES + 2 * RESERVE_LOW:
                return  # taking it now would leave the disk nearly full: the next job tries again
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError:
            os.close(fd)
            fd = -1
            path.unlink(missing_ok=True)
        finally:
            if fd >= 0:
                os.close(fd)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                if self._pid == os.getpid():
                    self._conn.close()
                else:
                    _INHERITED.append(self._conn)
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- paths ----------------------------------------------------------------------------------

    def log_dir(self, job_id: str) -> Path:
        return self.root / LOGS_DIR / job_id

    def log_path(self, job_id: str, role: str, index: int) -> Path:
        _check_role(role)
        return self.log_dir(job_id) / f"{role}-{index}.log"

    # --- jobs -----------------------------------------------------------------------------------

    def create_job(
        self,
        name: str,
        backend: str,
        spec_json: str,
        plan_json: str | None,
        replicas: Sequence[tuple[str, int]],
        backoff_limit: int | None = None,
        phase: JobPhase = JobPhase.PENDING,
        namespace: str | None = None,
        ttl_seconds_after_finished: int | None = None,
    ) -> str:
        """Record a new job and its replicas (in plan order); returns its id, ``<name>-<5 chars>``.

        Also creates the job's log directory and a ``Created`` condition. ``ttl_seconds_after_finished``:
        the job is one of :meth:`expired_jobs` that long after it finished.
        """
        _check_json("spec_json", spec_json)
        if plan_json is not None:
            _check_json("plan_json", plan_json)
        seen: set[tuple[str, int]] = set()
        for role, index in replicas:
            _check_role(role)
            if (role, index) in seen:
                raise ValueError(f"replica {role}-{index} listed twice")
            seen.add((role, index))
        now = time.time()
        for _ in range(20):
            job_id = _new_job_id(name)
            try:
                with self._tx(write=True) as conn:
                    conn.execute(
                        "INSERT INTO jobs (id, name, backend, namespace, phase, spec_json, plan_json,"
                        " backoff_limit, created_at, started_at, ttl_seconds_after_finished)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            job_id,
                            name,
                            backend,
                            namespace,
                            str(phase),
                            spec_json,
                            plan_json,
                            backoff_limit,
                            now,
                            now if phase is JobPhase.RUNNING else None,
                            ttl_seconds_after_finished,
                        ),
                    )
                    conn.executemany(
                        "INSERT INTO replicas (job_id, role, idx, pos, phase, log_path) VALUES (?, ?, ?, ?, ?, ?)",
                        [
                            (
                                job_id,
                                role,
                                index,
                                pos,
                                str(ReplicaPhase.PENDING),
                                str(self.log_path(job_id, role, index)),
                            )
                            for pos, (role, index) in enumerate(replicas)
                        ],
                    )
                    self._insert_condition(
                        conn,
                        job_id,
                        Condition(ConditionType.CREATED, ConditionStatus.TRUE, "JobCreated", None, now),
                    )
            except sqlite3.IntegrityError:
                continue  # the random suffix collided with an existing job: draw again
            self.log_dir(job_id).mkdir(parents=True, exist_ok=True, mode=0o700)
            self.ensure_reserve()
            return job_id
        raise StoreError(f"could not find a free job id for {name!r}")

    def resolve_id(self, prefix: str) -> str:
        """The job id that is ``prefix`` or starts with it; errors name the candidates."""
        if not prefix:
            raise JobNotFoundError("no job id given")
        with self._tx(write=False) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (prefix,)).fetchone():
                return prefix
            # substr() rather than LIKE: a '_' or '%' the user typed must not act as a wildcard.
            rows = conn.execute(
                "SELECT id, phase FROM jobs WHERE substr(id, 1, ?) = ? ORDER BY created_at DESC, rowid DESC",
                (len(prefix), prefix),
            ).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        if not rows:
            raise JobNotFoundError(f"no job matches {prefix!r} (store: {self.db_path})")
        shown = ", ".join(f"{r[0]} ({r[1]})" for r in rows[:10])
        more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
        raise AmbiguousJobIdError(
            f"{prefix!r} matches {len(rows)} jobs: {shown}{more}; give more of the id",
            [str(r[0]) for r in rows],
        )

    def set_job_phase(
        self,
        job_id: str,
        phase: JobPhase,
        reason: str | None = None,
        message: str | None = None,
        condition: Condition | None = None,
        *,
        expect: Collection[JobPhase] | None = None,
        at: float | None = None,
    ) -> bool:
        """Move the job to ``phase`` with this reason and message (None clears them), in one transaction.

        Returns False, changing nothing, when the job is in a terminal phase already (the first
        ending wins: a cancel racing a success must not flip it back) or, with ``expect``, when
        the current phase is not one of those. Entering Running stamps ``started_at`` once;
        entering a terminal phase stamps ``finished_at``: ``at`` (epoch seconds; a supervisor found
        dead ended when it last gave a sign of life), else now.
        """
        now = time.time() if at is None else at
        with self._tx(write=True) as conn:
            row = conn.execute("SELECT phase FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            current = JobPhase(row[0])
            if expect is not None and current not in expect:
                return False
            if current.is_terminal and phase != current:
                return False
            conn.execute(
                "UPDATE jobs SET phase = ?, reason = ?, message = ?,"
                " started_at = CASE WHEN ? AND started_at IS NULL THEN ? ELSE started_at END,"
                " finished_at = CASE WHEN ? AND finished_at IS NULL THEN ? ELSE finished_at END"
                " WHERE id = ?",
                (
                    str(phase),
                    reason,
                    message,
                    phase is JobPhase.RUNNING,
                    now,
                    phase.is_terminal,
                    now,
                    job_id,
                ),
            )
            if condition is not None:
                self._insert_condition(conn, job_id, condition)
        return True

    def set_supervisor(self, job_id: str, pid: int | None) -> None:
        """Record the process supervising the job (None: no supervisor), with its start time."""
        start = None if pid is None else proc_start_time(pid)
        self._update_job(job_id, "supervisor_pid = ?, supervisor_start_time = ?", (pid, start))

    def supervisor_process(self, job_id: str) -> tuple[int, int | None] | None:
        """The recorded supervisor as (pid, start time), alive or not; None when none is recorded."""
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT supervisor_pid, supervisor_start_time FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
        if row is None:
            raise JobNotFoundError(f"no job {job_id!r}")
        pid, start = row
        return None if pid is None else (int(pid), None if start is None else int(start))

    def live_supervisor_pid(self, job_id: str) -> int | None:
        """The supervisor's pid if that very process is still running, else None. Safe to signal."""
        record = self.supervisor_process(job_id)
        if record is None or not pid_alive(*record):
            return None
        return record[0]

    def recorded_supervisor_pid(self, job_id: str) -> int | None:
        """The pid a supervisor recorded and has not cleared (it clears it when it ends), alive or not."""
        record = self.supervisor_process(job_id)
        return None if record is None else record[0]

    def supervisor_alive(self, job_id: str) -> bool:
        return self.live_supervisor_pid(job_id) is not None

    def record_restart(self, job_id: str) -> int:
        """Count one restart of the whole replica group (``backoffCount``); returns the new count."""
        with self._tx(write=True) as conn:
            cur = conn.execute("UPDATE jobs SET backoff_count = backoff_count + 1 WHERE id = ?", (job_id,))
            if cur.rowcount == 0:
                raise JobNotFoundError(f"no job {job_id!r}")
            return int(conn.execute("SELECT backoff_count FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])

    def add_condition(self, job_id: str, condition: Condition) -> None:
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            self._insert_condition(conn, job_id, condition)

    def set_first_failure(self, job_id: str, failure: FailureSummary | None) -> None:
        """Record (or replace, as the policy's action evolves) why the job failed."""
        text = None if failure is None else json.dumps(failure.to_dict())
        self._update_job(job_id, "first_failure_json = ?", (text,))

    def set_plan_json(self, job_id: str, plan_json: str | None) -> None:
        if plan_json is not None:
            _check_json("plan_json", plan_json)
        self._update_job(job_id, "plan_json = ?", (plan_json,))

    def set_spec_json(self, job_id: str, spec_json: str) -> None:
        """Replace the job's spec (an elastic job scaled: `resume` and `describe` then see its new size)."""
        _check_json("spec_json", spec_json)
        self._update_job(job_id, "spec_json = ?", (spec_json,))

    def get_spec_json(self, job_id: str) -> str:
        return str(self._job_column(job_id, "spec_json"))

    def get_plan_json(self, job_id: str) -> str | None:
        value = self._job_column(job_id, "plan_json")
        return None if value is None else str(value)

    def expired_jobs(self, now: float | None = None) -> list[str]:
        """Finished jobs whose ttlSecondsAfterFinished has passed (by ``now``, default the time), oldest first."""
        terminal = [str(p) for p in JobPhase if p.is_terminal]
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT id FROM jobs WHERE ttl_seconds_after_finished IS NOT NULL AND finished_at IS NOT NULL"
                f" AND finished_at + ttl_seconds_after_finished <= ? AND phase IN ({', '.join('?' for _ in terminal)})"
                " ORDER BY finished_at",
                (time.time() if now is None else now, *terminal),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def delete_job(self, job_id: str) -> None:
        """Forget the job and remove its log directory. Stopping its processes is the caller's job."""
        with self._tx(write=True) as conn:
            # Explicit deletes, not only ON DELETE CASCADE: a connection opened without
            # foreign_keys (an older kubetrain, the sqlite3 shell) must not leave orphans behind.
            for table in ("requests", "conditions", "replicas"):
                conn.execute(f"DELETE FROM {table} WHERE job_id = ?", (job_id,))
            if conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount == 0:
                raise JobNotFoundError(f"no job {job_id!r}")
        import shutil  # only delete needs it; keep it off the start-up path of every command

        shutil.rmtree(self.log_dir(job_id), ignore_errors=True)

    # --- replicas -------------------------------------------------------------------------------

    def update_replica(
        self,
        job_id: str,
        role: str,
        index: int,
        *,
        phase: ReplicaPhase | _Unset = _UNSET,
        pid: int | _Unset | None = _UNSET,
        pid_start_time: int | _Unset | None = _UNSET,
        host: str | _Unset | None = _UNSET,
        exit_code: int | _Unset | None = _UNSET,
        signal: int | _Unset | None = _UNSET,
        restarts: int | _Unset = _UNSET,
        started_at: float | _Unset | None = _UNSET,
        finished_at: float | _Unset | None = _UNSET,
        log_path: Path | str | _Unset | None = _UNSET,
        reason: str | _Unset | None = _UNSET,
        message: str | _Unset | None = _UNSET,
    ) -> None:
        """Set the given fields of one replica; fields not passed keep their value.

        Conveniences that keep the record coherent unless the field is passed explicitly:
        a ``pid`` brings its start time from /proc; entering Running from another phase
        (a start or restart) stamps ``started_at`` and clears ``finished_at``, ``exit_code``
        and ``signal`` of the previous attempt; entering Succeeded or Failed stamps ``finished_at``.
        """
        now = time.time()
        fields: dict[str, Any] = {
            name: value
            for name, value in (
                ("phase", phase),
                ("pid", pid),
                ("pid_start_time", pid_start_time),
                ("host", host),
                ("exit_code", exit_code),
                ("signal", signal),
                ("restarts", restarts),
                ("started_at", started_at),
                ("finished_at", finished_at),
                ("log_path", log_path),
                ("reason", reason),
                ("message", message),
            )
            if value is not _UNSET
        }
        if not isinstance(pid, _Unset) and isinstance(pid_start_time, _Unset):
            fields["pid_start_time"] = None if pid is None else proc_start_time(pid)
        if "log_path" in fields and fields["log_path"] is not None:
            fields["log_path"] = str(fields["log_path"])
        with self._tx(write=True) as conn:
            row = conn.execute(
                "SELECT phase FROM replicas WHERE job_id = ? AND role = ? AND idx = ?", (job_id, role, index)
            ).fetchone()
            if row is None:
                raise JobNotFoundError(f"no replica {role}-{index} in job {job_id!r}")
            current = ReplicaPhase(row[0])
            if isinstance(phase, ReplicaPhase) and phase != current:
                if phase is ReplicaPhase.RUNNING:
                    fields.setdefault("started_at", now)
                    for stale in ("finished_at", "exit_code", "signal"):
                        fields.setdefault(stale, None)
                elif phase.is_terminal:
                    fields.setdefault("finished_at", now)
            if "phase" in fields:
                fields["phase"] = str(fields["phase"])
            if not fields:
                return
            assignments = ", ".join(f"{name} = ?" for name in fields)
            conn.execute(
                f"UPDATE replicas SET {assignments} WHERE job_id = ? AND role = ? AND idx = ?",
                (*fields.values(), job_id, role, index),
            )

    def record_replica_restart(self, job_id: str, role: str, index: int) -> int:
        """Count one restart of a single replica; returns its new restart count."""
        key = (job_id, role, index)
        with self._tx(write=True) as conn:
            cur = conn.execute(
                "UPDATE replicas SET restarts = restarts + 1 WHERE job_id = ? AND role = ? AND idx = ?", key
            )
            if cur.rowcount == 0:
                raise JobNotFoundError(f"no replica {role}-{index} in job {job_id!r}")
            return int(
                conn.execute("SELECT restarts FROM replicas WHERE job_id = ? AND role = ? AND idx = ?", key).fetchone()[
                    0
                ]
            )

    def add_replicas(self, job_id: str, replicas: Sequence[tuple[str, int]]) -> None:
        """Record more replicas of a running job (an elastic job scaled up), Pending, after the others;
        those it has already are left as they are."""
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            pos = int(conn.execute("SELECT COALESCE(MAX(pos), -1) FROM replicas WHERE job_id = ?",
                                   (job_id,)).fetchone()[0])
            for role, index in replicas:
                _check_role(role)
                if conn.execute("SELECT 1 FROM replicas WHERE job_id = ? AND role = ? AND idx = ?",
                                (job_id, role, index)).fetchone() is not None:
                    continue
                pos += 1
                conn.execute(
                    "INSERT INTO replicas (job_id, role, idx, pos, phase, log_path) VALUES (?, ?, ?, ?, ?, ?)",
                    (job_id, role, index, pos, str(ReplicaPhase.PENDING), str(self.log_path(job_id, role, index))),
                )

    def remove_replicas(self, job_id: str, replicas: Sequence[tuple[str, int]]) -> None:
        """Forget replicas a running job no longer has (an elastic job scaled down; their logs stay)."""
        with self._tx(write=True) as conn:
            conn.executemany("DELETE FROM replicas WHERE job_id = ? AND role = ? AND idx = ?",
                             [(job_id, role, index) for role, index in replicas])

    def replica_records(self, job_id: str) -> list[ReplicaRecord]:
        """Pids, their start times and log files, in plan order: for signalling and reading logs."""
        with self._tx(write=False) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            rows = conn.execute(
                "SELECT role, idx, phase, pid, pid_start_time, log_path FROM replicas WHERE job_id = ? ORDER BY pos",
                (job_id,),
            ).fetchall()
        return [
            ReplicaRecord(role, idx, ReplicaPhase(phase), pid, start, None if lp is None else Path(lp))
            for role, idx, phase, pid, start, lp in rows
        ]

    # --- requests to the supervisor -------------------------------------------------------------

    def add_request(self, job_id: str, kind: RequestKind) -> int:
        """Ask the job's supervisor to cancel, suspend or resume; returns the request id."""
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            cur = conn.execute(
                "INSERT INTO requests (job_id, kind, created_at) VALUES (?, ?, ?)",
                (job_id, str(kind), time.time()),
            )
            return int(cur.lastrowid or 0)

    def pending_requests(self, job_id: str) -> list[Request]:
        """Requests not handled yet, oldest first."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT id, job_id, kind, created_at FROM requests WHERE job_id = ? AND handled_at IS NULL ORDER BY id",
                (job_id,),
            ).fetchall()
        return [Request(rid, jid, RequestKind(kind), created) for rid, jid, kind, created in rows]

    def mark_request_handled(self, request_id: int) -> None:
        with self._tx(write=True) as conn:
            conn.execute(
                "UPDATE requests SET handled_at = ? WHERE id = ? AND handled_at IS NULL",
                (time.time(), request_id),
            )

    # --- reading status -------------------------------------------------------------------------

    def get_status(self, job_id: str) -> JobStatus:
        """The job as the shared status model. ``job_id`` must be a full id (see :meth:`resolve_id`)."""
        statuses = self._load("WHERE id = ?", (job_id,))
        if not statuses:
            raise JobNotFoundError(f"no job {job_id!r}")
        return statuses[0]

    def list_jobs(self, limit: int | None = None, phases: Collection[JobPhase] | None = None) -> list[JobStatus]:
        """Jobs newest first, optionally only those in ``phases`` and at most ``limit`` of them."""
        where = ""
        params: list[Any] = []
        if phases is not None:
            if not phases:
                return []
            where = f"WHERE phase IN ({', '.join('?' for _ in phases)})"
            params += [str(p) for p in phases]
        clause = f"{where} ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            clause += " LIMIT ?"
            params.append(limit)
        return self._load(clause, tuple(params))

    def _load(self, clause: str, params: tuple[Any, ...]) -> list[JobStatus]:
        # Three queries in one read transaction: a consistent snapshot, and no query per job.
        with self._tx(write=False) as conn:
            jobs = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs {clause}", params).fetchall()
            if not jobs:
                return []
            selected = f"SELECT id FROM jobs {clause}"
            replicas = conn.execute(
                f"SELECT {_REPLICA_COLUMNS} FROM replicas WHERE job_id IN ({selected}) ORDER BY job_id, pos",
                params,
            ).fetchall()
            conditions = conn.execute(
                f"SELECT {_CONDITION_COLUMNS} FROM conditions WHERE job_id IN ({selected}) ORDER BY job_id, seq",
                params,
            ).fetchall()
        by_job_replicas: dict[str, list[ReplicaStatus]] = {}
        for jid, role, idx, phase, code, sig, restarts, pid, host, started, finished, reason, msg in replicas:
            by_job_replicas.setdefault(jid, []).append(
                ReplicaStatus(
                    role=role,
                    index=idx,
                    phase=ReplicaPhase(phase),
                    exit_code=code,
                    signal=sig,
                    restarts=restarts,
                    pid=pid,
                    host=host,
                    started_at=started,
                    finished_at=finished,
                    reason=reason,
                    message=msg,
                )
            )
        by_job_conditions: dict[str, list[Condition]] = {}
        for jid, ctype, cstatus, reason, msg, ctime in conditions:
            by_job_conditions.setdefault(jid, []).append(Condition(ctype, ConditionStatus(cstatus), reason, msg, ctime))
        out = []
        for (
            jid,
            name,
            backend,
            namespace,
            phase,
            backoff_count,
            backoff_limit,
            reason,
            message,
            created,
            started,
            finished,
            failure_json,
        ) in jobs:
            out.append(
                JobStatus(
                    job_id=jid,
                    name=name,
                    backend=backend,
                    namespace=namespace,
                    phase=JobPhase(phase),
                    replicas=by_job_replicas.get(jid, []),
                    backoff_count=backoff_count,
                    backoff_limit=backoff_limit,
                    conditions=by_job_conditions.get(jid, []),
                    reason=reason,
                    message=message,
                    created_at=created,
                    started_at=started,
                    finished_at=finished,
                    first_failure=FailureSummary.from_dict(json.loads(failure_json)) if failure_json else None,
                )
            )
        return out

    # --- internals ------------------------------------------------------------------------------

    def _update_job(self, job_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        with self._tx(write=True) as conn:
            cur = conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*params, job_id))
            if cur.rowcount == 0:
                raise JobNotFoundError(f"no job {job_id!r}")

    def _job_column(self, job_id: str, column: str) -> Any:
        with self._tx(write=False) as conn:
            row = conn.execute(f"SELECT {column} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFoundError(f"no job {job_id!r}")
        return row[0]

    @staticmethod
    def _insert_condition(conn: sqlite3.Connection, job_id: str, c: Condition) -> None:
        conn.execute(
            "INSERT INTO conditions (job_id, seq, type, status, reason, message, time)"
            " SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM conditions WHERE job_id = ?",
            (job_id, str(c.type), str(c.status), c.reason, c.message, c.time, job_id),
        )


process_start_time = proc_start_time  # the name this module has always exported
