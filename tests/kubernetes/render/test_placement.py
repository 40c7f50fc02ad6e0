"""Where pods may run: Run:ai's nodePools (only the listed pools, the first preferred) and affinity merged
per kind, job (or Kale's DistributedConfig) under role, on every flavor."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.backends.kubernetes.render import FLAVORS
from kubetrain.jobspec import DistributedConfig, SpecError
from kubetrain.jobspec.kube_models import kube_to_dict
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, pod_templates
from tests.support.manifest_schemas import assert_valid
from tests.support.render import render

POOL = "kubetrain.dev/node-pool"
SPEC: dict[str, Any] = {"framework": "pytorch", "roles": {"master": {}, "worker": {"replicas": 2}},
                        "run": {"python": ["train.py"]}}


def affinities(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Role → its pods' affinity."""
    return {role: t["spec"].get("affinity", {}) for role, t in pod_templates(objects).items()}


def node_term(key: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def required(key: str, *values: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [node_term(key, *values)]}}}


ANTI = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                      "labelSelector": {"matchLabels": {"app": "train"}}}}]}}


# -- nodePools ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_node_pools_are_required_and_preferred_in_order(flavor: str) -> None:
    """Run:ai schedules only onto the listed pools: a required `In` over the pool label, and the order of
    preference as weights 100, 99, ..."""
    objects = render(make_job({**SPEC, "scheduling": {"nodePools": ["a100", "v100", "t4"]}}, image=IMAGE), flavor)
    assert_valid(objects)
    for role, affinity in affinities(objects).items():
        node = affinity["nodeAffinity"]
        assert node["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [node_term(POOL, "a100", "v100", "t4")]}, role
        preferred = node["preferredDuringSchedulingIgnoredDuringExecution"]
        assert [(p["weight"], p["preference"]) for p in preferred] == [
            (100, node_term(POOL, "a100")), (99, node_term(POOL, "v100")), (98, node_term(POOL, "t4"))]


def test_node_pools_narrow_each_of_the_users_required_terms() -> None:
    """Required terms are ORed: the pools go into every term (a term of their own would admit any node the
    user's term admits), and the user's preferences come first."""
    affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            node_term("zone", "a"),
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": node_term("disk", "ssd")}]}}
    objects = render(make_job({**SPEC, "affinity": affinity,
                               "scheduling": {"nodePools": ["a100"], "nodePoolLabel": "example.com/pool"}},
                              image=IMAGE), "jobset")
    assert_valid(objects)
    node = affinities(objects)["worker"]["nodeAffinity"]
    pools = {"key": "example.com/pool", "operator": "In", "values": ["a100"]}
    assert node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, pools]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}], "matchExpressions": [pools]},
    ]
    assert [p["weight"] for p in node["preferredDuringSchedulingIgnoredDuringExecution"]] == [5, 100]


def test_a_required_pool_outside_node_pools_is_refused() -> None:
    job = make_job({**SPEC, "roles": {"master": {}, "worker": {"replicas": 2, "affinity": required(POOL, "cpu")}},
                    "scheduling": {"nodePools": ["a100", "v100"]}}, image=IMAGE)
    with pytest.raises(SpecError) as info:
        render(job, "job")
    assert info.value.paths == [
        "spec.roles.worker.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"]
    assert "none of scheduling.nodePools (a100, v100)" in str(info.value)


# -- affinity: job (DistributedConfig) and role, per kind ---------------------------------------------------------


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_config_affinity_and_role_affinity_merge_per_kind(flavor: str) -> None:
    """Kale's DistributedConfig gives every pod a podAntiAffinity and a nodeAffinity; the worker role its own
    nodeAffinity. Workers: the role's nodeAffinity (replacing the job's) and the config's podAntiAffinity
    (kept); the master, which sets none: the config's both."""
    job = make_job({**SPEC, "roles": {"master": {}, "worker": {"replicas": 2, "affinity": required("gpu", "h100")}}},
                   image=IMAGE)
    config = DistributedConfig(affinity={**ANTI, **required("zone", "a")})
    objects = render(job, flavor, config=config)
    assert_valid(objects)
    seen = affinities(objects)
    assert seen["worker"] == {**required("gpu", "h100"), **ANTI}
    assert seen["master"] == {**required("zone", "a"), **ANTI}


def test_role_affinity_replaces_only_the_kinds_it_sets() -> None:
    job = make_job({**SPEC, "affinity": {**ANTI, **required("zone", "a")},
                    "roles": {"master": {"affinity": {"podAffinity": ANTI["podAntiAffinity"]}},
                              "worker": {"replicas": 2, "affinity": required("gpu", "h100")}}}, image=IMAGE)
    spec = job.spec
    master, worker = spec.role_settings("master").affinity, spec.role_settings("worker").affinity
    assert kube_to_dict(master) == {**required("zone", "a"), "podAffinity": ANTI["podAntiAffinity"], **ANTI}
    assert kube_to_dict(worker) == {**required("gpu", "h100"), **ANTI}
    assert kube_to_dict(spec.affinity) == {**required("zone", "a"), **ANTI}  # the job's own is unchanged


def test_with_config_merges_affinity_per_kind_over_the_jobs() -> None:
    """TrainJob.with_config: the config's kinds over the job's, the job's other kinds kept; roles then merge
    over that as they do over the job's own."""
    job = make_job({**SPEC, "affinity": required("zone", "a"),
                    "roles": {"master": {}, "worker": {"replicas": 2, "affinity": required("gpu", "h100")}}},
                   image=IMAGE)
    configured = job.with_config(DistributedConfig(affinity=ANTI))
    assert kube_to_dict(configured.spec.affinity) == {**required("zone", "a"), **ANTI}
    assert kube_to_dict(configured.spec.role_settings("worker").affinity) == {**required("gpu", "h100"), **ANTI}
    assert kube_to_dict(job.spec.affinity) == required("zone", "a")  # the original is unchanged
    replaced = job.with_config(DistributedConfig(affinity=required("zone", "b")))
    assert kube_to_dict(replaced.spec.affinity) == required("zone", "b")
