import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.backends.local.procfs import pid_alive, proc_start_time
from kubetrain.backends.local.store import JobStore
from kubetrain.backends.local.store_connection import StoreError, state_dir
from kubetrain.backends.local.store_jobs import AmbiguousJobIdError, JobIdTaken, new_job_id
from kubetrain.backends.local.store_requests import RequestKind
from kubetrain.contract.errors import JobNotFound
from kubetrain.status import Condition, ConditionStatus, FailureSummary, JobPhase, ReplicaPhase

SPEC = json.dumps({"name": "demo", "roles": [{"name": "worker", "replicas": 2}]})
REPLICAS = [("master", 0), ("worker", 0), ("worker", 1)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    with JobStore(tmp_path) as s:
        yield s


def create(store: JobStore, name: str = "demo", **kwargs: object) -> str:
    return store.create_job(name, "local", SPEC, None, REPLICAS, **kwargs)  # type: ignore[arg-type]


# --- locations ------------------------------------------------------------------------------------


def test_state_dir_prefers_kubetrain_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path / "kt"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "kt"


def test_state_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBETRAIN_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "xdg" / "kubetrain"


def test_state_dir_default_and_relative_xdg_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBETRAIN_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert state_dir() == tmp_path / ".local" / "state" / "kubetrain"
    # The XDG spec says relative paths are invalid and must be ignored.
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")
    assert state_dir() == tmp_path / ".local" / "state" / "kubetrain"


def test_default_store_lives_in_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path / "home"))
    with JobStore() as store:
        job_id = create(store)
        assert store.db_path == tmp_path / "home" / "jobs.db"
        assert store.db_path.exists()
        assert store.log_path(job_id, "worker", 1) == tmp_path / "home" / "logs" / job_id / "worker-1.log"
    # Job specs and logs may hold credentials: only the owner may read them.
    assert (tmp_path / "home").stat().st_mode & 0o077 == 0


def test_store_accepts_a_db_file_path(tmp_path: Path) -> None:
    with JobStore(tmp_path / "custom.db") as store:
        job_id = create(store)
        assert (tmp_path / "custom.db").exists()
        assert store.log_dir(job_id) == tmp_path / "logs" / job_id


# --- records --------------------------------------------------------------------------------------


def test_create_and_read_back(store: JobStore) -> None:
    before = time.time()
    job_id = store.create_job("My_Demo.Job", "local", SPEC, '{"replicas": []}', REPLICAS, backoff_limit=3)
    # A DNS-1123 label: the same id can name Kubernetes objects and be typed in a shell.
    assert re.fullmatch(r"my-demo-job-[a-z0-9]{5}", job_id)

    status = store.get_status(job_id)
    assert status.job_id == job_id
    assert status.name == "My_Demo.Job"
    assert status.backend == "local"
    assert status.phase is JobPhase.PENDING
    assert status.backoff_count == 0 and status.backoff_limit == 3
    assert status.created_at is not None and status.created_at >= before
    assert status.started_at is None and status.finished_at is None
    assert [(r.role, r.index, r.phase) for r in status.replicas] == [
        (role, index, ReplicaPhase.PENDING) for role, index in REPLICAS
    ]
    assert [c.type for c in status.conditions] == ["Created"]
    assert store.get_spec_json(job_id) == SPEC
    assert store.get_plan_json(job_id) == '{"replicas": []}'
    assert store.log_dir(job_id).is_dir()
    assert [r.log_path for r in store.replica_records(job_id)] == [
        store.log_path(job_id, role, index) for role, index in REPLICAS
    ]


def test_create_rejects_bad_input(store: JobStore) -> None:
    with pytest.raises(ValueError, match="spec_json"):
        store.create_job("demo", "local", "{not json", None, REPLICAS)
    # A role names a log file: it must not reach outside the job's log directory.
    with pytest.raises(ValueError, match="role"):
        store.create_job("demo", "local", SPEC, None, [("../../etc", 0)])
    with pytest.raises(ValueError, match="twice"):
        store.create_job("demo", "local", SPEC, None, [("worker", 0), ("worker", 0)])
    assert store.list_jobs() == []


def test_ids_are_unique(store: JobStore) -> None:
    ids = {create(store) for _ in range(50)}
    assert len(ids) == 50


