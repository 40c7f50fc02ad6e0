"""T9k `DeepSpeedJob` (`batch.tensorstack.dev/v1beta1`) → a TrainJob with framework deepspeed.

kubetrain's TrainJob was designed with DeepSpeedJob in view, so nearly every field has a home: `config.run` is
`spec.run`, `slotsPerWorker` is `procsPerReplica`, `runMode` is `runMode`, `elastic` is `elastic`, the worker's
template becomes the job's typed settings plus a `podTemplate` for the rest. What has none (a numeric
scheduler priority, per-replica debug commands) is refused with the reason.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..jobspec.model import API_VERSION, KIND
from .conversion import SimpleKind
from .metadata import refuse_status, take_metadata_as_written
from .template_split import lift_job_level, pod_template_fields, split_pod_template
from .walker import FieldTree, SourceWalker

API_VERSIONS = ("batch.tensorstack.dev/v1beta1",)

_CLEAN_UP = {"All": "All", "Unfinished": "Running", "None": "None"}
"""DeepSpeedJob's cleanUpPolicy → runPolicy.cleanPodPolicy (Unfinished: the pods still running)."""
_AUTOTUNE = ("none", "tune", "run")
_RUN_KINDS = ("python", "module", "exec")


def fields() -> FieldTree:
    return {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "status": None,
        "spec": {
            "scheduler": {"t9kScheduler": {"queue": None, "priority": None}},
            "runPolicy": {"activeDeadlineSeconds": None, "backoffLimit": None, "cleanUpPolicy": None},
            "runMode": {
                "immediate": None,
                "debug": {"enable": None, "enabled": None,
                          "replicaSpecs": {"type": None, "skipInitContainer": None, "command": None}},
                "pause": {
                    "enable": None,
                    "resumeSpecs": {"type": None, "skipInitContainer": None, "command": None, "args": None},
                },
            },
            "elastic": {"enabled": None, "minReplicas": None, "maxReplicas": None, "expectedReplicas": None},
            "config": {
                "customCommand": None,
                "slotsPerWorker": None,
                "localRank": None,
                "autotune": None,
                "run": {name: None for name in _RUN_KINDS},
                "otherArgs": None,
            },
            "disableCustomEnv": None,
            "worker": {"replicas": None, "template": pod_template_fields(), "restartPolicy": None},
        },
    }


def convert(doc: Mapping[str, Any], w: SourceWalker) -> dict[str, Any]:
    w.take("apiVersion", "apiVersion")
    w.take("kind", "spec.controller.kind")
    refuse_status(w)
    metadata = take_metadata_as_written(w)
    # The job runs under T9k's contract: the deepspeed launcher's variables for every process.
    controller: dict[str, Any] = {"apiVersion": str(doc.get("apiVersion")), "kind": "DeepSpeedJob"}
    if metadata.get("name"):
        controller["name"] = metadata["name"]
    spec: dict[str, Any] = {"framework": "deepspeed", "controller": controller}
    _config(w, spec)
    _run_mode(w, spec)
    _policies(w, spec)
    _worker(w, spec)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _config(w: SourceWalker, spec: dict[str, Any]) -> None:
    run: dict[str, Any] = {}
    custom = w.get("spec.config.customCommand")
    if w.has("spec.config.slotsPerWorker"):
        spec["procsPerReplica"] = w.take("spec.config.slotsPerWorker", "spec.procsPerReplica")
    if custom is not None:
        run["customCommand"] = w.take("spec.config.customCommand", "spec.run.customCommand")
        ignored = "customCommand replaces it (as it does in a DeepSpeedJob: only slotsPerWorker still applies)"
        for name in ("localRank", "autotune", "run", "otherArgs"):
            w.refuse(f"spec.config.{name}", ignored)
    else:
        for name in _RUN_KINDS:
            if w.has(f"spec.config.run.{name}"):
                run[name] = copy.deepcopy(w.take(f"spec.config.run.{name}", f"spec.run.{name}"))
        if w.has("spec.config.otherArgs"):
            run["otherArgs"] = list(w.take("spec.config.otherArgs", "spec.run.otherArgs"))
        if w.has("spec.config.localRank"):
            spec["localRank"] = w.take("spec.config.localRank", "spec.localRank")
        autotune = w.get("spec.config.autotune")
        if autotune == "none":
            w.take("spec.config.autotune", "spec.run.otherArgs")
        elif autotune in _AUTOTUNE:
            w.approx(
                "spec.config.autotune",
                "spec.run.otherArgs",
                f"passed to the deepspeed launcher as --autotuning {autotune}; kubetrain starts the launcher only "
                "with several processes per replica (procsPerReplica > 1)",
            )
            run["otherArgs"] = [*run.get("otherArgs", []), "--autotuning", str(autotune)]
        elif autotune is not None:
            w.invalid("spec.config.autotune", "is not a DeepSpeedJob autotune mode", choices=_AUTOTUNE)
    if run:
        spec["run"] = run


