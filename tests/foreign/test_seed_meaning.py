"""Where kubetrain contradicted the source documents (shared seeds 002 T9k DeepSpeedJob, 003 TorchX, 004 Run:ai
TrainingWorkload), each held to the document's own words. The files are written here in the shapes the
projects' own examples use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local.backend import free_ports
from kubetrain.foreign import convert
from kubetrain.status import JobPhase
from tests.support.helpers import no_process_left_behind, run_job, write  # noqa: F401 (an autouse fixture)

# -- 002 T9k DeepSpeedJob -----------------------------------------------------------------------------------

RANK_REPORT = """\
import json, os, sys
import torch.distributed as dist

dist.init_process_group("gloo")  # env://, as deepspeed.init_distributed() reads it
rank = dist.get_rank()
report = {"rank": rank, "world": dist.get_world_size(), "argv": sys.argv[1:], "port": os.environ["MASTER_PORT"]}
with open(os.path.join(os.environ["OUT_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
dist.barrier()
dist.destroy_process_group()
"""


def deepspeedjob(other_args: list[str], out: Path) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": "ds-args"},
        "spec": {
            "config": {"slotsPerWorker": 1, "run": {"python": ["report.py", "--steps", "3"]}, "otherArgs": other_args},
            "worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{
                    "name": "worker", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                    "env": [{"name": "OUT_DIR", "value": str(out)}]}]}},
            },
        },
    }


@pytest.mark.slow
def test_deepspeedjob_other_args_go_to_the_deepspeed_launcher_with_one_slot_per_worker(tmp_path: Path) -> None:
    """Seed 002: otherArgs are "other command line args for the deepspeed job", whatever slotsPerWorker is. With
    one slot per worker they reached the Python interpreter (`python --master_port 29600 report.py`: "unknown
    option --master_port"); the deepspeed launcher of each worker's node takes them now."""
    pytest.importorskip("deepspeed")
    write(tmp_path / "report.py", RANK_REPORT)
    out = tmp_path / "out"
    out.mkdir()
    port = str(free_ports(1)[0])
    job = convert(deepspeedjob(["--master_port", port], out)).job.with_base_dir(tmp_path)
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    assert sorted(r["rank"] for r in reports) == [0, 1]
    # The launcher's own option took effect, and the program saw only its own arguments.
    assert {r["port"] for r in reports} == {port}
    assert {tuple(r["argv"]) for r in reports} == {("--steps", "3")}


# -- 004 Run:ai TrainingWorkload ----------------------------------------------------------------------------


def workload(**fields: Any) -> dict[str, Any]:
    spec = {"name": {"value": "trial"}, "image": {"value": "python:3.12"},
            "command": {"value": "python train.py --epochs 3"}, **{k: {"value": v} for k, v in fields.items()}}
    return {"apiVersion": "run.ai/v2alpha1", "kind": "TrainingWorkload", "metadata": {"name": "trial"}, "spec": spec}


@pytest.mark.parametrize("run_as_user", [False, None])
def test_runai_ids_are_used_only_when_run_as_user_is_true(run_as_user: bool | None) -> None:
    """Seed 004: runAsUid and runAsGid are "used only if runAsUser is set to true". With runAsUser false or
    absent, kubetrain rendered runAsUser 1000 and runAsGroup 2000 while warning that runAsGid was ignored."""
    fields: dict[str, Any] = {"runAsUid": 1000, "runAsGid": 2000}
    if run_as_user is not None:
        fields["runAsUser"] = run_as_user
    conversion = convert(workload(**fields))
    security = conversion.data["spec"].get("security") or {}
    assert "runAsUid" not in security and "runAsGid" not in security
    refused = {note.source: note.reason for note in conversion.refused()}
    assert set(refused) == {"spec.runAsUid", "spec.runAsGid"}
    assert all("only if runAsUser is set to true" in why for why in refused.values())
    pod = conversion.job.spec
    assert pod.security is None or (pod.security.run_as_uid is None and pod.security.run_as_gid is None)


def test_runai_ids_apply_with_run_as_user_true() -> None:
    conversion = convert(workload(runAsUser=True, runAsUid=1000, runAsGid=2000))
    assert conversion.data["spec"]["security"] == {"runAsUid": 1000, "runAsGid": 2000}
    assert not conversion.refused()


def test_runai_backoff_limit_defaults_to_6() -> None:
    """Seed 004: backoffLimit "Specifies the number of retries before marking a workload as failed. Defaults to
    6". A workload without it became backoffLimit 0 with restartPolicy Never: no retry at all."""
    job = convert(workload()).job
    assert job.spec.backoff_limit_of() == 6
    assert job.spec.job_restart_policy() == "OnFailure"
    assert convert(workload(backoffLimit=1)).job.spec.backoff_limit_of() == 1
