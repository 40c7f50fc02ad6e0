"""The flavor registry: every flavor in `FLAVORS` is the CLI's choice, renders every framework it runs into
schema-valid objects of its own kinds, and maps its engine's verdict (succeeded, failed) to the status model.

These tests iterate the registry: a new flavor is checked by them as soon as it is registered (its engine's
verdict has to be written down in VERDICTS, in the shape its controller writes it).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.backends.kubernetes.capabilities import Capabilities
from kubetrain.backends.kubernetes.flavors import (
    AUTO_ORDER,
    FLAVORS,
    Flavor,
    flavor_of,
    flavors_that,
    get_flavor,
    kubeflow,
)
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.kubernetes.status_map import job_status
from kubetrain.contract import choices
from kubetrain.contract.errors import UsageError
from kubetrain.contract.features import FEATURES
from kubetrain.contract.frameworks import RECORDS, record_of
from kubetrain.jobspec import SpecError, from_dict
from kubetrain.jobspec.controller import CONTROLLER_KINDS
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.cluster import job_doc
from tests.support.manifest_schemas import assert_valid

T0 = "2026-03-01T10:00:00Z"
T1 = "2026-03-01T10:01:00Z"

VERDICTS: dict[str, dict[str, dict[str, Any]]] = {
    "job": {
        "Succeeded": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": T1},
                                     {"type": "Complete", "status": "True", "lastTransitionTime": T1}]},
        "Failed": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                   "message": "Job has reached the specified backoff limit",
                                   "lastTransitionTime": T1}]},
    },
    "jobset": {
        "Succeeded": {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                      "lastTransitionTime": T1}], "terminalState": "Completed"},
        "Failed": {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs",
                                   "message": "jobset failed", "lastTransitionTime": T1}],
                   "terminalState": "Failed"},
    },
    "volcano": {
        "Succeeded": {"state": {"phase": "Completed", "lastTransitionTime": T1}},
        "Failed": {"state": {"phase": "Failed", "reason": "PodFailed", "lastTransitionTime": T1}},
    },
    "kubeflow": {
        "Succeeded": {"conditions": [{"type": "Succeeded", "status": "True", "reason": "JobSucceeded",
                                      "lastTransitionTime": T1}]},
        "Failed": {"conditions": [{"type": "Failed", "status": "True", "reason": "JobFailed",
                                   "message": "job failed", "lastTransitionTime": T1}]},
    },
}
"""Each engine's verdict on its workload's status, as its controller writes it."""


def frameworks_of(flavor: Flavor) -> list[str]:
    """The frameworks a flavor runs: every one, or those the training operator has a kind for."""
    if flavor.features.every_framework:
        return list(choices.FRAMEWORKS)
    return [f for f in choices.FRAMEWORKS if record_of(f).kubeflow is not None]


def test_the_registry_is_the_cli_choice() -> None:
    assert tuple(FLAVORS) == choices.FLAVORS
    assert next(iter(FLAVORS)) == choices.DEFAULT_FLAVOR
    assert all(name == flavor.name and get_flavor(name) is flavor for name, flavor in FLAVORS.items())
    assert set(AUTO_ORDER) <= set(FLAVORS) and AUTO_ORDER[-1] == choices.DEFAULT_FLAVOR
    assert set(VERDICTS) == set(FLAVORS), "write down the new flavor's verdicts"


def test_each_flavor_can_express_what_its_features_record_says() -> None:
    """The records render refuses by and the parity table derives its cells from are the flavors' own."""
    assert tuple(FEATURES) == choices.FLAVORS
    for name, flavor in FLAVORS.items():
        assert flavor.features is FEATURES[name], name


def test_an_unknown_flavor_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown flavor 'argo': one of job, jobset, volcano, kubeflow") as err:
        get_flavor("argo")
    assert err.value.exit_code == 2
    with pytest.raises(UsageError, match="k8s is a backend, not a flavor"):
        get_flavor("k8s")
    with pytest.raises(UsageError, match="unknown flavor 'argo'"):
        render_manifests(from_dict(job_doc("x")), "argo")


@pytest.mark.parametrize("name", FLAVORS)
def test_a_cluster_without_the_flavor_is_told_what_to_install(name: str) -> None:
    flavor = FLAVORS[name]
    bare = Capabilities(groups={"batch": ["v1"]})
    if flavor.install is None:
        assert flavor.missing(bare) is None and name in bare.flavors()
        return
    assert flavor.missing(bare) == (f"the {name} flavor needs {flavor.install}: this cluster does not serve the "
                                    f"{flavor.group} API group")
    other = Capabilities(groups={"batch": ["v1"], flavor.group: ["v0"]})
    assert f"{flavor.group}/{flavor.version}, but this cluster serves only {flavor.group}/v0" in (
        flavor.missing(other) or "")
    served = Capabilities(groups={"batch": ["v1"], flavor.group: [flavor.version]})
    assert flavor.missing(served) is None and name in served.flavors()