def _run_mode(w: SourceWalker, spec: dict[str, Any]) -> None:
    # T9k's own examples spell the debug switch `enabled`; the reference `enable`: both are read.
    debug_key = "enabled" if w.has("spec.runMode.debug.enabled") else "enable"
    if w.has("spec.runMode.debug.enabled") and w.has("spec.runMode.debug.enable"):
        w.invalid("spec.runMode.debug.enabled", "is given beside enable: give one of them",
                  hint="keep enable (the API reference's name) or enabled (T9k's examples'), not both")
    debug, pause = w.get(f"spec.runMode.debug.{debug_key}"), w.get("spec.runMode.pause.enable")
    for name, value in ((f"debug.{debug_key}", debug), ("pause.enable", pause)):
        if value is not None and not isinstance(value, bool):  # "true" is text: the API server rejects it
            w.invalid(
                f"spec.runMode.{name}",
                "must be a boolean (true or false)",
                hint="write enable: true, unquoted (YAML 1.2: yes/on are text, not booleans)",
            )
    w.take("spec.runMode.immediate", "spec.runMode")
    if debug is True:
        spec["runMode"] = "Debug"
        w.take(f"spec.runMode.debug.{debug_key}", "spec.runMode")
    elif debug is not None:
        w.take(f"spec.runMode.debug.{debug_key}")  # false: read, and nothing set from it (no comment claims it)
    if pause is True:
        if spec.get("runMode") == "Debug":
            w.refuse("spec.runMode.pause.enable", "debug is enabled too: kubetrain runs in one mode (Debug kept)")
        else:
            spec["runMode"] = "Pause"
            w.take("spec.runMode.pause.enable", "spec.runMode")
    elif pause is not None:
        w.take("spec.runMode.pause.enable")
    w.refuse(
        "spec.runMode.debug.replicaSpecs",
        "kubetrain's Debug mode holds every replica's program the same way (`kubetrain attach` runs it by hand); "
        "per-replica commands and skipInitContainer are not supported",
    )
    w.refuse(
        "spec.runMode.pause.resumeSpecs",
        "kubetrain resumes a paused job as it was written (`kubetrain resume`); per-replica resume commands are "
        "not supported",
    )


