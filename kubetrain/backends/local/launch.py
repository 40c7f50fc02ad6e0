"""The launch record: what the local supervisor starts a job from, and what `kubetrain attach` shows.

`plan()` wires the framework (its env, argv and files) once for every backend. A local run adds what only
it needs, here: the user's env list, expanded per process with Kubernetes' `$(VAR)` rules
(`contract.expansion`, the kubelet's own) so it means what it means in a pod, fieldRefs answered with the
local replica's name and address, and a warning for what cannot exist outside a pod (Secrets,
ConfigMaps), never its value. The Kubernetes render does neither: it lists the user's env in the
container and leaves the expansion to the kubelet.

What a process cannot get through its env (mounts, GPUs, ...) is judged apart, before the record is made
(`machine_fit`); the record takes the GPUs it gives each replica.

The record is stored with the job as JSON (`JobStore.set_plan_json`) and read back typed; `kubetrain run
--dry-run` prints the same layout (`LAYOUT`: what every process shares once, each process what is its own).
The supervisor imports this module, so it imports only the standard library and kubetrain's stdlib-only
modules; the plan it is built from (`LaunchRecord.from_plan`) is only looked at, never imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ...contract import env_names, expansion
from ...contract.hostnames import localize, name_pattern
from ...restart_policy import RestartRules
from .pod_fields import pod_fields_of

if TYPE_CHECKING:
    from ...jobspec import ReplicaSettings
    from ...plan import Plan, ReplicaPlan
    from .machine_fit import MachineFit


@dataclass(frozen=True)
class LaunchProcess:
    """One process the supervisor starts."""

    key: str
    """The output prefix and log name: `worker-1`, or `worker-1.0` with several processes per replica."""
    argv: tuple[str, ...]
    env: dict[str, str]
    """The framework's env, then the user's (expanded); the supervisor starts from its own environment."""
    local_rank: int = 0


@dataclass(frozen=True)
class LaunchReplica:
    role: str
    index: int
    host: str
    processes: tuple[LaunchProcess, ...]
    """Empty for a replica that only hosts processes another one starts (an MPI worker under mpirun)."""

    @property
    def key(self) -> str:
        return f"{self.role}-{self.index}"


class RoleCount(NamedTuple):
    role: str
    replicas: int


@dataclass(frozen=True)
class ElasticRange:
    """An elastic job's bounds (`spec.elastic`): its replicas are torchrun agents of one rendezvous, and the
    job keeps running while at least `min_replicas` of them live; `role`'s count may change while it runs."""

    min_replicas: int
    max_replicas: int
    role: str = "worker"

    def to_dict(self) -> dict[str, Any]:
        return {"minReplicas": self.min_replicas, "maxReplicas": self.max_replicas, "role": self.role}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ElasticRange:
        return cls(int(data["minReplicas"]), int(data["maxReplicas"]), str(data.get("role") or "worker"))


RENDEZVOUS_FILE = "rendezvous"
"""An elastic job's rendezvous store locally: a file in the job's folder (torch's c10d FileStore), which
outlives every replica. A TCP store is hosted by one agent, and its loss would end the rendezvous with it."""


