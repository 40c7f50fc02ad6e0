"""The local launch record: the plan plus what only a local run adds (the user's env, expanded per process
as the kubelet would; what cannot exist outside a pod, warned about), as data the supervisor and
`kubetrain attach` read; and `LocalBackend` as `backends.base.Backend` answers through it. Pure, but for
the few tests at the end that run a job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.base import Backend
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.errors import LocalError
from kubetrain.backends.local.launch import LaunchProcess, LaunchRecord
from kubetrain.contract.errors import UsageError
from kubetrain.frameworks import local_topology
from kubetrain.plan import plan, replica_counts
from kubetrain.status import JobPhase
from tests.support.helpers import generic, make_job, no_process_left_behind  # noqa: F401 (an autouse fixture)

PORTS = [41001, 41002, 41003, 41004, 41005, 41006, 41007, 41008]


def launch(spec: dict[str, Any], name: str = "job", **kw: Any) -> LaunchRecord:
    """The launch record of `spec`'s plan over fixed local ports."""
    job = make_job(spec, name)
    return LaunchRecord.from_plan(plan(job, local_topology(replica_counts(job.spec), PORTS), name=name), **kw)


# -- the user's env ---------------------------------------------------------------------------------------


def test_user_env_expansion_like_kubernetes() -> None:
    p = launch(
        {
            "framework": "pytorch",
            "replicas": 2,
            "run": {"python": ["t.py"]},
            "env": [
                {"name": "BASE", "value": "/data"},
                {"name": "OUT", "value": "$(BASE)/rank-$(RANK)"},  # earlier user vars and the framework's
                {"name": "LATER", "value": "$(DEFINED_AFTER)"},  # only earlier variables expand
                {"name": "DEFINED_AFTER", "value": "x"},
                {"name": "ESCAPED", "value": "$$(BASE)"},
                {"name": "UNKNOWN", "value": "$(NOT_SET)"},
            ],
        }
    )
    for rank, proc in enumerate(p.processes):
        env = proc.env
        assert env["OUT"] == f"/data/rank-{rank}"
        assert env["LATER"] == "$(DEFINED_AFTER)"
        assert env["ESCAPED"] == "$(BASE)"
        assert env["UNKNOWN"] == "$(NOT_SET)"


def test_user_env_field_refs() -> None:
    p = launch(
        {
            "framework": "generic",
            "replicas": 2,
            "run": {"python": ["t.py"]},
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ],
        },
        name="demo",
    )
    assert [proc.env["POD_NAME"] for proc in p.processes] == ["demo-worker-0", "demo-worker-1"]
    assert {proc.env["POD_IP"] for proc in p.processes} == {"127.0.0.1"}


def test_secret_refs_are_warned_about_and_not_set() -> None:
    p = launch(
        {
            "framework": "generic",
            "replicas": 1,
            "run": {"python": ["t.py"]},
            "env": [
                {"name": "PLAIN", "value": "ok"},
                {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "api"}}},
                {"name": "CONF", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "c"}}},
            ],
            "envFrom": [{"secretRef": {"name": "s3"}}],
        }
    )
    env = p.processes[0].env
    assert env["PLAIN"] == "ok"
    assert "API_KEY" not in env and "CONF" not in env
    warnings = "\n".join(p.warnings)
    assert "API_KEY" in warnings and "CONF" in warnings and "envFrom" in warnings


def test_role_env_overrides_the_jobs() -> None:
    p = launch(
        {
            "framework": "generic",
            "run": {"python": ["t.py"]},
            "env": {"GREETING": "hello", "SHARED": "job"},
            "roles": {"server": {"env": {"GREETING": "serving"}}, "client": {"replicas": 1}},
        }
    )
    by_key = {proc.key: proc for proc in p.processes}
    assert by_key["server-0"].env["GREETING"] == "serving"
    assert by_key["client-0"].env["GREETING"] == "hello"
    assert by_key["server-0"].env["SHARED"] == by_key["client-0"].env["SHARED"] == "job"