def _policies(w: SourceWalker, spec: dict[str, Any]) -> None:
    scheduling: dict[str, Any] = {}
    if w.has("spec.scheduler.t9kScheduler.queue"):
        scheduling["queue"] = w.take("spec.scheduler.t9kScheduler.queue", "spec.scheduling.queue")
    w.refuse(
        "spec.scheduler.t9kScheduler.priority",
        "a numeric scheduler priority has no home: kubetrain takes a PriorityClass name "
        "(spec.scheduling.priorityClass)",
    )
    if scheduling:
        spec["scheduling"] = scheduling

    policy: dict[str, Any] = {}
    if w.get("spec.worker.restartPolicy") == "Never" and w.get("spec.runPolicy.backoffLimit"):
        # What the DeepSpeedJob means (and a Kubeflow job's Never replicas with a backoffLimit): no worker is
        # restarted, so there is nothing for the limit to count. kubetrain refuses the pair in a TrainJob, where
        # it reads as a contradiction; here it is converted as meant.
        w.approx(
            "spec.runPolicy.backoffLimit",
            None,
            "worker.restartPolicy is Never: no worker is restarted, so the limit has no restart to count and is "
            "left out (the first failed worker fails the job, as in the DeepSpeedJob)",
        )
    for name in ("activeDeadlineSeconds", "backoffLimit"):
        if w.has(f"spec.runPolicy.{name}") and not w.consumed(f"spec.runPolicy.{name}"):
            policy[name] = w.take(f"spec.runPolicy.{name}", f"spec.runPolicy.{name}")
    clean = w.get("spec.runPolicy.cleanUpPolicy")
    if clean in _CLEAN_UP:
        policy["cleanPodPolicy"] = _CLEAN_UP[clean]
        w.take("spec.runPolicy.cleanUpPolicy", "spec.runPolicy.cleanPodPolicy")
    elif clean is not None:
        w.invalid("spec.runPolicy.cleanUpPolicy", "is not a DeepSpeedJob cleanUpPolicy", choices=tuple(_CLEAN_UP))
    if policy:
        spec["runPolicy"] = policy

    elastic: dict[str, Any] = {}
    for name in ("enabled", "minReplicas", "maxReplicas", "expectedReplicas"):
        if w.has(f"spec.elastic.{name}"):
            elastic[name] = w.take(f"spec.elastic.{name}", f"spec.elastic.{name}")
    if elastic:
        spec["elastic"] = elastic

    disable = w.get("spec.disableCustomEnv")
    if disable is True:
        w.approx(
            "spec.disableCustomEnv",
            "spec.env",
            "kubetrain starts every training process itself with the job's env: there is no env file to leave out, "
            "so the processes still see the variables",
        )
    elif disable is not None:
        w.take("spec.disableCustomEnv", "spec.env")


def _worker(w: SourceWalker, spec: dict[str, Any]) -> None:
    custom = "customCommand" in spec.get("run", {}) and "elastic" not in spec
    elastic = spec.get("elastic") or {}
    expected = elastic.get("expectedReplicas") if elastic.get("enabled", True) else None
    replicas = w.get("spec.worker.replicas")
    if custom:
        # "Custom launch commands": the command that launches the job, run once, not on every worker as the
        # training program is. kubetrain's launcher role runs it (with the hostfile, KUBETRAIN_HOSTFILE); the
        # workers host what it starts (on Kubernetes reaching them is the command's own business: kubetrain's
        # pods serve no ssh).
        workers = w.take("spec.worker.replicas", "spec.roles.worker.replicas", 1)
        spec["roles"] = {"launcher": {}, "worker": {"replicas": workers}}
    elif expected is not None and replicas is not None and replicas != expected:
        # T9k creates expectedReplicas workers ("Number of replicas to be created"): the job starts there.
        w.approx(
            "spec.worker.replicas",
            None,
            f"an elastic DeepSpeedJob starts with elastic.expectedReplicas ({expected}) workers, as T9k creates "
            f"them; worker.replicas ({replicas}) is not the start size",
        )
    elif w.has("spec.worker.replicas"):
        spec["replicas"] = w.take("spec.worker.replicas", "spec.replicas")
    # DeepSpeedJob's default is OnFailure (kubetrain's is Never): said explicitly so the job restarts the same.
    spec["restartPolicy"] = w.take("spec.worker.restartPolicy", "spec.restartPolicy", "OnFailure")
    template = "spec.worker.template"
    containers = w.get(f"{template}.spec.containers")
    if "run" in spec and isinstance(containers, list) and containers and isinstance(containers[0], Mapping):
        for part in ("command", "args"):
            w.refuse(
                f"{template}.spec.containers[0].{part}",
                "config decides what a DeepSpeedJob's worker runs (kubetrain's spec.run); the container's own "
                f"{part} is not used",
            )
    w.refuse(
        f"{template}.spec.restartPolicy",
        "a DeepSpeedJob sets its pods' restartPolicy itself; worker.restartPolicy decides restarts",
    )
    settings, rest = split_pod_template(w, template, role_target="spec")
    settings = lift_job_level(spec, settings)
    if "run" in settings and "run" in spec:  # both: config.run wins (refused above); never reached
        settings.pop("run")
    if "resources" in settings:
        spec.setdefault("resources", {}).update(settings.pop("resources"))
    for key, value in settings.items():
        spec.setdefault(key, value)
    if rest is not None:
        spec["podTemplate"] = rest


KINDS = (SimpleKind("DeepSpeedJob", API_VERSIONS, fields, convert),)

__all__ = ["API_VERSIONS", "KINDS", "convert", "fields"]
