"""Why replicas are Pending, one line per cause with a hint: scheduling, image pulls, mounts, Kueue admission,
Volcano gangs, quota. The emulator plays the scheduler, kubelet and controllers that report them."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.backends.kubernetes.diagnose import MAX_EVENT_READS, from_pods, unschedulable_hint
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase
from tests.support.cluster import Cluster, emulated, job_doc, now  # noqa: F401


def _submit(c: Cluster, name: str, flavor: str = "job", **spec: Any) -> tuple[Any, list[str]]:
    b = c.backend()
    sub = b.submit(from_dict(job_doc(name, **spec)), flavor=flavor)
    pods = c.controllers.create_pods(flavor, sub.name) if c.controllers else {}
    return b, [pods[k] for k in sorted(pods)]


def test_image_pull_errors(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _submit(emulated, "pull")
    for pod in pods:
        emu.set_pod_phase("default", pod, "Pending", reason="ImagePullBackOff",
                          message='Back-off pulling image "registry.example/busybox:nope": not found')
    status = b.status("pull")
    assert status.phase is JobPhase.PENDING and status.reason == "ImagePull"
    [d] = b.describe("pull").diagnoses
    assert d.replicas == ["worker-0", "worker-1"]
    assert d.line() == ('ImagePull (worker-0, worker-1): ImagePullBackOff: Back-off pulling image '
                        '"registry.example/busybox:nope": not found — hint: the image or tag does not exist: '
                        "check spec.image")


def test_mount_failures_come_from_the_pod_events(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _submit(emulated, "mount")
    for pod in pods:
        emu.set_pod_phase("default", pod, "Pending")  # on a node, ContainerCreating
    emu.add_event(emu.get("pods", pods[1]), "FailedMount",
                  'MountVolume.SetUp failed for volume "data" : persistentvolumeclaim "datasets" not found',
                  type="Warning")
    emu.clear_requests()
    diagnoses = b.describe("mount").diagnoses
    [d] = diagnoses
    assert d.cause == "Mount" and d.replicas == ["worker-1"]
    assert 'persistentvolumeclaim "datasets" not found' in d.message and "spec.mounts" in d.hint
    assert emu.count_requests("GET", "/events$") == 2  # both stuck pods are asked about


def test_events_are_read_for_at_most_a_few_stuck_pods(emulated: Cluster) -> None:
    # A job of many replicas stuck creating must not cost an events request per pod on every status.
    emu = emulated.emu
    assert emu is not None
    b, pods = _submit(emulated, "many", replicas=5)
    for pod in pods:
        emu.set_pod_phase("default", pod, "Pending")
        emu.add_event(emu.get("pods", pod), "FailedMount", 'persistentvolumeclaim "datasets" not found',
                      type="Warning")
    emu.clear_requests()
    causes = {d.cause for d in b.describe("many").diagnoses}
    assert causes == {"Mount"}
    assert emu.count_requests("GET", "/events$") == MAX_EVENT_READS


def test_missing_secret_is_a_container_config_error(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _submit(emulated, "secret", replicas=1)
    emu.set_pod_phase("default", pods[0], "Pending", reason="CreateContainerConfigError",
                      message='secret "wandb" not found')
    status = b.status("secret")
    assert status.reason == "ContainerConfig"
    summary = 'secret Pending (ContainerConfig): CreateContainerConfigError: secret "wandb" not found'
    assert status.summary_line() == summary
    lines = b.describe("secret").status_lines()
    assert lines[:2] == [summary, "  worker-0         Pending    CreateContainerConfigError"]
    assert lines[2].startswith('  ContainerConfig (worker-0): CreateContainerConfigError: secret "wandb" not found '
                               "— hint: a Secret or ConfigMap the pod refers to is missing")


def test_kueue_not_admitted_yet(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    emu.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "team-a", "namespace": "default"}, "spec": {"clusterQueue": "gpus"}})
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("queued", scheduling={"queue": "team-a"}, resources={"gpu": 8})), flavor="jobset")
    js = emu.get("jobsets", sub.name)
    js["spec"]["suspend"] = True  # Kueue's webhook holds every job of a queue until it is admitted
    emu.update(js)
    message = ("couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in "
               "flavor a100, 16 more needed")
    emu.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": f"jobset-{sub.name}-1a2b3", "namespace": "default",
                             "labels": {"kueue.x-k8s.io/job-uid": js["metadata"]["uid"]},
                             "ownerReferences": [{"apiVersion": js["apiVersion"], "kind": "JobSet", "name": sub.name,
                                                  "uid": js["metadata"]["uid"], "controller": True}]},
                "spec": {"queueName": "team-a", "podSets": [{"name": "worker", "count": 2, "template": {
                    "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                           "message": message, "lastTransitionTime": now()}]}})
    status = b.status(sub.name)
    assert status.phase is JobPhase.PENDING and status.reason == "Kueue"
    [d] = b.describe(sub.name).diagnoses
    assert d.message == f"not admitted by queue team-a: {message}"
    assert "lacks quota for the whole job" in d.hint and d.replicas == ["worker-0", "worker-1"]
    # kubetrain's own suspend is a pause, not a wait for Kueue
    paused = b.suspend(sub.name)
    assert paused.phase is JobPhase.SUSPENDED


def test_volcano_gang_not_ready(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, _ = _submit(emulated, "gang", flavor="volcano", replicas=4)
    assert emulated.controllers is not None
    emulated.controllers.podgroup_unschedulable(
        "gang", "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
                "Pending: 4 Unschedulable")
    status = b.status("gang")
    assert status.reason == "PodGroup" and "pod group is not ready" in (status.message or "")
    [d] = b.describe("gang").diagnoses
    assert d.replicas == [f"worker-{i}" for i in range(4)]
    assert "the gang needs 4 pods placed at once" in d.hint and "queue default" in d.hint


def test_quota_refusal_on_the_workload(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("quota", resources={"gpu": 8})), flavor="job")
    refusal = ('Error creating: pods "quota-worker-0-x8k2p" is forbidden: exceeded quota: gpu-quota, requested: '
               "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4")
    emu.add_event(emu.get("jobs", "quota-worker"), "FailedCreate", refusal, type="Warning",
                  component="job-controller")
    status = b.status(sub.name)
    assert status.reason == "Quota" and refusal in (status.message or "")
    [d] = b.describe(sub.name).diagnoses
    assert d.replicas == ["worker-0", "worker-1"] and "kubectl describe resourcequota -n default" in d.hint


def test_a_running_job_costs_no_diagnosis_requests(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _submit(emulated, "busy")
    for pod in pods:
        emu.set_pod_phase("default", pod, "Running")
    b.status("busy")  # discovery and the kinds' lists are cached per backend
    emu.clear_requests()
    status = b.status("busy")
    assert status.phase is JobPhase.RUNNING and status.reason is None
    # The pods are listed while the workload is looked up: the three requests, in either order.
    assert sorted(r.path.rsplit("/", 1)[-1] for r in emu.requests) == ["jobs", "jobsets", "pods"]


@pytest.mark.parametrize(("message", "expected"), [
    ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", "no node has enough free nvidia.com/gpu"),
    ("0/4 nodes are available: 1 Insufficient cpu, 3 Insufficient memory.", "no node has enough free cpu, memory"),
    ("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", "node selector/affinity"),
    ("0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}.", "spec.tolerations"),
    ("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.", "kubectl get pvc"),
    ("something new", "kubectl describe pod"),
])
def test_unschedulable_hints(message: str, expected: str) -> None:
    assert expected in unschedulable_hint(message)


def test_from_pods_reads_nothing_but_the_pods() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j-worker", "labels": {
        "kubetrain.dev/role": "worker", "kubetrain.dev/job": "j"}},
           "spec": {"completions": 2, "template": {"spec": {"containers": [{"name": "main"}]}}}}
    pod = {"metadata": {"name": "p0", "labels": {"kubetrain.dev/role": "worker",
                                                 "batch.kubernetes.io/job-completion-index": "0"}},
           "spec": {"containers": [{"name": "main"}]},
           "status": {"phase": "Pending", "conditions": [
               {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates"}]}}
    found, creating, missing = from_pods([job], [pod])
    assert [d.cause for d in found] == ["SchedulingGated"] and creating == [] and missing == ["worker-1"]
