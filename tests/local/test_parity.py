"""Same meaning on every backend, locally: a field the local backend accepts takes effect, is refused with
its path before anything is created, or is approximated with a warning naming it — never dropped.

Real processes and real files: a fake `nvidia-smi` on PATH (or a fake /proc) stands in for GPUs, so the
real discovery and assignment run against a device list this machine does not have."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.errors import LocalError, LocalRefusal
from kubetrain.backends.local.gpus import GpuInventory, discover_gpus, parse_nvidia_smi
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.backends.local.machine_fit import machine_fit
from kubetrain.contract.errors import EXIT_USAGE, JobNotFound, KubetrainError
from kubetrain.plan import plan
from kubetrain.status import JobPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    alive,
    cli,
    generic,
    job_file,
    log_lines,
    make_job,
    no_process_left_behind,
    wait_for,
    write,
)

pytestmark = pytest.mark.timeout(60)

SHOW = """\
import json, os, sys
# What this process was given: its argv and the variables the tests look at.
keys = ("KUBETRAIN_REPLICA_INDEX", "KUBETRAIN_LOCAL_RANK", "KUBETRAIN_PROCS_PER_REPLICA", "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER")
print("SHOW " + json.dumps({"argv": sys.argv[1:], **{k: os.environ.get(k) for k in keys}}), flush=True)
"""

FOUR_GPUS = "".join(f"GPU {i}: NVIDIA A100-SXM4-40GB (UUID: GPU-{i}aaa-bbbb)\n" for i in range(4))
MIG_GPU = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0aaa-bbbb)
  MIG 1g.5gb      Device  0: (UUID: MIG-0000-aaaa)
  MIG 1g.5gb      Device  1: (UUID: MIG-0001-aaaa)
  MIG 2g.10gb     Device  2: (UUID: MIG-0002-aaaa)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-1aaa-bbbb)
"""


def shown(job_id: str) -> dict[str, dict[str, Any]]:
    """Process key → what SHOW printed in it."""
    out = {}
    for key, lines in log_lines(job_id).items():
        found = [json.loads(line.split("SHOW ", 1)[1]) for line in lines if line.startswith("SHOW ")]
        assert len(found) == 1, (key, lines)
        out[key] = found[0]
    return out


def run(job_spec: dict[str, Any], base: Path, name: str = "job", **options: Any) -> tuple[str, list[str], JobPhase]:
    """Run attached through the backend; (job id, the events said, final phase)."""
    events: list[str] = []
    with LocalBackend(**options) as backend:
        result = backend.run(make_job(job_spec, name).with_base_dir(base), on_event=events.append)
    assert result.status is not None
    assert [f"warning: {w}" for w in result.warnings] == [e for e in events if e.startswith("warning: ")]
    return result.job_id, result.warnings, result.status.phase


def refused(job_spec: dict[str, Any], base: Path, **options: Any) -> LocalRefusal:
    """The refusal of running `job_spec`, after checking that nothing was created."""
    with LocalBackend(**options) as backend:
        logs = backend.store.root / "logs"
        before = ([s.job_id for s in backend.list()], sorted(logs.iterdir()) if logs.exists() else [])
        with pytest.raises(LocalRefusal) as caught:
            backend.run(make_job(job_spec).with_base_dir(base))
        assert ([s.job_id for s in backend.list()], sorted(logs.iterdir()) if logs.exists() else []) == before
    return caught.value


def nvidia_smi(folder: Path, listing: str, code: int = 0) -> Path:
    """A folder holding an `nvidia-smi` that prints `listing` (for `-L`) and exits `code`."""
    bindir = folder / "fake-bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}EOF\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