def test_a_job_is_recorded_under_an_id_drawn_beforehand_unless_another_job_has_it(store: JobStore) -> None:
    """The local backend draws a job's id before recording it (its launch record names it): the id is kept,
    and one another job has is refused, with nothing recorded."""
    drawn = new_job_id("demo")
    assert drawn.startswith("demo-") and create(store, job_id=drawn) == drawn
    with pytest.raises(JobIdTaken, match=drawn):
        create(store, job_id=drawn)
    assert [j.job_id for j in store.list_jobs()] == [drawn]


def test_records_survive_reopening(tmp_path: Path) -> None:
    # Every CLI invocation opens the store afresh.
    with JobStore(tmp_path) as first:
        job_id = create(first)
        first.set_job_phase(job_id, JobPhase.RUNNING)
        first.update_replica(job_id, "worker", 1, phase=ReplicaPhase.RUNNING, pid=4242, host="localhost")
    with JobStore(tmp_path) as second:
        status = second.get_status(job_id)
    assert status.phase is JobPhase.RUNNING
    replica = status.replica("worker", 1)
    assert replica is not None and replica.pid == 4242 and replica.host == "localhost"


def test_job_phase_transitions_stamp_times_and_conditions(store: JobStore) -> None:
    job_id = create(store)
    assert store.set_job_phase(
        job_id, JobPhase.RUNNING, condition=Condition("Running", ConditionStatus.TRUE, "AllReplicasStarted")
    )
    running = store.get_status(job_id)
    assert running.started_at is not None and running.finished_at is None

    assert store.set_job_phase(
        job_id,
        JobPhase.FAILED,
        reason="BackoffLimitExceeded",
        message="worker-1 failed 4 times",
        condition=Condition("Failed", ConditionStatus.TRUE, "BackoffLimitExceeded", "gave up"),
    )
    failed = store.get_status(job_id)
    assert failed.phase is JobPhase.FAILED
    assert failed.reason == "BackoffLimitExceeded" and failed.message == "worker-1 failed 4 times"
    assert failed.started_at == running.started_at
    assert failed.finished_at is not None and failed.finished_at >= failed.started_at
    assert [(c.type, c.reason) for c in failed.conditions] == [
        ("Created", "JobCreated"),
        ("Running", "AllReplicasStarted"),
        ("Failed", "BackoffLimitExceeded"),
    ]


def test_terminal_phase_is_final(store: JobStore) -> None:
    # A cancel that lands while the supervisor records success must not flip the outcome.
    job_id = create(store)
    assert store.set_job_phase(job_id, JobPhase.CANCELLED, reason="UserRequested")
    assert not store.set_job_phase(
        job_id, JobPhase.SUCCEEDED, condition=Condition("Succeeded", ConditionStatus.TRUE)
    )
    status = store.get_status(job_id)
    assert status.phase is JobPhase.CANCELLED and status.reason == "UserRequested"
    assert [c.type for c in status.conditions] == ["Created"]


def test_set_job_phase_expect(store: JobStore) -> None:
    job_id = create(store)
    assert not store.set_job_phase(job_id, JobPhase.RUNNING, expect={JobPhase.SUSPENDED})
    assert store.get_status(job_id).phase is JobPhase.PENDING
    assert store.set_job_phase(job_id, JobPhase.SUSPENDED, expect={JobPhase.PENDING, JobPhase.RUNNING})
    assert store.set_job_phase(job_id, JobPhase.RUNNING, expect={JobPhase.SUSPENDED})
    assert store.get_status(job_id).phase is JobPhase.RUNNING


