"""The job store's SQLite database: where it is, opening it safely, and short transactions.

Several processes use the store at once (each running job's supervisor writes, any number of CLI calls
read, cancel and delete), so a connection is opened in WAL mode (readers never block the writer and see a
consistent snapshot), every write is one short ``BEGIN IMMEDIATE`` transaction (the write lock taken up
front: a deferred transaction upgrading to a writer can fail with SQLITE_BUSY without waiting) under a
busy timeout, and ``synchronous=NORMAL`` (a killed process never corrupts the database; only a power cut
can lose the last few commits, which job records can afford rather than an fsync per replica update).
What goes wrong with the files (a read-only folder, a corrupt database, a full disk) is a `StoreError`
that says what to do, never a traceback. The tables themselves: `store_jobs`, `store_replicas`,
`store_requests`, put together in `store.JobStore`.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Self

from ...contract import env_names
from ...contract.errors import KubetrainError
from ...contract.state_dir import state_dir
from .disk_reserve import DiskReserve

#: Overrides the state directory (tests, several independent installations, shared scratch disks).
ENV_HOME = env_names.HOME
DB_NAME = "jobs.db"
LOGS_DIR = "logs"
#: How long a writer waits for another writer's transaction before giving up.
BUSY_TIMEOUT_MS = 5000
_ROLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StoreError(KubetrainError):
    """The job store cannot do what was asked."""


def _writable(path: Path) -> bool:
    """Writable by this user: the mode's owner write bit (which even root honours here), and access(2)."""
    return bool(path.stat().st_mode & 0o200) and os.access(path, os.W_OK)


def _is_full(exc: sqlite3.DatabaseError) -> bool:
    return "disk is full" in str(exc) or getattr(exc, "sqlite_errorcode", None) == 13  # SQLITE_FULL


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return "not a database" in text or "malformed" in text or "corrupt" in text


def check_role(role: str) -> None:
    # The role names a log file; it must not be able to point outside the job's log directory.
    if not _ROLE_RE.match(role):
        raise ValueError(f"role {role!r} must be letters, digits, '-', '_' or '.', starting with a letter/digit")


# --- schema ---------------------------------------------------------------------------------------

# Each entry moves the schema from version N-1 to N; append, never edit, once released.
MIGRATIONS: dict[int, tuple[str, ...]] = {
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
SCHEMA_VERSION = max(MIGRATIONS)

JOB_COLUMNS = (
    "id, name, backend, namespace, phase, backoff_count, backoff_limit, reason, message, "
    "created_at, started_at, finished_at, first_failure_json"
)
REPLICA_COLUMNS = (
    "job_id, role, idx, phase, exit_code, signal, restarts, pid, host, started_at, finished_at, reason, message"
)
CONDITION_COLUMNS = "job_id, type, status, reason, message, time"

# Connections inherited through fork() are kept referenced, never closed: closing one in the
# child could act on locks and WAL files the parent still uses.
_INHERITED: list[sqlite3.Connection] = []


class StoreConnection:
    """One SQLite connection to the store, shared by the threads of a process; after ``fork()`` the child
    transparently opens its own. The base of `store.JobStore`: each table's operations build on `_tx`.

    ``path`` is the state directory (default :func:`state_dir`), or a ``*.db`` file whose
    directory then holds the logs.
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
        self._joined = 0  # > 0 inside `transaction()`, in the thread holding the lock
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self.reserve = DiskReserve(self.root)
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
                for statement in MIGRATIONS[target]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Several writes as one: each operation of the store called inside joins this one transaction, so a
        reader (`status`, the web view, `wait --for`) sees all of them or none, never a state between two
        (the replicas Running under a job still Pending). Other threads' operations wait until it ends."""
        with self._tx(write=True):
            self._joined += 1
            try:
                yield
            finally:
                self._joined -= 1

    @contextmanager
    def _tx(self, write: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._joined:
                # Inside `transaction()` (this thread holds the lock): its BEGIN, COMMIT or ROLLBACK are the
                # outer block's, which also turns what goes wrong into a `StoreError`.
                yield self._connection()
                return
            conn = self._connection()
            if write:
                self.reserve.keep_room()
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
            if not (_is_full(exc) and conn.in_transaction and self.reserve.release()):
                raise
            conn.execute("COMMIT")

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
        check_role(role)
        return self.log_dir(job_id) / f"{role}-{index}.log"
