"""The workload controllers a job launcher relies on, played on the emulator: the Job controller (through
``KubeEmulator.create_job_pods``), JobSet, Volcano and the Kubeflow training operator.

Nothing in the emulator runs on its own; a test (or a benchmark) decides when each controller acts:
``create_pods`` makes every replica's pod as the engine names and labels them, ``conclude`` writes the
engine's verdict on the workload's status, ``gang_restart`` plays a JobSet restart or a Volcano
RestartJob, ``podgroup_unschedulable`` Volcano's scheduler failing to place a gang. Replicas are named
``<role>-<index>`` after the role label the launcher puts on each pod template, and a job's objects are
found by its job label (kubetrain's labels unless others are given).

Engines are named as the launcher names them: ``job`` (batch/v1 Jobs, one per role), ``jobset``,
``volcano``, ``kubeflow`` (any kubeflow.org/v1 kind).
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .emulator import KubeEmulator

VOLCANO = "jobs.batch.volcano.sh"
KUBEFLOW_PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs", "JAXJob": "jaxjobs"}
ENGINES = ("job", "jobset", "volcano", "kubeflow")

JOB_LABEL = "kubetrain.dev/job"
ROLE_LABEL = "kubetrain.dev/role"


def now() -> str:
    """The current time as the API server writes it (RFC 3339, microseconds)."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def child_pod(owner: dict[str, Any], name: str, template: dict[str, Any], extra_labels: dict[str, str],
              restart_policy: str | None = None) -> dict[str, Any]:
    """A pod from a template, controlled by ``owner``."""
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
    workload's status once the caller decides how the job ended."""

    def __init__(self, emu: KubeEmulator, namespace: str, *, job_label: str = JOB_LABEL,
                 role_label: str = ROLE_LABEL) -> None:
        self.emu = emu
        self.ns = namespace
        self.job_label = job_label
        self.role_label = role_label
        self.attempt: dict[str, int] = {}

    def _selector(self, name: str) -> str:
        return f"{self.job_label}={name}"

    def root(self, engine: str, name: str) -> dict[str, Any]:
        """The job's root workload object."""
        if engine == "job":
            jobs = self.emu.objects("jobs", self.ns, label_selector=self._selector(name))
            return next(j for j in jobs if not j["metadata"].get("ownerReferences"))
        if engine == "jobset":
            return self.emu.get("jobsets", name, self.ns)
        if engine == "volcano":
            return self.emu.get(VOLCANO, name, self.ns)
        for plural in KUBEFLOW_PLURALS.values():
            found = self.emu.find(plural, name, self.ns)
            if found is not None:
                return found
        raise LookupError(name)

    def create_pods(self, engine: str, name: str, only: set[str] | None = None) -> dict[str, str]:
        """Replica (``worker-1``) → pod name, as the engine's controller names them (``only``: these replicas)."""
        out: dict[str, str] = {}
        if engine == "job":
            jobs = self.emu.objects("jobs", self.ns, label_selector=self._selector(name))
            for job in jobs:
                role = job["metadata"]["labels"][self.role_label]
                n = job["spec"].get("completions", 1)
                indexes = [i for i in range(n) if only is None or f"{role}-{i}" in only]
                for pod in self.emu.create_job_pods(self.ns, job["metadata"]["name"], indexes=indexes):
                    out[f"{role}-{pod['metadata']['labels']['batch.kubernetes.io/job-completion-index']}"] = (
                        pod["metadata"]["name"])
        elif engine == "jobset":
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
                    role = template["spec"]["template"]["metadata"]["labels"][self.role_label]
                    n = template["spec"].get("completions", 1)
                    indexes = [i for i in range(n) if only is None or f"{role}-{i}" in only]
                    for pod in self.emu.create_job_pods(self.ns, child, indexes=indexes):
                        index = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
                        out[f"{role}-{index}"] = pod["metadata"]["name"]
        elif engine == "volcano":
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
                role = task["template"]["metadata"]["labels"][self.role_label]
                for i in range(task.get("replicas", 1)):
                    if only is not None and f"{role}-{i}" not in only:
                        continue
                    pod = child_pod(vj, f"{name}-{task['name']}-{i}", task["template"],
                                    {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"],
                                     "volcano.sh/task-index": str(i)})
                    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = group
                    out[f"{role}-{i}"] = self.emu.create(pod)["metadata"]["name"]
        else:
            kf = self.root("kubeflow", name)
            specs = next(v for k, v in kf["spec"].items() if k.endswith("ReplicaSpecs"))
            for rtype, rspec in specs.items():
                role = rspec["template"]["metadata"]["labels"][self.role_label]
                policy = rspec.get("restartPolicy", "Never")
                for i in range(rspec.get("replicas", 1)):
                    if only is not None and f"{role}-{i}" not in only:
                        continue
                    pod = child_pod(kf, f"{name}-{rtype.lower()}-{i}", rspec["template"],
                                    {"training.kubeflow.org/job-name": name,
                                     "training.kubeflow.org/replica-type": rtype.lower(),
                                     "training.kubeflow.org/replica-index": str(i)},
                                    "Never" if policy == "ExitCode" else policy)
                    out[f"{role}-{i}"] = self.emu.create(pod)["metadata"]["name"]
        return out

    def conclude(self, engine: str, name: str, outcome: str, *, reason: str | None = None,
                 message: str | None = None, restarts: int = 0) -> None:
        """The engine's verdict: ``Succeeded`` or ``Failed`` (with reason/message), ``restarts`` done."""
        t = now()
        ok = outcome == "Succeeded"
        root = self.root(engine, name)
        rname = root["metadata"]["name"]
        if not ok:  # every engine stops the replicas still running when a job fails
            for pod in self.emu.objects("pods", self.ns, label_selector=self._selector(name)):
                if pod["status"].get("phase") in ("Pending", "Running"):
                    self.emu.delete("pods", pod["metadata"]["name"], self.ns)
        if engine == "job":
            conds = ([{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": t},
                      {"type": "Complete", "status": "True", "lastTransitionTime": t}] if ok else
                     [{"type": "FailureTarget", "status": "True", "reason": reason or "BackoffLimitExceeded",
                       "message": message or "Job has reached the specified backoff limit", "lastTransitionTime": t},
                      {"type": "Failed", "status": "True", "reason": reason or "BackoffLimitExceeded",
                       "message": message or "Job has reached the specified backoff limit", "lastTransitionTime": t}])
            self.emu.patch_status("jobs", rname, {"conditions": conds, "completionTime": t if ok else None}, self.ns)
        elif engine == "jobset":
            ctype = "Completed" if ok else "Failed"
            cond = {"type": ctype, "status": "True", "reason": reason or ("AllJobsCompleted" if ok else "FailedJobs"),
                    "message": message or ("jobset completed successfully" if ok else "jobset failed"),
                    "lastTransitionTime": t}
            self.emu.patch_status("jobsets", rname, {"conditions": [cond], "restarts": restarts,
                                                     "terminalState": ctype}, self.ns)
        elif engine == "volcano":
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

    def gang_restart(self, engine: str, name: str) -> dict[str, str]:
        """A JobSet restart (all child Jobs recreated, attempt + 1) or a Volcano RestartJob (pods recreated)."""
        if engine == "jobset":
            for job in self.emu.objects("jobs", self.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"):
                self.emu.delete("jobs", job["metadata"]["name"], self.ns, propagation="Background")
            self.attempt[name] = self.attempt.get(name, 0) + 1
            self.emu.patch_status("jobsets", name, {"restarts": self.attempt[name]}, self.ns)
        elif engine == "volcano":
            for pod in self.emu.objects("pods", self.ns, label_selector=f"volcano.sh/job-name={name}"):
                self.emu.delete("pods", pod["metadata"]["name"], self.ns)
            retry = (self.emu.get(VOLCANO, name, self.ns).get("status") or {}).get("retryCount", 0) + 1
            self.emu.patch_status(VOLCANO, name, {"retryCount": retry, "state": {"phase": "Restarting"}}, self.ns)
        else:
            raise ValueError(engine)
        return self.create_pods(engine, name)


__all__ = ["ENGINES", "KUBEFLOW_PLURALS", "VOLCANO", "Controllers", "child_pod", "now"]
