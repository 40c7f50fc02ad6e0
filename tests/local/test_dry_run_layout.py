"""What `kubetrain run --dry-run` prints locally: readable, and linear in the replica count. The env every
process shares is written once at the top, each process lists only its own, and a role's address list is
written once where values embed it (`launch.LAYOUT`); read as its help says, it still tells exactly what
each process gets."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.backends.local import launch, machine_fit
from kubetrain.backends.local import prepare as local_prepare
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.backends.local.prepare import DRY_RUN_FILES_DIR, prepare_launch
from kubetrain.cli.output import dump
from kubetrain.contract import choices
from kubetrain.jobspec import TrainJob
from tests.support.helpers import cli, job_file, make_job

FRAMEWORKS = list(choices.FRAMEWORKS)


@pytest.fixture(autouse=True)
def fixed_ports_and_cores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ports fixed, so the record the supervisor would get can be built again and compared; and room for 64
    replicas on any machine (the cores check is `test_sizes`'s)."""
    monkeypatch.setattr(local_prepare, "free_ports", lambda count: list(range(20000, 20000 + count)))
    monkeypatch.setattr(machine_fit, "PROCS_PER_CORE", 10_000)
    yield


def dry_run(job: TrainJob, folder: Path) -> dict[str, Any]:
    with LocalBackend() as backend:
        result = backend.run(job.with_base_dir(folder), dry_run="client")
    assert result.plan is not None
    return result.plan


def supervised(job: TrainJob, folder: Path) -> LaunchRecord:
    """The launch record a run of `job` gives its supervisor (on the same ports as the dry run)."""
    job = job.with_base_dir(folder)
    preload = local_prepare.modules_to_preload(job, None)
    return prepare_launch(job, job.name, DRY_RUN_FILES_DIR, base_dir=folder, cwd=str(folder), preload=preload).record


def as_documented(plan: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Each process's env, read the way `launch.LAYOUT` (the dry run's help and header) tells a person to:
    the top-level env plus the process's own; a list value is its pieces joined, {ref: NAME} standing for
    sharedValues.NAME. Independent of `LaunchRecord.from_dict`."""
    shared = plan["sharedValues"]

    def text(value: str | list[Any]) -> str:
        if isinstance(value, str):
            return value
        return "".join(p if isinstance(p, str) else shared[p["ref"]] for p in value)

    out = {}
    for replica in plan["replicas"]:
        for process in replica["processes"]:
            assert not set(process["env"]) & set(plan["env"]), "a process's own env repeats the shared one"
            out[process["key"]] = {k: text(v) for k, v in {**plan["env"], **process["env"]}.items()}
    return out


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_dry_run_per_replica_does_not_grow_with_the_replica_count(framework: str, tmp_path: Path) -> None:
    (tmp_path / "train.py").touch()
    sizes = {}
    for replicas in (2, 64):
        job = make_job({"framework": framework, "replicas": replicas, "run": {"python": ["train.py"]}}, "big")
        plan = dry_run(job, tmp_path)
        sizes[replicas] = len(dump(plan, "json")) / len(plan["replicas"])  # what `-o json` prints
        # Read as documented, it is every process's whole env, as the supervisor would start it.
        record = supervised(job, tmp_path)
        assert as_documented(plan) == record.envs()
        assert LaunchRecord.from_dict(plan) == record
    assert sizes[64] <= sizes[2], sizes


def test_each_roles_address_list_is_written_once_and_every_value_embedding_it_is_exact(tmp_path: Path) -> None:
    """TF_CONFIG embeds every role's list; a user's variable may embed TF_CONFIG or KUBETRAIN_CLUSTER (written
    without spaces) too."""
    env = [
        {"name": "MINE", "value": "tf=$(TF_CONFIG) cluster=$(KUBETRAIN_CLUSTER) $(KUBETRAIN_REPLICA_INDEX)"},
    ]
    roles = {"chief": {"replicas": 1}, "ps": {"replicas": 11}, "worker": {"replicas": 40}}
    job = make_job({"framework": "tensorflow", "roles": roles, "run": {"python": ["t.py"]}, "env": env}, "tf")
    plan = dry_run(job, tmp_path)
    record = supervised(job, tmp_path)
    assert as_documented(plan) == record.envs()
    assert plan["cluster"] == {role: list(addresses) for role, addresses in record.cluster.items()}
    # Lists of 200 characters or more are referenced; the chief's and ps's compact one (199) stay inline.
    assert set(plan["sharedValues"]) == {"ps", "worker", "worker,compact"}
    assert plan["sharedValues"]["worker"] == json.dumps(list(record.cluster["worker"]))
    text = dump(plan, "json")
    # Once in cluster, in each of its two shared texts, and in KUBETRAIN_CLUSTER: in no process's own env.
    assert text.count(record.cluster["worker"][-1]) == 4


def test_the_plain_dry_run_says_how_to_read_it_and_json_stays_json(tmp_path: Path) -> None:
    path = job_file(tmp_path, {"framework": "tensorflow", "replicas": 12, "run": {"python": ["t.py"]}}, "tf")
    plain = cli("run", "--dry-run", path)
    assert plain.returncode == 0, plain.stderr
    header = [line[2:] for line in plain.stdout.splitlines() if line.startswith("# ")]
    assert " ".join(header) == " ".join(launch.LAYOUT.split())
    shown = yaml.safe_load(plain.stdout)
    assert shown["replicas"][11]["processes"][0]["env"]["TF_CONFIG"][1] == {"ref": "worker"}
    as_json = cli("run", "--dry-run", path, "-o", "json")
    assert as_documented(json.loads(as_json.stdout))["worker-11"]["KUBETRAIN_REPLICA_INDEX"] == "11"
    assert "sharedValues.NAME" in cli("run", "--help").stdout