@pytest.mark.parametrize(("name", "framework"), [(n, fw) for n, f in FLAVORS.items() for fw in frameworks_of(f)])
def test_every_framework_the_flavor_runs_renders_valid_objects_of_its_kinds(name: str, framework: str) -> None:
    flavor = FLAVORS[name]
    rendered = render_manifests(from_dict(job_doc("demo", framework=framework)), name, "ml")
    assert_valid(rendered.objects)
    assert rendered.flavor == name
    root = rendered.root
    assert flavor_of(root) is flavor
    res = flavor.resource_of(root)
    assert (res.api_version, res.kind) == (root["apiVersion"], root["kind"]) and res in flavor.resources
    kind = record_of(framework).kubeflow
    if not flavor.features.every_framework:
        assert kind is not None and root["kind"] == kind.kind
    workloads = [o for o in rendered.with_owner("uid-root") if flavor.owns(o)]
    assert sum(r.replicas for r in flavor.roles(workloads)) == len(
        [r for r in job_status(workloads, [], job_id="demo").replicas])


@pytest.mark.parametrize("name", [n for n, f in FLAVORS.items() if not f.features.every_framework])
def test_a_framework_the_flavor_cannot_run_names_the_flavors_that_can(name: str) -> None:
    missing = [f for f in choices.FRAMEWORKS if f not in frameworks_of(FLAVORS[name])]
    assert missing
    able = ", ".join(flavors_that(lambda f: f.every_framework))
    for framework in missing:
        with pytest.raises(SpecError, match=f"flavors that can express it: {able}"):
            render_manifests(from_dict(job_doc("demo", framework=framework)), name)


def _workloads(name: str, outcome: str) -> list[dict[str, Any]]:
    """The flavor's workload objects for a two-replica PyTorch job, created, with the engine's verdict."""
    flavor = FLAVORS[name]
    rendered = render_manifests(from_dict(job_doc("demo")), name, "ml")
    out = []
    for obj in rendered.with_owner("uid-root"):
        if not flavor.owns(obj):
            continue
        obj["metadata"].update(uid=f"uid-{obj['metadata']['name']}", creationTimestamp=T0)
        obj["status"] = {}
        out.append(obj)
    out[0]["status"] = VERDICTS[name][outcome]
    return out


@pytest.mark.parametrize("name", FLAVORS)
def test_the_engines_verdict_is_the_jobs_phase(name: str) -> None:
    running = _workloads(name, "Succeeded")
    running[0]["status"] = {}
    st = job_status(running, [], job_id="demo")
    assert st.phase is JobPhase.PENDING and [r.name for r in st.replicas] == ["worker-0", "worker-1"]
    assert all(r.reason == "NoPod" for r in st.replicas)

    st = job_status(_workloads(name, "Succeeded"), [], job_id="demo")
    assert st.phase is JobPhase.SUCCEEDED and st.finished_at is not None and st.namespace == "ml"
    assert all(r.phase is ReplicaPhase.SUCCEEDED for r in st.replicas)
    assert st.summary_line() == "demo Succeeded: 2/2 replicas succeeded"

    failed = _workloads(name, "Failed")
    st = job_status(list(reversed(failed)), [], job_id="demo")  # any order: the root is found
    assert st.phase is JobPhase.FAILED and st.reason == failed[0]["status"].get(
        "conditions", [failed[0]["status"].get("state")])[0]["reason"]
    assert [r.name for r in st.replicas] == ["worker-0", "worker-1"]
    assert all(r.reason == "NotStarted" for r in st.replicas)


def test_the_kubeflow_kinds_are_the_frameworks_and_the_converted_kinds() -> None:
    """The frameworks' kinds, and those a converted job of the operator's own kind renders back as."""
    kinds = {s.kubeflow.kind for s in RECORDS.values() if s.kubeflow is not None}
    assert {r.kind for r in kubeflow.RESOURCES} == kinds | set(kubeflow.CONTROLLER_KINDS)
    assert set(kubeflow.CONTROLLER_KINDS) == {kind for api, kind in CONTROLLER_KINDS if api == kubeflow.API_VERSION}
    assert all(r.group == kubeflow.FLAVOR.group and r.version == kubeflow.FLAVOR.version for r in kubeflow.RESOURCES)


def test_the_flavor_modules_load_no_render_machinery() -> None:
    """status, list and logs need the flavors, not pydantic or the planner: those load on first render."""
    import subprocess
    import sys

    code = ("import sys, kubetrain.backends.kubernetes.flavors, kubetrain.backends.kubernetes.status_map; "
            "print(sorted(m for m in ('pydantic', 'kubernetes', 'yaml', 'kubetrain.plan', 'kubetrain.jobspec') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_code_outside_a_flavors_module_compares_flavor_names() -> None:
    """What differs by flavor is an attribute or method of its `Flavor`: `flavor == "jobset"` anywhere else
    would be one more place to touch when adding a flavor."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "kubetrain"
    names = "|".join(FLAVORS)
    compare = re.compile(rf'[=!]=\s*"({names})"|"({names})"\s*[=!]=|\bin\s*[(\[{{]\s*"({names})"')
    own = {root / "backends" / "kubernetes" / "flavors" / f"{name}.py" for name in FLAVORS}
    found = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py")) if p not in own
             for n, line in enumerate(p.read_text().splitlines(), 1) if compare.search(line)]
    assert found == []
