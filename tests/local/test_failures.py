"""Failures and stops on the local backend, with real processes: exit codes, restart policies, backoff,
deadlines, cancel, Ctrl-C, SIGTERM and a SIGKILLed supervisor — and never a process left behind."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from kubetrain.backends.base import StillStopping
from kubetrain.backends.local import job_control, job_start
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.backends.local.supervisor import Supervisor
from kubetrain.backends.logfiles.reader import iter_log
from kubetrain.restart_policy import LOCAL_BACKOFF_BASE
from kubetrain.status import JobPhase, JobStatus, ReplicaPhase
from tests.support.helpers import (
    ALWAYS_FAIL,
    EXIT_ON_INDEX,
    FAIL_FIRST_ATTEMPT,
    PIDFILE_SLEEP,
    attached_sleepers,
    cli,
    create_job,
    generic,
    job_file,
    local_backend,
    log_lines,
    make_job,
    no_traceback,
    pidfiles,
    run_job,
    running_sleepers,
    signal_supervisor,
    start_detached,
    status_of,
    supervisor_pid,
    wait_for,
    wait_gone,
    wait_pids,
    write,
)

pytestmark = pytest.mark.timeout(120)


def only_job_id() -> str:
    result = cli("list", "-o", "name")
    ids = result.stdout.split()
    assert len(ids) == 1, result.stdout
    return ids[0]


# -- a replica's exit -----------------------------------------------------------------------------------


def test_a_replica_exiting_3_fails_the_job_naming_replica_and_code(tmp_path: Path) -> None:
    write(tmp_path / "fail.py", EXIT_ON_INDEX)
    path = job_file(tmp_path, generic(["fail.py", "3", "1"]), "fail")
    result = cli("run", path)
    assert result.returncode == 1
    no_traceback(result)
    assert "worker-1 exited with code 3" in result.stderr
    assert "replica 1 exiting with code 3" in result.stderr  # its last output, shown with the failure

    job_id = only_job_id()
    status = status_of(job_id)
    assert status.phase is JobPhase.FAILED
    failure = status.first_failure
    assert failure is not None
    assert (failure.role, failure.index, failure.exit_code) == ("worker", 1, 3)
    assert "replica 1 exiting with code 3" in failure.last_lines
    assert status.replica("worker", 1).exit_code == 3  # type: ignore[union-attr]
    # The other replica did not fail on its own: kubetrain stopped it, and says so.
    other = status.replica("worker", 0)
    assert other is not None and (other.reason, other.signal) == ("Stopped", 15)

    shown = cli("status", job_id)
    assert shown.returncode == 0
    assert "Failed" in shown.stdout and "worker-1 exited with code 3" in shown.stdout
    assert "stopped (SIGTERM)" in shown.stdout


def test_a_missing_program_fails_with_127_and_says_so(tmp_path: Path) -> None:
    job = make_job({"framework": "generic", "replicas": 1, "run": {"exec": ["no-such-program-kt"]}})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED
    assert status.first_failure is not None and status.first_failure.exit_code == 127
    assert any("no-such-program-kt" in line for line in status.first_failure.last_lines)


def test_a_failing_local_rank_is_what_its_replica_reports(tmp_path: Path) -> None:
    """With procsPerReplica 2, local rank 1 exits 3: the replica is Failed with exit code 3 — not with the
    SIGTERM its sibling got when the job was stopped."""
    write(
        tmp_path / "lr.py",
        "import os, sys, time\nif os.environ['LOCAL_RANK'] == '1':\n    sys.exit(3)\ntime.sleep(600)\n",
    )
    job = make_job({"framework": "pytorch", "replicas": 1, "procsPerReplica": 2, "run": {"python": ["lr.py"]}})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED
    replica = status.replica("worker", 0)
    assert replica is not None
    assert (replica.phase, replica.exit_code, replica.signal) == (ReplicaPhase.FAILED, 3, None)
    assert status.first_failure is not None and status.first_failure.exit_code == 3


# -- restart policies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["sigkill", "137"])
def test_exit_code_policy_retries_137(tmp_path: Path, how: str) -> None:
    """restartPolicy ExitCode: a replica killed by SIGKILL (or exiting 137, as the OOM killer looks in a
    container) is retried; the job then succeeds."""
    write(tmp_path / "once.py", FAIL_FIRST_ATTEMPT)
    job = make_job(
        generic(["once.py", str(tmp_path / "marker"), how], restartPolicy="ExitCode", runPolicy={"backoffLimit": 3})
    )
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert status.backoff_count == 1
    restarting = status.condition("Restarting")
    assert restarting is not None and "worker-1" in (restarting.message or "")
    assert status.total_restarts() == 1  # the RESTARTS column of `kubetrain list`


def test_exit_code_policy_does_not_retry_1(tmp_path: Path) -> None:
    write(tmp_path / "once.py", FAIL_FIRST_ATTEMPT)
    job = make_job(
        generic(["once.py", str(tmp_path / "marker"), "1"], restartPolicy="ExitCode", runPolicy={"backoffLimit": 3})
    )
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED
    assert status.backoff_count == 0
    assert status.first_failure is not None
    assert status.first_failure.exit_code == 1
    assert "permanent" in (status.first_failure.policy_action or "")


def test_backoff_limit_counts_restarts_then_gives_up(tmp_path: Path) -> None:
    write(tmp_path / "always.py", ALWAYS_FAIL)
    job = make_job(generic(["always.py", "2"], replicas=1, restartPolicy="OnFailure", runPolicy={"backoffLimit": 2}))
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED
    assert status.backoff_count == 2
    assert status.total_restarts() == 2
    assert status.reason == "BackoffLimitExceeded"
    failure = status.first_failure
    assert failure is not None and failure.exit_code == 2
    assert "gave up" in (failure.policy_action or "")
    assert log_lines(status.job_id)["worker-0"].count("attempt failing") == 3  # 1 try + 2 restarts


COUNT_ATTEMPTS_AND_FAIL = """\
import pathlib, sys
# Counts its attempts in a file, prints lines naming the attempt, then fails.
counter = pathlib.Path(sys.argv[1])
attempt = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(attempt))
for step in range(3):
    print(f"attempt {attempt} step {step}", flush=True)
