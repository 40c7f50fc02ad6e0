"""The local backend's job lifecycle across commands: run modes, suspend and resume, concurrent jobs,
delete, and what the store records. Real processes; plain Python replicas."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local.errors import LocalError
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import (
    PIDFILE_SLEEP,
    TICK,
    alive,
    cli,
    create_job,
    generic,
    job_file,
    local_backend,
    log_lines,
    make_job,
    no_traceback,
    pidfiles,
    processes_of,
    running_sleepers,
    start_detached,
    status_of,
    wait_for,
    wait_gone,
    wait_phase,
    wait_pids,
    write,
)

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("paused", [{"runMode": "Pause"}, {"runPolicy": {"suspend": True}}], ids=["pause", "suspend"])
def test_run_mode_pause_creates_suspended_and_resume_runs_it(tmp_path: Path, paused: dict[str, Any]) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    path = job_file(tmp_path, generic(["sleep.py", str(pids), "0"], **paused), "paused")
    created = cli("run", path)
    assert created.returncode == 0, created.stderr
    job_id = created.stdout.strip()
    assert "kubetrain resume" in created.stderr
    status = status_of(job_id)
    assert (status.phase, status.reason) == (JobPhase.SUSPENDED, "Paused")
    assert [r.phase for r in status.replicas] == [ReplicaPhase.PENDING] * 2
    assert pidfiles(pids) == {}  # nothing started

    resumed = cli("resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    status = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert len(pidfiles(pids)) == 2


def test_suspend_a_running_job_then_resume_it(tmp_path: Path) -> None:
    job_id, sup, found = running_sleepers(tmp_path, "susp")
    pids = tmp_path / "pids"  # where running_sleepers' replicas write their pid files

    suspended = cli("suspend", job_id)
    assert suspended.returncode == 0, suspended.stderr
    assert f"job {job_id} suspended" in suspended.stdout
    wait_gone([*found.values(), sup])
    status = status_of(job_id)
    assert status.phase is JobPhase.SUSPENDED
    assert all(r.phase is not ReplicaPhase.RUNNING for r in status.replicas)
    assert cli("suspend", job_id).returncode == 0  # already suspended: nothing to do

    # Resumed, the replicas start again (new processes, a fresh plan: the old ports may be taken by now).
    for pidfile in pids.glob("*.pid"):
        pidfile.unlink()
    resumed = cli("resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    again = wait_pids(pids, 2)
    assert set(again.values()).isdisjoint(found.values())
    assert wait_phase(job_id, JobPhase.RUNNING).reason == "Started"
    assert cli("cancel", job_id).returncode == 0
    wait_gone(again.values())
    assert status_of(job_id).phase is JobPhase.CANCELLED


def test_resume_refuses_a_job_that_is_not_suspended(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    path = job_file(tmp_path, generic(["sleep.py", str(tmp_path / "pids"), "0"], replicas=1))
    assert cli("run", path).returncode == 0
    job_id = cli("list", "-o", "name").stdout.split()[0]
    result = cli("resume", job_id)
    assert result.returncode == 1
    assert "not Suspended" in result.stderr
    assert "Traceback" not in result.stderr
    with local_backend() as backend, pytest.raises(LocalError):
        backend.suspend(job_id)


def test_run_mode_debug_holds_the_program_and_attach_prints_it(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    path = job_file(tmp_path, {**generic(["sleep.py", str(pids)]), "framework": "pytorch", "runMode": "Debug"}, "dbg")
    started = cli("run", path, "--detach")
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    status = wait_phase(job_id, JobPhase.RUNNING)
    assert status.reason == "DebugHold"
    for replica in status.replicas:
        assert (replica.phase, replica.reason) == (ReplicaPhase.RUNNING, "DebugHold")

    shown = cli("attach", job_id, "worker-1", "--print")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "export RANK=1" in lines
    assert "export WORLD_SIZE=2" in lines
    assert "export KUBETRAIN_ROLE=worker" in lines
    assert f"cd {tmp_path.resolve()}" in lines
    assert lines[-1].endswith(f"sleep.py {pids}")  # the held command, to run by hand
    assert pidfiles(pids) == {}  # held: the program itself has not run

    # Without --print: a shell in the replica's environment and folder (here fed from a pipe).
    shell = cli("attach", job_id, "worker-1", env={"SHELL": "/bin/sh"}, stdin='echo "rank=$RANK"; pwd\n')
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.splitlines() == ["rank=1", str(tmp_path.resolve())]
    assert f"sleep.py {pids}" in shell.stderr  # what to run by hand

    unknown = cli("attach", job_id, "worker-7", "--print")
    assert unknown.returncode == 1 and "worker-0, worker-1" in unknown.stderr

    assert cli("cancel", job_id).returncode == 0
    assert status_of(job_id).phase is JobPhase.CANCELLED


def test_two_detached_jobs_at_once_both_succeed(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    paths = [job_file(tmp_path, generic(["tick.py", "10", "0.1"]), f"conc{i}", f"job{i}.yaml") for i in range(2)]
    ids = []
    for path in paths:
        started = cli("run", path, "--detach")
        assert started.returncode == 0, started.stderr
        ids.append(started.stdout.strip())
    assert len(set(ids)) == 2
    # Reading the store while both supervisors write to it: always a consistent answer, never "locked".
    while True:
        listed = cli("list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        phases = {item["jobId"]: item["phase"] for item in json.loads(listed.stdout)["items"]}
        assert set(phases) == set(ids)
        if all(phase in ("Succeeded", "Failed", "Cancelled") for phase in phases.values()):
            break
    for job_id in ids:
        status = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED)
        assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
        assert [r.phase for r in status.replicas] == [ReplicaPhase.SUCCEEDED] * 2
        logs = log_lines(job_id)
        for key, lines in logs.items():
            assert [line for line in lines if line.startswith("tick")] == [f"tick {i} {key}" for i in range(10)]

    listed = json.loads(cli("list", "-o", "json").stdout)["items"]
    assert sorted(item["jobId"] for item in listed) == sorted(ids)
    assert {item["phase"] for item in listed} == {"Succeeded"}
    pids = {r["pid"] for item in listed for r in item["replicas"]}
    assert len(pids) == 4  # four distinct replica processes recorded


def test_delete_a_running_job_stops_it_and_forgets_it(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    job_id, _sup = start_detached(make_job(generic(["sleep.py", str(pids)]), "del"), tmp_path)
    found = wait_pids(pids, 2)
    with local_backend() as backend:
        log_dir = backend.store.log_dir(job_id)
    assert log_dir.is_dir()
    deleted = cli("delete", job_id)
    assert deleted.returncode == 0, deleted.stderr
    wait_gone(found.values())
    assert cli("list", "-o", "name").stdout.strip() == ""
    assert not log_dir.exists()
    gone = cli("status", job_id)
    assert gone.returncode == 1 and "no job matches" in gone.stderr


GO_THEN_EXIT = """\
import os, pathlib, sys, time
# Record this process's pid, then exit 0 once the file `go` appears beside the pid files.
d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
key = f"{os.environ['KUBETRAIN_ROLE']}-{os.environ['KUBETRAIN_REPLICA_INDEX']}.0"
(d / (key + ".tmp")).write_text(str(os.getpid()))
(d / (key + ".tmp")).rename(d / (key + ".pid"))
while not (d / "go").exists():
    time.sleep(0.02)
