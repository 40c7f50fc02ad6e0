import json
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.status import (
    Condition,
    ConditionStatus,
    FailureSummary,
    JobPhase,
    JobStatus,
    ReplicaPhase,
    ReplicaStatus,
    RoleCounts,
    describe_exit,
    stopped_by_cancel,
)
from kubetrain.status_text import format_age, format_describe, format_table

NOW = 1_700_000_000.0


def failed_job() -> JobStatus:
    return JobStatus(
        job_id="demo-x7k2b",
        name="demo",
        backend="local",
        phase=JobPhase.FAILED,
        replicas=[
            ReplicaStatus("master", 0, ReplicaPhase.SUCCEEDED, exit_code=0, pid=100, started_at=NOW - 300),
            ReplicaStatus("worker", 0, ReplicaPhase.SUCCEEDED, exit_code=0, pid=101),
            ReplicaStatus("worker", 1, ReplicaPhase.FAILED, exit_code=3, restarts=1, pid=102, host="node-a"),
        ],
        backoff_count=2,
        backoff_limit=3,
        conditions=[
            Condition("Created", ConditionStatus.TRUE, "JobCreated", None, NOW - 310),
            Condition("Restarting", ConditionStatus.TRUE, "ReplicaFailed", "worker-1 exited with code 3", NOW - 200),
            Condition("Failed", ConditionStatus.TRUE, "BackoffLimitExceeded", "gave up", NOW - 100),
        ],
        reason="BackoffLimitExceeded",
        message="worker-1 failed 3 times",
        created_at=NOW - 310,
        started_at=NOW - 300,
        finished_at=NOW - 100,
        first_failure=FailureSummary(
            role="worker",
            index=1,
            exit_code=3,
            last_lines=[
                "Traceback (most recent call last):",
                '  File "train.py", line 9',
                "ValueError: boom",
            ],
            policy_action="restarted 2/3, gave up",
        ),
    )


def test_job_phase_terminal() -> None:
    assert {p for p in JobPhase if p.is_terminal} == {JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED}
    # A suspended job can resume, so it must not be treated as finished.
    assert not JobPhase.SUSPENDED.is_terminal


def test_to_dict_is_json_and_round_trips() -> None:
    status = failed_job()
    data = json.loads(json.dumps(status.to_dict()))
    assert JobStatus.from_dict(data) == status


def test_to_dict_uses_kubernetes_style_keys_and_includes_counts() -> None:
    data = failed_job().to_dict()
    assert data["phase"] == "Failed"
    assert data["backoffCount"] == 2 and data["backoffLimit"] == 3
    assert data["replicas"][2]["exitCode"] == 3
    assert data["firstFailure"]["policyAction"] == "restarted 2/3, gave up"
    assert data["counts"]["worker"] == {
        "pending": 0,
        "running": 0,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 0,
        "unknown": 0,
    }


def test_from_dict_ignores_unknown_keys() -> None:
    # A record written by a newer kubetrain with extra fields still loads.
    data = failed_job().to_dict()
    data["someFutureField"] = {"x": 1}
    data["replicas"][0]["gpuUtilization"] = 0.5
    assert JobStatus.from_dict(data) == failed_job()


def test_from_dict_rejects_unknown_phase() -> None:
    data = failed_job().to_dict()
    data["phase"] = "Exploded"
    with pytest.raises(ValueError):
        JobStatus.from_dict(data)


