"""Elastic jobs on this machine, with real torchrun agents and real gloo: a lost replica is survived and
replaced, and a running job is scaled. Every wait is on a file the training script writes or on the job's
recorded status, never on a clock."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from kubetrain.contract.errors import UsageError
from kubetrain.status import JobPhase, JobStatus
from tests.support.helpers import local_backend as open_local
from tests.support.helpers import (
    log_lines,
    make_job,
    no_process_left_behind,  # noqa: F401 (an autouse fixture)
    start_detached,
    status_of,
    wait_for,
    wait_phase,
    write,
)

pytest.importorskip("torch")

# An elastic training loop as torchrun runs one: each restart of the workers resumes from the checkpoint rank 0
# writes after every step; every step all ranks all-reduce. It goes on past `steps` until it has run with
# `want_world` ranks, so a test that changes the membership knows the job ends only after the change took.
# Replica 1 holds at `hold_at` (once, announced by the `held` file) until the test kills it.
TRAIN = """\
import json, os, pathlib, sys, time
import torch
import torch.distributed as dist

work = pathlib.Path(sys.argv[1])
steps, want_world, hold_at = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
node = os.environ["KUBETRAIN_REPLICA_INDEX"]
ckpt = work / "ckpt.json"
state = json.loads(ckpt.read_text()) if ckpt.exists() else {"step": 0, "total": 0.0}
t = torch.tensor([float(state["step"]), state["total"]], dtype=torch.float64)
dist.broadcast(t, 0)
step, total = int(t[0]), float(t[1])
if rank == 0:
    (work / "running").write_text(str(world))
while step < steps or world < want_world:
    if step == hold_at and node == "1" and not (work / "held").exists():
        (work / "held").write_text(str(os.getpid()))
        while True:  # held until killed
            time.sleep(0.05)
    x = torch.tensor([float(step % steps + 1)], dtype=torch.float64)
    dist.all_reduce(x)
    total += float(x) / world
    step += 1
    if rank == 0:
        tmp = work / "ckpt.tmp"
        tmp.write_text(json.dumps({"step": step, "total": total}))
        tmp.rename(ckpt)
        with open(work / "worlds.txt", "a") as f:
            f.write(f"{step} {world}\\n")
    if step >= steps and world < want_world:
        time.sleep(0.02)  # waiting for the membership to change: no need to spin
dist.barrier()
print("RESULT " + json.dumps({"node": node, "rank": rank, "world": world, "step": step, "total": total}), flush=True)
dist.destroy_process_group()
"""

STEPS = 40
# Short rendezvous timers so a test takes seconds, not torch's half minutes: a dead agent is dropped after
# 5 missed 1 s heartbeats, and a round closes 1 s after its minimum is there.
RDZV = "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=5"


def elastic_job(work: Path, want_world: int, hold_at: int = -1, **spec: Any) -> dict[str, Any]:
    return {
        "framework": "pytorch",
        "replicas": 2,
        "elastic": {"minReplicas": 1, "maxReplicas": 3},
        "env": [{"name": "PET_RDZV_CONF", "value": RDZV}],
        "run": {"python": ["train.py", str(work), str(STEPS), str(want_world), str(hold_at)]},
        **spec,
    }


def results(job_id: str) -> list[dict[str, Any]]:
    """The RESULT line of each replica's last run."""
    out = []
    for lines in log_lines(job_id).values():
        found = [json.loads(line.split("RESULT ", 1)[1]) for line in lines if "RESULT " in line]
        if found:
            out.append(found[-1])
    return out


def condition_messages(status: JobStatus, kind: str) -> list[str]:
    return [c.message or "" for c in status.conditions if c.type == kind]


