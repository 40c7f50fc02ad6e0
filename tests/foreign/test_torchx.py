"""`kubetrain.from_torchx(app)`: TorchX AppDefs — the dist.ddp component's and a hand-built one with mounts,
resources and capabilities — as TrainJobs, every attribute accounted for, rendered and run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kubetrain
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.foreign.conversion import ForeignRefused
from kubetrain.foreign.torchx import torchx_conversion
from tests.foreign.test_kubeflow import ddp_shim
from tests.support.helpers import assert_ddp_in_step, no_process_left_behind, run_job  # noqa: F401
from tests.support.manifest_schemas import assert_valid


def _torchx() -> tuple[Any, Any]:
    """torchx.specs and torchx.components.dist; the tests need the real TorchX to build AppDefs."""
    # scripts/test.sh installs torchx 0.7.0 (torchx < 0.4 cannot be imported on Python 3.11).
    import torchx.components.dist as dist  # type: ignore[import-untyped, unused-ignore]
    import torchx.specs as specs  # type: ignore[import-untyped, unused-ignore]

    return specs, dist


def _ddp(**options: Any) -> Any:
    _specs, dist = _torchx()
    return dist.ddp("--lr", "0.1", script="train.py", name="Trainer_App", image="trainer:1", **options)


def _verdicts(conversion: Any) -> dict[str, tuple[str, str | None]]:
    return {n.source: (n.verdict, n.target) for n in conversion.notes}


def test_the_ddp_component_becomes_a_pytorch_job_of_workers() -> None:
    app = _ddp(
        j="2x2",
        env={"A": "1"},
        max_retries=2,
        cpu=2,
        memMB=1024,
        mounts=["type=bind", "src=/data", "dst=/data", "readonly"],
    )
    job = kubetrain.from_torchx(app)
    spec = job.spec
    assert job.metadata.name == "trainer-app"  # a Kubernetes name, as TorchX's scheduler cleans it
    assert spec.framework.value == "pytorch" and spec.role_replicas() == {"worker": 2}
    worker = spec.role_settings("worker")
    assert worker.run is not None and worker.run.python == ["train.py", "--lr", "0.1"]
    assert worker.procs_per_replica == 2 and worker.image == "trainer:1"
    assert worker.resources is not None and (worker.resources.cpu, worker.resources.memory) == ("2", "1024Mi")
    assert [(m.type, m.src, m.dst, m.readonly) for m in worker.mounts or []] == [  # type: ignore[union-attr]
        ("bind", "/data", "/data", True)
    ]
    assert worker.env is not None and {v.name: v.value for v in worker.env}["A"] == "1"
    assert spec.run_policy.backoff_limit == 2 and spec.elastic is None


def test_every_attribute_of_the_ddp_component_is_accounted_for() -> None:
    conversion = torchx_conversion(_ddp(j="1:3x2"))
    verdicts = _verdicts(conversion)
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == set()
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == {
        "name",
        "roles[0].name",
        "roles[0].entrypoint",
        "roles[0].args",
        "roles[0].port_map.c10d",
    }
    assert verdicts["roles[0].min_replicas"] == ("mapped", "spec.elastic.minReplicas")
    assert verdicts["roles[0].num_replicas"] == ("mapped", "spec.roles.worker.replicas")
    elastic = conversion.job.spec.elastic
    assert elastic is not None and (elastic.min_replicas, elastic.max_replicas) == (1, 3)
    args_note = next(n for n in conversion.notes if n.source == "roles[0].args")
    assert "--rdzv_endpoint" in args_note.reason  # what of torchrun's line kubetrain does itself


def _hand_built() -> Any:
    specs, _dist = _torchx()
    resource = specs.Resource(
        cpu=4,
        gpu=1,
        memMB=8000,
        capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
        devices={"vpc.amazonaws.com/efa": 1},
    )
    ps = specs.Role(
        name="param_server",
        image="ps:1",
        entrypoint="python",
        args=["-m", "ps.main", "--shard", "${replica_id}"],
        num_replicas=2,
        resource=resource,
        port_map={"grpc": 50051},
        max_retries=3,
        retry_policy=specs.RetryPolicy.REPLICA,
        metadata={"local_cwd": {"x": 1}},
        mounts=[
            specs.VolumeMount(src="data-pvc", dst_path="/data", read_only=False),
            specs.DeviceMount(src_path="/dev/fuse", dst_path="/dev/fuse"),
        ],
    )
    trainer = specs.Role(
        name="trainer",
        image="trainer:1",
        entrypoint="./train",
        args=["--steps", "10"],
        num_replicas=1,
        max_retries=1,
        env={"MODE": "sync"},
        mounts=[specs.BindMount(src_path="/mnt/ckpt", dst_path="/ckpt")],
    )
    return specs.AppDef(name="hand", roles=[ps, trainer])


def test_a_hand_built_appdef_keeps_resources_capabilities_mounts_and_ports() -> None:
    conversion = torchx_conversion(_hand_built())
    job = conversion.job
    assert job.spec.framework.value == "generic"
    assert job.spec.role_replicas() == {"param-server": 2, "trainer": 1}
    ps = job.spec.role_settings("param-server")
    assert ps.run is not None and ps.run.module == ["ps.main", "--shard", "$(KUBETRAIN_REPLICA_INDEX)"]
    assert ps.run.expand_env  # the replica's own index, as TorchX substitutes it
    res = ps.resources
    assert res is not None and (res.cpu, res.gpu, res.memory) == ("4", 1, "8000Mi")
    assert res.capabilities == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert res.extended_resources == {"vpc.amazonaws.com/efa": "1"}
    assert [(m.type, m.src) for m in ps.mounts or []] == [("volume", "data-pvc"), ("device", "/dev/fuse")]  # type: ignore[union-attr]
    assert [(p.container, p.name) for p in ps.ports or []] == [(50051, "grpc")]
    trainer = job.spec.role_settings("trainer")
    assert trainer.run is not None and trainer.run.exec == ["./train", "--steps", "10"]
    assert job.spec.run_policy.backoff_limit == 1  # the smallest max_retries, as TorchX's Kubernetes scheduler
    verdicts = _verdicts(conversion)
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == {"roles[0].metadata"}
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == {
        "roles[0].name",
        "roles[0].entrypoint",
        "roles[0].args",
        "roles[0].retry_policy",
        "roles[1].max_retries",
    }
    macro = next(n for n in conversion.notes if n.source == "roles[0].args")
    assert "${replica_id}" in macro.reason and "KUBETRAIN_REPLICA_INDEX" in macro.reason


def test_strict_refuses_what_does_not_map() -> None:
    with pytest.raises(ForeignRefused) as caught:
        torchx_conversion(_hand_built(), strict=True)
    assert "roles[0].metadata" in str(caught.value)


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_a_hand_built_appdef_renders_valid_manifests(flavor: str) -> None:
    objects = render_manifests(kubetrain.from_torchx(_hand_built()), flavor).objects
    assert_valid(objects)
    selectors = [obj for obj in objects if "p4d.24xlarge" in str(obj)]
    assert selectors, "the instance-type capability becomes a node selector"


def test_the_ddp_component_renders_for_the_kubeflow_flavor_as_a_pytorchjob() -> None:
    objects = render_manifests(kubetrain.from_torchx(_ddp(j="2x1")), "kubeflow").objects
    assert_valid(objects)
    assert objects[0]["kind"] == "PyTorchJob"
    assert objects[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2


@pytest.mark.slow
def test_the_ddp_component_runs_here_through_torch_distributed(tmp_path: Path) -> None:
    _specs, dist = _torchx()
    shim = ddp_shim(tmp_path)
    app = dist.ddp("--steps", "3", script=str(shim), name="ddp", j="2x1")
    assert_ddp_in_step(run_job(kubetrain.from_torchx(app), tmp_path), "worker-0", "worker-1")