phases = st.sampled_from(list(ReplicaPhase))
times = st.none() | st.floats(min_value=0, max_value=4e9, allow_nan=False)
text = st.none() | st.text(max_size=20)
replicas = st.builds(
    ReplicaStatus,
    role=st.sampled_from(["master", "worker", "ps"]),
    index=st.integers(0, 64),
    phase=phases,
    exit_code=st.none() | st.integers(0, 255),
    signal=st.none() | st.integers(1, 64),
    restarts=st.integers(0, 10),
    pid=st.none() | st.integers(1, 2**22),
    host=text,
    started_at=times,
    finished_at=times,
    reason=text,
    message=text,
)
jobs = st.builds(
    JobStatus,
    job_id=st.text(min_size=1, max_size=20),
    name=st.text(min_size=1, max_size=20),
    backend=st.sampled_from(["local", "kubernetes"]),
    namespace=text,
    phase=st.sampled_from(list(JobPhase)),
    replicas=st.lists(replicas, max_size=6),
    backoff_count=st.integers(0, 10),
    backoff_limit=st.none() | st.integers(0, 10),
    conditions=st.lists(
        st.builds(
            Condition,
            type=st.text(min_size=1, max_size=12),
            status=st.sampled_from(list(ConditionStatus)),
            reason=text,
            message=text,
            time=st.floats(min_value=0, max_value=4e9, allow_nan=False),
        ),
        max_size=4,
    ),
    reason=text,
    message=text,
    created_at=times,
    started_at=times,
    finished_at=times,
    first_failure=st.none()
    | st.builds(
        FailureSummary,
        role=st.text(min_size=1, max_size=8),
        index=st.integers(0, 8),
        exit_code=st.none() | st.integers(0, 255),
        signal=st.none() | st.integers(1, 64),
        last_lines=st.lists(st.text(max_size=30), max_size=5),
        policy_action=text,
        reason=text,
        message=text,
    ),
)


@given(jobs)
def test_any_status_round_trips_through_json(status: JobStatus) -> None:
    assert JobStatus.from_dict(json.loads(json.dumps(status.to_dict()))) == status


def test_counts_per_role_in_order_of_appearance() -> None:
    status = JobStatus(
        job_id="j",
        name="j",
        replicas=[
            ReplicaStatus("launcher", 0, ReplicaPhase.RUNNING),
            ReplicaStatus("worker", 0, ReplicaPhase.RUNNING),
            ReplicaStatus("worker", 1, ReplicaPhase.PENDING),
            ReplicaStatus("worker", 2, ReplicaPhase.FAILED),
            ReplicaStatus("worker", 3, ReplicaPhase.SUCCEEDED),
            ReplicaStatus("worker", 4, ReplicaPhase.UNKNOWN),
        ],
    )
    counts = status.counts()
    assert list(counts) == ["launcher", "worker"]
    assert counts["launcher"] == RoleCounts(running=1)
    assert counts["worker"] == RoleCounts(pending=1, running=1, succeeded=1, failed=1, unknown=1)
    assert counts["worker"].total == 5


def cancelled_job() -> JobStatus:
    """Two workers a cancel stopped after worker-0 of three had succeeded."""
    return JobStatus(
        job_id="sweep-b7k2c",
        name="sweep",
        phase=JobPhase.CANCELLED,
        replicas=[
            ReplicaStatus("worker", 0, ReplicaPhase.SUCCEEDED, exit_code=0),
            ReplicaStatus("worker", 1, ReplicaPhase.CANCELLED, signal=15, reason="Cancelled"),
            ReplicaStatus("worker", 2, ReplicaPhase.CANCELLED, signal=9, reason="Cancelled"),
        ],
        reason="Cancelled",
        message="cancelled by request",
    )


def test_a_cancelled_replica_is_counted_as_cancelled_not_failed() -> None:
    status = cancelled_job()
    assert ReplicaPhase.CANCELLED.is_terminal
    counts = status.counts()["worker"]
    assert counts == RoleCounts(succeeded=1, cancelled=2)
    assert counts.total == 3
    assert status.to_dict()["counts"]["worker"]["cancelled"] == 2
    assert [r.describe_exit() for r in status.replicas[1:]] == [
        "stopped by cancel (SIGTERM)",
        "stopped by cancel (SIGKILL)",
    ]
    assert JobStatus.from_dict(json.loads(json.dumps(status.to_dict()))) == status


def test_describe_shows_cancelled_replicas_as_cancelled() -> None:
    text = format_describe(cancelled_job(), now=NOW)
    replicas = table_rows(text[text.index("Replicas:") : text.index("Counts:")])
    assert [row[2] for row in replicas[2:]] == ["Succeeded", "Cancelled", "Cancelled"]
    assert "Failed" not in text
    counts = table_rows(text[text.index("Counts:") : text.index("Conditions:")])
    assert dict(zip(counts[1], counts[2], strict=True))["CANCELLED"] == "2"
    assert dict(zip(counts[1], counts[2], strict=True))["FAILED"] == "0"