sys.exit(2)
"""


def test_the_failure_summary_shows_only_the_last_attempts_output(tmp_path: Path) -> None:
    """The log file keeps every attempt (gang restarts append to it); the failure summary's last lines are
    those of the attempt that failed last, though the earlier one's fit in its ten lines."""
    write(tmp_path / "attempts.py", COUNT_ATTEMPTS_AND_FAIL)
    spec = generic(
        ["attempts.py", str(tmp_path / "count")], replicas=1, restartPolicy="OnFailure", runPolicy={"backoffLimit": 1}
    )
    result = cli("run", job_file(tmp_path, spec, "attempts"))
    assert result.returncode == 1
    no_traceback(result)
    last = [f"attempt 2 step {step}" for step in range(3)]
    job_id = only_job_id()
    assert log_lines(job_id)["worker-0"] == [f"attempt 1 step {step}" for step in range(3)] + last

    status = status_of(job_id)
    assert (status.phase, status.reason, status.backoff_count) == (JobPhase.FAILED, "BackoffLimitExceeded", 1)
    assert status.first_failure is not None and status.first_failure.last_lines == last
    # As `run` and `status` print it.
    for shown in (result.stderr, cli("status", job_id).stdout):
        assert [line.split("| ", 1)[1] for line in shown.splitlines() if line.startswith("    | ")] == last


def test_a_job_failing_only_on_its_first_attempt_succeeds_after_one_restart(tmp_path: Path) -> None:
    write(tmp_path / "once.py", FAIL_FIRST_ATTEMPT)
    job = make_job(
        generic(["once.py", str(tmp_path / "marker"), "4"], restartPolicy="OnFailure", runPolicy={"backoffLimit": 1})
    )
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert status.backoff_count == 1
    assert [r.phase for r in status.replicas] == [ReplicaPhase.SUCCEEDED] * 2
    logs = log_lines(status.job_id)
    assert "first attempt fails" in logs["worker-1"] and "replica 1 succeeded" in logs["worker-1"]


def test_a_backoff_limit_alone_restarts_the_job(tmp_path: Path) -> None:
    """runPolicy.backoffLimit without a restartPolicy (Kale's V1RunPolicy, a DeepSpeedJob's runPolicy, Run:ai's
    backoffLimit) means OnFailure: replica 1 fails once, the job restarts and succeeds."""
    write(tmp_path / "once.py", FAIL_FIRST_ATTEMPT)
    job = make_job(generic(["once.py", str(tmp_path / "marker"), "4"], runPolicy={"backoffLimit": 1}))
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert status.backoff_count == 1
    assert "replica 1 succeeded" in log_lines(status.job_id)["worker-1"]


