"""Each role's workingDir on this machine: its processes start there (spawned, and forked by the preload
server), a relative script in its `run` is found there (and refused up front, at the role's path, when it is
not), a role podTemplate's main container gives it too, and a Kubeflow PyTorchJob's container workingDir is
used rather than warned about. Launch records stored before roles had their own folders still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubetrain
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.status import JobPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    cli,
    job_file,
    local_backend,
    log_lines,
    make_job,
    no_process_left_behind,
    no_traceback,
    wait_phase,
    write,
)

pytestmark = pytest.mark.timeout(240)

WHERE = """\
import os, sys
print(f"in {os.getcwd()} torch {'torch' in sys.modules}", flush=True)
"""

GLOO_WHERE = """\
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([1.0])
dist.all_reduce(total)
print(f"in {os.getcwd()} torch {'torch' in sys.modules} world {int(total.item())}", flush=True)
dist.destroy_process_group()
"""


def lines_of(stdout: str) -> dict[str, str]:
    """Process key → what it printed after `in `, from `kubetrain run`'s prefixed output."""
    out = {}
    for line in stdout.splitlines():
        if "] in " in line:
            key, _, rest = line.partition("] in ")
            out[key.lstrip("[")] = rest
    return out


def two_folders(tmp_path: Path, script: str) -> tuple[str, str]:
    """The script in `a/` and `b/` only (not beside the job file): each role must start in its own."""
    for name in ("a", "b"):
        write(tmp_path / name / "where.py", script)
    return str((tmp_path / "a").resolve()), str((tmp_path / "b").resolve())


def test_each_role_of_a_local_job_starts_in_its_own_working_dir(tmp_path: Path) -> None:
    a, b = two_folders(tmp_path, WHERE)
    spec = {
        "framework": "generic",
        "run": {"python": ["where.py"]},
        "roles": {"one": {"replicas": 1, "workingDir": "a"}, "two": {"replicas": 2, "workingDir": "b"}},
    }
    result = cli("run", job_file(tmp_path, spec), cwd=tmp_path.parent)  # not from the job file's folder
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert lines_of(result.stdout) == {"one-0": f"{a} torch False", "two-0": f"{b} torch False",
                                       "two-1": f"{b} torch False"}  # fmt: skip
    assert "workingDir" not in result.stderr  # used, so not warned about


def test_the_preload_server_forks_each_role_into_its_own_working_dir(tmp_path: Path) -> None:
    """A PyTorch job preloads torch by default: its replicas are forked from one server, which must change
    into each replica's own folder (a real gloo all-reduce over both roles)."""
    m, w = two_folders(tmp_path, GLOO_WHERE)
    spec = {
        "framework": "pytorch",
        "run": {"python": ["where.py"]},
        "roles": {"master": {"replicas": 1, "workingDir": "a"}, "worker": {"replicas": 1, "workingDir": "b"}},
    }
    result = cli("run", job_file(tmp_path, spec), cwd=tmp_path.parent)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    # `torch True` before the script imported it: the replica was forked from the preloaded server.
    assert lines_of(result.stdout) == {"master-0": f"{m} torch True world 2", "worker-0": f"{w} torch True world 2"}


def test_a_role_pod_templates_working_dir_is_the_roles_folder(tmp_path: Path) -> None:
    """As on Kubernetes (`plan.settings_for`): the template's workingDir where the settings give none."""
    _, b = two_folders(tmp_path, WHERE)
    write(tmp_path / "where.py", WHERE)
    template = {"spec": {"containers": [{"name": "main", "image": "x", "workingDir": "b"}]}}
    spec = {
        "framework": "generic",
        "run": {"python": ["where.py"]},
        "roles": {"one": {"replicas": 1}, "two": {"replicas": 1, "podTemplate": template}},
    }
    result = cli("run", job_file(tmp_path, spec), cwd=tmp_path.parent)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert lines_of(result.stdout) == {"one-0": f"{tmp_path.resolve()} torch False", "two-0": f"{b} torch False"}


