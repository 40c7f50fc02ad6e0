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
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from .contract.frameworks import record_of
from .frameworks import RoleWiring, Topology, WireContext, local_topology, resolve, wire_of
from .frameworks.controllers import ContractContext, contract_of
from .frameworks.launchers import TORCHRUN, run_launcher, run_script_launcher
from .jobspec import FieldError, JobSpec, ReplicaSettings, SpecError, TrainJob
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
    entrypoint: bool = False
    """`argv` are the arguments of the image's ENTRYPOINT (`run.entrypoint`): nothing a local run can start."""


@dataclass(frozen=True)
class ReplicaPlan:
    role: str
    index: int
    host: str
    processes: tuple[ProcessPlan, ...]
    settings: ReplicaSettings
    pod_fields: dict[str, str] = field(default_factory=dict)
    """What the downward API reads in this replica's pod (`metadata.labels['k']`, `metadata.name`): a
    controller's labels and annotations; a backend adds its own (the address)."""

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
    paths: dict[str, str] = field(default_factory=dict)
    """Files a controller places at absolute paths (`/etc/volcano/worker.host`) → content (`spec.controller`)."""
    names: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Host names the controller makes resolvable → the replica (role, index) each names."""
    local_problems: tuple[FieldError, ...] = ()
    """What a local run cannot do as the controller would (refused up front by the local backend)."""

    @property
    def controller(self) -> bool:
        """The job runs under a controller's contract (`spec.controller`): its env is the controller's, which a
        pod gets after the user's own."""
        return self.job.spec.controller is not None

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
    implied = {role: n for role, n in record_of(spec.framework).implied_roles.items() if role not in counts}
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
    native_controller: bool = False,
    paths_root: str = "",
) -> Plan:
    """Wire every role of `job` over `topology` (default: `default_topology`).

    `launcher_procs`: kubetrain starts each of a replica's processes itself (local: no launcher importing
    torch); False leaves that to a launcher inside the replica (torchrun), as on Kubernetes.
    A job with `spec.controller` is wired by that controller's contract: `native_controller` says the engine
    running the pods is that very controller (it gives its variables and files itself), `paths_root` where the
    files it places at absolute paths are (locally, a folder standing for `/`; on Kubernetes "").
    """
    if job.unconverted is not None:
        # A stand-in for a foreign document that can only be submitted as written (`TrainJob.with_source`):
        # planning it would run its placeholder program and call that the user's job.
        raise job.unconverted
    spec = job.spec
    job_name = name or job.name
    topology = topology or default_topology(job)
    controller = spec.controller
    contract = contract_of(controller) if controller is not None else None
    wirings: list[RoleWiring] = []
    files: dict[str, str] = {}
    paths: dict[str, str] = {}
    names: dict[str, tuple[str, int]] = {}
    problems: list[FieldError] = []
    settings_of = {role: settings_for(spec, role) for role in topology.roles}
    role_procs = {role: procs_per_replica(settings) for role, settings in settings_of.items()}
    for role in topology.roles:
        settings = settings_of[role]
        ctx = WireContext(
            job_name, spec, role, settings, topology, role_procs[role], launcher_procs, files_dir, role_procs,
            job.metadata.namespace, dict(job.metadata.annotations), paths_root,
        )
        if contract is not None and controller is not None:
            cctx = ContractContext(ctx, controller, native_controller)
            wiring = _framework_launcher(ctx, contract.wire(cctx))
            problems += contract.local_problems(cctx)
        else:
            _refuse_nested_launchers(ctx)
            wiring = _entrypoint(ctx, wire_of(spec.framework)(ctx))
        wirings.append(wiring)
        files.update(wiring.files)
        paths.update(wiring.paths)
        names.update({host: (role, index) for host, index in wiring.names.items()})
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
        paths,
        names,
        tuple(problems),
    )


def _framework_launcher(ctx: WireContext, wiring: RoleWiring) -> RoleWiring:
    """A contract over a framework whose launcher kubetrain starts itself (MPI: a converter reads the launcher's
    `mpirun` as kubetrain's run, and kubetrain's mpirun reaches the workers, over ssh on Kubernetes): each
    role's processes and files are the framework's, with the contract's variables, files and names over them.
    A launcher role whose run already is a launcher (horovodrun), or a shell script that starts one (Volcano's
    `sh -c '... mpiexec --host ${MPI_HOST} ...'`), runs as written, under the contract alone."""
    record = record_of(ctx.spec.framework)
    if not record.ssh_launcher:
        return wiring
    if ctx.role == record.program_role and run_script_launcher(ctx.settings.run) is not None:
        return wiring
    own = wire_of(ctx.spec.framework)(ctx)
    return replace(wiring, env={**own.env, **wiring.env}, processes=own.processes,
                   files={**own.files, **wiring.files})