def test_the_users_env_comes_after_the_frameworks_and_wins() -> None:
    """Same name: the user's value. A reference before the override sees the framework's value, as in a
    pod, where the user's list follows kubetrain's."""
    p = launch(
        {
            "framework": "pytorch",
            "replicas": 2,
            "run": {"python": ["t.py"]},
            "env": [
                {"name": "BEFORE", "value": "$(WORLD_SIZE)"},
                {"name": "WORLD_SIZE", "value": "99"},
                {"name": "AFTER", "value": "$(WORLD_SIZE)"},
            ],
        }
    )
    for proc in p.processes:
        assert (proc.env["BEFORE"], proc.env["WORLD_SIZE"], proc.env["AFTER"]) == ("2", "99", "99")


def test_every_process_of_a_replica_gets_the_users_env() -> None:
    p = launch(
        {
            "framework": "pytorch",
            "replicas": 2,
            "procsPerReplica": 2,
            "run": {"python": ["t.py"]},
            "env": {"WHO": "$(RANK)/$(LOCAL_RANK)"},
        }
    )
    assert [(proc.key, proc.local_rank, proc.env["WHO"]) for proc in p.processes] == [
        ("worker-0.0", 0, "0/0"),
        ("worker-0.1", 1, "1/1"),
        ("worker-1.0", 0, "2/0"),
        ("worker-1.1", 1, "3/1"),
    ]


# -- the record ---------------------------------------------------------------------------------------------


def test_the_record_holds_what_the_supervisor_needs_and_survives_json() -> None:
    p = launch(
        {
            "framework": "mpi",
            "replicas": 2,
            "run": {"python": ["t.py"]},
            "restartPolicy": "ExitCode",
            "exitCodes": {"retryable": [75], "permanent": [137]},
            "runPolicy": {"backoffLimit": 3, "activeDeadlineSeconds": 60},
            "runMode": "Debug",
            "env": {"TAG": "x"},
        },
        name="m",
        cwd="/work/dir",
        preload=["decimal"],
    )
    assert p.job_id == "m" and p.framework == "mpi"
    assert (p.cwd, p.preload, p.run_mode, p.active_deadline_seconds) == ("/work/dir", ("decimal",), "Debug", 60)
    assert (p.restart.policy, p.restart.backoff_limit) == ("ExitCode", 3)
    assert p.files == {"hostfile": "localhost slots=2\n"}
    assert [r.key for r in p.replicas] == ["launcher-0", "worker-0", "worker-1"]
    assert [proc.key for proc in p.processes] == ["launcher-0"]  # mpirun starts every rank
    assert p.roles == (("launcher", 1), ("worker", 2))
    assert p.replica_of("launcher-0").role == "launcher"
    assert p.processes[0].env["TAG"] == "x"
    again = LaunchRecord.from_json(json.dumps(json.loads(p.to_json())))
    assert again == p


def test_the_json_layout_is_the_one_dry_run_prints() -> None:
    data = launch({"framework": "generic", "replicas": 2, "run": {"python": ["t.py"]}}, cwd="/d").to_dict()
    assert list(data) == [
        "name", "framework", "files", "filesDir", "restart", "activeDeadlineSeconds", "runMode", "cluster", "env",
        "sharedValues", "replicas", "warnings", "cwd", "preload",
    ]  # fmt: skip
    assert data["cluster"] == {"worker": ["127.0.0.1:41001", "127.0.0.1:41002"]}
    # What every process has alike is written once, at the top; each process lists only its own.
    assert (data["env"]["KUBETRAIN_JOB"], data["env"]["KUBETRAIN_NUM_REPLICAS"]) == ("job", "2")
    replica = data["replicas"][1]
    assert (replica["role"], replica["index"], replica["host"]) == ("worker", 1, "127.0.0.1")
    process = replica["processes"][0]
    assert (process["key"], process["argv"], process["localRank"]) == ("worker-1", ["python", "t.py"], 0)
    assert process["env"] == {"KUBETRAIN_REPLICA_INDEX": "1"}


