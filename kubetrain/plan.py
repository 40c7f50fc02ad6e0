"""TrainJob → Plan: the one planner every backend consumes. Pure.

`plan()` wires each role once (O(roles)): its settings, processes per replica, and the framework's env
and argv, with values still symbolic in the replica's index (`frameworks.values`). The Kubernetes render
turns `Plan.roles` into one pod template per role, so a manifest serves every replica; the local backend
expands `Plan.replicas` (computed on first use) into processes. Both read the same wiring, so the env
contract cannot drift between them.

The user's own env list is not wired here: each backend passes it on as it must (the render lists it in
the container for the kubelet to expand; the local launch record, `backends/local/launch.py`, expands it
per process with the kubelet's rules), so `ProcessPlan.env` is the framework's env alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .frameworks import RoleWiring, Topology, WireContext, local_topology, resolve, support_of
from .jobspec import JobSpec, ReplicaSettings, TrainJob
from .jobspec.pod_template import with_template_defaults
from .restart_policy import RestartRules

FILES_DIR_PLACEHOLDER = "/etc/kubetrain"
"""Where replicas find the job's files (hostfiles) when the backend does not say otherwise."""


@dataclass(frozen=True)
class ProcessPlan:
    """One process to start: what the local backend runs, and what a pod's container runs."""

    key: str
    """Stable name shown as the output prefix: `worker-1`, or `worker-1.0` with several processes."""
    argv: tuple[str, ...]
    env: dict[str, str]
    """The framework's env (the user's env list is the backend's to add, see the module doc)."""
    local_rank: int = 0


