"""JobSet (jobset.x-k8s.io/v1alpha2) as a TrainJob.

Each replicated Job becomes a role named after it, with replicas × parallelism replicas indexed across its Jobs
(kubetrain's jobset flavor renders one Job of N pods per role, the same pods). Its pod template is split into
kubetrain's typed settings and a `podTemplate` remainder. failurePolicy.maxRestarts is the job's
runPolicy.backoffLimit (JobSet restarts the whole set, as kubetrain restarts the whole replica group), a
FailJobSet rule on some replicated Jobs their roles' restartPolicy Never, suspend and ttlSecondsAfterFinished the
runPolicy's. JobSet knows no framework: the job is generic (every replica finds the others in
KUBETRAIN_CLUSTER), unless kubetrain rendered it itself (KUBETRAIN_FRAMEWORK in its containers says which).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..jobspec.errors import Path
from .conversion import SimpleKind
from .metadata import METADATA_FIELDS, take_object_metadata
from .shapes import (
    convert_template,
    document,
    is_kubetrain_template,
    object_fields,
    role_data,
)
from .walker import FieldTree, SourceWalker

API_VERSION = "jobset.x-k8s.io/v1alpha2"
DEFAULT_MANAGER = "jobset.sigs.k8s.io/jobset-controller"

_JOB_SPEC: FieldTree = {
    "parallelism": None,
    "completions": None,
    "completionMode": None,
    "backoffLimit": None,
    "backoffLimitPerIndex": None,
    "maxFailedIndexes": None,
    "podFailurePolicy": None,
    "activeDeadlineSeconds": None,
    "ttlSecondsAfterFinished": None,
    "suspend": None,
    "manualSelector": None,
    "selector": None,
    "podReplacementPolicy": None,
    "successPolicy": None,
    "managedBy": None,
    "template": None,
}
_REPLICATED_JOB: FieldTree = {
    "name": None,
    "groupName": None,
    "replicas": None,
    "dependsOn": None,
    "template": {"metadata": METADATA_FIELDS, "spec": _JOB_SPEC},
}
_SPEC: FieldTree = {
    "replicatedJobs": _REPLICATED_JOB,
    "network": {"enableDNSHostnames": None, "subdomain": None, "publishNotReadyAddresses": None},
    "successPolicy": {"operator": None, "targetReplicatedJobs": None},
    "failurePolicy": {"maxRestarts": None, "restartStrategy": None, "rules": None},
    "startupPolicy": {"startupPolicyOrder": None},
    "suspend": None,
    "coordinator": None,
    "managedBy": None,
    "ttlSecondsAfterFinished": None,
    "volumeClaimPolicies": None,
}


def _fields() -> FieldTree:
    return object_fields(_SPEC)


def _convert(doc: Mapping[str, Any], walker: SourceWalker) -> dict[str, Any]:
    metadata = take_object_metadata(walker)
    spec: dict[str, Any] = {"framework": "generic"}
    roles: dict[str, dict[str, Any]] = {}
    templates = [("spec", "replicatedJobs", i, "template", "spec", "template")
                 for i in walker.indexes(("spec", "replicatedJobs"))]
    # A JobSet kubetrain rendered itself converts back to the job it was; any other runs under JobSet's
    # contract (spec.controller): each container's command as written, with what JobSet and the Job controller
    # give its pod (the completion index, JobSet's labels and annotations, host names).
    contract = not any(is_kubetrain_template(walker, template) for template in templates)
    controller_roles: dict[str, dict[str, Any]] = {}
    for i in walker.indexes(("spec", "replicatedJobs")):
        rj = ("spec", "replicatedJobs", i)
        name = walker.get((*rj, "name"))
        target = f"spec.roles.{name}"
        walker.take((*rj, "name"), f"spec.roles.{name}")
        roles[str(name)] = _replicated_job(walker, rj, target, spec, controller_roles if contract else None)
    spec["roles"] = roles
    subdomain = walker.get(("spec", "network", "subdomain")) if contract else None
    if subdomain is not None:
        walker.take(("spec", "network", "subdomain"), "spec.controller.subdomain")
    _policies(walker, spec, roles, contract)
    if contract:
        controller: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "JobSet", "roles": controller_roles}
        if metadata.get("name"):
            controller["name"] = metadata["name"]
        if subdomain is not None:
            controller["subdomain"] = subdomain
        spec["controller"] = controller
    return document(metadata, spec)


def _replicated_job(
    walker: SourceWalker,
    rj: Path,
    target: str,
    spec: dict[str, Any],
    controller_roles: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    jobs = int(walker.get((*rj, "replicas"), 1))
    job = (*rj, "template", "spec")
    pods = int(walker.get((*job, "parallelism"), walker.get((*job, "completions"), 1)))
    replicas = jobs * pods
    role = target.rpartition(".")[2]
    if controller_roles is not None:
        # The contract keeps each pod's Job and completion index (J Jobs of P pods, indexed across them).
        controller_roles[role] = {"name": role, **({"jobs": jobs} if jobs > 1 else {})}
        walker.take((*rj, "replicas"), f"spec.controller.roles.{role}.jobs")
        walker.take((*job, "parallelism"), f"{target}.replicas")
    how = f"{jobs} Jobs of {pods} pods: one role of {replicas} replicas, indexed across them"
    for part in ((*rj, "replicas"), (*job, "parallelism")):
        if jobs > 1 and walker.has(part):
            walker.approx(part, f"{target}.replicas", how)
        else:
            walker.take(part, f"{target}.replicas")
    completions = walker.get((*job, "completions"))
    if completions is None or completions == pods:
        walker.take((*job, "completions"), None)
    else:
        walker.approx(
            (*job, "completions"),
            f"{target}.replicas",
            f"{completions} completions of {pods} pods: kubetrain's replicas each complete once",
        )
    mode = walker.get((*job, "completionMode"))
    if mode in (None, "Indexed"):
        walker.take((*job, "completionMode"), None)
    else:
        walker.approx((*job, "completionMode"), None, "kubetrain's replicas are always indexed")
    limit = walker.get((*job, "backoffLimit"))
    if limit in (None, 0):
        walker.take((*job, "backoffLimit"), None)
    else:
        walker.approx(
            (*job, "backoffLimit"),
            "spec.runPolicy.backoffLimit",
            "a Job's own pod retries: kubetrain counts restarts against the job's backoffLimit",
        )
        spec.setdefault("runPolicy", {}).setdefault("backoffLimit", limit)
    deadline = walker.approx(
        (*job, "activeDeadlineSeconds"),
        "spec.runPolicy.activeDeadlineSeconds",
        "one Job's deadline: kubetrain's is the whole job's",
    )
    if deadline is not None:
        spec.setdefault("runPolicy", {}).setdefault("activeDeadlineSeconds", deadline)
    if _is_kubetrain_failure_policy(walker.get((*job, "podFailurePolicy"))):
        walker.approx(
            (*job, "podFailurePolicy"), None, "kubetrain's own: a preempted pod is replaced, not counted as a failure"
        )
    walker.refuse(
        (*job, "podFailurePolicy"),
        "rules on a pod's exit codes are kubetrain's restartPolicy "
        "ExitCode with exitCodes; other rules are not rendered",
    )
    walker.refuse((*rj, "dependsOn"), "kubetrain starts every role together")
    walker.refuse((*rj, "groupName"), "kubetrain groups no replicated Jobs")
    template = (*job, "template")
    own = is_kubetrain_template(walker, template)
    _job_metadata(walker, (*rj, "template", "metadata"), own)
    pod_policy = (*template, "spec", "restartPolicy")
    walker.approx(
        pod_policy,
        None,
        "a Job's failed pods are replaced; kubetrain's restarts follow the JobSet's "
        "failurePolicy (runPolicy.backoffLimit)",
    )
    converted = convert_template(walker, template, target, spec,
                                 port_target=f"spec.controller.roles.{role}.port" if controller_roles is not None
                                 else None)
    framework = _kubetrain_framework(walker, template) if own else None
    if framework is not None:
        spec["framework"] = framework
    return role_data(replicas, converted)


def _job_metadata(walker: SourceWalker, meta: Path, own: bool) -> None:
    labels = walker.get((*meta, "labels"))
    if own and isinstance(labels, Mapping):
        walker.approx((*meta, "labels"), None, "kubetrain's own labels, written again when the job is rendered")
    for part in ("labels", "annotations"):
        walker.refuse(
            (*meta, part), "labels of the Job objects: kubetrain labels them itself (the pods take the pod template's)"
        )


def _is_kubetrain_failure_policy(policy: Any) -> bool:
    return policy == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }


def _kubetrain_framework(walker: SourceWalker, template: Path) -> str | None:
    for container in walker.get((*template, "spec", "containers")) or []:
        for var in (container or {}).get("env") or []:
            if isinstance(var, Mapping) and var.get("name") == "KUBETRAIN_FRAMEWORK":
                return str(var.get("value"))
    return None


def _policies(
    walker: SourceWalker, spec: dict[str, Any], roles: dict[str, dict[str, Any]], contract: bool = False
) -> None:
    s = ("spec",)
    run_policy: dict[str, Any] = spec.setdefault("runPolicy", {})
    fp = (*s, "failurePolicy")
    restarts = walker.take((*fp, "maxRestarts"), "spec.runPolicy.backoffLimit")
    if restarts is not None:
        run_policy["backoffLimit"] = restarts
    strategy = walker.get((*fp, "restartStrategy"))
    if strategy in (None, "Recreate"):
        walker.take((*fp, "restartStrategy"), None)
    else:
        walker.approx(
            (*fp, "restartStrategy"), None, f"{strategy}: kubetrain restarts the whole job, every Job recreated at once"
        )
    for i in walker.indexes((*fp, "rules")):
        rule = walker.get((*fp, "rules", i))
        targets = rule.get("targetReplicatedJobs") if isinstance(rule, Mapping) else None
        plain = isinstance(rule, Mapping) and set(rule) <= {"name", "action", "targetReplicatedJobs"}
        if plain and rule.get("action") == "FailJobSet" and targets and all(t in roles for t in targets):
            for t in targets:
                roles[t]["restartPolicy"] = "Never"
            walker.take((*fp, "rules", i), "spec.roles.*.restartPolicy")
        elif (
            isinstance(rule, Mapping)
            and rule.get("action") == "FailJobSet"
            and rule.get("onJobFailureReasons") == ["PodFailurePolicy"]
        ):
            walker.approx(
                (*fp, "rules", i),
                None,
                "kubetrain's own rule for restartPolicy ExitCode: a permanent exit code fails the job",
            )
        else:
            walker.refuse(
                (*fp, "rules", i),
                "kubetrain's failure rules are restartPolicy per role (Never: a "
                "failure fails the job) and exitCodes; this rule is not rendered",
            )
    success = (*s, "successPolicy")
    operator, targets = walker.get((*success, "operator")), walker.get((*success, "targetReplicatedJobs"))
    if operator in (None, "All") and not targets:
        walker.take(success, None)
    elif contract and isinstance(targets, list) and all(t in roles for t in targets):
        run_policy["successRoles"] = [str(t) for t in targets]
        if operator in (None, "All"):
            walker.take(success, "spec.runPolicy.successRoles")
        else:
            walker.approx(success, "spec.runPolicy.successRoles", f"operator {operator}: JobSet completes when "
                          "one of these replicated Jobs has; kubetrain when every one of them has")
    else:
        walker.approx(success, None, "a kubetrain job succeeds when every replica that runs a program has exited 0")
    order = walker.get((*s, "startupPolicy", "startupPolicyOrder"))
    if order in (None, "AnyOrder"):
        walker.take((*s, "startupPolicy"), None)
    else:
        walker.approx(
            (*s, "startupPolicy"),
            None,
            "kubetrain starts every role at once; replicas wait for their peers through the framework's rendezvous",
        )
    net = (*s, "network")
    for name, default in (("enableDNSHostnames", True), ("publishNotReadyAddresses", True)):
        if walker.get((*net, name)) in (None, default):
            walker.take((*net, name), None)
        else:
            walker.approx(
                (*net, name),
                None,
                "kubetrain's jobset flavor gives every pod a DNS name, published "
                "before it is ready (the replicas rendezvous by name)",
            )
    walker.approx((*net, "subdomain"), None, "kubetrain names the subdomain (and its headless Service) after the job")
    # (under JobSet's contract the subdomain was taken above, as spec.controller.subdomain)
    for name in ("suspend", "ttlSecondsAfterFinished"):
        value = walker.take((*s, name), f"spec.runPolicy.{name}")
        if value is not None:
            run_policy[name] = value
    walker.refuse(
        (*s, "coordinator"),
        "kubetrain's coordinator is the framework's first replica (MASTER_ADDR, "
        "JAX_COORDINATOR_ADDRESS, ...), in every replica's KUBETRAIN_CLUSTER",
    )
    manager = walker.get((*s, "managedBy"))
    if manager == DEFAULT_MANAGER:
        walker.approx((*s, "managedBy"), None, "JobSet's own controller, which kubetrain's jobset flavor uses")
    else:
        walker.refuse((*s, "managedBy"), "kubetrain renders JobSets for JobSet's own controller")
    walker.refuse(
        (*s, "volumeClaimPolicies"),
        "kubetrain creates no PersistentVolumeClaims: mount existing claims (mounts type volume)",
    )
    if not run_policy:
        del spec["runPolicy"]


KINDS: tuple[SimpleKind, ...] = (SimpleKind("JobSet", (API_VERSION,), _fields, _convert),)

__all__ = ["API_VERSION", "KINDS"]
