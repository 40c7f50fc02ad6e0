"""Manifests do not grow with the replica count, render fast, and nothing over etcd's limit is produced."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kubetrain.backends.kubernetes.render import ETCD_MAX_BYTES, FLAVORS, to_yaml
from kubetrain.jobspec import SpecError, TrainJob
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE
from tests.support.render import render


def ddp(replicas: int, **spec: Any) -> TrainJob:
    return make_job({"framework": "pytorch", "roles": {"master": {}, "worker": {"replicas": replicas - 1}},
                     "run": {"python": ["train.py"]}, "resources": {"cpu": 8, "memory": "32Gi", "gpu": 8},
                     **spec}, image=IMAGE)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_size_does_not_depend_on_the_replica_count(flavor: str) -> None:
    sizes = {n: len(to_yaml(render(ddp(n), flavor))) for n in (2, 64, 1000, 10_000, 100_000)}
    # Only the digits of the counts change.
    assert max(sizes.values()) - min(sizes.values()) <= 40, sizes
    if flavor in ("job", "jobset"):
        assert sizes[1000] <= 10_000


def test_thousand_replicas_render_within_the_goal() -> None:
    job = ddp(1000)
    for flavor in ("job", "jobset"):
        best = min(_timed(job, flavor) for _ in range(5))
        assert best <= 0.020, f"{flavor}: {best * 1000:.1f} ms"


def _timed(job: TrainJob, flavor: str) -> float:
    start = time.perf_counter()
    render(job, flavor)
    return time.perf_counter() - start


def test_an_object_over_etcds_limit_is_refused_and_volcano_points_to_jobset() -> None:
    big = "x" * (ETCD_MAX_BYTES + 1)
    with pytest.raises(SpecError) as info:
        render(ddp(4, env={"BLOB": big}), "volcano")
    assert "over etcd's 1.5 MiB object limit" in str(info.value)
    assert "the jobset flavor's objects do not grow with the replica count" in str(info.value)
    with pytest.raises(SpecError) as info:
        render(ddp(4, env={"BLOB": big}), "jobset")
    assert "over etcd's 1.5 MiB" in str(info.value) and "hint" not in str(info.value)
    near = "x" * (ETCD_MAX_BYTES // 2 - 20_000)  # in both roles' templates
    (obj,) = render(ddp(4, env={"BLOB": near}), "volcano")
    assert len(json.dumps(obj, separators=(",", ":"))) <= ETCD_MAX_BYTES


def test_a_hostfile_over_a_configmaps_limit_is_refused() -> None:
    job = make_job({"framework": "mpi", "replicas": 40_000, "run": {"python": ["a.py"]}}, image=IMAGE)
    with pytest.raises(SpecError, match="over a ConfigMap's 1 MiB"):
        render(job, "jobset")