print(f"{key} done", flush=True)
"""


@contextmanager
def piped_supervisor(job_id: str) -> Iterator[subprocess.Popen[str]]:
    """The job's supervisor started as `run --detach` starts it, but with its output piped here: a detached
    one writes to supervisor.log in the job's log directory, which delete removes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.backends.local.supervisor", job_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_delete_of_a_running_job_waits_for_its_supervisor_which_exits_quietly(
    tmp_path: Path, kubetrain_home: Path
) -> None:
    """The supervisor still has work once the job's phase is Cancelled (closing the process group, clearing
    its record): delete returns only after it exited, and it never trips over the deleted job."""
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    with local_backend() as backend:
        job_id = create_job(backend, make_job(generic(["sleep.py", str(pids)]), "del"), tmp_path)
        log_dir = backend.store.log_dir(job_id)
    with piped_supervisor(job_id) as supervisor:
        found = wait_pids(pids, 2)
        wait_phase(job_id, JobPhase.RUNNING)
        deleted = cli("delete", job_id)
        assert deleted.returncode == 0, deleted.stderr
        no_traceback(deleted)
        # Not a race: delete waited for the supervisor's exit, and the supervisor for its replicas'.
        assert supervisor.poll() is not None
        assert processes_of(kubetrain_home) == []
        assert not any(alive(pid) for pid in found.values())
        out, err = supervisor.communicate(timeout=60)
    assert (out, err) == ("", "")
    assert supervisor.returncode == 1  # cancelled
    assert cli("list", "-o", "name").stdout.strip() == ""
    assert not log_dir.exists()


