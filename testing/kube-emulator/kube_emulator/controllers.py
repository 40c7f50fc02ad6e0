"""The workload controllers a job launcher relies on, played on the emulator: the Job controller (through
``KubeEmulator.create_job_pods``), JobSet, Volcano and the Kubeflow training operator.

Nothing in the emulator runs on its own; a test (or a benchmark) decides when each controller acts:
``create_pods`` makes every replica's pod as the engine names and labels them, ``conclude`` writes the
engine's verdict on the workload's status, ``gang_restart`` plays a JobSet restart or a Volcano
RestartJob, ``podgroup_unschedulable`` Volcano's scheduler failing to place a gang. Replicas are named
``<role>-<index>`` after the role label the launcher puts on each pod template, and a job's objects are
found by its job label (kubetrain's labels unless others are given).

Engines are named as the launcher names them: ``job`` (batch/v1 Jobs, one per role), ``jobset``,
``volcano``, ``kubeflow`` (any training-operator kubeflow.org/v1 kind), and for documents submitted as their
authors wrote them: ``mpi-operator`` (a kubeflow.org/v2beta1 MPIJob: a launcher Job and worker pods),
``deepspeedjob`` (T9k's batch.tensorstack.dev DeepSpeedJob) and ``trainingworkload`` (Run:ai's). A replica's
role is the launcher's role label on its template when there is one, else the engine's own name for it (the
replica type in lower case, the replicatedJob or task name).

``acknowledge`` writes what each controller writes on an object as soon as it handles it (the first
reconcile), without creating pods: what tells a client that a controller is alive and acting.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .emulator import KubeEmulator

VOLCANO = "jobs.batch.volcano.sh"
KUBEFLOW_PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs", "JAXJob": "jaxjobs",
                    "XGBoostJob": "xgboostjobs", "PaddleJob": "paddlejobs"}
DEEPSPEEDJOBS = "deepspeedjobs.batch.tensorstack.dev"
TRAININGWORKLOADS = "trainingworkloads.run.ai"
ENGINES = ("job", "jobset", "volcano", "kubeflow", "mpi-operator", "deepspeedjob", "trainingworkload")
KF = "training.kubeflow.org/"

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


def indexes_of(text: str | None) -> set[int]:
    """A Job status's index list ("1,3-5") as a set."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


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
        if engine == "deepspeedjob":
            return self.emu.get(DEEPSPEEDJOBS, name, self.ns)
        if engine == "trainingworkload":
            return self.emu.get(TRAININGWORKLOADS, name, self.ns)
        for plural in KUBEFLOW_PLURALS.values():
            try:
                found = self.emu.find(plural, name, self.ns)
            except LookupError:  # a kind whose CRD this cluster does not have
                continue
            if found is not None:
                return found
        raise LookupError(name)

    def _role(self, template: dict[str, Any], default: str) -> str:
        return str(((template.get("metadata") or {}).get("labels") or {}).get(self.role_label) or default)

    def pods_of(self, engine: str, name: str) -> list[dict[str, Any]]:
        """The job's pods: by the launcher's job label, or (a document as written) by the labels the engine's
        controller puts on them, or owned by the root."""
        pods = self.emu.objects("pods", self.ns, label_selector=self._selector(name))
        if pods:
            return pods
        engine_label = {"jobset": "jobset.sigs.k8s.io/jobset-name", "volcano": "volcano.sh/job-name",
                        "kubeflow": KF + "job-name", "mpi-operator": KF + "job-name"}.get(engine)
        if engine_label is not None:
            return self.emu.objects("pods", self.ns, label_selector=f"{engine_label}={name}")
        uid = self.root(engine, name)["metadata"]["uid"]
        return [p for p in self.emu.objects("pods", self.ns)
                if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]

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
                    # JobSet's defaulting webhook: Indexed Jobs, pods restarted OnFailure unless the template says.
                    template["spec"].setdefault("completionMode", "Indexed")
                    template["spec"]["template"].setdefault("spec", {}).setdefault("restartPolicy", "OnFailure")
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
                    role = self._role(template["spec"]["template"], rj["name"])
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
                role = self._role(task["template"], task["name"])
                for i in range(task.get("replicas", 1)):
                    if only is not None and f"{role}-{i}" not in only:
                        continue
                    pod = child_pod(vj, f"{name}-{task['name']}-{i}", task["template"],
                                    {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"],
                                     "volcano.sh/task-index": str(i)})
                    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = group
                    out[f"{role}-{i}"] = self.emu.create(pod)["metadata"]["name"]
        elif engine == "mpi-operator":
            out.update(self._mpi_operator_pods(name, only))
        elif engine in ("deepspeedjob", "trainingworkload"):
            root = self.root(engine, name)
            if engine == "deepspeedjob":
                worker = root["spec"]["worker"]
                template, count, policy = worker["template"], int(worker.get("replicas", 1)), "Never"
            else:  # a TrainingWorkload's pods: one per parallel run, from the workload's own fields
                spec = root["spec"]
                count = int((spec.get("parallelism") or {}).get("value", 1))
                container = {"name": name, "image": (spec.get("image") or {}).get("value", "busybox")}
                template, policy = {"spec": {"containers": [container]}}, "Never"
            for i in range(count):
                if only is not None and f"worker-{i}" not in only:
                    continue
                pod = child_pod(root, f"{name}-worker-{i}", template, {}, policy)
                out[f"worker-{i}"] = self.emu.create(pod)["metadata"]["name"]
        else:
            kf = self.root("kubeflow", name)
            specs = next(v for k, v in kf["spec"].items() if k.endswith("ReplicaSpecs"))
            for rtype, rspec in specs.items():
                role = self._role(rspec["template"], rtype.lower())
                policy = rspec.get("restartPolicy", "Never")
                for i in range(rspec.get("replicas", 1)):
                    if only is not None and f"{role}-{i}" not in only:
                        continue
                    pod = child_pod(kf, f"{name}-{rtype.lower()}-{i}", rspec["template"],
                                    {KF + "operator-name": "training-operator",
                                     KF + "job-name": name,
                                     KF + "replica-type": rtype.lower(),
                                     KF + "replica-index": str(i)},
                                    "Never" if policy == "ExitCode" else policy)
                    out[f"{role}-{i}"] = self.emu.create(pod)["metadata"]["name"]
        return out

    def _mpi_operator_pods(self, name: str, only: set[str] | None) -> dict[str, str]:
        """mpi-operator v2: worker pods ``<name>-worker-<i>`` and a launcher Job ``<name>-launcher`` (its pod
        made by the Job controller), labelled ``training.kubeflow.org/job-role``."""
        mj = self.emu.get("mpijobs", name, self.ns)
        specs = mj["spec"]["mpiReplicaSpecs"]
        out: dict[str, str] = {}

        def labels(role: str) -> dict[str, str]:
            return {KF + "operator-name": "mpi-operator", KF + "job-name": name, KF + "job-role": role}

        worker = specs.get("Worker") or {}
        for i in range(int(worker.get("replicas", 0))):
            if only is not None and f"worker-{i}" not in only:
                continue
            pod = child_pod(mj, f"{name}-worker-{i}", worker["template"], {**labels("worker"),
                                                                            KF + "replica-index": str(i)})
            out[f"worker-{i}"] = self.emu.create(pod)["metadata"]["name"]
        launcher = specs.get("Launcher")
        if launcher is not None and (only is None or "launcher-0" in only):
            job = f"{name}-launcher"
            if self.emu.find("jobs", job, self.ns) is None:
                template = copy.deepcopy(launcher["template"])
                template.setdefault("metadata", {}).setdefault("labels", {}).update(labels("launcher"))
                template["spec"]["restartPolicy"] = "Never" if launcher.get("restartPolicy") != "OnFailure" \
                    else "OnFailure"
                self.emu.create({"apiVersion": "batch/v1", "kind": "Job",
                                 "metadata": {"name": job, "namespace": self.ns, "labels": labels("launcher"),
                                              "ownerReferences": [{"apiVersion": mj["apiVersion"], "kind": "MPIJob",
                                                                   "name": name, "uid": mj["metadata"]["uid"],
                                                                   "controller": True}]},
                                 "spec": {"backoffLimit": 6, "template": template}})
            [pod] = self.emu.create_job_pods(self.ns, job, count=1)
            out["launcher-0"] = pod["metadata"]["name"]
        return out

    def acknowledge(self, engine: str, name: str) -> None:
        """What the engine's controller writes on the object when it first handles it (no pods yet)."""
        t = now()
        root = self.root(engine, name)
        rname = root["metadata"]["name"]
        if engine == "job":
            self.emu.patch_status("jobs", rname, {"startTime": t, "active": 0, "ready": 0, "terminating": 0,
                                                  "uncountedTerminatedPods": {}}, self.ns)
        elif engine == "jobset":
            self.emu.patch_status("jobsets", rname, {"restarts": 0, "replicatedJobsStatus": [
                {"name": rj["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
                for rj in root["spec"]["replicatedJobs"]]}, self.ns)
        elif engine == "volcano":
            self.emu.patch_status(VOLCANO, rname, {"state": {"phase": "Pending", "lastTransitionTime": t},
                                                   "minAvailable": root["spec"].get("minAvailable", 1),
                                                   "conditions": [{"status": "Pending", "lastTransitionTime": t}]},
                                  self.ns)
        elif engine == "deepspeedjob":
            self.emu.patch_status(DEEPSPEEDJOBS, rname, {"phase": "Pending", "conditions": [
                {"type": "Initialized", "status": "True", "reason": "Initialized", "lastTransitionTime": t}]}, self.ns)
        elif engine == "trainingworkload":
            self.emu.patch_status(TRAININGWORKLOADS, rname, {"phase": "Pending", "conditions": [
                {"type": "Pending", "status": "True", "lastTransitionTime": t}]}, self.ns)
        else:  # the training operator and the mpi-operator: the Created condition
            plural = KUBEFLOW_PLURALS[root["kind"]]
            self.emu.patch_status(plural, rname, {"conditions": [
                {"type": "Created", "status": "True", "reason": f"{root['kind']}Created",
                 "message": f"{root['kind']} {rname} is created.", "lastUpdateTime": t, "lastTransitionTime": t}]},
                self.ns)

    def conclude(self, engine: str, name: str, outcome: str, *, reason: str | None = None,
                 message: str | None = None, restarts: int = 0) -> None:
        """The engine's verdict: ``Succeeded`` or ``Failed`` (with reason/message), ``restarts`` done."""
        t = now()
        ok = outcome == "Succeeded"
        root = self.root(engine, name)
        rname = root["metadata"]["name"]
        if not ok:  # every engine stops the replicas still running when a job fails
            for pod in self.pods_of(engine, name):
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
        elif engine == "deepspeedjob":
            self.emu.patch_status(DEEPSPEEDJOBS, rname, {"phase": outcome, "backoffCount": restarts, "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": t},
                {"type": "Complete" if ok else "Failed", "status": "True", "reason": reason or outcome,
                 "message": message or f"job {rname} {outcome.lower()}", "lastTransitionTime": t}]}, self.ns)
        elif engine == "trainingworkload":
            self.emu.patch_status(TRAININGWORKLOADS, rname, {"phase": "Completed" if ok else "Failed", "conditions": [
                {"type": "Completed" if ok else "Failed", "status": "True", "reason": reason or outcome,
                 "message": message or f"workload {rname} {outcome.lower()}", "lastTransitionTime": t}]}, self.ns)
        else:
            plural = KUBEFLOW_PLURALS[root["kind"]]
            conds = [{"type": "Created", "status": "True", "reason": "Created", "lastTransitionTime": t},
                     {"type": "Running", "status": "False", "reason": "Done", "lastTransitionTime": t},
                     {"type": outcome, "status": "True", "reason": reason or f"Job{outcome}",
                      "message": message or f"job {rname} {outcome.lower()}", "lastTransitionTime": t}]
            self.emu.patch_status(plural, rname, {"conditions": conds}, self.ns)

    def job_pod_failed(self, pod_name: str, exit_code: int) -> dict[str, Any]:
        """A pod of a batch/v1 Job fails with ``exit_code`` (``137``: its main process was SIGKILLed, as when a
        node loses it), and the Job controller does what Kubernetes' does with it, in its order:

        1. ``podFailurePolicy``: the first rule matching the exit code (``onExitCodes``, operators In and
           NotIn) acts: ``FailJob`` fails the Job, ``FailIndex`` fails the pod's index, ``Ignore`` recreates the
           pod without counting it, ``Count`` counts it as the default does.
        2. ``backoffLimitPerIndex`` set: the failure is its index's; the index's pod is recreated while the
           index has failed at most that many times (the count in the pod annotation
           ``batch.kubernetes.io/job-index-failure-count``), else the index is failed (``status.failedIndexes``)
           and the other indexes run on; ``maxFailedIndexes`` exceeded fails the Job.
        3. Otherwise ``backoffLimit``: the Job fails (``BackoffLimitExceeded``) once more pods failed than it
           allows, else the pod is recreated.

        A failed Job's running pods are deleted. Returns the Job as it is afterwards."""
        pod = self.emu.set_pod_phase(self.ns, pod_name, "Failed", exit_code=exit_code, reason="Error")
        job_name = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        job = self.emu.get("jobs", job_name, self.ns)
        spec, status = job["spec"], dict(job.get("status") or {})
        index = int(pod["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index", "0"))
        action = "Count"
        for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
            codes = rule.get("onExitCodes")
            if codes is None:
                continue  # onPodConditions: a failed container is no pod condition
            inside = exit_code in codes.get("values", [])
            if inside == (codes.get("operator") == "In"):
                action = rule["action"]
                break
        failures = int(pod["metadata"]["annotations"].get("batch.kubernetes.io/job-index-failure-count", "0"))
        if action != "Ignore":
            status["failed"] = int(status.get("failed") or 0) + 1
            failures += 1
        per_index = spec.get("backoffLimitPerIndex")
        fail_job: tuple[str, str] | None = None
        recreate = action == "Ignore"
        if action == "FailJob":
            fail_job = ("PodFailurePolicy", f"Pod {self.ns}/{pod_name} has condition matching FailJob rule")
        elif per_index is not None:
            if action == "FailIndex" or failures > per_index:
                failed = indexes_of(status.get("failedIndexes")) | {index}
                status["failedIndexes"] = ",".join(str(i) for i in sorted(failed))
                most = spec.get("maxFailedIndexes")
                if most is not None and len(failed) > most:
                    fail_job = ("MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of "
                                "failed indexes")
            else:
                recreate = True
        elif action == "FailIndex":
            fail_job = ("PodFailurePolicy", "FailIndex needs backoffLimitPerIndex")
        elif status["failed"] > int(spec.get("backoffLimit", 6)):
            fail_job = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        else:
            recreate = True
        self.emu.patch_status("jobs", job_name, status, self.ns)
        if fail_job is not None:
            self.conclude_job(job_name, *fail_job)
        elif recreate:
            for new in self.emu.create_job_pods(self.ns, job_name, indexes=[index]):
                annotations = {**new["metadata"]["annotations"],
                               "batch.kubernetes.io/job-index-failure-count": str(failures)}
                new["metadata"]["annotations"] = annotations
                self.emu.update(new)
        return self.emu.get("jobs", job_name, self.ns)

    def conclude_job(self, job_name: str, reason: str, message: str) -> None:
        """One batch/v1 Job fails: FailureTarget and Failed conditions, its running pods deleted."""
        t = now()
        for pod in self.emu.objects("pods", self.ns, label_selector=f"batch.kubernetes.io/job-name={job_name}"):
            if pod["status"].get("phase") in ("Pending", "Running"):
                self.emu.delete("pods", pod["metadata"]["name"], self.ns)
        conds = [{"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": t}
                 for kind in ("FailureTarget", "Failed")]
        self.emu.patch_status("jobs", job_name, {"conditions": conds}, self.ns)

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


__all__ = ["DEEPSPEEDJOBS", "ENGINES", "KUBEFLOW_PLURALS", "TRAININGWORKLOADS", "VOLCANO", "Controllers", "child_pod",
           "now"]