def test_stopped_by_cancel_marks_only_the_replicas_that_had_not_ended() -> None:
    replicas = [
        ReplicaStatus("worker", 0, ReplicaPhase.SUCCEEDED, exit_code=0),
        ReplicaStatus("worker", 1, ReplicaPhase.FAILED, exit_code=3),
        ReplicaStatus("worker", 2, ReplicaPhase.RUNNING),
        ReplicaStatus("worker", 3, ReplicaPhase.PENDING),
    ]
    stopped_by_cancel(replicas, NOW)
    assert [(r.phase, r.reason) for r in replicas] == [
        (ReplicaPhase.SUCCEEDED, None),
        (ReplicaPhase.FAILED, None),
        (ReplicaPhase.CANCELLED, "Cancelled"),
        (ReplicaPhase.CANCELLED, "Cancelled"),
    ]
    assert replicas[2].describe_exit() == "stopped by cancel"
    assert replicas[2].finished_at == NOW and replicas[0].finished_at is None


@pytest.mark.parametrize(
    ("exit_code", "sig", "reason", "expected"),
    [
        (0, None, None, "exit code 0"),
        (3, None, None, "exit code 3"),
        (None, 9, None, "killed by SIGKILL (9)"),
        (None, 15, None, "killed by SIGTERM (15)"),
        # Stopped by the backend because another replica failed (or a cancel): not a failure of its own.
        (None, 15, "Stopped", "stopped (SIGTERM)"),
        (143, None, "Stopped", "stopped (exit code 143)"),
        (137, None, "OOMKilled", "OOMKilled (137)"),
        (None, 9, "OOMKilled", "OOMKilled (137)"),
        # A container runtime reports death by signal as 128+N; name the likely signal.
        (139, None, None, "exit code 139 (SIGSEGV?)"),
        (None, None, None, ""),
    ],
)
def test_describe_exit(exit_code: int | None, sig: int | None, reason: str | None, expected: str) -> None:
    assert describe_exit(exit_code, sig, reason) == expected
    replica = ReplicaStatus("worker", 0, exit_code=exit_code, signal=sig, reason=reason)
    assert replica.describe_exit() == expected


def test_describe_exit_names_signals_via_platform() -> None:
    assert describe_exit(None, int(signal.SIGINT)) == f"killed by SIGINT ({int(signal.SIGINT)})"
    # A number with no name on this platform is still shown, not an exception.
    assert describe_exit(None, 200) == "killed by signal 200 (200)"


def test_explain_gives_replica_exit_policy_and_last_output() -> None:
    text = failed_job().first_failure.explain("demo-x7k2b")  # type: ignore[union-attr]
    lines = text.splitlines()
    assert lines[0] == "Job demo-x7k2b failed: worker-1 exited with code 3 (restarted 2/3, gave up)"
    assert lines[1] == "  last output of worker-1:"
    assert lines[2:] == [
        "    | Traceback (most recent call last):",
        '    |   File "train.py", line 9',
        "    | ValueError: boom",
    ]


def test_explain_signal_and_no_output() -> None:
    failure = FailureSummary(
        role="worker",
        index=0,
        signal=9,
        policy_action="not retried: restartPolicy Never",
        message="the node ran out of memory",
    )
    text = failure.explain("big-job-abcde")
    assert text.splitlines() == [
        "Job big-job-abcde failed: worker-0 was killed by SIGKILL (9) (not retried: restartPolicy Never)",
        "  the node ran out of memory",
        "  worker-0 wrote no output",
    ]


def test_explain_oom() -> None:
    failure = FailureSummary(role="worker", index=2, exit_code=137, reason="OOMKilled")
    assert failure.headline() == "worker-2 was OOMKilled (137)"