def test_update_replica(store: JobStore) -> None:
    job_id = create(store)
    store.update_replica(job_id, "worker", 1, phase=ReplicaPhase.RUNNING, pid=os.getpid(), host="localhost")
    first = store.get_status(job_id).replica("worker", 1)
    assert first is not None
    assert first.phase is ReplicaPhase.RUNNING and first.pid == os.getpid() and first.started_at is not None
    # The pid's start time is captured so a reused pid is never mistaken for this replica.
    record = next(r for r in store.replica_records(job_id) if (r.role, r.index) == ("worker", 1))
    assert record.pid_start_time == proc_start_time(os.getpid())

    store.update_replica(job_id, "worker", 1, phase=ReplicaPhase.FAILED, exit_code=3, reason="Error")
    failed = store.get_status(job_id).replica("worker", 1)
    assert failed is not None
    assert failed.phase is ReplicaPhase.FAILED and failed.exit_code == 3 and failed.finished_at is not None
    assert failed.host == "localhost"  # fields not passed keep their value

    # A restart begins a fresh attempt: the previous exit no longer describes the replica.
    assert store.record_replica_restart(job_id, "worker", 1) == 1
    store.update_replica(job_id, "worker", 1, phase=ReplicaPhase.RUNNING, pid=os.getpid(), reason=None)
    again = store.get_status(job_id).replica("worker", 1)
    assert again is not None
    assert again.phase is ReplicaPhase.RUNNING and again.restarts == 1
    assert again.exit_code is None and again.signal is None and again.finished_at is None
    assert again.reason is None

    other = store.get_status(job_id).replica("worker", 0)
    assert other is not None and other.phase is ReplicaPhase.PENDING and other.pid is None


def test_update_unknown_replica_or_job(store: JobStore) -> None:
    job_id = create(store)
    with pytest.raises(JobNotFound, match="worker-7"):
        store.update_replica(job_id, "worker", 7, phase=ReplicaPhase.RUNNING)
    with pytest.raises(JobNotFound):
        store.set_job_phase("nope-aaaaa", JobPhase.RUNNING)
    with pytest.raises(JobNotFound):
        store.get_status("nope-aaaaa")
    with pytest.raises(JobNotFound):
        store.record_restart("nope-aaaaa")


def test_restarts_and_first_failure(store: JobStore) -> None:
    job_id = create(store, backoff_limit=3)
    assert store.record_restart(job_id) == 1
    assert store.record_restart(job_id) == 2
    failure = FailureSummary(
        role="worker",
        index=1,
        exit_code=3,
        last_lines=["Traceback (most recent call last):", "ValueError: boom"],
        policy_action="restarted 2/3",
    )
    store.set_first_failure(job_id, failure)
    status = store.get_status(job_id)
    assert status.backoff_count == 2
    assert status.first_failure == failure
    assert "ValueError: boom" in status.first_failure.explain(job_id)


def test_resolve_id(store: JobStore) -> None:
    a = create(store, name="alpha")
    b1 = create(store, name="beta")
    b2 = create(store, name="beta")
    assert store.resolve_id(a) == a
    assert store.resolve_id("alp") == a

    with pytest.raises(AmbiguousJobIdError) as excinfo:
        store.resolve_id("beta")
    assert set(excinfo.value.candidates) == {b1, b2}
    assert b1 in str(excinfo.value) and b2 in str(excinfo.value)

    with pytest.raises(JobNotFound, match="gamma"):
        store.resolve_id("gamma")
    # '_' is a LIKE wildcard; typed by a user it must match only itself.
    with pytest.raises(JobNotFound):
        store.resolve_id("alph_")
    with pytest.raises(JobNotFound):
        store.resolve_id("")


def test_list_jobs_newest_first(store: JobStore) -> None:
    ids = [create(store, name=f"job{i}") for i in range(4)]
    store.set_job_phase(ids[1], JobPhase.RUNNING)
    store.set_job_phase(ids[2], JobPhase.SUCCEEDED)
    store.update_replica(ids[1], "worker", 0, phase=ReplicaPhase.RUNNING)

    listed = store.list_jobs()
    assert [s.job_id for s in listed] == ids[::-1]
    # Each job carries its own replicas and conditions, not its neighbours'.
    assert listed[2].counts()["worker"].running == 1
    assert all(len(s.replicas) == 3 and s.conditions[0].type == "Created" for s in listed)

    assert [s.job_id for s in store.list_jobs(limit=2)] == [ids[3], ids[2]]
    live = store.list_jobs(phases={JobPhase.PENDING, JobPhase.RUNNING})
    assert [s.job_id for s in live] == [ids[3], ids[1], ids[0]]


