"""`kubetrain.run(..., on_status=...)`: a program gets the run as data (`RunEvent`), not as message text: the
job's id once it exists, then its status each time a replica starts or ends — locally from the supervisor
that makes each change, on Kubernetes from the watch that follows the job. And `kubetrain.run` shows the
replicas' output without the metric lines `kubetrain.metrics.log` prints into it, as `kubetrain run` does."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import io
import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path

import kubetrain
from kubetrain.backends.base import RunEvent, RunResult
from kubetrain.metrics.wire import MARKER, format_record
from kubetrain.status import JobPhase, JobStatus, ReplicaPhase
from kubetrain.terminal import OutputSink
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401
from tests.support.helpers import make_job, write

WAIT = 30.0
"""Bounds a failure only: every wait ends as soon as the event it waits for arrives."""


class Events:
    """What `on_status` received, and a way to wait for an event (no sleeping)."""

    def __init__(self) -> None:
        self.received: list[RunEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: RunEvent) -> None:
        with self._cond:
            self.received.append(event)
            self._cond.notify_all()

    def wait_for(self, what: str, test: Callable[[RunEvent], bool]) -> RunEvent:
        with self._cond:
            found = self._cond.wait_for(lambda: next((e for e in self.received if test(e)), None), WAIT)
        assert found is not None, f"no event with {what}: {[(e.kind, e.text) for e in self.received]}"
        return found

    def statuses(self) -> list[JobStatus]:
        return [e.status for e in self.received if e.kind == "status" and e.status is not None]


def phases(status: JobStatus | None) -> dict[str, ReplicaPhase]:
    return {} if status is None else {r.name: r.phase for r in status.replicas}


def in_a_thread(call: Callable[[], RunResult]) -> Callable[[], RunResult]:
    """Run `call` in a thread; the returned function joins it and gives its result (or raises its error)."""
    outcome: list[RunResult | BaseException] = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def join() -> RunResult:
        thread.join(WAIT)
        assert outcome, "run did not return"
        [result] = outcome
        if isinstance(result, BaseException):
            raise result
        return result

    return join


LAST_WAITS = """\
import os
if os.environ["KUBETRAIN_REPLICA_INDEX"] == "1":
    with open(os.environ["GATE"]) as gate:  # held until the test has seen worker-0 end
        gate.read()
print("done", os.environ["KUBETRAIN_REPLICA_INDEX"], flush=True)
"""


def test_a_local_run_tells_a_program_its_job_id_then_each_replica_starting_and_ending(tmp_path: Path) -> None:
    write(tmp_path / "train.py", LAST_WAITS)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    job = make_job(
        {"framework": "generic", "replicas": 2, "run": {"python": ["train.py"]},
         "env": [{"name": "GATE", "value": str(gate)}]},
        name="events",
    )  # fmt: skip
    texts: list[str] = []
    events = Events()
    join = in_a_thread(
        lambda: kubetrain.run(job, base_dir=str(tmp_path), quiet=True, on_event=texts.append, on_status=events)
    )
    created = events.wait_for("kind created", lambda e: e.kind == "created")
    assert created is events.received[0] and created.job_id
    both = events.wait_for("both replicas running", lambda e: set(phases(e.status).values()) == {ReplicaPhase.RUNNING})
    assert both.status is not None and both.status.phase is JobPhase.RUNNING
    # worker-0 has ended while worker-1 waits at the gate: the event comes as it happens, not at the end.
    events.wait_for(
        "worker-0 ended alone",
        lambda e: phases(e.status) == {"worker-0": ReplicaPhase.SUCCEEDED, "worker-1": ReplicaPhase.RUNNING},
    )
    with open(gate, "w") as f:
        f.write("go")
    result = join()
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    assert all(e.job_id == result.job_id == created.job_id for e in events.received)
    final = events.statuses()[-1]
    assert final.phase is JobPhase.SUCCEEDED and set(phases(final).values()) == {ReplicaPhase.SUCCEEDED}
    # A status event is a change: no two in a row show the same thing.
    shown = [(s.phase, s.reason, sorted(phases(s).items())) for s in events.statuses()]
    assert all(a != b for a, b in itertools.pairwise(shown)), shown
    # The text callback is as it was: kubetrain's messages only, each also an event of kind "message".
    assert texts == [f"job {result.job_id}: 2 processes (worker×2); Ctrl-C cancels"]
    assert [e.text for e in events.received if e.kind == "message"] == texts


def test_a_cluster_run_tells_a_program_pods_scheduled_starting_running_and_ending(emulated: Cluster) -> None:
    emu, controllers = emulated.emu, emulated.controllers
    assert emu is not None and controllers is not None
    events = Events()
    texts: list[str] = []
    out, err = io.StringIO(), io.StringIO()
    join = in_a_thread(
        lambda: kubetrain.run(
            kubetrain.from_dict(job_doc("watched")),
            backend="kubernetes",
            kubeconfig=str(emulated.kubeconfig),
            namespace="default",
            flavor="job",
            sink=OutputSink(out, err, color=False),
            on_event=texts.append,
            on_status=events,
        )
    )
    created = events.wait_for("kind created", lambda e: e.kind == "created")
    assert (created.job_id, created.text) == ("watched", texts[0])
    pods = controllers.create_pods("job", "watched")
    unplaced = events.wait_for(
        "both pods created, on no node yet",
        lambda e: (
            e.status is not None
            and [(r.phase, r.host) for r in e.status.replicas] == [(ReplicaPhase.PENDING, None)] * 2
        ),
    )
    assert unplaced.status is not None and unplaced.status.phase is JobPhase.PENDING
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Pending", reason="ContainerCreating")
    starting = events.wait_for(
        "containers being created",
        lambda e: e.status is not None and [r.reason for r in e.status.replicas] == ["ContainerCreating"] * 2,
    )
    assert starting.status is not None and starting.status.phase is JobPhase.PENDING
    sample = format_record({"loss": 0.5}, 1, 1767225600.0, "worker", 0, 0)
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, f"{MARKER}{sample}\nepoch 1 on {replica}\n")
    events.wait_for("both pods running", lambda e: set(phases(e.status).values()) == {ReplicaPhase.RUNNING})
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    controllers.conclude("job", "watched", "Succeeded")
    result = join()
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    final = events.statuses()[-1]
    assert final.phase is JobPhase.SUCCEEDED and set(phases(final).values()) == {ReplicaPhase.SUCCEEDED}
    assert all(e.job_id == "watched" for e in events.received)
    # The program's output, without the metric lines (`kubetrain metrics watched` reads those).
    assert sorted(out.getvalue().splitlines()) == ["[worker-0] epoch 1 on worker-0", "[worker-1] epoch 1 on worker-1"]
    # Every line `on_event` got is an event too: the first is the created event's text, the rest messages.
    assert [e.text for e in events.received if e.kind in ("created", "message")] == texts


def test_a_local_run_hides_metric_lines_a_replica_prints(tmp_path: Path) -> None:
    write(
        tmp_path / "train.py",
        "import kubetrain.metrics as m\nprint('before')\nm.log(step=1, loss=0.5)\nprint('after')\n",
    )
    job = make_job(
        {"framework": "generic", "replicas": 1, "run": {"python": ["train.py"]},
         "env": [{"name": "KUBETRAIN_METRICS", "value": "stdout"}, {"name": "KUBETRAIN_METRICS_FILE", "value": ""}]},
        name="marked",
    )  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    result = kubetrain.run(job, base_dir=str(tmp_path), sink=OutputSink(out, err, color=False))
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED, err.getvalue()
    assert out.getvalue().splitlines() == ["[worker-0] before", "[worker-0] after"]