@dataclass(frozen=True)
class LaunchRecord:
    """Everything the supervisor needs to run a job, and `attach` to stand in for one of its replicas."""

    job_id: str
    """The local job id (the job's name for a dry run): the plan's name, in `KUBETRAIN_JOB`."""
    framework: str
    replicas: tuple[LaunchReplica, ...]
    files: dict[str, str] = field(default_factory=dict)
    """Files the replicas read (name → content), written to `files_dir` before they start."""
    files_dir: str = ""
    paths: dict[str, str] = field(default_factory=dict)
    """Files a controller would place at absolute paths in a pod (`/etc/volcano/worker.host`) → content, written
    under `files_root` (what $KUBETRAIN_FILES_ROOT names) before the replicas start."""
    cwd: str | None = None
    """Where a role's processes start unless `role_cwds` names it (the job's workingDir, else the job file's
    folder); None: the supervisor's."""
    role_cwds: dict[str, str] = field(default_factory=dict)
    """Role → where its processes start, for each role whose workingDir (its own, or its podTemplate main
    container's) differs from `cwd`. Kept apart so a record with no role folders has the layout it always had,
    and a record stored before roles had their own folders reads back with every role in `cwd`."""
    preload: tuple[str, ...] = ()
    """Modules the replicas import once, in a process that then forks each of them (empty: none)."""
    restart: RestartRules = field(default_factory=RestartRules)
    active_deadline_seconds: int | None = None
    run_mode: str = "Immediate"
    """Immediate | Pause | Debug (the replicas hold their program; `attach` runs it by hand)."""
    success_roles: tuple[str, ...] = ()
    """runPolicy.successRoles: the job succeeds once these roles' processes have exited 0 (the rest are then
    stopped); empty: once every process has."""
    warnings: tuple[str, ...] = ()
    """What a local run leaves out (Secrets, ConfigMaps), said before it starts."""
    cluster: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Role → its replicas' `host:port` addresses: stored once, and referred to by the env values that list
    them (TF_CONFIG's cluster), so the stored record does not grow with the square of the replica count."""
    elastic: ElasticRange | None = None
    """An elastic job's bounds: a lost replica is replaced alone, the job scales in them (None: a gang)."""
    parallelism: int | None = None
    """A job of trials (`spec.trials`): each replica is a run of its own, started at most this many at a time
    and retried alone; the job succeeds once every one has succeeded (None: the replicas start together)."""

    @property
    def rendezvous_path(self) -> str | None:
        """An elastic job's rendezvous file (`RENDEZVOUS_FILE`), emptied before each gang start."""
        if self.elastic is None or not self.files_dir:
            return None
        return os.path.join(os.path.dirname(self.files_dir), RENDEZVOUS_FILE)

    @classmethod
    def from_plan(
        cls,
        plan: Plan,
        *,
        cwd: str | None = None,
        role_cwds: Mapping[str, str] | None = None,
        preload: Sequence[str] = (),
        fit: MachineFit | None = None,
        metrics_dir: str | None = None,
    ) -> LaunchRecord:
        """The record of `plan` (pure): its processes with the user's env added per process, and what this
        machine gives each replica (`fit`, from `machine_fit`: its GPUs) between the two. `metrics_dir`:
        where each process's `kubetrain.metrics.log` writes (`<key>.jsonl`, in `KUBETRAIN_METRICS_FILE`).
        `role_cwds`: each role's folder (`machine_fit.role_working_dirs`); only those that differ from `cwd`
        are kept."""
        user_env: dict[str, list[UserVar]] = {}
        warnings: list[str] = list(fit.warnings) if fit is not None else []
        for wiring in plan.roles:
            user_env[wiring.role], notes = user_environment(plan.settings[wiring.role], wiring.role)
            warnings += notes
        spec = plan.job.spec
        machine_env = fit.replica_env if fit is not None else {}
        elastic = None
        if spec.elastic is not None and spec.elastic.enabled:
            assert spec.elastic.min_replicas is not None and spec.elastic.max_replicas is not None
            elastic = ElasticRange(spec.elastic.min_replicas, spec.elastic.max_replicas)
        rendezvous = os.path.join(os.path.dirname(plan.files_dir), RENDEZVOUS_FILE) if elastic else None
        hosts = {name: plan.topology.host(role, index) for name, (role, index) in plan.names.items()}
        return cls(
            job_id=plan.name,
            framework=spec.framework.value,
            replicas=tuple(
                _replica(r, plan.name, user_env[r.role], machine_env.get(r.key, {}), metrics_dir, rendezvous,
                         controller=plan.controller, hosts=hosts, files_root=files_root(plan.files_dir),
                         namespace=plan.job.metadata.namespace)
                for r in plan.replicas
            ),
            files=dict(plan.files),
            files_dir=plan.files_dir,
            paths=dict(plan.paths),
            cwd=cwd,
            role_cwds={role: path for role, path in (role_cwds or {}).items() if path != cwd},
            preload=tuple(preload),
            restart=plan.restart,
            active_deadline_seconds=spec.run_policy.active_deadline_seconds,
            run_mode=spec.run_mode,
            success_roles=tuple(spec.run_policy.success_roles or ()),
            warnings=tuple(dict.fromkeys(warnings)),
            cluster={role: tuple(plan.topology.addresses(role)) for role in plan.topology.roles},
            elastic=elastic,
            parallelism=spec.trials.parallelism if spec.trials is not None else None,
        )

    @property
    def processes(self) -> list[LaunchProcess]:
        """Every process, in replica order."""
        return [p for r in self.replicas for p in r.processes]

    @property
    def roles(self) -> tuple[RoleCount, ...]:
        """Each role with its number of replicas, in plan order."""
        counts: dict[str, int] = {}
        for r in self.replicas:
            counts[r.role] = counts.get(r.role, 0) + 1
        return tuple(RoleCount(role, n) for role, n in counts.items())

    def cwd_of(self, role: str) -> str | None:
        """Where `role`'s processes start: its own workingDir's folder, else the job's (`cwd`)."""
        return self.role_cwds.get(role, self.cwd)

    def replica_of(self, key: str) -> LaunchReplica:
        """The replica running process `key`."""
        for replica in self.replicas:
            if any(p.key == key for p in replica.processes):
                return replica
        raise KeyError(key)

    def replica(self, role: str, index: int) -> LaunchReplica:
        for replica in self.replicas:
            if replica.role == role and replica.index == index:
                return replica
        raise KeyError(f"{role}-{index}")

    # -- JSON: the layout `kubetrain run --dry-run` prints and the job store holds (`LAYOUT`) ---------------

    def envs(self) -> dict[str, dict[str, str]]:
        """Each process's whole environment, by process key (`worker-1`): the shared `env` of `to_dict` with
        the process's own. From a dry run's data: `LaunchRecord.from_dict(result.plan).envs()`."""
        return {p.key: dict(p.env) for p in self.processes}

    def to_dict(self) -> dict[str, Any]:
        """The record in `LAYOUT`: what every process has alike written once (`env`), each process only
        what is its own, and a role's address list written once (`sharedValues`) where a value embeds it —
        so the size per replica does not depend on the replica count. `from_dict` gives the record back."""
        common = _common_env([p.env for p in self.processes])
        texts = _address_texts(self.cluster)
        used: set[str] = set()

        def own(env: Mapping[str, str]) -> dict[str, str | list[Any]]:
            return {k: _encode(v, texts, used) for k, v in env.items() if k not in common}

        replicas = [
            {
                "role": r.role,
                "index": r.index,
                "host": r.host,
                "processes": [
                    {"key": p.key, "argv": list(p.argv), "env": own(p.env), "localRank": p.local_rank}
                    for p in r.processes
                ],
            }
            for r in self.replicas
        ]
        return {
            "name": self.job_id,
            "framework": self.framework,
            "files": dict(self.files),
            "filesDir": self.files_dir,
            **({"paths": dict(self.paths)} if self.paths else {}),
            "restart": self.restart.to_dict(),
            "activeDeadlineSeconds": self.active_deadline_seconds,
            "runMode": self.run_mode,
            **({"successRoles": list(self.success_roles)} if self.success_roles else {}),
            "cluster": {role: list(addresses) for role, addresses in self.cluster.items()},
            "env": common,
            "sharedValues": {name: text for name, text in texts if name in used},
            "replicas": replicas,
            "warnings": list(self.warnings),
            "cwd": self.cwd,
            **({"roleCwd": dict(self.role_cwds)} if self.role_cwds else {}),
            "preload": list(self.preload),
            **({"elastic": self.elastic.to_dict()} if self.elastic is not None else {}),
            **({"parallelism": self.parallelism} if self.parallelism is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchRecord:
        """The record as `to_dict` wrote it, or an earlier kubetrain stored it: every process's whole env
        listed with it, or the shared part apart in `commonEnv`. Keys an earlier record lacks take their
        defaults."""
        data = _whole(data)
        return cls(
            job_id=str(data.get("name", "")),
            framework=str(data.get("framework", "")),
            replicas=tuple(
                LaunchReplica(
                    str(r["role"]),
                    int(r["index"]),
                    str(r.get("host", "")),
                    tuple(
                        LaunchProcess(
                            str(p["key"]),
                            tuple(str(a) for a in p["argv"]),
                            {str(k): str(v) for k, v in p.get("env", {}).items()},
                            int(p.get("localRank", 0)),
                        )
                        for p in r.get("processes", ())
                    ),
                )
                for r in data.get("replicas", ())
            ),
            files={str(k): str(v) for k, v in (data.get("files") or {}).items()},
            files_dir=str(data.get("filesDir", "")),
            paths={str(k): str(v) for k, v in (data.get("paths") or {}).items()},
            cwd=data.get("cwd"),
            role_cwds={str(k): str(v) for k, v in (data.get("roleCwd") or {}).items()},
            preload=tuple(data.get("preload") or ()),
            restart=RestartRules.from_dict(data.get("restart") or {}),
            active_deadline_seconds=data.get("activeDeadlineSeconds"),
            run_mode=str(data.get("runMode") or "Immediate"),
            success_roles=tuple(str(r) for r in data.get("successRoles") or ()),
            warnings=tuple(data.get("warnings") or ()),
            cluster={str(k): tuple(str(a) for a in v) for k, v in (data.get("cluster") or {}).items()},
            elastic=ElasticRange.from_dict(data["elastic"]) if data.get("elastic") else None,
            parallelism=int(data["parallelism"]) if data.get("parallelism") else None,
        )

    def to_json(self) -> str:
        """The stored form: `to_dict`, without spaces. `from_json` reads it back whole."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> LaunchRecord:
        return cls.from_dict(json.loads(text))


# -- the layout: shared values once ------------------------------------------------------------------------

LAYOUT = """\
Each process gets the top-level env, plus its own env (under replicas[].processes[]). An env value
written as a list is its pieces joined: a text as it is, {ref: NAME} the text sharedValues.NAME (a
role's address list as JSON, written once rather than in every replica's value). cluster: each role's
replicas' host:port, by index. From Python: LaunchRecord.from_dict(data).envs(), every process's
whole env (kubetrain.backends.local.launch)."""
"""How to read `to_dict` (what `kubetrain run --dry-run` prints locally): said in its help and output."""

_SHARED_MIN = 200
"""Address lists shorter than this (about 8 addresses) stay in the values that embed them, where a person
reads them best; longer ones are referenced, so a value embedding them has a bounded size."""


def _common_env(envs: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The variables every one of `envs` has, with the same value (in the first's order)."""
    if not envs:
        return {}
    first, rest = envs[0], envs[1:]
    return {k: v for k, v in first.items() if all(env.get(k) == v for env in rest)}


def _address_texts(cluster: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """(name, text) for each role's address list as a value may embed it: as JSON with Python's default
    spacing (TF_CONFIG's cluster), named by the role, and without spaces (KUBETRAIN_CLUSTER), `ROLE,compact`.
    Only lists of `_SHARED_MIN` characters or more."""
    out = []
    for role, addresses in cluster.items():
        for name, separators in ((role, (", ", ": ")), (f"{role},compact", (",", ":"))):
            text = json.dumps(list(addresses), separators=separators)
            if len(text) >= _SHARED_MIN:
                out.append((name, text))
    return out


def _encode(value: str, texts: Sequence[tuple[str, str]], used: set[str]) -> str | list[Any]:
    """`value`, or, where it embeds any of `texts`, its pieces: texts and `{"ref": NAME}` (names into `used`)."""
    pieces: list[Any] = [value]
    for name, text in sorted(texts, key=lambda item: -len(item[1])):  # the longest first: never a part of one
        if not any(isinstance(p, str) and text in p for p in pieces):
            continue
        used.add(name)
        split: list[Any] = []
        for piece in pieces:
            if not isinstance(piece, str):
                split.append(piece)
                continue
            for i, part in enumerate(piece.split(text)):
                if i:
                    split.append({"ref": name})
                if part:
                    split.append(part)
        pieces = split
    return value if len(pieces) == 1 and isinstance(pieces[0], str) else pieces


def _whole(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data` with every process's whole env in its own `env` and no reference left: the layout of records
    stored before `LAYOUT`, which `from_dict` reads. Unchanged when it is that already."""
    if not any(key in data for key in ("env", "commonEnv", "sharedValues")):
        return data
    shared: Mapping[str, str] = data.get("sharedValues") or {}

    def decode(value: str | list[Any]) -> str:
        if isinstance(value, str):
            return value
        return "".join(p if isinstance(p, str) else shared[p["ref"]] for p in value)

    # `commonEnv`: the shared env as kubetrain stored it before the dry run printed the same layout.
    common = {k: decode(v) for k, v in (data.get("env") or data.get("commonEnv") or {}).items()}
    out = {k: v for k, v in data.items() if k not in ("env", "sharedValues", "commonEnv")}
    out["replicas"] = [
        {
            **r,
            "processes": [
                {**p, "env": {**common, **{k: decode(v) for k, v in p.get("env", {}).items()}}}
                for p in r.get("processes", ())
            ],
        }
        for r in data.get("replicas", ())
    ]
    return out


# -- the user's env ---------------------------------------------------------------------------------------


class UserVar(NamedTuple):
    """One variable of the user's env list: a value to expand, or a pod field to read."""

    name: str
    value: str
    field_path: str | None = None


def user_environment(settings: ReplicaSettings, role: str) -> tuple[list[UserVar], list[str]]:
    """The user's env of `role` in order, and what cannot exist outside a pod (Secrets, ConfigMaps): left
    out, with a warning naming it, never its value."""
    out: list[UserVar] = []
    warnings: list[str] = []
    for var in settings.env or []:
        if var.value_from is None:
            out.append(UserVar(var.name, var.value or ""))
        elif var.value_from.field_ref is not None:
            out.append(UserVar(var.name, "", var.value_from.field_ref.field_path))
        else:
            warnings.append(f"env {var.name} (role {role}) comes from a Secret/ConfigMap/resource: not set locally")
    if settings.env_from:
        warnings.append(f"envFrom (role {role}) reads ConfigMaps/Secrets: not set locally")
    return out, warnings


def expand_user_env(
    user_env: Sequence[UserVar], base: Mapping[str, str], pod_fields: Mapping[str, str]
) -> dict[str, str]:
    """The user's variables as a pod would see them: each value expanded against the variables before it
    (the framework's, then the user's earlier ones; `$$` escapes), a fieldRef read from `pod_fields`."""
    env = dict(base)
    out: dict[str, str] = {}
    for var in user_env:
        value = pod_fields.get(var.field_path, "") if var.field_path is not None else expansion.expand(var.value, env)
        env[var.name] = out[var.name] = value
    return out


def files_root(files_dir: str) -> str:
    """Where a local job's controller files are: the folder standing for `/` ($KUBETRAIN_FILES_ROOT)."""
    return os.path.join(files_dir, "root") if files_dir else ""


def _replica(
    replica: ReplicaPlan,
    job_name: str,
    user_env: Sequence[UserVar],
    machine_env: Mapping[str, str],
    metrics_dir: str | None = None,
    rendezvous: str | None = None,
    *,
    controller: bool = False,
    hosts: Mapping[str, str] | None = None,
    files_root: str = "",
    namespace: str | None = None,
) -> LaunchReplica:
    from ...plan import expanded_args  # here: the supervisor reads records without importing the planner

    pod_fields = pod_fields_of(replica, job_name, namespace)
    pattern = name_pattern(list(hosts or {}))
    processes = []
    for p in replica.processes:
        # What the machine gives the replica (its GPUs) is there before the user's env, as in a pod.
        base = {**p.env, **machine_env}
        if metrics_dir is not None:  # a file per process: ranks never share one (the user's env may override)
            base[env_names.METRICS_FILE] = os.path.join(metrics_dir, f"{p.key}.jsonl")
        if not controller:
            env = {**base, **expand_user_env(user_env, base, pod_fields)}
        else:
            # A controller appends its variables after the container's own env: the user's values are expanded
            # without them and theirs win a name. Host names the controller makes resolvable in the cluster are
            # this machine's addresses here.
            theirs = {k: v for k, v in base.items() if k in p.env and not k.startswith("KUBETRAIN_")}
            own = {k: v for k, v in base.items() if k not in theirs}
            if files_root:
                own[env_names.FILES_ROOT] = files_root
            users = expand_user_env(user_env, own, pod_fields)
            env = {**own, **{k: localize(v, hosts or {}, pattern) for k, v in users.items()}, **theirs}
        if rendezvous is not None and env.get("PET_RDZV_BACKEND") == "c10d":
            env.update(file_rendezvous(env, rendezvous))
        argv = list(p.argv)
        for i in expanded_args(argv, replica.settings):  # run.expandEnv: as the kubelet expands a container's args
            argv[i] = expansion.expand(argv[i], env)
        processes.append(LaunchProcess(p.key, tuple(argv), env, p.local_rank))
    return LaunchReplica(replica.role, replica.index, replica.host, tuple(processes))


def file_rendezvous(env: Mapping[str, str], path: str) -> dict[str, str]:
    """torchrun's c10d rendezvous kept in a file (`RENDEZVOUS_FILE`) instead of a TCP store that the first
    agent hosts: losing that agent (replica 0) would end the rendezvous for every survivor. The user's own
    rendezvous options (PET_RDZV_CONF: timeouts, keep-alive) are kept; only the store is set."""
    options = [o for o in env.get("PET_RDZV_CONF", "").split(",") if o and not o.startswith("store_type=")]
    return {"PET_RDZV_ENDPOINT": path, "PET_RDZV_CONF": ",".join(["store_type=file", *options])}


__all__ = [
    "LAYOUT",
    "LaunchProcess",
    "LaunchRecord",
    "LaunchReplica",
    "RoleCount",
    "UserVar",
    "expand_user_env",
    "user_environment",
]