def fake_nvidia_smi(folder: Path, monkeypatch: pytest.MonkeyPatch, listing: str, code: int = 0) -> None:
    """That `nvidia-smi` first on PATH, for kubetrain and the CLI it starts."""
    monkeypatch.setenv("PATH", f"{nvidia_smi(folder, listing, code)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def fake_proc(root: Path, bus_ids: list[str]) -> Path:
    """A /proc with the NVIDIA driver's entry for a GPU at each PCI bus id."""
    for n, bus in enumerate(bus_ids):
        info = f"Model: \t\t NVIDIA T4\nIRQ:   \t\t 1{n}\nGPU UUID: \t GPU-{bus}\nBus Location: \t {bus}\n"
        write(root / "driver" / "nvidia" / "gpus" / bus / "information", info)
    return root


def no_gpus(tmp_path: Path) -> Callable[[], GpuInventory]:
    """Discovery on a machine with no nvidia-smi and no driver."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return lambda: discover_gpus(environ={"PATH": str(empty)}, proc_root=tmp_path / "no-proc")


# -- runPolicy.ttlSecondsAfterFinished ------------------------------------------------------------------------


def test_ttl_deletes_the_finished_job_and_its_logs_once_it_expires(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "print('done')\n")
    kept, _, _ = run(generic(["ok.py"], 1), tmp_path, "kept")
    job_id, warnings, phase = run(generic(["ok.py"], 1, runPolicy={"ttlSecondsAfterFinished": 1}), tmp_path, "ttl")
    assert phase is JobPhase.SUCCEEDED and warnings == []
    with LocalBackend() as backend:
        logs = backend.store.log_dir(job_id)
        assert (logs / "worker-0.log").read_text()
        finished = backend.store.get_status(job_id).finished_at
        assert finished is not None
        # Not before its time, exactly at it (the store's view, with no clock involved).
        assert backend.store.expired_jobs(now=finished + 0.9) == []
        assert backend.store.expired_jobs(now=finished + 1) == [job_id]
        # And for real: the next look at the jobs once a second has passed deletes it, logs included.
        wait_for("the job to expire", lambda: job_id not in {s.job_id for s in backend.list()}, timeout=10)
        assert not logs.exists()
        with pytest.raises(JobNotFound):
            backend.status(job_id)
        assert [s.job_id for s in backend.list()] == [kept]  # no TTL: kept


def test_ttl_sweep_leaves_a_job_whose_supervisor_is_still_finishing(tmp_path: Path) -> None:
    with LocalBackend() as backend:
        store = backend.store
        job_id = store.create_job("j", "local", "{}", None, [("worker", 0)], ttl_seconds_after_finished=0)
        store.set_job_phase(job_id, JobPhase.SUCCEEDED, reason="Completed")
        store.set_supervisor(job_id, os.getpid())  # this very process: alive
        assert backend.sweep_expired() == []
        assert store.log_dir(job_id).is_dir()
        store.set_supervisor(job_id, None)
        assert backend.sweep_expired() == [job_id]
        assert not store.log_dir(job_id).exists()


# -- runPolicy.cleanPodPolicy ---------------------------------------------------------------------------------

ONE_FAILS = """\
import os, pathlib, sys, time
# Replica 0 records its pid and runs on; replica 1 then fails, ending the job.
d = pathlib.Path(sys.argv[1])
if os.environ["KUBETRAIN_REPLICA_INDEX"] == "0":
    (d / "tmp").write_text(str(os.getpid()))
    (d / "tmp").rename(d / "0.pid")
    time.sleep(600)
while not (d / "0.pid").exists():
    time.sleep(0.01)
sys.exit(3)
"""


@pytest.mark.parametrize("policy", ["None", "Running", "All"])
def test_clean_pod_policy_stops_the_running_replicas_and_says_so_for_none(tmp_path: Path, policy: str) -> None:
    write(tmp_path / "one_fails.py", ONE_FAILS)
    spec = generic(["one_fails.py", str(tmp_path)], runPolicy={"cleanPodPolicy": policy})
    _, warnings, phase = run(spec, tmp_path)
    assert phase is JobPhase.FAILED
    survivor = int((tmp_path / "0.pid").read_text())
    assert not alive(survivor)  # no orphan, whatever the policy
    said = [w for w in warnings if w.startswith("spec.runPolicy.cleanPodPolicy:")]
    if policy == "None":
        assert len(said) == 1 and "approximated locally as Running" in said[0], warnings
    else:
        assert said == []  # honoured as written: the remaining replicas are stopped when the job ends


# -- procsPerReplica ------------------------------------------------------------------------------------------


def test_a_generic_job_runs_procs_per_replica_processes_each_told_its_local_rank(tmp_path: Path) -> None:
    write(tmp_path / "show.py", SHOW)
    job_id, warnings, phase = run(generic(["show.py"], 2, procsPerReplica=3, localRank=True), tmp_path)
    assert phase is JobPhase.SUCCEEDED and warnings == []
    seen = shown(job_id)
    assert sorted(seen) == [f"worker-{i}.{r}" for i in range(2) for r in range(3)]
    for key, got in seen.items():
        index, rank = key.removeprefix("worker-").split(".")
        assert (got["KUBETRAIN_REPLICA_INDEX"], got["KUBETRAIN_LOCAL_RANK"]) == (index, rank)
        assert got["KUBETRAIN_PROCS_PER_REPLICA"] == "3"
        assert got["argv"] == [f"--local_rank={rank}"]
        assert got["CUDA_VISIBLE_DEVICES"] is None  # asks for no GPU: the environment is left alone


# -- GPUs -----------------------------------------------------------------------------------------------------


def test_each_replica_gets_its_own_gpus_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(tmp_path, monkeypatch, FOUR_GPUS)
    write(tmp_path / "show.py", SHOW)
    spec = {
        "framework": "generic",
        "run": {"python": ["show.py"]},
        "roles": {"server": {"replicas": 1}, "trainer": {"replicas": 2, "resources": {"gpu": 2}}},
    }
    job_id, warnings, phase = run(spec, tmp_path)
    assert phase is JobPhase.SUCCEEDED and warnings == []
    devices = {key: (got["CUDA_VISIBLE_DEVICES"], got["CUDA_DEVICE_ORDER"]) for key, got in shown(job_id).items()}
    assert devices == {
        "server-0": ("", "PCI_BUS_ID"),  # asks for none: sees none, as a pod without a GPU request
        "trainer-0": ("0,1", "PCI_BUS_ID"),
        "trainer-1": ("2,3", "PCI_BUS_ID"),
    }


def test_a_job_asking_for_more_gpus_than_there_are_is_refused_with_the_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, monkeypatch, FOUR_GPUS.splitlines(keepends=True)[0])
    write(tmp_path / "show.py", SHOW)
    refusal = refused(generic(["show.py"], 2, resources={"gpu": 2}), tmp_path)
    assert refusal.paths == ["spec.resources.gpu"]
    assert "the job asks for 4 GPUs (2 replicas × 2); this machine has 1 (nvidia-smi -L)" in str(refusal)
    assert isinstance(refusal, LocalError) and isinstance(refusal, KubetrainError)
    assert refusal.exit_code == EXIT_USAGE


def test_a_gpu_job_on_a_machine_with_none_is_refused_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, monkeypatch, "No devices were found\n")  # as the real one says it
    write(tmp_path / "show.py", SHOW)
    path = job_file(tmp_path, generic(["show.py"], 2, resources={"gpu": 1}))
    result = cli("run", path)
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "error: spec.resources.gpu: the job asks for 2 GPUs (2 replicas × 1); this machine has 0" in result.stderr
    assert "Traceback" not in result.stderr
    listed = cli("list")
    assert listed.returncode == 0 and "No jobs found" in listed.stdout + listed.stderr


def test_no_gpu_anywhere_is_refused_with_where_it_looked(tmp_path: Path) -> None:
    write(tmp_path / "show.py", SHOW)
    refusal = refused(generic(["show.py"], 1, resources={"gpu": 1}), tmp_path, gpus=no_gpus(tmp_path))
    assert "the job asks for 1 GPU (1 replica × 1); this machine has 0 (no nvidia-smi on PATH" in str(refusal)


def test_gpus_from_the_driver_proc_entries_without_nvidia_smi(tmp_path: Path) -> None:
    root = fake_proc(tmp_path / "proc", ["0000:3b:00.0", "0000:1a:00.0"])
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    inventory = discover_gpus(environ={"PATH": str(empty)}, proc_root=root)
    # Numbered in PCI bus order, as nvidia-smi numbers them (and CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID).
    assert [(g.index, g.uuid) for g in inventory.gpus] == [(0, "GPU-0000:1a:00.0"), (1, "GPU-0000:3b:00.0")]
    write(tmp_path / "show.py", SHOW)
    job_id, _, phase = run(generic(["show.py"], 2, resources={"gpu": 1}), tmp_path, gpus=lambda: inventory)
    assert phase is JobPhase.SUCCEEDED
    assert {k: v["CUDA_VISIBLE_DEVICES"] for k, v in shown(job_id).items()} == {"worker-0": "0", "worker-1": "1"}


def test_a_failing_nvidia_smi_falls_back_to_the_driver_and_cuda_visible_devices_limits_the_gpus(
    tmp_path: Path,
) -> None:
    bindir = nvidia_smi(tmp_path, "", code=9)
    root = fake_proc(tmp_path / "proc", ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0"])
    found = discover_gpus(environ={"PATH": str(bindir)}, proc_root=root)
    assert [g.index for g in found.gpus] == [0, 1, 2] and "-L failed" in found.source
    limited = discover_gpus(environ={"PATH": str(bindir), "CUDA_VISIBLE_DEVICES": "2,GPU-0000:01"}, proc_root=root)
    assert [g.index for g in limited.gpus] == [2, 0]
    assert "CUDA_VISIBLE_DEVICES=2,GPU-0000:01 leaves 2 of 3" in limited.source


def test_shares_of_a_gpu_are_packed_onto_whole_gpus_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, monkeypatch, "".join(FOUR_GPUS.splitlines(keepends=True)[:2]))
    write(tmp_path / "show.py", SHOW)
    spec = generic(["show.py"], 3, resources={"gpu": 0.5, "gpuSharing": "hami", "gpuMemory": "4Gi"})
    job_id, warnings, phase = run(spec, tmp_path)
    assert phase is JobPhase.SUCCEEDED
    assert {k: v["CUDA_VISIBLE_DEVICES"] for k, v in shown(job_id).items()} == {
        "worker-0": "0", "worker-1": "0", "worker-2": "1"
    }
    assert warnings[0].startswith("spec.resources.gpu: 0.5 of a GPU is approximated locally")
    assert all(w.startswith("not used locally") for w in warnings[1:])  # gpuMemory: nothing limits it here
    assert "worker-0, worker-1 on GPU 0; worker-2 on GPU 1" in warnings[0]


def test_mig_slices_get_mig_devices_or_whole_gpus_with_a_warning(tmp_path: Path) -> None:
    inventory = GpuInventory(tuple(parse_nvidia_smi(MIG_GPU)), "nvidia-smi -L")
    assert [g.index for g in inventory.whole] == [1]  # GPU 0 is in MIG mode: only its slices run work
    write(tmp_path / "show.py", SHOW)
    job_id, warnings, _ = run(generic(["show.py"], 2, resources={"migProfile": "1g.5gb"}), tmp_path,
                              gpus=lambda: inventory)
    assert warnings == []
    assert {k: v["CUDA_VISIBLE_DEVICES"] for k, v in shown(job_id).items()} == {
        "worker-0": "MIG-0000-aaaa", "worker-1": "MIG-0001-aaaa"
    }
    job_id, warnings, _ = run(generic(["show.py"], 1, resources={"migProfile": "3g.20gb"}), tmp_path, "other",
                              gpus=lambda: inventory)
    assert shown(job_id)["worker-0"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert len(warnings) == 1 and warnings[0].startswith("spec.resources.migProfile: 3g.20gb is approximated")
    refusal = refused(generic(["show.py"], 3, resources={"migProfile": "1g.5gb"}), tmp_path, gpus=lambda: inventory)
    assert "the job asks for 3 MIG 1g.5gb devices (3 replicas × 1); this machine has 2" in str(refusal)


def test_an_mpi_launcher_gets_the_gpus_of_the_workers_whose_ranks_it_starts(tmp_path: Path) -> None:
    inventory = GpuInventory(tuple(parse_nvidia_smi(FOUR_GPUS)), "nvidia-smi -L")
    job = make_job({"framework": "mpi", "run": {"python": ["t.py"]},
                    "roles": {"worker": {"replicas": 2, "resources": {"gpu": 1}}}})
    with LocalBackend(gpus=lambda: inventory) as backend:
        result = backend.run(job.with_base_dir(tmp_path), dry_run="client")
    assert result.plan is not None
    env = {r.role: r.processes[0].env for r in LaunchRecord.from_dict(result.plan).replicas if r.processes}
    # The launcher asks for none itself, and starts both workers' ranks: they see both workers' GPUs.
    assert env["launcher"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert any(w.startswith("spec.roles.worker.resources.gpu: launcher-0 starts the ranks") for w in result.warnings)


def test_the_user_env_still_wins_over_the_gpus_given(tmp_path: Path) -> None:
    inventory = GpuInventory(tuple(parse_nvidia_smi(FOUR_GPUS)), "nvidia-smi -L")
    env = {"CUDA_VISIBLE_DEVICES": "3", "SEEN": "$(CUDA_DEVICE_ORDER)"}
    job = make_job(generic(["t.py"], 1, resources={"gpu": 1}, env=env))
    with LocalBackend(gpus=lambda: inventory) as backend:
        result = backend.run(job.with_base_dir(tmp_path), dry_run="client")
    assert result.plan is not None
    given = LaunchRecord.from_dict(result.plan).processes[0].env
    assert (given["CUDA_VISIBLE_DEVICES"], given["SEEN"]) == ("3", "PCI_BUS_ID")


# -- mounts ---------------------------------------------------------------------------------------------------

READ = """\
import pathlib, sys
# Print the file each argument names (a mount's dst, or its src).
for name in sys.argv[1:]:
    print("READ", name, pathlib.Path(name).read_text().strip(), flush=True)
"""


def test_a_bind_mount_is_honoured_at_its_src_and_warned_about_elsewhere(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write(data / "f.txt", "hello\n")
    write(tmp_path / "read.py", READ)
    mounts = [
        {"type": "bind", "src": str(data), "dst": str(data)},
        {"type": "bind", "src": "data", "dst": "/kubetrain-test-data", "readonly": True},
    ]
    job_id, warnings, phase = run(generic(["read.py", str(data / "f.txt")], 1, mounts=mounts), tmp_path)
    assert phase is JobPhase.SUCCEEDED
    assert f"READ {data / 'f.txt'} hello" in log_lines(job_id)["worker-0"]
    assert warnings == [
        f"spec.mounts[1]: bind mount dst /kubetrain-test-data is not created locally; the program sees src {data} "
        "at its own path — use src paths, or a workingDir-relative path, in the program; readonly is not enforced "
        "locally"
    ]


@pytest.mark.parametrize(
    ("mount", "says"),
    [
        ({"type": "volume", "src": "datasets", "dst": "/d"}, "PersistentVolumeClaim datasets exists only on a cluster"),
        ({"type": "configMap", "name": "cfg", "dst": "/etc/cfg"}, "ConfigMap cfg exists only on a cluster"),
        ({"type": "secret", "name": "keys", "dst": "/etc/keys"}, "Secret keys exists only on a cluster"),
        ({"type": "s3", "bucket": "b", "dst": "/s3"}, "s3 bucket b is mounted by a CSI driver on a cluster"),
        ({"type": "gitSync", "repository": "https://example.com/r.git", "dst": "/code"}, "gitSync of https://"),
        ({"type": "nfs", "server": "nfs.example.com", "path": "/x", "dst": "/x"}, "nfs export nfs.example.com:/x is "
         "not mounted on this machine"),
    ],
    ids=lambda v: v["type"] if isinstance(v, dict) else "",
)
def test_a_mount_nothing_here_can_provide_is_refused_with_its_path(
    tmp_path: Path, mount: dict[str, Any], says: str
) -> None:
    write(tmp_path / "t.py", "print(1)\n")
    spec = {"framework": "generic", "run": {"python": ["t.py"]}, "roles": {"a": {}, "b": {"mounts": [mount]}}}
    refusal = refused(spec, tmp_path)
    assert refusal.paths == ["spec.roles.b.mounts[0]"]
    assert says in str(refusal) and "type=bind,src=<folder>,dst=" in str(refusal)


def test_every_refusal_is_said_at_once_before_anything_runs(tmp_path: Path) -> None:
    write(tmp_path / "t.py", "print(1)\n")
    spec = generic(["t.py"], 2, resources={"gpu": 1},
                   mounts=["type=volume,src=a,dst=/a", {"type": "secret", "name": "s", "dst": "/s"}])
    refusal = refused(spec, tmp_path, gpus=no_gpus(tmp_path))
    assert refusal.paths == ["spec.mounts[0]", "spec.mounts[1]", "spec.resources.gpu"]
    assert str(refusal).startswith("3 problems:")
    with LocalBackend(gpus=no_gpus(tmp_path)) as backend, pytest.raises(LocalRefusal):
        backend.run(make_job(spec).with_base_dir(tmp_path), dry_run="client")


def test_nfs_device_and_emptydir_verdicts(tmp_path: Path) -> None:
    table = write(tmp_path / "mounts", "nfs.example.com:/exports/a /mnt/a nfs4 rw,relatime 0 0\n"
                                       "nfs.example.com:/exports/b/ /b nfs rw 0 0\n")
    mounts = [
        {"type": "nfs", "server": "nfs.example.com", "path": "/exports/a", "dst": "/a"},
        {"type": "nfs", "server": "nfs.example.com", "path": "/exports/b", "dst": "/b"},
        {"type": "device", "src": "/dev/null"},
        {"type": "device", "src": "/dev/null", "dst": "/dev/other", "perm": "r"},
        {"type": "device", "src": "/dev/kubetrain-no-such-device"},
        {"type": "emptyDir", "dst": "/scratch"},
    ]
    job = make_job(generic(["t.py"], 1, mounts=mounts))
    fit = machine_fit(plan(job), base_dir=str(tmp_path), gpus=no_gpus(tmp_path), mounts_table=str(table))
    assert fit.refusals == ()
    by_path = {w.split(":", 1)[0]: w for w in fit.warnings}
    # mounts[1] (the export mounted at its dst) and mounts[2] (a device at its own path): honoured, not a word.
    assert sorted(by_path) == ["spec.mounts[0]", "spec.mounts[3]", "spec.mounts[4]", "spec.mounts[5]"]
    assert "mounted on this machine at /mnt/a, not at /a" in by_path["spec.mounts[0]"]
    assert "finds it at /dev/null" in by_path["spec.mounts[3]"] and "perm r is not enforced" in by_path[
        "spec.mounts[3]"]
    assert "does not exist on this machine" in by_path["spec.mounts[4]"]
    assert "emptyDir /scratch is not created locally" in by_path["spec.mounts[5]"]


# -- scheduling.preemptionLimit -------------------------------------------------------------------------------


def test_preemption_fields_are_warned_about(tmp_path: Path) -> None:
    job = make_job(generic(["t.py"], 1, scheduling={"preemptionLimit": 2, "terminateAfterPreemption": True}))
    with LocalBackend() as backend:
        result = backend.run(job.with_base_dir(tmp_path), dry_run="client")
    assert [w.split(":", 1)[0] for w in result.warnings] == [
        "spec.scheduling.preemptionLimit", "spec.scheduling.terminateAfterPreemption"
    ]


def test_a_job_asking_for_nothing_special_gets_no_warning_and_discovers_no_gpu(tmp_path: Path) -> None:
    def never() -> GpuInventory:
        raise AssertionError("GPUs looked up for a job that asks for none")

    with LocalBackend(gpus=never) as backend:
        result = backend.run(make_job(generic(["t.py"], 2)).with_base_dir(tmp_path), dry_run="client")
    assert result.warnings == []