def test_a_record_stored_with_its_common_env_apart_by_an_earlier_kubetrain_still_reads() -> None:
    """The stored layout before the dry run printed the same one: `commonEnv`, references named `ROLE,`."""
    addresses = '["127.0.0.1:1", "127.0.0.1:2"]'
    stored = {
        "name": "job-1", "framework": "tensorflow", "files": {}, "filesDir": "/x/files", "restart": {},
        "activeDeadlineSeconds": None, "runMode": "Immediate", "warnings": [],
        "cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
        "sharedValues": {"worker": addresses}, "commonEnv": {"A": "1"},
        "replicas": [{"role": "worker", "index": i, "host": "127.0.0.1", "processes": [{
            "key": f"worker-{i}", "argv": ["python", "t.py"],
            "env": {"TF_CONFIG": ['{"cluster":{"worker":', {"ref": "worker"}, f'}},"task":{{"index":{i}}}}}']}}]}
            for i in range(2)],
    }  # fmt: skip
    record = LaunchRecord.from_json(json.dumps(stored))
    assert record.envs() == {
        f"worker-{i}": {"A": "1", "TF_CONFIG": f'{{"cluster":{{"worker":{addresses}}},"task":{{"index":{i}}}}}'}
        for i in range(2)
    }
    assert record.cluster == {"worker": ("127.0.0.1:1", "127.0.0.1:2")}
    assert LaunchRecord.from_json(record.to_json()) == record


def test_a_record_stored_by_an_earlier_kubetrain_still_reads() -> None:
    """Jobs suspended before an upgrade are resumed (and attached to) after it."""
    old = {
        "name": "job-1", "framework": "generic", "files": {}, "filesDir": "/x/files",
        "restart": {"policy": "OnFailure", "backoffLimit": 2}, "activeDeadlineSeconds": None, "runMode": "Immediate",
        "replicas": [{"role": "worker", "index": 0, "host": "127.0.0.1",
                      "processes": [{"key": "worker-0", "argv": ["python", "t.py"], "env": {"A": "1"}}]}],
        "warnings": [],
    }  # fmt: skip
    record = LaunchRecord.from_dict(old)
    assert record.processes == [LaunchProcess("worker-0", ("python", "t.py"), {"A": "1"}, 0)]
    assert (record.cwd, record.preload, record.restart.backoff_limit) == (None, (), 2)


# -- LocalBackend as a Backend --------------------------------------------------------------------------


def test_the_local_backend_is_a_backend() -> None:
    with LocalBackend() as backend:
        assert isinstance(backend, Backend)
        assert backend.name == "local"