def test_losing_a_replica_runs_degraded_then_rejoins_and_succeeds(tmp_path: Path) -> None:
    write(tmp_path / "train.py", TRAIN)
    work = tmp_path / "work"
    work.mkdir()
    spec = elastic_job(work, want_world=2, hold_at=20, restartPolicy="OnFailure", runPolicy={"backoffLimit": 3})
    job_id, _ = start_detached(make_job(spec, "elastic"), tmp_path)
    wait_for("replica 1 to hold at step 20", lambda: (work / "held").exists())
    # A lost node: worker-1's torchrun agent (the replica's process) SIGKILLed; its worker goes with it.
    agent = status_of(job_id).replica("worker", 1)
    assert agent is not None and agent.pid is not None
    os.kill(agent.pid, signal.SIGKILL)
    final = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED, timeout=180)
    assert final.phase is JobPhase.SUCCEEDED, final.summary_line()
    lost = condition_messages(final, "ReplicaLost")
    assert len(lost) == 1 and lost[0].startswith("worker-1 killed by SIGKILL") and "1/2 replicas running" in lost[0]
    rejoined = condition_messages(final, "ReplicaRejoined")
    assert len(rejoined) == 1 and "2/2 replicas" in rejoined[0]
    # Degraded between the two, in the order they happened.
    kinds = [c.type for c in final.conditions]
    assert kinds.index("ReplicaLost") < kinds.index("ReplicaRejoined")
    worker1 = final.replica("worker", 1)
    assert worker1 is not None and worker1.restarts == 1 and final.backoff_count == 1
    # Both ranks of the rejoined job finished together, from the checkpoint, on the same result.
    done = results(job_id)
    assert sorted(r["rank"] for r in done) == [0, 1]
    assert {r["world"] for r in done} == {2}
    assert len({(r["step"], r["total"]) for r in done}) == 1
    assert done[0]["total"] == expected_total(done[0]["step"])


def expected_total(steps: int) -> float:
    """What the loop sums over `steps` steps, whatever the number of ranks each step ran with."""
    return float(sum(s % STEPS + 1 for s in range(steps)))


def test_a_lost_replica_not_replaced_leaves_the_job_running_degraded(tmp_path: Path) -> None:
    """restartPolicy Never: the lost replica stays lost, the survivor trains on alone and the job succeeds;
    while it runs its status says it is degraded."""
    write(tmp_path / "train.py", TRAIN)
    work = tmp_path / "work"
    work.mkdir()
    spec = elastic_job(work, want_world=1, hold_at=20)
    job_id, _ = start_detached(make_job(spec, "elastic"), tmp_path)
    wait_for("replica 1 to hold at step 20", lambda: (work / "held").exists())
    agent = status_of(job_id).replica("worker", 1)
    assert agent is not None and agent.pid is not None
    os.kill(agent.pid, signal.SIGKILL)
    degraded = wait_for("the job to say it is degraded",
                        lambda: (lambda s: s if s.degraded or s.phase.is_terminal else None)(status_of(job_id)))
    final = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED, timeout=180)
    if not degraded.phase.is_terminal:
        assert degraded.phase_text() == "Running (degraded: 1/2 replicas)"
    assert final.phase is JobPhase.SUCCEEDED, final.summary_line()
    lost = condition_messages(final, "ReplicaLost")
    assert len(lost) == 1 and "not replaced: not retried: restartPolicy Never" in lost[0]
    assert not condition_messages(final, "ReplicaRejoined")
    done = results(job_id)
    assert [(r["node"], r["world"]) for r in done] == [("0", 1)]
    # It trained alone after the loss: steps past the hold ran with one rank.
    worlds = [line.split() for line in (work / "worlds.txt").read_text().splitlines()]
    assert [w for s, w in worlds if int(s) <= 20] == ["2"] * 20
    assert {w for s, w in worlds if int(s) > 20} == {"1"}


def test_scaling_a_running_job_from_2_to_3_ends_with_3_ranks_agreeing(tmp_path: Path) -> None:
    write(tmp_path / "train.py", TRAIN)
    work = tmp_path / "work"
    work.mkdir()
    job_id, _ = start_detached(make_job(elastic_job(work, want_world=3), "elastic"), tmp_path)
    wait_for("the job to train with 2 ranks", lambda: (work / "running").exists())
    with open_local() as backend:
        with pytest.raises(UsageError, match=r"outside the job's elastic bounds \[1, 3\]"):
            backend.scale(job_id, 4)
        status = backend.scale(job_id, 3)
    assert [r.name for r in status.replicas] == ["worker-0", "worker-1", "worker-2"]
    final = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED, timeout=180)
    assert final.phase is JobPhase.SUCCEEDED, final.summary_line()
    assert condition_messages(final, "Scaled") == ["replicas 2 → 3: started worker-2"]
    done = results(job_id)
    assert sorted(r["rank"] for r in done) == [0, 1, 2]
    assert {r["world"] for r in done} == {3}
    assert len({(r["step"], r["total"]) for r in done}) == 1
    assert done[0]["total"] == expected_total(done[0]["step"])
    # The stored spec has the new size: describe shows it, and a resume would start 3.
    with open_local() as backend:
        assert backend.describe(job_id).to_dict()["spec"]["spec"]["replicas"] == 3
