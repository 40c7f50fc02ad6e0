"""Shared fixtures of the Kubernetes backend tests (this module holds no tests).

The ``cluster`` fixture runs a test twice: against the API emulator (always), and against a real
cluster when ``KUBETRAIN_TEST_KUBECONFIG`` names a kubeconfig (not collected otherwise). A test drives the
backend only through its API; the parts a real cluster does by itself (the Job/JobSet/Volcano/Kubeflow
controllers creating pods, the kubelet running them, the controllers concluding) are methods of
:class:`Cluster` that play them on the emulator and, on a real cluster, do nothing (the job's own
command does it) or wait for it. So the same assertions hold in both places.

Import what you use: ``from tests.support.cluster import cluster, emulated  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.capabilities import FlavorUnavailable
from kubetrain.backends.kubernetes.client import RetryPolicy
from kubetrain.jobspec import TrainJob, from_dict
from kubetrain.status import JobStatus
from tests.support.manifest_schemas import validate_manifest

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator

REAL_KUBECONFIG = os.environ.get("KUBETRAIN_TEST_KUBECONFIG")
REAL_NAMESPACE = os.environ.get("KUBETRAIN_TEST_NAMESPACE", "default")
IMAGE = os.environ.get("KUBETRAIN_TEST_IMAGE", "busybox:1.36")
FAST_RETRY = RetryPolicy(attempts=5, base=0.01, cap=0.05)

FLAVORS = ("job", "jobset", "volcano", "kubeflow")
VOLCANO = "jobs.batch.volcano.sh"
KUBEFLOW_PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs", "JAXJob": "jaxjobs"}


def now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def job_doc(name: str, *, framework: str = "pytorch", replicas: int = 2, script: str = "echo hello",
            **spec: Any) -> dict[str, Any]:
    """A small TrainJob whose replicas run ``sh -c script`` in busybox (real clusters run it as is)."""
    body: dict[str, Any] = {"framework": framework, "replicas": replicas, "image": IMAGE,
                            "run": {"exec": ["sh", "-c", script]}, "resources": {"cpu": "10m", "memory": "16Mi"}}
    body.update(spec)
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": body}


# --------------------------------------------------------------------------------------------- controllers


def _child_pod(owner: dict[str, Any], name: str, template: dict[str, Any], extra_labels: dict[str, str],
               restart_policy: str | None = None) -> dict[str, Any]:
    tmeta = template.get("metadata") or {}
    spec = copy.deepcopy(template.get("spec") or {})
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "labels": {**(tmeta.get("labels") or {}), **extra_labels},
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                 "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }


class Controllers:
    """What the engines' controllers do, played on the emulator: pods for every replica, and the
    workload's status once the test decides how the job ended."""

    def __init__(self, emu: KubeEmulator, namespace: str) -> None:
        self.emu = emu
        self.ns = namespace
        self.attempt: dict[str, int] = {}

    def root(self, flavor: str, name: str) -> dict[str, Any]:
        if flavor == "job":
            jobs = self.emu.objects("jobs", self.ns, label_selector=f"kubetrain.dev/job={name}")
            return next(j for j in jobs if not j["metadata"].get("ownerReferences"))
        if flavor == "jobset":
            return self.emu.get("jobsets", name, self.ns)
        if flavor == "volcano":
            return self.emu.get(VOLCANO, name, self.ns)
        for plural in KUBEFLOW_PLURALS.values():
            found = self.emu.find(plural, name, self.ns)
            if found is not None:
                return found
        raise LookupError(name)

    def create_pods(self, flavor: str, name: str, only: set[str] | None = None) -> dict[str, str]:
        """Replica (``worker-1``) → pod name, as the flavor's controller names them."""
        out: dict[str, str] = {}
        if flavor == "job":
            jobs = self.emu.objects("jobs", self.ns, label_selector=f"kubetrain.dev/job={name}")
            for job in jobs:
                role = job["metadata"]["labels"]["kubetrain.dev/role"]
                n = job["spec"].get("completions", 1)
                indexes = [i for i in range(n) if only is None or f"{role}-{i}" in only]
                for pod in self.emu.create_job_pods(self.ns, job["metadata"]["name"], indexes=indexes):
                    out[f"{role}-{pod['metadata']['labels']['batch.kubernetes.io/job-completion-index']}"] = (
                        pod["metadata"]["name"])
        elif flavor == "jobset":
            js = self.emu.get("jobsets", name, self.ns)
            attempt = self.attempt.get(name, 0)
            for rj in js["spec"]["replicatedJobs"]:
                for j in range(rj.get("replicas", 1)):
                    child = f"{name}-{rj['name']}-{j}"
                    jset_labels = {"jobset.sigs.k8s.io/jobset-name": name,
                                   "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                                   "jobset.sigs.k8s.io/job-index": str(j),
                                   "jobset.sigs.k8s.io/restart-attempt": str(attempt)}
                    template = copy.deepcopy(rj["template"])
                    template["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {}).update(
                        jset_labels)
                    if self.emu.find("jobs", child, self.ns) is None:
                        self.emu.create({
                            "apiVersion": "batch/v1", "kind": "Job",
                            "metadata": {"name": child, "namespace": self.ns,
                                         "labels": {**(template.get("metadata") or {}).get("labels", {}),
                                                    **jset_labels},
                                         "ownerReferences": [{"apiVersion": js["apiVersion"], "kind": "JobSet",
                                                              "name": name, "uid": js["metadata"]["uid"],
                                                              "controller": True}]},
                            "spec": template["spec"]})
                    role = template["spec"]["template"]["metadata"]["labels"]["kubetrain.dev/role"]
                    n = template["spec"].get("completions", 1)
                    indexes = [i for i in range(n) if only is None or f"{role}-{i}" in only]
                    for pod in self.emu.create_job_pods(self.ns, child, indexes=indexes):
                        index = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
                        out[f"{role}-{index}"] = pod["metadata"]["name"]
        elif flavor == "volcano":
            vj = self.emu.get(VOLCANO, name, self.ns)
            group = f"{name}-{vj['metadata']['uid']}"
            if self.emu.find("podgroups", group, self.ns) is None:
                self.emu.create({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": group, "namespace": self.ns,
                                 "ownerReferences": [{"apiVersion": vj["apiVersion"], "kind": "Job", "name": name,
                                                      "uid": vj["metadata"]["uid"], "controller": True}]},
                    "spec": {"minMember": vj["spec"].get("minAvailable", 1),
                             "queue": vj["spec"].get("queue", "default")},
                    "status": {"phase": "Pending"}})
            for task in vj["spec"]["tasks"]:
                role = task["template"]["metadata"]["labels"]["kubetrain.dev/role"]
                for i in range(task.get("replicas", 1)):
                    if only is not None and f"{role}-{i}" not in only:
                        continue
                    pod = _child_pod(vj, f"{name}-{task['name']}-{i}", task["template"],
                                     {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"],
                                      "volcano.sh/task-index": str(i)})
                    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = group
                    out[f"{role}-{i}"] = self.emu.create(pod)["metadata"]["name"]
        else:
            kf = self.root("kubeflow", name)
            specs = next(v for k, v in kf["spec"].items() if k.endswith("ReplicaSpecs"))
            for rtype, rspec in specs.items():
                role = rspec["template"]["metadata"]["labels"]["kubetrain.dev/role"]
                policy = rspec.get("restartPolicy", "Never")
                for i in range(rspec.get("replicas", 1)):
                    if only is not None and f"{role}-{i}" not in only:
                        continue
                    pod = _child_pod(kf, f"{name}-{rtype.lower()}-{i}", rspec["template"],
                                     {"training.kubeflow.org/job-name": name,
                                      "training.kubeflow.org/replica-type": rtype.lower(),
                                      "training.kubeflow.org/replica-index": str(i)},
                                     "Never" if policy == "ExitCode" else policy)
                    out[f"{role}-{i}"] = self.emu.create(pod)["metadata"]["name"]
        return out

    def conclude(self, flavor: str, name: str, outcome: str, *, reason: str | None = None,
                 message: str | None = None, restarts: int = 0) -> None:
        """The engine's verdict: ``Succeeded`` or ``Failed`` (with reason/message), ``restarts`` done."""
        t = now()
        ok = outcome == "Succeeded"
        root = self.root(flavor, name)
        rname = root["metadata"]["name"]
        if not ok:  # every engine stops the replicas still running when a job fails
            for pod in self.emu.objects("pods", self.ns, label_selector=f"kubetrain.dev/job={name}"):
                if pod["status"].get("phase") in ("Pending", "Running"):
                    self.emu.delete("pods", pod["metadata"]["name"], self.ns)
        if flavor == "job":
            conds = ([{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": t},
                      {"type": "Complete", "status": "True", "lastTransitionTime": t}] if ok else
                     [{"type": "FailureTarget", "status": "True", "reason": reason or "BackoffLimitExceeded",
                       "message": message or "Job has reached the specified backoff limit", "lastTransitionTime": t},
                      {"type": "Failed", "status": "True", "reason": reason or "BackoffLimitExceeded",
                       "message": message or "Job has reached the specified backoff limit", "lastTransitionTime": t}])
            self.emu.patch_status("jobs", rname, {"conditions": conds, "completionTime": t if ok else None}, self.ns)
        elif flavor == "jobset":
            ctype = "Completed" if ok else "Failed"
            cond = {"type": ctype, "status": "True", "reason": reason or ("AllJobsCompleted" if ok else "FailedJobs"),
                    "message": message or ("jobset completed successfully" if ok else "jobset failed"),
                    "lastTransitionTime": t}
            self.emu.patch_status("jobsets", rname, {"conditions": [cond], "restarts": restarts,
                                                     "terminalState": ctype}, self.ns)
        elif flavor == "volcano":
            state = {"phase": "Completed" if ok else "Failed", "lastTransitionTime": t}
            if reason:
                state["reason"] = reason
            if message:
                state["message"] = message
            self.emu.patch_status(VOLCANO, rname, {"state": state, "retryCount": restarts,
                                                   "conditions": [{"status": state["phase"],
                                                                   "lastTransitionTime": t}]}, self.ns)
        else:
            plural = KUBEFLOW_PLURALS[root["kind"]]
            conds = [{"type": "Created", "status": "True", "reason": "Created", "lastTransitionTime": t},
                     {"type": "Running", "status": "False", "reason": "Done", "lastTransitionTime": t},
                     {"type": outcome, "status": "True", "reason": reason or f"Job{outcome}",
                      "message": message or f"job {rname} {outcome.lower()}", "lastTransitionTime": t}]
            self.emu.patch_status(plural, rname, {"conditions": conds}, self.ns)

    def podgroup_unschedulable(self, name: str, message: str) -> None:
        """Volcano's scheduler: the gang cannot be placed."""
        vj = self.emu.get(VOLCANO, name, self.ns)
        self.emu.patch_status("podgroups", f"{name}-{vj['metadata']['uid']}", {
            "phase": "Pending",
            "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                            "message": message, "lastTransitionTime": now()}]}, self.ns)

    def gang_restart(self, flavor: str, name: str) -> dict[str, str]:
        """A JobSet restart (all child Jobs recreated, attempt + 1) or a Volcano RestartJob (pods recreated)."""
        if flavor == "jobset":
            for job in self.emu.objects("jobs", self.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"):
                self.emu.delete("jobs", job["metadata"]["name"], self.ns, propagation="Background")
            self.attempt[name] = self.attempt.get(name, 0) + 1
            self.emu.patch_status("jobsets", name, {"restarts": self.attempt[name]}, self.ns)
        elif flavor == "volcano":
            for pod in self.emu.objects("pods", self.ns, label_selector=f"volcano.sh/job-name={name}"):
                self.emu.delete("pods", pod["metadata"]["name"], self.ns)
            retry = (self.emu.get(VOLCANO, name, self.ns).get("status") or {}).get("retryCount", 0) + 1
            self.emu.patch_status(VOLCANO, name, {"retryCount": retry, "state": {"phase": "Restarting"}}, self.ns)
        else:
            raise ValueError(flavor)
        return self.create_pods(flavor, name)


class Cluster:
    """A cluster for one test: the emulator (``real`` False) or the one in KUBETRAIN_TEST_KUBECONFIG."""

    def __init__(self, kubeconfig: Path | str, namespace: str, emulator: KubeEmulator | None) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.emu = emulator
        self.real = emulator is None
        self.timeout = 180.0 if self.real else 10.0
        self.controllers = Controllers(emulator, namespace) if emulator is not None else None
        self._backends: list[KubernetesBackend] = []
        self.created: list[str] = []

    def backend(self, **options: Any) -> KubernetesBackend:
        options.setdefault("retry", FAST_RETRY)
        options.setdefault("log_grace", 1.0)
        options.setdefault("diagnose_every", 0.2)
        b = KubernetesBackend(kubeconfig=self.kubeconfig, namespace=self.namespace, **options)
        self._backends.append(b)
        return b

    def name(self, base: str) -> str:
        """Job names: as given on the emulator, with a random suffix on a shared real cluster."""
        name = base if not self.real else f"{base}-{secrets.token_hex(3)}"
        self.created.append(name)
        return name

    def job(self, base: str, **options: Any) -> TrainJob:
        return from_dict(job_doc(self.name(base), **options))

    def require(self, backend: KubernetesBackend, flavor: str) -> bool:
        """Whether ``flavor`` can run here. On a real cluster without its controller, what a user meets
        instead is checked (submit refuses, naming what is missing) and the test ends there."""
        missing = backend.capabilities().missing(flavor)
        if missing is None:
            return True
        assert self.real, f"the emulator serves every flavor: {missing}"
        with pytest.raises(FlavorUnavailable) as refused:
            backend.submit(self.job(f"unavailable-{flavor}"), flavor=flavor)
        assert str(refused.value) == missing
        return False

    # -- what the cluster does by itself ------------------------------------------------------------

    def start_pods(self, backend: KubernetesBackend, flavor: str, name: str) -> dict[str, str]:
        """Every replica's pod: created by the played controller, or waited for."""
        if self.controllers is not None:
            return self.controllers.create_pods(flavor, name)
        backend.wait(name, until=lambda s: all(r.reason != "NoPod" for r in s.replicas), timeout=self.timeout)
        return {k: str(v["name"]) for k, v in backend.describe(name).pods.items()}

    def kubelet(self, pod: str, phase: str, *lines: str, **kwargs: Any) -> None:
        """The kubelet: the pod's phase, and what its container printed (emulator only)."""
        if self.emu is None:
            return
        if phase in ("Succeeded", "Failed"):
            current = self.emu.get("pods", pod, self.namespace)
            if current["status"].get("phase") == "Pending":
                self.emu.set_pod_phase(self.namespace, pod, "Running")
            for line in lines:
                self.emu.append_log(self.namespace, pod, line + "\n")
            self.emu.set_pod_phase(self.namespace, pod, phase, **kwargs)
            return
        self.emu.set_pod_phase(self.namespace, pod, phase, **kwargs)
        for line in lines:
            self.emu.append_log(self.namespace, pod, line + "\n")

    def conclude(self, flavor: str, name: str, outcome: str, **kwargs: Any) -> None:
        if self.controllers is not None:
            self.controllers.conclude(flavor, name, outcome, **kwargs)

    def expect(self, backend: KubernetesBackend, name: str, until: Callable[[JobStatus], bool]) -> JobStatus:
        """The job's status once ``until`` holds (at once on the emulator; waited for on a real cluster)."""
        status = backend.wait(name, until=until, timeout=self.timeout)
        assert until(status), status.to_dict()
        return status

    def close(self) -> None:
        if self.real and self._backends:
            for name in self.created:
                with contextlib.suppress(Exception):  # already deleted by the test
                    self._backends[0].delete(name)
        for b in self._backends:
            b.close()


@pytest.fixture(params=["emulator", *(["real"] if REAL_KUBECONFIG else [])])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """The emulator, then a real cluster (a variant that exists only with KUBETRAIN_TEST_KUBECONFIG)."""
    if request.param == "real":
        assert REAL_KUBECONFIG
        c = Cluster(REAL_KUBECONFIG, REAL_NAMESPACE, None)
    else:
        emu = request.getfixturevalue("kube_emulator")
        emu.body_validator = validate_manifest
        c = Cluster(emu.write_kubeconfig(tmp_path / "kubeconfig"), "default", emu)
    try:
        yield c
    finally:
        c.close()
        if c.emu is not None:
            assert c.emu.validation_failures == [], c.emu.validation_failures


@pytest.fixture
def emulated(kube_emulator: KubeEmulator, tmp_path: Path) -> Iterator[Cluster]:
    """The emulator only: for what a real cluster cannot be made to do on demand (faults, 410s)."""
    kube_emulator.body_validator = validate_manifest
    c = Cluster(kube_emulator.write_kubeconfig(tmp_path / "kubeconfig"), "default", kube_emulator)
    try:
        yield c
    finally:
        c.close()