def record_of(job_id: str) -> LaunchRecord:
    with local_backend() as backend:
        text = backend.store.get_plan_json(job_id)
    assert text is not None
    return LaunchRecord.from_json(text)


def log_times(job_id: str, role: str, index: int) -> dict[str, float]:
    """Line → when it was logged (epoch seconds), for one replica."""
    with local_backend() as backend:
        (path,) = backend._log_paths(job_id, role, index).values()
    return {rec.text: rec.time_ns / 1e9 for rec in iter_log(path)}


def test_on_failure_restarts_after_a_back_off_that_status_shows(tmp_path: Path) -> None:
    """restartPolicy OnFailure without a backoffLimit allows the default 6 restarts; the group restarts only
    after the back-off (1 s locally before the first restart), and the status says when the next attempt is."""
    write(tmp_path / "once.py", FAIL_FIRST_ATTEMPT)
    job = make_job(generic(["once.py", str(tmp_path / "marker"), "4"], restartPolicy="OnFailure"))
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert status.backoff_count == 1
    assert record_of(status.job_id).restart.backoff_limit == 6

    backing_off = status.condition("Restarting")
    assert backing_off is not None and backing_off.reason == "BackOff"
    message = backing_off.message or ""
    assert "worker-1 exited with code 4 (restarted 1/6)" in message and "next attempt in 1s, at 20" in message
    # The store's own times: the group started again no sooner than the back-off after the failure.
    restarted = [c for c in status.conditions if c.type == "Running" and c.time >= backing_off.time]
    assert restarted, status.conditions
    assert restarted[0].time - backing_off.time >= LOCAL_BACKOFF_BASE
    # And the replica's log: its second attempt wrote no sooner than that after its first.
    times = log_times(status.job_id, "worker", 1)
    assert times["replica 1 succeeded"] - times["first attempt fails"] >= LOCAL_BACKOFF_BASE


def wait_backing_off(job_id: str) -> JobStatus:
    return wait_for(f"job {job_id} to back off",
                    lambda: (lambda s: s if s.reason == "BackOff" else None)(status_of(job_id)), timeout=60)


def test_a_cancel_interrupts_the_back_off(tmp_path: Path) -> None:
    """A long back-off (30 s here, through the launch record) is visible in `kubetrain status` and
    `describe`, and a cancel ends the job then, without another attempt."""
    write(tmp_path / "always.py", ALWAYS_FAIL)
    job = make_job(generic(["always.py", "2"], replicas=1, restartPolicy="OnFailure", runPolicy={"backoffLimit": 3}))
    with local_backend() as backend:
        job_id = create_job(backend, job, tmp_path)
        record = json.loads(backend.store.get_plan_json(job_id) or "{}")
        record["restart"]["backoffSeconds"] = {"base": 30, "max": 30}
        backend.store.set_plan_json(job_id, json.dumps(record))
        assert record_of(job_id).restart.delay(0) == 30
        sup = job_start.start_detached(backend.store, job_id)
    status = wait_backing_off(job_id)
    assert status.phase is JobPhase.RUNNING and status.backoff_count == 0
    assert "next attempt in 30s" in (status.message or "")
    shown = cli("status", job_id)
    assert shown.returncode == 0 and "BackOff" in shown.stdout and "next attempt in 30s, at " in shown.stdout
    assert "BackOff" in cli("describe", job_id).stdout

    cancelled = cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    wait_gone([sup])
    status = status_of(job_id)
    assert status.phase is JobPhase.CANCELLED and status.backoff_count == 0
    assert log_lines(job_id)["worker-0"].count("attempt failing") == 1  # no attempt after the cancel


FAIL_ROLE_FIRST_ATTEMPT = """import os, sys
# The replica of role `role` fails on the first attempt only (a marker file remembers it); then all succeed.
marker, role = sys.argv[1], sys.argv[2]
if os.environ["KUBETRAIN_ROLE"] == role and not os.path.exists(marker):
    open(marker, "w").close()
    print("first attempt fails", flush=True)
    sys.exit(3)
print("done", flush=True)
"""


@pytest.mark.parametrize(("failing", "phase", "restarts"), [
    ("driver", JobPhase.FAILED, 0), ("trainer", JobPhase.SUCCEEDED, 1)])