@dataclass(frozen=True)
class ReplicaPlan:
    role: str
    index: int
    host: str
    processes: tuple[ProcessPlan, ...]
    settings: ReplicaSettings

    @property
    def key(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass(frozen=True)
class Plan:
    job: TrainJob
    name: str
    """The job's name (`metadata.name`, or a name generated from `namePrefix` by the backend)."""
    topology: Topology
    roles: tuple[RoleWiring, ...]
    """Each role wired once, env symbolic in the replica index."""
    settings: dict[str, ReplicaSettings]
    """Role → what each of its replicas gets (the job's settings with the role's merged over them)."""
    procs: dict[str, int]
    """Role → processes per replica (`auto` resolved)."""
    files: dict[str, str] = field(default_factory=dict)
    files_dir: str = FILES_DIR_PLACEHOLDER
    restart: RestartRules = field(default_factory=RestartRules)

    @cached_property
    def replicas(self) -> tuple[ReplicaPlan, ...]:
        """Every replica with concrete argv and env, in role order: O(replicas), computed on first use."""
        out: list[ReplicaPlan] = []
        for wiring in self.roles:
            settings = self.settings[wiring.role]
            for index in range(wiring.replicas):
                out.append(_replica(wiring.role, index, wiring, self.topology, settings))
        return tuple(out)

    @property
    def processes(self) -> list[ProcessPlan]:
        return [p for r in self.replicas for p in r.processes]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view of the wiring, replica by replica (the framework's env only; the local backend's
        launch record, which `kubetrain run --dry-run` prints, adds the user's)."""
        return {
            "name": self.name,
            "framework": self.job.spec.framework.value,
            "files": self.files,
            "filesDir": self.files_dir,
            "restart": self.restart.to_dict(),
            "activeDeadlineSeconds": self.job.spec.run_policy.active_deadline_seconds,
            "runMode": self.job.spec.run_mode,
            "replicas": [
                {
                    "role": r.role,
                    "index": r.index,
                    "host": r.host,
                    "processes": [{"key": p.key, "argv": list(p.argv), "env": p.env} for p in r.processes],
                }
                for r in self.replicas
            ],
        }


def expanded_args(argv: Sequence[str], settings: ReplicaSettings) -> tuple[int, ...]:
    """Positions in a process's `argv` of the user's arguments that `run.expandEnv` expands against the replica's
    env (the kubelet's `$(VAR)` rule for a container's args): the arguments of run.python, module, exec, a
    customCommand list and otherArgs that hold a `$`. kubetrain's own arguments never hold `$(` or `$$`, and a
    customCommand string is the shell's to expand, never this. Empty without expandEnv."""
    run = settings.run
    if run is None or not run.expand_env:
        return ()
    command = run.custom_command if isinstance(run.custom_command, list) else []
    user = {arg for arg in (*(run.python or ()), *(run.module or ()), *(run.exec or ()), *command, *run.other_args)
            if "$" in arg}
    return tuple(i for i, arg in enumerate(argv) if arg in user)


def procs_per_replica(settings: ReplicaSettings) -> int:
    """`auto`: one process per whole GPU the replica asks for, else one."""
    procs = settings.procs_per_replica
    if procs is None:
        return 1
    if procs == "auto":
        gpus = settings.resources.gpu if settings.resources is not None else None
        return int(gpus) if gpus and gpus >= 1 else 1
    return int(procs)


def replica_counts(spec: JobSpec) -> dict[str, int]:
    """Replicas per role as planned: the roles the framework implies (an MPI job's launcher) first."""
    counts = spec.role_replicas()
    implied = {role: n for role, n in support_of(spec.framework).implied_roles.items() if role not in counts}
    return {**implied, **counts}


def check_scale(replicas: int, low: int, high: int) -> None:
    """A `UsageError` naming the bounds when `replicas` is outside an elastic job's [low, high]."""
    from .contract.errors import UsageError

    if not low <= replicas <= high:
        raise UsageError(
            f"--replicas {replicas} is outside the job's elastic bounds [{low}, {high}] "
            f"(spec.elastic.minReplicas {low}, maxReplicas {high})"
        )


def scaled(job: TrainJob, replicas: int) -> TrainJob:
    """`job` with `replicas` workers: an elastic job scaled while it runs (`Backend.scale`). A `UsageError`
    for a job that is not elastic, or a count outside [minReplicas, maxReplicas], naming the bounds."""
    from .contract.errors import UsageError
    from .jobspec import from_dict

    elastic = job.spec.elastic
    if elastic is None or not elastic.enabled:
        raise UsageError(
            f"job {job.name} is not elastic: only a job with spec.elastic (pytorch, deepspeed) changes its "
            "number of replicas while it runs; change spec.replicas and run it again"
        )
    assert elastic.min_replicas is not None and elastic.max_replicas is not None  # Elastic checked them
    check_scale(replicas, elastic.min_replicas, elastic.max_replicas)
    data = job.to_dict()
    spec = data["spec"]
    spec.get("elastic", {}).pop("expectedReplicas", None)
    roles = spec.get("roles")
    if roles and "worker" in roles:
        roles["worker"]["replicas"] = replicas
    else:
        spec["replicas"] = replicas
    return from_dict(data).with_base_dir(job.base_dir)


def default_topology(job: TrainJob, base_port: int = 29500) -> Topology:
    """127.0.0.1 with consecutive ports from `base_port`: deterministic, for previews. The local backend
    passes free ports instead."""
    counts = replica_counts(job.spec)
    return local_topology(counts, list(range(base_port, base_port + sum(counts.values()))))


def plan(
    job: TrainJob,
    topology: Topology | None = None,
    *,
    name: str | None = None,
    files_dir: str = FILES_DIR_PLACEHOLDER,
    launcher_procs: bool = True,
) -> Plan:
    """Wire every role of `job` over `topology` (default: `default_topology`).

    `launcher_procs`: kubetrain starts each of a replica's processes itself (local: no launcher importing
    torch); False leaves that to a launcher inside the replica (torchrun), as on Kubernetes.
    """
    if job.unconverted is not None:
        # A stand-in for a foreign document that can only be submitted as written (`TrainJob.with_source`):
        # planning it would run its placeholder program and call that the user's job.
        raise job.unconverted
    spec = job.spec
    job_name = name or job.name
    topology = topology or default_topology(job)
    wire = support_of(spec.framework).wire
    wirings: list[RoleWiring] = []
    files: dict[str, str] = {}
    settings_of = {role: settings_for(spec, role) for role in topology.roles}
    role_procs = {role: procs_per_replica(settings) for role, settings in settings_of.items()}
    for role in topology.roles:
        settings = settings_of[role]
        ctx = WireContext(
            job_name, spec, role, settings, topology, role_procs[role], launcher_procs, files_dir, role_procs
        )
        wiring = wire(ctx)
        wirings.append(wiring)
        files.update(wiring.files)
    rules = restart_rules(spec, topology.roles)
    return Plan(
        job,
        job_name,
        topology,
        tuple(wirings),
        settings_of,
        role_procs,
        files,
        files_dir,
        rules,
    )


def restart_rules(spec: JobSpec, roles: Iterable[str]) -> RestartRules:
    """The job's restart policy, each role's where it differs (`roles.<role>.restartPolicy`), and
    runPolicy.backoffLimit with its default applied (`JobSpec.backoff_limit_of`)."""
    codes = spec.exit_codes
    job_policy = spec.job_restart_policy()
    per_role = {role: spec.restart_policy_of(role) for role in roles}
    return RestartRules(
        job_policy,
        spec.backoff_limit_of(),
        frozenset(codes.retryable) if codes else frozenset(),
        frozenset(codes.permanent) if codes else frozenset(),
        {role: policy for role, policy in per_role.items() if policy != job_policy},
    )


def settings_for(spec: JobSpec, role: str) -> ReplicaSettings:
    """What one replica of `role` gets: the job's settings with the role's merged over them, completed from
    the podTemplate's main container where they set nothing (its command and args as the program, its image,
    env and workingDir: `jobspec.pod_template.with_template_defaults`), so every backend runs the same."""
    if spec.roles is not None and role not in spec.roles:
        # A role the framework implies (MPI's launcher) takes the job-level settings, not another role's.
        settings = ReplicaSettings.model_validate(
            {name: getattr(spec, name) for name in ReplicaSettings.model_fields}
        )
    else:
        settings = spec.role_settings(role)
    return with_template_defaults(settings)


def _replica(role: str, index: int, wiring: RoleWiring, topology: Topology, settings: ReplicaSettings) -> ReplicaPlan:
    host = topology.host(role, index)
    base = {k: resolve(v, index, topology) for k, v in wiring.env.items()}
    processes = []
    many = len(wiring.processes) > 1
    for proc in wiring.processes:
        env = {**base, **{k: resolve(v, index, topology) for k, v in proc.env.items()}}
        key = f"{role}-{index}.{proc.local_rank}" if many else f"{role}-{index}"
        processes.append(ProcessPlan(key, proc.argv, env, proc.local_rank))
    return ReplicaPlan(role, index, host, tuple(processes), settings)


__all__ = [
    "Plan",
    "ProcessPlan",
    "ReplicaPlan",
    "RestartRules",
    "default_topology",
    "expanded_args",
    "plan",
    "restart_rules",
    "settings_for",
]