def _entrypoint(ctx: WireContext, wiring: RoleWiring) -> RoleWiring:
    """A role whose `run.entrypoint` runs the image's own ENTRYPOINT: its process is that, with the framework's
    variables; a framework that would start it under a launcher of its own cannot."""
    run = ctx.settings.run
    if run is None or run.entrypoint is None or not wiring.processes:
        return wiring
    args = tuple(run.entrypoint)
    wrapped = [p.argv for p in wiring.processes if p.argv != args]
    if wrapped:
        own = ctx.spec.roles is not None and ctx.role in ctx.spec.roles and ctx.spec.roles[ctx.role].run is not None
        where = ("spec", "roles", ctx.role, "run", "entrypoint") if own else ("spec", "run", "entrypoint")
        raise SpecError([FieldError(where, f"runs the image's ENTRYPOINT, which the {ctx.spec.framework.value} "
                                    f"framework would have to start under {wrapped[0][0]} here",
                                    hint="give the command (run.exec), so kubetrain can start it under the launcher")])
    return replace(wiring, processes=tuple(replace(p, entrypoint=True) for p in wiring.processes))


def _refuse_nested_launchers(ctx: WireContext) -> None:
    """No launcher inside a launcher. A `run` that already is torchrun runs as written (pytorch and deepspeed
    give it its options as PET_* variables); one that is the launcher the framework starts itself (mpirun in an
    MPI job, deepspeed in a DeepSpeed job), or any launcher where kubetrain would start several copies of it or
    wrap it in torchrun, is refused with the way to say it: `run.customCommand`, the job's own launch line."""
    run = ctx.settings.run
    launcher = run_launcher(run)
    scripted = launcher is None  # a shell script that starts one (`sh -c '... mpiexec ...'`)
    launcher = launcher or run_script_launcher(run)
    if launcher is None or run is None or run.custom_command is not None:
        return
    record = record_of(ctx.spec.framework)
    framework = ctx.spec.framework.value
    if launcher == TORCHRUN and record.torchrun and not scripted:
        return  # unwrapped: pytorch's wiring runs it as written with the PET_* variables
    elastic = ctx.spec.elastic is not None and record.torchrun
    form = "module" if run.module is not None else "exec"
    own = ctx.spec.roles is not None and ctx.role in ctx.spec.roles and ctx.spec.roles[ctx.role].run is not None
    where = ("spec", "roles", ctx.role, "run", form) if own else ("spec", "run", form)
    if launcher in record.wraps:
        why = f"kubetrain's {framework} framework starts {launcher} itself, so the job would run {launcher} " \
              f"inside {launcher}"
    elif elastic:
        why = "kubetrain starts torchrun's elastic agent around it, so each replica would run a launcher inside a " \
              "launcher"
    elif ctx.procs > 1:
        why = f"kubetrain starts {ctx.procs} processes per replica, so each replica would run {ctx.procs} {launcher}s"
    else:
        return
    starts = f"its shell script starts {launcher}" if scripted else f"starts {launcher}"
    raise SpecError([FieldError(where, f"{starts}, and {why}",
                                hint="give your own launch line as run.customCommand (kubetrain then starts it as "
                                     "written, with the framework's variables), or give the program alone")])


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
    own = wiring.env_by_index.get(index, {})
    base = {k: resolve(v, index, topology) for k, v in {**wiring.env, **own}.items()}
    processes = []
    many = len(wiring.processes) > 1
    for proc in wiring.processes:
        env = {**base, **{k: resolve(v, index, topology) for k, v in proc.env.items()}}
        key = f"{role}-{index}.{proc.local_rank}" if many else f"{role}-{index}"
        processes.append(ProcessPlan(key, proc.argv, env, proc.local_rank, proc.entrypoint))
    fields = {f"metadata.labels['{k}']": resolve(v, index, topology) for k, v in wiring.labels.items()}
    fields.update({f"metadata.annotations['{k}']": resolve(v, index, topology) for k, v in wiring.annotations.items()})
    if wiring.pod_name is not None:
        fields["metadata.name"] = resolve(wiring.pod_name, index, topology)
    return ReplicaPlan(role, index, host, tuple(processes), settings, fields)


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