def test_a_script_missing_from_the_roles_folder_is_refused_at_the_roles_path(tmp_path: Path) -> None:
    write(tmp_path / "where.py", WHERE)  # beside the job file, but the role starts in a/
    (tmp_path / "a").mkdir()
    spec = {
        "framework": "generic",
        "run": {"python": ["where.py"]},
        "roles": {"one": {"replicas": 1}, "two": {"replicas": 1, "workingDir": "a"}},
    }
    result = cli("run", job_file(tmp_path, spec))
    assert result.returncode == 2, (result.stdout, result.stderr)
    # The job's `run` is at fault, for role two only: role one's script is where it starts.
    assert f"spec.run.python[0]: script where.py not found (role two): there is no {tmp_path.resolve()}/a/where.py" in (
        result.stderr
    )
    assert "role one" not in result.stderr


def test_a_pytorchjob_containers_working_dir_is_used(tmp_path: Path) -> None:
    """A Kubeflow PyTorchJob run as it is: each replica spec's container workingDir is its processes' folder."""
    m, w = two_folders(tmp_path, WHERE)

    def replica(folder: str) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "x", "workingDir": folder, "command": ["python", "where.py"]}
        return {"replicas": 1, "template": {"spec": {"containers": [container]}}}

    document = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pj-wd"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(m), "Worker": replica(w)}},
    }
    path = tmp_path / "pj.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = cli("run", path, cwd=tmp_path.parent)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert lines_of(result.stdout) == {"master-0": f"{m} torch True", "worker-0": f"{w} torch True"}
    assert "workingDir" not in result.stderr, result.stderr


def test_a_resumed_job_keeps_each_roles_folder(tmp_path: Path) -> None:
    a, b = two_folders(tmp_path, WHERE)
    job = make_job({
        "framework": "generic",
        "runMode": "Pause",
        "run": {"python": ["where.py"]},
        "roles": {"one": {"replicas": 1, "workingDir": "a"}, "two": {"replicas": 1, "workingDir": "b"}},
    })  # fmt: skip
    created = kubetrain.run(job, base_dir=str(tmp_path))
    assert created.status is not None and created.status.phase is JobPhase.SUSPENDED
    with local_backend() as backend:
        backend.resume(created.job_id)
    wait_phase(created.job_id, JobPhase.SUCCEEDED)
    logs = log_lines(created.job_id)
    assert logs == {"one-0": [f"in {a} torch False"], "two-0": [f"in {b} torch False"]}


# -- the launch record ----------------------------------------------------------------------------------------


def test_the_record_names_only_the_roles_whose_folder_differs_and_survives_json(tmp_path: Path) -> None:
    spec = {
        "framework": "generic",
        "run": {"python": ["where.py"]},
        "roles": {"one": {"replicas": 1}, "two": {"replicas": 1, "workingDir": "b"}},
    }
    result = kubetrain.run(make_job(spec), dry_run="client", base_dir=str(tmp_path))
    data = result.plan or {}
    assert data["cwd"] == str(tmp_path.resolve())
    assert data["roleCwd"] == {"two": str((tmp_path / "b").resolve())}
    record = LaunchRecord.from_json(json.dumps(data))
    assert (record.cwd_of("one"), record.cwd_of("two")) == (str(tmp_path.resolve()), str((tmp_path / "b").resolve()))
    assert LaunchRecord.from_json(record.to_json()) == record
    # No role with a folder of its own: the layout kubetrain always stored (no roleCwd key).
    plain = kubetrain.run(make_job({**spec, "roles": {"one": {"replicas": 1}}}), dry_run="client",
                          base_dir=str(tmp_path))  # fmt: skip
    assert "roleCwd" not in (plain.plan or {})


def test_a_record_stored_before_roles_had_their_own_folder_starts_every_role_in_its_cwd() -> None:
    old = {
        "name": "job-1", "framework": "generic", "files": {}, "filesDir": "/x/files", "restart": {},
        "activeDeadlineSeconds": None, "runMode": "Immediate", "warnings": [], "cwd": "/srv/job", "preload": [],
        "env": {}, "sharedValues": {}, "cluster": {"one": ["127.0.0.1:1"], "two": ["127.0.0.1:2"]},
        "replicas": [{"role": role, "index": 0, "host": "127.0.0.1",
                      "processes": [{"key": f"{role}-0", "argv": ["python", "t.py"], "env": {}}]}
                     for role in ("one", "two")],
    }  # fmt: skip
    record = LaunchRecord.from_dict(old)
    assert record.role_cwds == {}
    assert (record.cwd_of("one"), record.cwd_of("two")) == ("/srv/job", "/srv/job")