def test_delete_removes_record_and_logs(store: JobStore) -> None:
    job_id = create(store)
    keep = create(store)
    log = store.log_path(job_id, "worker", 0)
    log.write_text("step 1\n")
    store.add_request(job_id, RequestKind.CANCEL)

    store.delete_job(job_id)

    assert not store.log_dir(job_id).exists()
    assert store.log_dir(keep).exists()
    with pytest.raises(JobNotFound):
        store.get_status(job_id)
    assert [s.job_id for s in store.list_jobs()] == [keep]
    with sqlite3.connect(store.db_path) as raw:
        for table in ("replicas", "conditions", "requests"):
            assert raw.execute(f"SELECT COUNT(*) FROM {table} WHERE job_id = ?", (job_id,)).fetchone()[0] == 0
    with pytest.raises(JobNotFound):
        store.delete_job(job_id)


def test_requests(store: JobStore) -> None:
    job_id = create(store)
    first = store.add_request(job_id, RequestKind.SUSPEND)
    store.add_request(job_id, RequestKind.CANCEL)
    pending = store.pending_requests(job_id)
    assert [r.kind for r in pending] == [RequestKind.SUSPEND, RequestKind.CANCEL]
    store.mark_request_handled(first)
    assert [r.kind for r in store.pending_requests(job_id)] == [RequestKind.CANCEL]


# --- liveness -------------------------------------------------------------------------------------


def test_supervisor_liveness(store: JobStore) -> None:
    job_id = create(store)
    assert not store.supervisor_alive(job_id)
    store.set_supervisor(job_id, os.getpid())
    assert store.supervisor_alive(job_id)
    assert store.live_supervisor_pid(job_id) == os.getpid()

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    store.set_supervisor(job_id, child.pid)
    child.wait()
    # Once the supervisor has exited, commands must not wait for or signal it.
    assert not store.supervisor_alive(job_id)
    assert store.live_supervisor_pid(job_id) is None


def test_pid_alive_rejects_reused_pid() -> None:
    me = os.getpid()
    start = proc_start_time(me)
    assert start is not None
    assert pid_alive(me, start)
    assert not pid_alive(me, start + 1)  # same pid, different process start: not ours


def test_zombie_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = proc_start_time(child.pid)
    deadline = time.monotonic() + 10
    while pid_alive(child.pid, start) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Exited but not yet reaped by us: still in /proc, yet not running.
    assert Path(f"/proc/{child.pid}").exists()
    assert not pid_alive(child.pid, start)
    child.wait()