def test_a_client_dry_run_gives_the_launch_record_and_stores_nothing(tmp_path: Path) -> None:
    job = make_job(
        {
            **generic(["t.py"]),
            "env": [
                {"name": "OUT", "value": "/out/$(KUBETRAIN_REPLICA_INDEX)"},
                {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            ],
        },
        "dry",
    ).with_base_dir(tmp_path)
    events: list[str] = []
    with LocalBackend(preload=["decimal"]) as backend:
        result = backend.run(job, dry_run="client", on_event=events.append)
        assert backend.list() == []
    assert (result.job_id, result.backend, result.status, result.exit_code) == ("dry", "local", None, 0)
    assert result.plan is not None
    assert result.plan["filesDir"] == "<job-dir>/files"
    assert result.plan["cwd"] == str(tmp_path.resolve())
    assert result.plan["preload"] == ["decimal"]
    envs = [r["processes"][0]["env"] for r in result.plan["replicas"]]
    assert [env["OUT"] for env in envs] == ["/out/0", "/out/1"]
    assert all("KEY" not in env for env in envs)
    assert any("KEY" in w for w in result.warnings) and result.plan["warnings"] == result.warnings
    assert events == []  # nothing ran


def test_a_server_dry_run_is_refused_locally() -> None:
    with LocalBackend() as backend, pytest.raises(UsageError, match="add --backend kubernetes"):
        backend.run(make_job(generic(["t.py"])), dry_run="server")


def test_a_paused_job_is_created_suspended_and_described(tmp_path: Path) -> None:
    job = make_job({**generic(["t.py"]), "runMode": "Pause", "envFrom": [{"secretRef": {"name": "s"}}]}, "held")
    events: list[str] = []
    missing: list[tuple[str, str]] = []
    with LocalBackend() as backend:
        result = backend.run(job.with_base_dir(tmp_path), on_event=events.append)
        assert result.status is not None and result.status.phase is JobPhase.SUSPENDED
        assert (result.exit_code, result.detached) == (0, False)
        assert events == [f"warning: {w}" for w in result.warnings] and result.warnings
        job_id = result.job_id
        prefix = job_id[: len("held-") + 2]
        assert backend.status(prefix).job_id == job_id  # any call takes an unambiguous prefix

        described = backend.describe(prefix)
        assert described.status.phase is JobPhase.SUSPENDED
        assert described.status_lines()[0] == described.status.summary_line()
        assert [line.split()[0] for line in described.status_lines()[1:]] == ["worker-0", "worker-1"]
        assert "Suspended" in described.text()
        assert described.to_dict()["spec"]["spec"]["runMode"] == "Pause"

        record = backend.launch_record(prefix)
        assert record.job_id == job_id and record.cwd == str(tmp_path.resolve())
        assert [p.key for p in record.processes] == ["worker-0", "worker-1"]

        assert list(backend.logs(prefix, on_missing=lambda key, why: missing.append((key, why)))) == []
        assert [key for key, _ in missing] == ["worker-0", "worker-1"]
        with pytest.raises(UsageError, match="--index needs --role"):
            backend.logs(prefix, index=1)
        with pytest.raises(LocalError, match=f"job {job_id} has no replica matching role ps index 0"):
            backend.logs(prefix, role="ps", index=0)
        with pytest.raises(UsageError, match="--grep"):
            backend.logs(prefix, grep="(")

        cancelled = backend.cancel(prefix)
        assert cancelled.phase is JobPhase.CANCELLED
        backend.delete(prefix)
        assert backend.list() == []


def test_an_attached_run_says_what_it_starts_and_returns_the_final_status(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("print('hello')\n")
    job = make_job(
        {**generic(["ok.py"]), "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}
    )
    events: list[str] = []
    with LocalBackend() as backend:
        result = backend.run(job.with_base_dir(tmp_path), on_event=events.append)
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    assert result.exit_code == 0 and result.job_id == result.status.job_id
    assert events == [
        f"warning: {result.warnings[0]}",
        f"job {result.job_id}: 2 processes (worker×2); Ctrl-C cancels",
    ]


def test_the_local_backend_never_imports_the_kubernetes_backend() -> None:
    """Nor does its supervisor import the spec layer or a framework: it starts in milliseconds."""
    code = (
        "import sys\n"
        "import kubetrain.backends.local.supervisor\n"
        "light = [m for m in sys.modules if m.startswith(('kubetrain.jobspec', 'kubetrain.frameworks', 'pydantic'))]\n"
        "from kubetrain.backends.base import open_backend\n"
        "from kubetrain.jobspec import from_dict\n"
        "job = from_dict({'metadata': {'name': 'j'}, 'spec': {'replicas': 2, 'run': {'python': ['t.py']}}})\n"
        "with open_backend('local') as backend:\n"
        "    backend.run(job, dry_run='client')\n"
        "print(light, [m for m in sys.modules if m.startswith('kubetrain.backends.kubernetes')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"