def test_summary_line() -> None:
    assert failed_job().summary_line() == (
        "demo-x7k2b Failed (BackoffLimitExceeded): worker-1 exited with code 3 (restarted 2/3, gave up)"
    )
    running = JobStatus(
        job_id="demo-aaaaa",
        name="demo",
        phase=JobPhase.RUNNING,
        replicas=[ReplicaStatus("worker", 0, ReplicaPhase.RUNNING), ReplicaStatus("worker", 1)],
    )
    assert running.summary_line() == "demo-aaaaa Running: 1/2 replicas running"


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (None, "<unknown>"),
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (312, "5m12s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (20 * 3600, "20h"),
        (2 * 86400, "2d"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (400 * 86400, "400d"),
        (2 * 365 * 86400 + 10 * 86400, "2y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_format_age_matches_kubectl(seconds: float | None, expected: str) -> None:
    assert format_age(seconds) == expected


def table_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_format_table() -> None:
    running = JobStatus(
        job_id="train-b2c4d",
        name="train",
        phase=JobPhase.RUNNING,
        replicas=[ReplicaStatus("worker", i, ReplicaPhase.RUNNING, restarts=1 if i == 0 else 0) for i in range(2)],
        backoff_count=1,
        created_at=NOW - 312,
    )
    rows = table_rows(format_table([running, failed_job()], wide=False, now=NOW))
    assert rows[0] == ["NAME", "PHASE", "REPLICAS", "RESTARTS", "AGE"]
    # The restarts held against backoffLimit: worker-0's one restart is the group's, counted once.
    assert rows[1] == ["train-b2c4d", "Running", "2/2", "1", "5m12s"]
    # Finished: REPLICAS counts replicas that succeeded.
    assert rows[2] == ["demo-x7k2b", "Failed", "2/3", "2", "5m10s"]


def test_format_table_columns_are_aligned() -> None:
    short = JobStatus(job_id="a-bbbbb", name="a", created_at=NOW)
    lines = format_table([failed_job(), short], wide=True, now=NOW).splitlines()
    for column in ("PHASE", "REPLICAS", "AGE", "BACKEND", "REASON"):
        start = lines[0].index(column)
        for line in lines[1:]:
            assert line[start - 1] == " " and line[start] != " ", (column, line)


def test_format_table_wide_and_empty() -> None:
    k8s = JobStatus(
        job_id="train-b2c4d",
        name="train",
        backend="kubernetes",
        namespace="ml",
        phase=JobPhase.PENDING,
        created_at=NOW,
    )
    rows = table_rows(format_table([k8s, failed_job()], wide=True, now=NOW))
    assert rows[0] == ["NAME", "PHASE", "REPLICAS", "RESTARTS", "AGE", "BACKEND", "NAMESPACE", "REASON"]
    assert rows[1] == ["train-b2c4d", "Pending", "0/0", "0", "0s", "kubernetes", "ml", "<none>"]
    assert rows[2][-3:] == ["local", "<none>", "BackoffLimitExceeded"]
    assert format_table([], wide=True) == "No jobs found."


def test_format_describe_sections() -> None:
    text = format_describe(failed_job(), now=NOW)
    lines = text.splitlines()
    fields = dict(line.split(":", 1) for line in lines[:10] if not line.startswith(" "))
    assert fields["Name"].strip() == "demo-x7k2b"
    assert fields["Phase"].strip() == "Failed"
    assert fields["Reason"].strip() == "BackoffLimitExceeded"
    assert fields["Restarts"].strip() == "2/3"
    # Local jobs have no namespace; the line would only be noise.
    assert "Namespace" not in fields
    for section in ("Replicas:", "Counts:", "Conditions:", "Failure:"):
        assert section in lines

    replicas = table_rows(text[text.index("Replicas:") : text.index("Counts:")])
    assert replicas[1] == ["ROLE", "INDEX", "PHASE", "EXIT", "RESTARTS", "PID/HOST", "REASON"]
    assert replicas[4] == ["worker", "1", "Failed", "exit", "code", "3", "1", "102@node-a", "-"]

    counts = table_rows(text[text.index("Counts:") : text.index("Conditions:")])
    assert counts[1] == ["ROLE", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]
    assert counts[2] == ["master", "0", "0", "1", "0", "0", "0"]
    assert counts[3] == ["worker", "0", "0", "1", "1", "0", "0"]

    conditions = text[text.index("Conditions:") : text.index("Failure:")]
    assert "BackoffLimitExceeded" in conditions and "Restarting" in conditions

    failure = text[text.index("Failure:") :]
    assert "Job demo-x7k2b failed: worker-1 exited with code 3 (restarted 2/3, gave up)" in failure
    assert "| ValueError: boom" in failure


def test_format_describe_of_a_new_job() -> None:
    text = format_describe(JobStatus(job_id="new-ccccc", name="new", backend="kubernetes", namespace="ml"))
    assert "Namespace:" in text and "ml" in text
    assert "Failure:" not in text
    assert "Replicas:\n  <none>" in text