def test_a_supervisor_finding_its_job_deleted_exits_quietly(tmp_path: Path) -> None:
    """Deleted before its supervisor started (a delete right after `run --detach`), or with the rows pulled
    from under a running supervisor (a delete that gave up waiting for it): no traceback, no process left,
    and no log directory made again."""
    write(tmp_path / "go.py", GO_THEN_EXIT)
    pids = tmp_path / "pids"
    with local_backend() as backend:
        early = create_job(backend, make_job(generic(["go.py", str(pids)], replicas=1), "early"), tmp_path)
        backend.delete(early)
        with piped_supervisor(early) as supervisor:
            out, err = supervisor.communicate(timeout=60)
        assert (out, err, supervisor.returncode) == ("", "", 1)
        assert not backend.store.log_dir(early).exists()
        assert pidfiles(pids) == {}  # nothing started

        late = create_job(backend, make_job(generic(["go.py", str(pids)]), "late"), tmp_path)
        with piped_supervisor(late) as supervisor:
            found = wait_pids(pids, 2)
            wait_phase(late, JobPhase.RUNNING)
            backend.store.delete_job(late)
            (pids / "go").touch()  # the replicas exit: the supervisor's next write finds the job gone
            out, err = supervisor.communicate(timeout=60)
        assert (out, err, supervisor.returncode) == ("", "", 1)
        wait_gone(found.values())
        assert not backend.store.log_dir(late).exists()
        assert backend.list() == []


def test_job_ids_resolve_by_unambiguous_prefix(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    path = job_file(tmp_path, generic(["tick.py", "1", "0"], replicas=1), "prefixjob")
    for _ in range(2):
        assert cli("run", path, "-q").returncode == 0
    ids = cli("list", "-o", "name").stdout.split()
    assert len(ids) == 2
    ambiguous = cli("status", "prefixjob")
    assert ambiguous.returncode == 1
    assert all(job_id in ambiguous.stderr for job_id in ids)
    shortest = next(ids[0][:n] for n in range(1, len(ids[0]) + 1) if not ids[1].startswith(ids[0][:n]))
    one = cli("status", shortest)
    assert one.returncode == 0
    assert one.stdout.startswith(f"{ids[0]} Succeeded")


IGNORES_SIGTERM = """\
import os, pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopped only by the SIGKILL after the grace period
pathlib.Path(sys.argv[1], str(os.getpid())).write_text("up")
time.sleep(600)
"""


def test_cancel_that_outlasts_its_wait_says_so_and_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubetrain.backends.local import job_control
    from kubetrain.cli.main import main

    write(tmp_path / "stubborn.py", IGNORES_SIGTERM)
    (tmp_path / "up").mkdir()
    job_id, _ = start_detached(make_job(generic(["stubborn.py", str(tmp_path / "up")], replicas=1)), tmp_path)
    pids = wait_for("the replica", lambda: [int(p.name) for p in (tmp_path / "up").iterdir()] or None)
    # The supervisor needs its 5 s grace period; cancel waits less than that here.
    monkeypatch.setattr(job_control, "STOP_WAIT", 0.3)
    code = main(["cancel", job_id])
    err = capsys.readouterr().err
    assert code == 1
    assert f"error: job {job_id} is still running" in err and f"kubetrain status {job_id}" in err
    # The request stands: the supervisor finishes the cancel on its own.
    assert wait_phase(job_id, JobPhase.CANCELLED).phase is JobPhase.CANCELLED
    wait_gone(pids)