# --- several processes ----------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import os, sys, time
    from kubetrain.backends.local.store import JobStore
    from kubetrain.status import Condition, ReplicaPhase

    root, job_id, role, n, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    store = JobStore(root)
    print("ready", flush=True)
    while not os.path.exists(go):  # start together, so the writes really interleave
        time.sleep(0.001)
    for i in range(n):
        store.record_restart(job_id)
        store.record_replica_restart(job_id, role, 0)
        store.update_replica(job_id, role, 0, phase=ReplicaPhase.RUNNING, message=f"step {i}")
        store.add_condition(job_id, Condition("Tick", message=f"{role} {i}"))
    store.close()
    """
)


def test_concurrent_writers_lose_no_update(tmp_path: Path) -> None:
    n = 200
    with JobStore(tmp_path) as store:
        job_id = store.create_job("race", "local", SPEC, None, [("a", 0), ("b", 0)])
        go = tmp_path / "go"
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(tmp_path), job_id, role, str(n), str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for role in ("a", "b")
        ]
        for w in writers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        go.touch()
        # Readers (CLI status, list) run while the supervisor writes; they must neither fail nor block it.
        reads = 0
        while any(w.poll() is None for w in writers):
            status = store.get_status(job_id)
            assert len(status.replicas) == 2
            store.list_jobs()
            reads += 1
        results = [w.communicate() for w in writers]
        for w, (_, err) in zip(writers, results, strict=True):
            assert w.returncode == 0, err
            assert err == ""

        status = store.get_status(job_id)
    assert reads > 0
    assert status.backoff_count == 2 * n
    assert [r.restarts for r in status.replicas] == [n, n]
    assert [r.message for r in status.replicas] == [f"step {n - 1}", f"step {n - 1}"]
    ticks = [c.message for c in status.conditions if c.type == "Tick"]
    assert len(ticks) == 2 * n
    for role in ("a", "b"):
        # Each writer's conditions are all there, in the order it wrote them.
        assert [t for t in ticks if t.startswith(role)] == [f"{role} {i}" for i in range(n)]  # type: ignore[union-attr]


def test_processes_opening_a_fresh_store_at_once(tmp_path: Path) -> None:
    # The first CLI invocations on a machine may race to create the database.
    script = textwrap.dedent(
        """
        import sys
        from kubetrain.backends.local.store import JobStore
        with JobStore(sys.argv[1]) as store:
            print(store.create_job("first", "local", "{}", None, [("worker", 0)]))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "fresh")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    with JobStore(tmp_path / "fresh") as store:
        assert {s.job_id for s in store.list_jobs()} == {out.strip() for out, _ in outputs}


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from kubetrain.backends.local.store import JobStore
    from kubetrain.status import Condition, JobPhase

    store = JobStore(sys.argv[1])
    job_id = sys.argv[2]
    store.set_supervisor(job_id, __import__("os").getpid())
    i = 0
    while True:
        i += 1
        # The job's reason and the new condition are written in one transaction.
        tick = Condition("Tick", message=str(i))
        store.set_job_phase(job_id, JobPhase.RUNNING, reason=f"tick-{i}", condition=tick)
    """
)


def test_store_survives_sigkilled_writer(tmp_path: Path) -> None:
    with JobStore(tmp_path) as store:
        job_id = create(store)
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path), job_id])
    try:
        with JobStore(tmp_path) as watcher:
            deadline = time.monotonic() + 30
            while len(watcher.get_status(job_id).conditions) < 100:
                assert writer.poll() is None, "writer died on its own"
                assert time.monotonic() < deadline, "writer made no progress"
                time.sleep(0.01)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()

    with sqlite3.connect(tmp_path / "jobs.db") as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with JobStore(tmp_path) as reopened:
        status = reopened.get_status(job_id)
        ticks = [c for c in status.conditions if c.type == "Tick"]
        # No transaction is half applied: the last reason matches the last condition.
        assert status.reason == f"tick-{ticks[-1].message}"
        assert [c.message for c in ticks] == [str(i) for i in range(1, len(ticks) + 1)]
        assert not reopened.supervisor_alive(job_id)
        # The dead writer left no lock behind: writing works at once.
        started = time.monotonic()
        assert reopened.set_job_phase(job_id, JobPhase.FAILED, reason="SupervisorLost")
        assert time.monotonic() - started < 1
        assert reopened.get_status(job_id).phase is JobPhase.FAILED


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "jobs.db") as raw:
        raw.execute("PRAGMA user_version = 999")
    with pytest.raises(StoreError, match="upgrade kubetrain"):
        JobStore(tmp_path)


def test_store_is_in_wal_mode(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "jobs.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_store_reconnects_after_fork(tmp_path: Path) -> None:
    # A supervisor may daemonize with fork(); the child must not share the parent's connection.
    store = JobStore(tmp_path)
    job_id = create(store)
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            store.record_restart(job_id)
            code = 0
        finally:
            os._exit(code)
    _, wait_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    assert store.record_restart(job_id) == 2
    store.close()


# --- several writes as one ------------------------------------------------------------------------


def test_writes_in_one_transaction_are_seen_together_or_not_at_all(store: JobStore) -> None:
    job_id = create(store)
    other = JobStore(store.db_path)  # another process's view
    with store.transaction():
        store.update_replica(job_id, "worker", 0, phase=ReplicaPhase.RUNNING)
        assert other.get_status(job_id).replicas[1].phase is ReplicaPhase.PENDING  # not committed yet
        store.set_job_phase(job_id, JobPhase.RUNNING, reason="Started")
    status = other.get_status(job_id)
    assert (status.phase, status.replicas[1].phase) == (JobPhase.RUNNING, ReplicaPhase.RUNNING)
    # A failure inside leaves nothing of the block: the replica written before it is rolled back too.
    with pytest.raises(JobNotFound), store.transaction():
        store.update_replica(job_id, "worker", 1, phase=ReplicaPhase.RUNNING)
        store.update_replica(job_id, "worker", 7, phase=ReplicaPhase.RUNNING)
    assert other.get_status(job_id).replicas[2].phase is ReplicaPhase.PENDING
    assert store.get_status(job_id).replicas[2].phase is ReplicaPhase.PENDING
    other.close()
