"""Where kubetrain contradicted the source documents (shared seeds 002 T9k DeepSpeedJob, 003 TorchX, 004 Run:ai
TrainingWorkload), each held to the document's own words. The files are written here in the shapes the
projects' own examples use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local.prepare import free_ports
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


def test_deepspeedjob_custom_command_is_the_launch_command_run_once(tmp_path: Path) -> None:
    """Seed 002: customCommand is "Custom launch commands, when enabled, other options in Config except for
    slotsPerWorker will not take effect": the command that launches the job, run once (as the deepspeed launcher
    it replaces), with the workers' hostfile. It ran on every worker replica."""
    out = tmp_path / "launches"
    doc = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": "ds-custom"},
        "spec": {
            "config": {
                "slotsPerWorker": 1,
                "customCommand": f'echo "launch $KUBETRAIN_ROLE over $(wc -l < "$KUBETRAIN_HOSTFILE")" >> {out}',
            },
            "worker": {"replicas": 3, "template": {"spec": {"containers": [{
                "name": "worker", "image": "deepspeed/deepspeed:v0.14.0"}]}}},
        },
    }
    conversion = convert(doc)
    status = run_job(conversion.job.with_base_dir(tmp_path), tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    lines = out.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launch launcher over ")


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


TRIAL = """\
import os, sys, time
index, total = int(os.environ["KUBETRAIN_REPLICA_INDEX"]), int(os.environ["KUBETRAIN_NUM_REPLICAS"])
out = os.environ["OUT_DIR"]
running, done = os.path.join(out, "running"), os.path.join(out, "done")
if index == 1 and not os.path.exists(os.path.join(out, "failed-once")):
    open(os.path.join(out, "failed-once"), "w").close()
    sys.exit(3)  # this run fails once: it is started again alone
open(os.path.join(running, str(index)), "w").close()
most = 0
while True:  # wait for a peer running at the same time, unless this is the last run left
    peers = len(os.listdir(running))
    most = max(most, peers)
    if peers > 1 or len(os.listdir(done)) + 1 >= total:
        break
    time.sleep(0.02)
with open(os.path.join(done, str(index)), "w") as f:
    f.write(str(most))
os.unlink(os.path.join(running, str(index)))
"""


def test_runai_completions_and_parallelism_run_that_many_successes_at_most_that_many_at_a_time(
    tmp_path: Path,
) -> None:
    """Seed 004: completions "Specifies the number of successful pods the job should reach to be completed";
    parallelism "the maximum desired number of pods the workload should run at any given time". With 4 and 2,
    kubetrain ran one pod and called the job Succeeded; now 4 runs succeed (one of them after a failure, started
    again alone), never more than 2 at once, and two do run together."""
    write(tmp_path / "trial.py", TRIAL)
    out = tmp_path / "out"
    for folder in ("running", "done"):
        (out / folder).mkdir(parents=True)
    doc = workload(completions=4, parallelism=2, command="python trial.py")
    doc["spec"]["environment"] = {"items": {"OUT_DIR": {"value": str(out)}}}
    conversion = convert(doc)
    assert conversion.data["spec"]["trials"] == {"completions": 4, "parallelism": 2}
    assert not conversion.refused()
    status = run_job(conversion.job.with_base_dir(tmp_path), tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    most = {int(p.name): int(p.read_text()) for p in (out / "done").iterdir()}
    assert sorted(most) == [0, 1, 2, 3]  # every run succeeded once
    assert max(most.values()) == 2  # two at a time, never more
    assert [r.restarts for r in status.replicas] == [0, 1, 0, 0] and status.backoff_count == 1


def test_runai_completions_default_to_1_and_parallelism_is_at_most_completions() -> None:
    """Seed 004: "The default value for 'completions' is 1. The 'parallelism' flag should be smaller or equal to
    'completions'"."""
    only_parallelism = convert(workload(parallelism=3))
    assert only_parallelism.data["spec"]["trials"] == {"completions": 1}
    assert any("completions" in note.reason for note in only_parallelism.approximated())
    assert convert(workload(completions=3)).data["spec"]["trials"] == {"completions": 3}


# -- 003 TorchX: macros -------------------------------------------------------------------------------------

REPORT_ARGS = """\
import json, os, sys
index = os.environ["KUBETRAIN_REPLICA_INDEX"]
rank0 = sys.argv[sys.argv.index("--rank0-env") + 1]
seen = {"argv": sys.argv[1:], "out": os.environ["OUT"], "rank0_host": os.environ.get(rank0)}
with open(os.path.join(os.environ["REPORTS"], f"replica-{index}.json"), "w") as f:
    json.dump(seen, f)
"""


def macro_app(reports: Path) -> Any:
    """A TorchX AppDef whose args and env use the macros TorchX substitutes (its test_data.py's shape)."""
    import torchx.specs as specs  # type: ignore[import-untyped, unused-ignore]

    trainer = specs.Role(
        name="trainer", image="trainer:1", entrypoint="python",
        args=["report.py", "--replica", specs.macros.replica_id, "--app-id", specs.macros.app_id,
              "--rank0-env", specs.macros.rank0_env, "--output-path", f"{specs.macros.img_root}/out",
              "--cost", "$$5"],
        env={"OUT": f"/ckpt/{specs.macros.app_id}/{specs.macros.replica_id}", "REPORTS": str(reports)},
        num_replicas=2,
    )
    return specs.AppDef("macros", roles=[trainer])


def test_torchx_macros_are_substituted_per_replica_when_run_here(tmp_path: Path) -> None:
    """Seed 003 and torchx.specs.api.macros: "replica_id - unique id for each instance of a replica of a Role, ...
    a role with 3 replicas could have the 0, 1, 2 as replica ids"; "app_id - application id as assigned by the
    scheduler"; rank0_env "will be filled with the name of the environment variable that provides the master host
    address"; img_root, the image's root ("" on TorchX's Kubernetes scheduler). They reached the program as
    written; each replica now gets its own values, in args (substituted "at runtime") and env values."""
    import kubetrain

    write(tmp_path / "report.py", REPORT_ARGS)
    reports = tmp_path / "reports"
    reports.mkdir()
    job = kubetrain.from_torchx(macro_app(reports))
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    for index in (0, 1):
        seen = json.loads((reports / f"replica-{index}.json").read_text())
        assert seen["argv"] == ["--replica", str(index), "--app-id", status.job_id, "--rank0-env",
                                "KUBETRAIN_RANK0_HOST", "--output-path", "/out", "--cost", "$5"]
        assert seen["out"] == f"/ckpt/{status.job_id}/{index}"
        assert seen["rank0_host"] == "127.0.0.1"  # the variable ${rank0_env} names holds the first replica's host


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_torchx_macros_in_pods_are_what_the_replicas_see_here(flavor: str, tmp_path: Path) -> None:
    """The same AppDef rendered: each pod's container, run as the kubelet runs it (its `$(VAR)` expansion, the
    engine's index) through a real /bin/sh, hands the program the arguments and env the local replica has."""
    import kubetrain
    from tests.kubernetes.render.test_env import check_parity

    job = kubetrain.from_torchx(macro_app(tmp_path))
    assert check_parity(job, flavor, tmp_path=tmp_path) == 2


def test_torchx_app_names_keep_their_separators_and_the_note_says_what_torchx_makes_of_them() -> None:
    """Seed 003: cleanup_str "Invokes lower on the string and removes all characters that do not satisfy [a-z0-9]":
    TorchX names `My_Trainer.v2` `mytrainerv2`; kubetrain keeps `my-trainer-v2` on purpose, and says both."""
    import torchx.specs as specs  # type: ignore[import-untyped, unused-ignore]

    from kubetrain.foreign.torchx import torchx_conversion

    app = specs.AppDef("My_Trainer.v2", roles=[specs.Role(name="trainer", image="t:1", entrypoint="./train")])
    conversion = torchx_conversion(app)
    assert conversion.job.metadata.name == "my-trainer-v2"
    note = next(n for n in conversion.notes if n.source == "name")
    assert "'mytrainerv2'" in note.reason and "'my-trainer-v2'" in note.reason