def test_each_role_restarts_by_its_own_policy(tmp_path: Path, failing: str, phase: JobPhase, restarts: int) -> None:
    """roles.<role>.restartPolicy (DeepSpeedJob's worker restartPolicy): the driver's Never fails the job on its
    failure; the trainer follows the job's OnFailure (from its backoffLimit), restarting the group."""
    write(tmp_path / "role.py", FAIL_ROLE_FIRST_ATTEMPT)
    job = make_job({"framework": "generic", "run": {"python": ["role.py", str(tmp_path / "marker"), failing]},
                    "runPolicy": {"backoffLimit": 2},
                    "roles": {"driver": {"restartPolicy": "Never"}, "trainer": {"replicas": 1}}})
    status = run_job(job, tmp_path)
    assert (status.phase, status.backoff_count) == (phase, restarts), status.summary_line()
    if phase is JobPhase.FAILED:
        assert status.first_failure is not None
        assert status.first_failure.policy_action == "not retried: role driver's restartPolicy Never"


# -- deadline -------------------------------------------------------------------------------------------


def test_active_deadline_stops_the_job(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    job = make_job(generic(["sleep.py", str(pids)], runPolicy={"activeDeadlineSeconds": 1}))
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED
    assert status.reason == "DeadlineExceeded"
    assert status.condition("DeadlineExceeded") is not None
    # Every replica that started by the deadline is stopped (on a loaded machine one may not have started its
    # program within the second: the deadline does not wait for it, so how many started is not asserted).
    wait_gone(pidfiles(pids).values())


STUBBORN = """\
import os, pathlib, signal, subprocess, sys, time
# Ignores SIGTERM, and leaves a child in its own session (outside the replica's process group).
signal.signal(signal.SIGTERM, signal.SIG_IGN)
d = pathlib.Path(sys.argv[1]); d.mkdir(exist_ok=True)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
(d / "child.pid").write_text(str(child.pid))
(d / "stubborn.pid").write_text(str(os.getpid()))
time.sleep(600)
"""


def test_deadline_kills_a_replica_ignoring_sigterm_and_its_escaped_child(tmp_path: Path) -> None:
    write(tmp_path / "stubborn.py", STUBBORN)
    pids = tmp_path / "pids"
    job = make_job(generic(["stubborn.py", str(pids)], replicas=1, runPolicy={"activeDeadlineSeconds": 2}))
    with local_backend() as backend:
        job_id = create_job(backend, job, tmp_path)
        phase = Supervisor(backend.store, job_id, grace=0.5).run()
    assert phase is JobPhase.FAILED
    assert status_of(job_id).reason == "DeadlineExceeded"
    found = pidfiles(pids)
    assert set(found) == {"child", "stubborn"}
    wait_gone(found.values())


# -- cancel, Ctrl-C, SIGTERM ----------------------------------------------------------------------------


def test_cancel_from_another_shell_leaves_no_process(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    path = job_file(tmp_path, generic(["sleep.py", str(pids)]), "cx")
    started = cli("run", path, "--detach")
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    found = wait_pids(pids, 2)
    sup = supervisor_pid(job_id)
    assert sup is not None

    cancelled = cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"job {job_id} cancelled" in cancelled.stdout
    wait_gone([*found.values(), sup])
    status = status_of(job_id)
    assert status.phase is JobPhase.CANCELLED
    assert all(r.phase is not ReplicaPhase.RUNNING for r in status.replicas)
    again = cli("cancel", job_id)
    assert again.returncode == 0 and "already ended" in again.stdout  # nothing left to do is not a failure
    no_traceback(again)


def test_cancel_of_an_attached_run_from_another_shell(tmp_path: Path) -> None:
    with attached_sleepers(tmp_path, "att") as (proc, job_id, found):
        cancelled = cli("cancel", job_id)
        _out, err = proc.communicate(timeout=60)
    assert cancelled.returncode == 0, cancelled.stderr
    assert proc.returncode == 130
    assert f"job {job_id} cancelled" in err
    wait_gone(found.values())
    assert status_of(job_id).phase is JobPhase.CANCELLED


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signal_to_an_attached_run_stops_the_job(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C, or a SIGTERM (`timeout`, `kill`, a CI runner stopping a step), on an attached `kubetrain run`
    cancels the job and stops every replica."""
    with attached_sleepers(tmp_path, "sig") as (proc, job_id, found):
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig  # 130 or 143, as a shell reports a command the signal ended
    assert "Traceback" not in err
    assert "cancelled" in err
    wait_gone(found.values())
    assert status_of(job_id).phase is JobPhase.CANCELLED


TERM_NOTING = """\
import os, pathlib, signal, sys, time
# Notes the SIGTERM it gets and carries on: only SIGKILL stops it.
d = pathlib.Path(sys.argv[1]); d.mkdir(exist_ok=True)
signal.signal(signal.SIGTERM, lambda *_: (d / "got-sigterm").touch())
(d / "replica.pid").write_text(str(os.getpid()))
while True:
    time.sleep(1)
"""


def test_a_second_ctrl_c_skips_the_grace_period(tmp_path: Path) -> None:
    """The first Ctrl-C asks the replicas to stop (SIGTERM); a second one kills them now instead of
    waiting out the grace period (10 minutes here: the test's own timeout would fail first)."""
    write(tmp_path / "noting.py", TERM_NOTING)
    pids = tmp_path / "pids"
    job = make_job(generic(["noting.py", str(pids)], replicas=1))

    def interrupt_twice() -> None:
        wait_for("the replica to start", lambda: (pids / "replica.pid").exists())
        os.kill(os.getpid(), signal.SIGINT)
        wait_for("the replica to get SIGTERM", lambda: (pids / "got-sigterm").exists())
        os.kill(os.getpid(), signal.SIGINT)

    with local_backend() as backend:
        job_id = create_job(backend, job, tmp_path)
        thread = threading.Thread(target=interrupt_twice, daemon=True)
        thread.start()
        phase = Supervisor(backend.store, job_id, grace=600).run()
        thread.join(30)
    assert phase is JobPhase.CANCELLED
    wait_gone(pidfiles(pids).values())


def test_sigkill_of_the_supervisor_leaves_no_replica_and_status_says_supervisor_lost(tmp_path: Path) -> None:
    job_id, _, found = running_sleepers(tmp_path, "lost")
    sup = signal_supervisor(job_id, signal.SIGKILL)
    wait_gone([sup, *found.values()])  # before anyone asks for the status: nothing else cleans up

    shown = cli("status", job_id)
    assert shown.returncode == 0
    assert "Failed" in shown.stdout and "SupervisorLost" in shown.stdout
    data = json.loads(cli("status", job_id, "-o", "json").stdout)
    assert (data["phase"], data["reason"]) == ("Failed", "SupervisorLost")
    assert {r["phase"] for r in data["replicas"]} <= {"Unknown", "Failed"}


# -- requests that arrive before the supervisor runs ------------------------------------------------


def test_a_job_cancelled_before_its_supervisor_starts_never_runs(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    job = make_job(generic(["sleep.py", str(pids), "0"]))
    with local_backend() as backend:
        job_id = create_job(backend, job, tmp_path)
        assert backend.cancel(job_id).phase is JobPhase.CANCELLED
        phase = job_start.run_attached(backend.store, job_id, None)  # the supervisor arrives late (a busy machine)
        assert phase is JobPhase.CANCELLED
        assert backend.status(job_id).phase is JobPhase.CANCELLED
    assert pidfiles(pids) == {}, "a cancelled job started its replicas"


def test_a_job_suspended_before_its_supervisor_starts_waits_for_resume(tmp_path: Path) -> None:
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    job = make_job(generic(["sleep.py", str(pids), "0"]))
    with local_backend() as backend:
        job_id = create_job(backend, job, tmp_path)
        with pytest.raises(StillStopping, match=f"job {job_id} is still pending"):
            backend.suspend(job_id)  # no supervisor yet to stop it: the request waits for one
        assert job_start.run_attached(backend.store, job_id, None) is JobPhase.SUSPENDED
        assert pidfiles(pids) == {}, "a suspended job started its replicas"
        # Resumed, its supervisor started here rather than detached.
        job_control.prepare_resume(backend.store, job_id, backend.gpus)
        assert job_start.run_attached(backend.store, job_id, None) is JobPhase.SUCCEEDED
    assert len(pidfiles(pids)) == 2


def test_cancel_right_after_a_detached_start_leaves_no_process(tmp_path: Path) -> None:
    """`kubetrain run --detach` then `kubetrain cancel` at once, whatever the supervisor was doing."""
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    job_id, sup = start_detached(make_job(generic(["sleep.py", str(pids)])), tmp_path)
    with local_backend() as backend:
        assert backend.cancel(job_id).phase is JobPhase.CANCELLED
    wait_gone([sup], timeout=60)  # the supervisor ends without waiting for replicas that live 600 s
    wait_gone(pidfiles(pids).values())
    assert status_of(job_id).phase is JobPhase.CANCELLED
