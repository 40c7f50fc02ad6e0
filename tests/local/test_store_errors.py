"""A job store that cannot be used: the real CLI in a subprocess says where, why and what to do (exit 1),
never a traceback; a corrupted store is moved aside, with a backup, never silently emptied."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import cli, generic, job_file, no_traceback

pytestmark = pytest.mark.timeout(120)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def failed(result: subprocess.CompletedProcess[str], *words: str) -> None:
    no_traceback(result)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert " — " in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def one_job(tmp_path: Path) -> str:
    (tmp_path / "hi.py").write_text("print('hi')\n")
    spec = job_file(tmp_path, generic(["hi.py"], replicas=1))
    assert cli("run", spec).returncode == 0
    return cli("list", "-o", "name").stdout.split()[0]


def test_store_and_logs_are_private(tmp_path: Path, kubetrain_home: Path) -> None:
    one_job(tmp_path)
    assert mode(kubetrain_home) == 0o700
    assert mode(kubetrain_home / "jobs.db") == 0o600
    for side in kubetrain_home.glob("jobs.db-*"):
        assert mode(side) == 0o600


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupted_store_is_moved_aside(tmp_path: Path, kubetrain_home: Path, damage: str) -> None:
    one_job(tmp_path)
    db = kubetrain_home / "jobs.db"
    if damage == "garbage":
        db.write_bytes(b"this is not SQLite at all" * 200)
    else:
        with db.open("r+b") as f:
            f.truncate(db.stat().st_size // 3 or 100)
    original = db.read_bytes()
    result = cli("list")
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    backups = list(kubetrain_home.glob("jobs.db.corrupt-*"))
    assert [b.name for b in backups if not b.name.endswith(("-wal", "-shm"))], result.stderr
    backup = next(b for b in backups if not b.name.endswith(("-wal", "-shm")))
    assert backup.read_bytes() == original  # kept, not emptied
    assert str(backup) in result.stderr and "moved" in result.stderr
    # the store works again
    assert cli("list").returncode == 0


def test_read_only_store_then_writable_again(tmp_path: Path, kubetrain_home: Path) -> None:
    job_id = one_job(tmp_path)
    db = kubetrain_home / "jobs.db"
    db.chmod(0o444)
    try:
        failed(cli("list"), str(db), "read-only")
        failed(cli("status", job_id), str(db), "read-only")
    finally:
        db.chmod(0o600)
    # a -shm left read-only (SQLite gives it the database's mode) must not break later commands
    shm = kubetrain_home / "jobs.db-shm"
    shm.write_bytes(b"")
    shm.chmod(0o444)
    result = cli("status", job_id)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert not shm.exists() or mode(shm) & 0o200


def test_read_only_home(kubetrain_home: Path) -> None:
    kubetrain_home.mkdir(mode=0o700)
    kubetrain_home.chmod(0o500)
    try:
        failed(cli("list"), str(kubetrain_home), "read-only")
    finally:
        kubetrain_home.chmod(0o700)


def test_home_is_a_file(kubetrain_home: Path) -> None:
    kubetrain_home.write_text("not a directory")
    failed(cli("list"), str(kubetrain_home), "not a directory")


def test_home_under_a_file(kubetrain_home: Path) -> None:
    kubetrain_home.write_text("not a directory")
    failed(cli("list", env={"KUBETRAIN_HOME": str(kubetrain_home / "sub")}), str(kubetrain_home), "not a directory")


def test_store_is_a_directory(kubetrain_home: Path) -> None:
    (kubetrain_home / "jobs.db").mkdir(parents=True)
    failed(cli("list"), "jobs.db", "directory")


def test_a_detached_supervisors_log_is_private(tmp_path: Path, kubetrain_home: Path) -> None:
    (tmp_path / "hi.py").write_text("print('hi')\n")
    started = cli("run", "--detach", job_file(tmp_path, generic(["hi.py"], replicas=1)))
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.split()[-1]
    assert cli("logs", "-f", job_id).returncode == 0  # until it ends
    assert mode(kubetrain_home / "logs" / job_id) == 0o700
    assert mode(kubetrain_home / "logs" / job_id / "supervisor.log") == 0o600
