"""Volcano Job (batch.volcano.sh/v1alpha1) as a TrainJob.

Each task becomes a role (its replicas, its pod template split into typed settings and a `podTemplate`
remainder). The job's gang (minAvailable), queue, scheduler and priority class are `spec.scheduling`'s; maxRetry
is runPolicy.backoffLimit. Volcano's policies (event → action) map where kubetrain has the same rule:
PodFailed → RestartJob is restartPolicy OnFailure, → TerminateJob/AbortJob is Never (a task's own policies its
role's), PodEvicted → TerminateJob is terminateAfterPreemption. A framework plugin names the framework and which
task is which role (`pytorch: [--master=master, --worker=worker]`); the `svc` and `env` plugins are what
kubetrain's volcano flavor uses itself; `ssh` gives MPI workers that run their own sshd their keys (rendered again on
the volcano flavor; docs/render.md, "MPI over ssh").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..contract.frameworks import record_of
from ..jobspec.errors import Path
from ..jobspec.frameworks import Framework
from .conversion import SimpleKind
from .metadata import take_object_metadata
from .mpirun import mpirun_run
from .shapes import (
    HOSTING_PROGRAM,
    convert_template,
    document,
    is_kubetrain_template,
    object_fields,
    role_data,
)
from .walker import FieldTree, SourceWalker

API_VERSION = "batch.volcano.sh/v1alpha1"
DEFAULT_SCHEDULER = "volcano"

_POLICY: FieldTree = {"event": None, "events": None, "action": None, "exitCode": None, "timeout": None}
_TASK: FieldTree = {
    "name": None,
    "replicas": None,
    "minAvailable": None,
    "maxRetry": None,
    "policies": _POLICY,
    "template": None,
    "topologyPolicy": None,
    "dependsOn": None,
    "partitionPolicy": None,
}
_SPEC: FieldTree = {
    "tasks": _TASK,
    "minAvailable": None,
    "minSuccess": None,
    "queue": None,
    "schedulerName": None,
    "priorityClassName": None,
    "maxRetry": None,
    "ttlSecondsAfterFinished": None,
    "policies": _POLICY,
    "plugins": None,
    "volumes": None,
    "runningEstimate": None,
    "networkTopology": None,
}

# plugin → (framework, {plugin option: role}); the option's value is the task's name (default: the role's).
_FRAMEWORK_PLUGINS: dict[str, tuple[Framework, dict[str, str]]] = {
    "pytorch": (Framework.PYTORCH, {"--master": "master", "--worker": "worker"}),
    "tensorflow": (
        Framework.TENSORFLOW,
        {"--ps": "ps", "--worker": "worker", "--chief": "chief", "--evaluator": "evaluator"},
    ),
    "mpi": (Framework.MPI, {"--master": "launcher", "--worker": "worker"}),
}
_PLUGIN_PORT = "--port"


def _fields() -> FieldTree:
    return object_fields(_SPEC)


def _convert(doc: Mapping[str, Any], walker: SourceWalker) -> dict[str, Any]:
    metadata = take_object_metadata(walker)
    tasks = [("spec", "tasks", i, "template") for i in walker.indexes(("spec", "tasks"))]
    # A job kubetrain rendered itself converts back to the job it was; any other runs under Volcano's contract
    # (spec.controller): each task's command as written, with what its plugins give it.
    contract = not any(is_kubetrain_template(walker, template) for template in tasks)
    framework, task_roles, plugins = _plugins(walker, contract)
    spec: dict[str, Any] = {"framework": framework.value}
    roles: dict[str, dict[str, Any]] = {}
    controller_roles: dict[str, dict[str, Any]] = {}
    for i in walker.indexes(("spec", "tasks")):
        task = ("spec", "tasks", i)
        name = str(walker.get((*task, "name"), f"task{i}"))
        role = task_roles.get(name, name)
        target = f"spec.roles.{role}"
        if role != name:
            walker.approx((*task, "name"), target, f"the {framework.value} plugin's {role} task")
        else:
            walker.take((*task, "name"), target)
        replicas = walker.take((*task, "replicas"), f"{target}.replicas", default=1)
        own = is_kubetrain_template(walker, (*task, "template"))
        program_role = record_of(framework).program_role
        launcher = program_role is not None and role == program_role
        converted = convert_template(
            walker,
            (*task, "template"),
            target,
            spec,
            run_target="spec.run" if launcher else None,
            program_note=HOSTING_PROGRAM if program_role is not None and not launcher else None,
            transform=mpirun_run if launcher else None,
            port_target=f"spec.controller.roles.{role}.port" if contract else None,
        )
        if launcher and converted.run is not None:
            spec["run"] = converted.run
            converted.run = None
        controller_roles[role] = {"name": name}
        if own:
            framework = _kubetrain_framework(walker, (*task, "template")) or framework
            spec["framework"] = framework.value
        policy = _task_policies(walker, task, target, spec if contract else None, role)
        roles[role] = role_data(replicas, converted, policy)
        walker.refuse((*task, "minAvailable"), "kubetrain's gang is the job's (scheduling.minAvailable), not a task's")
        walker.refuse((*task, "maxRetry"), "kubetrain's restarts count against the job's backoffLimit")
        walker.refuse((*task, "dependsOn"), "kubetrain starts every role together")
        walker.refuse((*task, "topologyPolicy"), "kubetrain sets no NUMA topology policy")
        walker.refuse((*task, "partitionPolicy"), "kubetrain places no task partitions")
    spec["roles"] = roles
    _ssh_plugin(walker, spec)
    _job_fields(walker, spec)
    if contract:
        controller: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Job", "roles": controller_roles}
        if metadata.get("name"):
            controller["name"] = metadata["name"]
        if plugins:
            controller["plugins"] = plugins
        spec["controller"] = controller
    return document(metadata, spec)


def _kubetrain_framework(walker: SourceWalker, template: Path) -> Framework | None:
    for container in walker.get((*template, "spec", "containers")) or []:
        for var in (container or {}).get("env") or []:
            if isinstance(var, Mapping) and var.get("name") == "KUBETRAIN_FRAMEWORK":
                return Framework(str(var.get("value")))
    return None


_CONTRACT_PLUGINS = ("env", "svc", *_FRAMEWORK_PLUGINS)
"""The plugins whose contract kubetrain gives (spec.controller.plugins); the ssh plugin is the job's
sshAuthMountPath (`_ssh_plugin`)."""


def _plugins(walker: SourceWalker, contract: bool = False) -> tuple[Framework, dict[str, str], dict[str, list[Any]]]:
    """The framework a plugin names (generic when none), task name → role, and (`contract`) the plugins whose
    contract the job gets, as written."""
    framework, task_roles = Framework.GENERIC, {}
    given: dict[str, list[Any]] = {}
    named = False  # the first framework plugin decides; any other is reported below
    pp = ("spec", "plugins")
    for name in walker.keys(pp):
        args = walker.get((*pp, name)) or []
        if contract and name in _CONTRACT_PLUGINS and (name not in _FRAMEWORK_PLUGINS or not named):
            given[name] = [str(a) for a in args] if isinstance(args, list) else []
            walker.take((*pp, name), f"spec.controller.plugins.{name}")
        if name in _FRAMEWORK_PLUGINS and not named:
            named = True
            framework, options = _FRAMEWORK_PLUGINS[name]
            task_roles = {role: role for role in options.values()}
            values = dict(_option(str(arg)) for arg in args if isinstance(arg, str))
            for option, role in options.items():
                task = values.get(option)
                if task:
                    task_roles.pop(role, None)
                    task_roles[task] = role
            port = values.get(_PLUGIN_PORT)
            how = f"the {name} plugin's env contract is kubetrain's {framework.value} framework's"
            if port:
                how += f"; its port {port} is kubetrain's rendezvous port, wired by kubetrain itself"
            if port:
                walker.approx((*pp, name), "spec.framework", how)
            else:
                walker.take((*pp, name), "spec.framework")
        elif name in ("svc", "env"):
            walker.approx(
                (*pp, name), None, "kubetrain's volcano flavor adds it itself (stable DNS names, the task index)"
            )
        elif name == "ssh":
            continue  # `_ssh_plugin`, once the framework is known
        else:
            walker.refuse(
                (*pp, name),
                f"the {name} plugin: kubetrain reads the pytorch, tensorflow and mpi "
                "plugins (framework) and svc, env, ssh",
            )
    return framework, task_roles, given


def _ssh_plugin(walker: SourceWalker, spec: dict[str, Any]) -> None:
    """Passwordless ssh between the pods: a key pair at the plugin's folder (`sshAuthMountPath`), which the
    volcano flavor asks of the plugin again and other flavors make themselves (an MPI job's workers running
    kubetrain's sshd have keys of their own)."""
    path = ("spec", "plugins", "ssh")
    if not walker.has(path):
        return
    values = dict(_option(str(arg)) for arg in walker.get(path) or [] if isinstance(arg, str))
    folder = values.pop("--ssh-key-file-path", None) or values.pop("-ssh-key-file-path", None)
    given_keys = [key for key in ("--ssh-private-key", "--ssh-public-key") if key in values]
    spec["sshAuthMountPath"] = folder or SSH_PLUGIN_FOLDER
    how = ("kept: the volcano flavor renders the plugin again, other flavors mount a key pair kubetrain makes when it "
           "submits the job at the same folder; locally the processes need no ssh")
    if given_keys:
        how += f"; {' and '.join(given_keys)} not used: every job gets a fresh key pair"
    walker.approx(path, "spec.sshAuthMountPath", how)


SSH_PLUGIN_FOLDER = "/root/.ssh"
"""Where Volcano's ssh plugin mounts the keys unless told (its --ssh-key-file-path)."""


def _option(arg: str) -> tuple[str, str]:
    key, _, value = arg.partition("=")
    return key, value


def _failure_action(policies: Sequence[Any]) -> str | None:
    """The action on a pod failure, among Volcano policies."""
    for policy in policies:
        if isinstance(policy, Mapping):
            events = [policy.get("event"), *(policy.get("events") or [])]
            if "PodFailed" in events or "*" in events:
                return str(policy.get("action"))
    return None


_RESTARTS = {
    "RestartJob": "OnFailure",
    "RestartTask": "OnFailure",
    "RestartPod": "OnFailure",
    "TerminateJob": "Never",
    "AbortJob": "Never",
    "CompleteJob": "Never",
}


def _task_policies(
    walker: SourceWalker, task: Path, target: str, spec: dict[str, Any] | None = None, role: str = ""
) -> str | None:
    """A task's policies → its role's restartPolicy (None: the job's); TaskCompleted → CompleteJob (`spec`
    given: the job is not kubetrain's own rendering) → the role in runPolicy.successRoles."""
    policy: str | None = None
    for j in walker.indexes((*task, "policies")):
        p = (*task, "policies", j)
        item = walker.get(p)
        if not isinstance(item, Mapping):
            continue
        if item.get("event") == "TaskCompleted" and item.get("action") == "CompleteJob" and spec is not None:
            success = spec.setdefault("runPolicy", {}).setdefault("successRoles", [])
            if success:
                walker.approx(p, "spec.runPolicy.successRoles", "Volcano completes the job when the first of "
                              "these tasks completes; kubetrain when every one of them has")
            else:
                walker.take(p, "spec.runPolicy.successRoles")
            success.append(role)
        elif item.get("event") == "TaskCompleted" and item.get("action") == "CompleteJob":
            walker.approx(
                p,
                None,
                "kubetrain's job completes when every replica that runs a program has exited "
                "0 (a hosting role's end completes it too)",
            )
        elif _failure_action([item]) in _RESTARTS and "exitCode" not in item:
            policy = _RESTARTS[_failure_action([item]) or ""]
            walker.take(p, f"{target}.restartPolicy")
        else:
            walker.refuse(
                p, "kubetrain's restart rules are restartPolicy (per role) and exitCodes; this policy is not rendered"
            )
    return policy


def _job_fields(walker: SourceWalker, spec: dict[str, Any]) -> None:
    s = ("spec",)
    scheduling: dict[str, Any] = spec.setdefault("scheduling", {})
    run_policy: dict[str, Any] = spec.setdefault("runPolicy", {})
    for src, dst in (("minAvailable", "minAvailable"), ("queue", "queue"), ("priorityClassName", "priorityClass")):
        value = walker.take((*s, src), f"spec.scheduling.{dst}")
        if value is not None:
            scheduling[dst] = value
    scheduler = walker.get((*s, "schedulerName"))
    if scheduler == DEFAULT_SCHEDULER:
        walker.approx(
            (*s, "schedulerName"),
            None,
            "Volcano's scheduler, which kubetrain's volcano flavor sets "
            "itself (other flavors schedule with the cluster's default)",
        )
    elif scheduler is not None:
        scheduling["schedulerName"] = walker.take((*s, "schedulerName"), "spec.scheduling.schedulerName")
    for j in walker.indexes((*s, "policies")):
        p = (*s, "policies", j)
        item = walker.get(p)
        events = [item.get("event"), *(item.get("events") or [])] if isinstance(item, Mapping) else []
        action = item.get("action") if isinstance(item, Mapping) else None
        if "PodEvicted" in events and len([e for e in events if e]) == 1:
            if action == "RestartJob":
                walker.approx(p, None, "kubetrain's own: a preempted replica is restarted, not counted as a failure")
            elif action in ("TerminateJob", "AbortJob"):
                walker.take(p, "spec.scheduling.terminateAfterPreemption")
                scheduling["terminateAfterPreemption"] = True
            else:
                walker.refuse(p, f"{action} on eviction is not a kubetrain rule")
        elif _failure_action([item]) in _RESTARTS and isinstance(item, Mapping) and "exitCode" not in item:
            walker.take(p, "spec.restartPolicy")
            spec["restartPolicy"] = _RESTARTS[str(action)]
        else:
            walker.refuse(p, "kubetrain's restart rules are restartPolicy and exitCodes; this policy is not rendered")
    ttl = walker.take((*s, "ttlSecondsAfterFinished"), "spec.runPolicy.ttlSecondsAfterFinished")
    if ttl is not None:
        run_policy["ttlSecondsAfterFinished"] = ttl
    restarting = any(r.get("restartPolicy") not in (None, "Never") for r in spec["roles"].values())
    if spec.get("restartPolicy") == "Never" and not restarting:
        # Only evictions restart such a job (kubetrain restarts a preempted replica without counting it):
        # Volcano's webhook turns maxRetry 0 into 3, so kubetrain's own render writes 1 here.
        walker.approx(
            (*s, "maxRetry"),
            None,
            "a pod failure terminates the job (PodFailed → TerminateJob): "
            "only evictions restart it, and kubetrain does not count those",
        )
    else:
        retries = walker.take((*s, "maxRetry"), "spec.runPolicy.backoffLimit")
        if retries is not None:
            run_policy["backoffLimit"] = retries
    for i in walker.indexes((*s, "volumes")):
        v = (*s, "volumes", i)
        volume = walker.get(v)
        if isinstance(volume, Mapping) and set(volume) == {"mountPath", "volumeClaimName"}:
            walker.take(v, "spec.mounts")
            spec.setdefault("mounts", []).append(
                {"type": "volume", "src": volume["volumeClaimName"], "dst": volume["mountPath"]}
            )
        else:
            walker.refuse(v, "kubetrain creates no PersistentVolumeClaims: mount an existing claim (volumeClaimName)")
    walker.refuse((*s, "minSuccess"), "a kubetrain job succeeds when every replica that runs a program has exited 0")
    walker.refuse((*s, "runningEstimate"), "kubetrain gives the scheduler no running-time estimate")
    walker.refuse((*s, "networkTopology"), "kubetrain sets no network-topology constraints")
    if not scheduling:
        del spec["scheduling"]
    if not run_policy:
        del spec["runPolicy"]


KINDS: tuple[SimpleKind, ...] = (SimpleKind("Job", (API_VERSION,), _fields, _convert),)

__all__ = ["API_VERSION", "KINDS"]
