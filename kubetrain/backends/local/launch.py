"""The launch record: what the local supervisor starts a job from, and what `kubetrain attach` shows.

`plan()` wires the framework (its env, argv and files) once for every backend. A local run adds what only
it needs, here: the user's env list, expanded per process with Kubernetes' `$(VAR)` rules
(`contract.expansion`, the kubelet's own) so it means what it means in a pod, fieldRefs answered with the
local replica's name and address, and a warning for what cannot exist outside a pod (Secrets,
ConfigMaps), never its value. The Kubernetes render does neither: it lists the user's env in the
container and leaves the expansion to the kubelet.

What a process cannot get through its env is judged here too (`machine_fit`): mounts, GPUs, the run
policy fields a local run has no exact counterpart for. Each is honoured (a bind mount whose src is its
dst; each replica's own GPUs in `CUDA_VISIBLE_DEVICES`), approximated with a warning naming its field
path, or refused with its path before the job is created.

The record is stored with the job as JSON (`JobStore.set_plan_json`) and read back typed; `kubetrain run
--dry-run` prints the same layout (`LAYOUT`: what every process shares once, each process what is its own).
The supervisor imports this module, so it imports only the standard library and kubetrain's stdlib-only
modules; the plan it is built from (`LaunchRecord.from_plan`) is only looked at, never imported (nor is the
job model `machine_fit` reads).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ...contract import env_names, expansion
from ...contract.hostnames import localize, name_pattern
from ...restart_policy import RestartRules

if TYPE_CHECKING:
    from ...jobspec import JobSpec, ReplicaSettings
    from ...plan import Plan, ReplicaPlan
    from .gpus import GpuInventory, GpuRequest


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
        `role_cwds`: each role's folder (`role_working_dirs`); only those that differ from `cwd` are kept."""
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


POD_FIELDS = ("metadata.name", "metadata.namespace", "status.podIP", "status.hostIP")
"""The downward API's fields every local replica answers (a controller's labels and annotations besides)."""


def pod_fields_of(replica: ReplicaPlan, job_name: str, namespace: str | None = None) -> dict[str, str]:
    """Locally the replica's "pod" is its processes on this host: the fieldRefs a pod answers, answered alike
    (a controller's labels, annotations and pod name from the plan)."""
    settings = replica.settings
    given = {f"metadata.labels['{k}']": str(v) for k, v in (settings.labels or {}).items()}
    given.update({f"metadata.annotations['{k}']": str(v) for k, v in (settings.annotations or {}).items()})
    return {
        "metadata.name": f"{job_name}-{replica.role}-{replica.index}",
        "metadata.namespace": namespace or "default",
        "status.podIP": replica.host,
        "status.hostIP": replica.host,
        **given,
        **replica.pod_fields,
    }


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


# -- what this machine makes of the fields a process does not get through its env -------------------------

FieldPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Refusal:
    """A field this machine cannot give the job: the job is not created."""

    path: FieldPath
    """Where in the spec: `("spec", "mounts", 1)`."""
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class MachineFit:
    """What a local run makes of the fields a replica does not get through the framework's env or the
    user's: what it refuses, how it approximates the rest (warnings naming the field), and what it adds to
    each replica's env (its GPUs)."""

    refusals: tuple[Refusal, ...] = ()
    warnings: tuple[str, ...] = ()
    replica_env: dict[str, dict[str, str]] = field(default_factory=dict)
    """Replica key (`worker-0`) → variables, under the user's env."""


MOUNTS_TABLE = "/proc/self/mounts"
"""Where a local run looks for an nfs export this machine has mounted already."""


def machine_fit(
    plan: Plan,
    *,
    base_dir: str,
    gpus: Callable[[], GpuInventory],
    mounts_table: str = MOUNTS_TABLE,
    folders: Mapping[str, str] | None = None,
) -> MachineFit:
    """Mounts, GPUs, cleanPodPolicy and the preemption fields of `plan`'s job on this machine. `gpus` is
    asked only when the job asks for GPUs; `base_dir` is where a relative bind mount src resolves; `folders`,
    where each role's processes start (None: `role_working_dirs(plan, base_dir)`).

    | field | locally |
    |---|---|
    | bind mount | honoured when src is dst; else the program sees src at its own path (warning) |
    | device mount | honoured at src (the device's own permissions apply); dst ≠ src, perm: warning |
    | nfs mount | honoured where this machine mounted the export (warning if not at dst); else refused |
    | emptyDir mount | warning: not created (the program makes its own scratch folder) |
    | volume, configMap, secret, s3, gitSync mount | refused: nothing on this machine holds them |
    | resources.gpu, migProfile, limits nvidia.com/gpu | each replica its own GPUs; too few: refused |
    | fractional gpu, gpuMemory, MIG without MIG devices | warning: shared or whole GPUs, no limits |
    | runPolicy.cleanPodPolicy None | warning: replicas still running at the end are stopped (as Running) |
    | scheduling.preemptionLimit, terminateAfterPreemption | warning: nothing preempts a local job |
    | replicas × procsPerReplica | past the open-file limit or 32 per core: refused, with the numbers |
    | run.python | a binary, a folder without __main__.py, an unreadable file, `python -m` alone: refused |
    | env names that are not shell names (`my.var`) | warning: the program gets them, a shell cannot |
    """
    spec = plan.job.spec
    refusals: list[Refusal] = []
    warnings: list[str] = []
    for where, mount in _mounts(spec):
        _mount_verdict(where, mount, base_dir, mounts_table, refusals, warnings)
    policy = spec.run_policy
    if policy.clean_pod_policy == "None":
        warnings.append(
            "spec.runPolicy.cleanPodPolicy: None is approximated locally as Running: replicas still running when "
            "the job ends are stopped, since a process cannot outlive its supervisor without becoming an orphan; "
            "every replica's log stays for `kubetrain logs`"
        )
    if spec.scheduling.preemption_limit is not None:
        warnings.append(
            "spec.scheduling.preemptionLimit: has no effect locally: nothing preempts a local job (a replica "
            "killed by a signal is a failure, under restartPolicy and runPolicy.backoffLimit)"
        )
    if spec.scheduling.terminate_after_preemption:
        warnings.append(
            "spec.scheduling.terminateAfterPreemption: has no effect locally: nothing preempts a local job"
        )
    size = _size_verdict(plan)
    if size is not None:
        refusals.append(size)
    _program_verdicts(plan, folders or role_working_dirs(plan, base_dir), refusals, warnings)
    _contract_verdicts(plan, refusals, warnings)
    requests, notes, paths = _gpu_requests(plan)
    warnings += notes
    replica_env: dict[str, dict[str, str]] = {}
    if any(r.whole or r.shared or r.mig for r in requests):
        from .gpus import assign_gpus

        assignment = assign_gpus(requests, gpus())
        refusals += [Refusal(paths[path], message, hint) for path, message, hint in assignment.problems]
        warnings += assignment.warnings
        replica_env = assignment.env
    return MachineFit(tuple(dict.fromkeys(refusals)), tuple(dict.fromkeys(warnings)), replica_env)


# -- how many processes this machine can hold ------------------------------------------------------------

FDS_PER_PROCESS = 4
"""What one local process costs the supervisor in open files: its stdout and stderr pipes, its pidfd, its
log; and before it starts, its replica's port is held by a bound socket."""
FDS_RESERVED = 64
"""Open files the supervisor needs besides its processes' (the store, its wake pipe, Python's own)."""
PROCS_PER_CORE = 32
"""The most local processes per core: past that a training job thrashes rather than runs."""


def _size_verdict(plan: Plan) -> Refusal | None:
    """A refusal, with the numbers, for more processes than this machine can supervise: by the open-file
    limit (`ulimit -n`) or by its cores. Judged from the plan's counts, before any port is bound."""
    import resource

    processes = sum(w.replicas * len(w.processes) for w in plan.roles)
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fit_files = processes if soft == resource.RLIM_INFINITY else max(0, (soft - FDS_RESERVED) // FDS_PER_PROCESS)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    fit_cores = cores * PROCS_PER_CORE
    if processes <= min(fit_files, fit_cores):
        return None
    spec = plan.job.spec
    counts = ", ".join(f"{w.role}: {w.replicas}×{len(w.processes)}" for w in plan.roles if w.processes)
    what = f"{processes} local processes ({counts} replicas×processes)"
    if processes > fit_files:
        return Refusal(
            ("spec", "replicas") if spec.roles is None else ("spec", "roles"),
            f"{what} need about {processes * FDS_PER_PROCESS + FDS_RESERVED} open files; this machine's limit "
            f"(ulimit -n) is {soft}, enough for {fit_files}",
            "raise the limit (ulimit -n), run fewer replicas or processes per replica, or run on Kubernetes",
        )
    return Refusal(
        ("spec", "replicas") if spec.roles is None else ("spec", "roles"),
        f"{what} are more than this machine's {cores} cores can run ({PROCS_PER_CORE} per core: {fit_cores})",
        "run fewer replicas or processes per replica locally, or run on Kubernetes",
    )


# -- what each replica runs: the program must be there, and be what `run` says it is ----------------------

_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PYTHON = re.compile(r"python[0-9.]*")
_HEAD_BYTES = 4096
_BINARY_KINDS = (
    (b"\x7fELF", "an ELF executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"MZ", "a Windows executable"),
)


def _program_verdicts(
    plan: Plan, folders: Mapping[str, str], refusals: list[Refusal], warnings: list[str]
) -> None:
    """Refused up front, with the field path: a `run.python` script that is unreadable or not Python
    source (a binary given as `python prog`), and `python -m` with no module after it. Warned: env names a
    shell cannot hold (`my.var`): the program gets them (as in a pod), but `export my.var=...` is no shell's."""
    spec = plan.job.spec
    for role, settings in plan.settings.items():
        run = settings.run
        if run is not None and run.python and not _skipped(run.python[0]):
            where = (*setting_path(spec, role, "run", "python"), 0)
            # Where Python looks for it: the folder the role's processes start in (`role_working_dirs`).
            verdict = _python_script(run.python[0], folders[role])
            if verdict is not None:
                refusals.append(Refusal(where, *verdict))
        # `kubetrain run -- python -m` (run: {python: [-m]}), or exec: [python3, -m]: Python would only print its usage.
        for name, argv in (("python", ["python", *(run.python or [])]), ("exec", run.exec or [])) if run else ():
            if len(argv) > 1 and _PYTHON.fullmatch(os.path.basename(argv[0])) and argv[-1] == "-m":
                refusals.append(
                    Refusal(
                        setting_path(spec, role, "run", name),
                        f"`{' '.join(argv)}` names no module after -m",
                        "python -m MODULE [args...], e.g. run: {module: [my_pkg.train]}",
                    )
                )
        for i, var in enumerate(settings.env or []):
            if not _SHELL_NAME.fullmatch(var.name):
                at = _show((*setting_path(spec, role, "env"), i, "name"))
                warnings.append(
                    f"{at}: {var.name!r} is not a shell variable name: the replicas' programs get it (as in a pod), "
                    "but no shell can export it, so `kubetrain attach` shells and `attach --print` lack it"
                )


def _contract_verdicts(plan: Plan, refusals: list[Refusal], warnings: list[str]) -> None:
    """What a local run cannot give as the controller (or the image) would, refused before anything starts:
    the image's ENTRYPOINT, a file the controller places at an absolute path that a command names literally,
    a contract's own cases (`Plan.local_problems`). Warned: a command naming a host name the controller makes
    resolvable on a cluster, a fieldRef no local replica answers."""
    spec = plan.job.spec
    refusals += [Refusal(p.path, p.message, p.hint) for p in plan.local_problems]
    kind = spec.controller.kind if spec.controller is not None else ""
    names = name_pattern(list(plan.names))
    literal = _paths_pattern(plan.paths)
    first = {r.role: r for r in reversed(plan.replicas)}
    for wiring in plan.roles:
        role, settings = wiring.role, plan.settings[wiring.role]
        run_at = setting_path(spec, role, "run")
        form = _run_form(settings)
        for proc in wiring.processes[:1]:
            if proc.entrypoint:
                image = settings.image or "its image"
                refusals.append(Refusal(
                    (*run_at, "entrypoint"),
                    f"runs the image's own ENTRYPOINT ({image}): the program is in the image, not on this machine",
                    "give the container its command, the program the ENTRYPOINT runs (docker image inspect "
                    f"{image} shows it as Entrypoint and Cmd), e.g. command: [python, /app/train.py]",
                ))
                continue
            text = " ".join(proc.argv)
            if literal is not None and (found := literal.search(text)) is not None:
                path = found.group(0)
                refusals.append(Refusal(
                    (*run_at, form),
                    f"names {path}, a file the {kind} controller places in the pod; kubetrain cannot place it at "
                    "that path on this machine (it would take root, or a mount namespace many machines do not "
                    f"give an unprivileged user) and gives it at $KUBETRAIN_FILES_ROOT{path} instead",
                    f'read "$KUBETRAIN_FILES_ROOT{path}" (unset on Kubernetes, so the same command works there), or '
                    "the variables the controller gives with the same content (docs/foreign.md)",
                ))
            for name in sorted({m.group(0) for m in names.finditer(text)} if names is not None else ()):
                warnings.append(
                    f"{_show((*run_at, form))}: names {name}, a host name the {kind} controller makes resolvable "
                    "on a cluster; locally nothing resolves it (the controller's variables, and env values that "
                    "name a replica, give this machine's address instead: pass it through the environment)"
                )
        replica = first.get(role)
        if replica is None:
            continue
        answered = pod_fields_of(replica, plan.name)
        for i, var in enumerate(settings.env or []):
            ref = var.value_from.field_ref if var.value_from is not None else None
            if ref is not None and ref.field_path not in answered:
                warnings.append(
                    f"{_show((*setting_path(spec, role, 'env'), i))}: {var.name} reads {ref.field_path} through "
                    "the downward API, which no local replica has: it is empty locally"
                )


def _run_form(settings: ReplicaSettings) -> str:
    run = settings.run
    if run is None:
        return "exec"
    return next((name for name, attr in (("python", "python"), ("module", "module"), ("exec", "exec"),
                                          ("customCommand", "custom_command")) if getattr(run, attr) is not None),
                "exec")


def _paths_pattern(paths: Mapping[str, str]) -> re.Pattern[str] | None:
    """An absolute path under any folder a controller places files in (`/etc/volcano/...`), as a command
    writes it."""
    folders = sorted({os.path.dirname(p) for p in paths}, key=len, reverse=True)
    if not folders:
        return None
    # Not `$KUBETRAIN_FILES_ROOT/etc/...` (nor any longer path ending so): only the absolute path itself.
    return re.compile(rf"(?<![\w}}.~/-])(?:{'|'.join(re.escape(f) for f in folders)})(?:/[^\s'\"`;|&)(<>$]*)?")


def missing_scripts(plan: Plan, folders: Mapping[str, str]) -> list[Refusal]:
    """A refusal per role whose `run.python` script is not there, with the path looked for: in the role's
    folder (`folders`, from `role_working_dirs`), where its processes start and Python looks. Only a real local
    run asks this: a dry run or a Kubernetes render must not need the file (in a pod, the script is in the
    image), so `machine_fit` leaves a missing script alone."""
    spec = plan.job.spec
    refusals = []
    for role, settings in plan.settings.items():
        run = settings.run
        if run is None or not run.python or _skipped(run.python[0]):
            continue
        script = run.python[0]
        looked = os.path.normpath(os.path.join(folders[role], script))
        if not os.path.exists(looked):
            where = (*setting_path(spec, role, "run", "python"), 0)
            # A job-level `run` is looked for in each role's folder: say which role's lacks it.
            whose = "" if where[:3] == ("spec", "roles", role) or spec.roles is None else f" (role {role})"
            refusals.append(Refusal(
                where,
                f"script {script} not found{whose}: there is no {looked}",
                "relative paths resolve against the role's workingDir, else the job's, else the job file's "
                "folder; fix the path or the folder",
            ))
    return refusals


def role_working_dirs(plan: Plan, base_dir: str) -> dict[str, str]:
    """Each role's folder, where its processes start and relative paths in its `run` resolve: its settings'
    workingDir (the role's, else the job's, else its podTemplate main container's: `plan.settings_for`) under
    `base_dir` (the job file's folder; an absolute workingDir stays as it is), else `base_dir` itself —
    so a job runs the same from any current directory, and each role where its pods would start."""
    return {
        role: os.path.realpath(os.path.join(base_dir, settings.working_dir or ""))
        for role, settings in plan.settings.items()
    }


def _skipped(arg: str) -> bool:
    # An option (`-c`, `-X dev`) or a value the kubelet's rules expand: not a file to look at up front.
    return arg.startswith("-") or "$(" in arg


def _python_script(script: str, folder: str) -> tuple[str, str | None] | None:
    """(message, hint) when Python cannot run `script` (relative to `folder`) as its program; None when it can
    (as far as a look at its first bytes tells)."""
    found = os.path.join(folder, script)
    if not os.path.exists(found):
        # Not refused: a dry run (and the parity harness) plans jobs whose scripts are not written yet, and a
        # missing script fails its replica at once with Python's own message.
        return None
    if os.path.isdir(found):
        if os.path.isfile(os.path.join(found, "__main__.py")):
            return None
        return f"{found} is a folder without __main__.py", "name the script inside it"
    try:
        with open(found, "rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError as exc:
        return f"script {found} cannot be read: {exc.strerror or exc}", None
    if b"\0" not in head or found.endswith((".pyc", ".pyz")) or head.startswith(b"PK\x03\x04"):
        return None  # source; or bytecode or a zip application, which Python runs too
    kind = next((name for magic, name in _BINARY_KINDS if head.startswith(magic)), "a binary file")
    return (
        f"{found} is {kind}, not Python source",
        f"run a program with exec: run: {{exec: [{script}, ...]}}",
    )


def setting_path(spec: JobSpec, role: str | None, *names: str) -> FieldPath:
    """Where a replica setting of `role` is written: in the role's overrides when the role sets it, else the
    job's (`("spec", "roles", "worker", "resources", "gpu")`). `names` are snake_case attributes or keys."""
    override = spec.roles.get(role) if spec.roles is not None and role is not None else None
    written: Any = override
    for name in names:
        if isinstance(written, dict):
            written = written.get(name)
        elif written is not None and name in getattr(written, "model_fields_set", ()):
            written = getattr(written, name)
        else:
            written = None
    camel = tuple(name if "/" in name else re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name) for name in names)
    return ("spec", "roles", role, *camel) if written is not None and role is not None else ("spec", *camel)


def _show(path: FieldPath) -> str:
    from ...jobspec import format_path

    return format_path(path)


def _mounts(spec: JobSpec) -> list[tuple[FieldPath, Any]]:
    """Each mount as written, with its path: the job's (every role has them), then each role's own."""
    out: list[tuple[FieldPath, Any]] = [(("spec", "mounts", i), m) for i, m in enumerate(spec.mounts or [])]
    for name, role in (spec.roles or {}).items():
        out += [(("spec", "roles", name, "mounts", i), m) for i, m in enumerate(role.mounts or [])]
    return out


def _mount_verdict(
    where: FieldPath, mount: Any, base_dir: str, mounts_table: str, refusals: list[Refusal], warnings: list[str]
) -> None:
    """Honoured (nothing said), approximated (a warning), or refused: one mount on this machine."""
    at = _show(where)
    kind = mount.type
    readonly = getattr(mount, "readonly", False)
    if kind == "bind":
        src = os.path.normpath(os.path.join(base_dir, mount.src))
        _at_own_path(at, f"bind mount dst {mount.dst} is not created locally; the program sees src {src}", src,
                     mount.dst, readonly, warnings)
    elif kind == "device":
        dst = mount.dst or mount.src
        notes = []
        if not os.path.exists(mount.src):
            notes.append(f"device {mount.src} does not exist on this machine")
        if os.path.normpath(dst) != os.path.normpath(mount.src):
            notes.append(f"device {mount.src} is not also at {dst} locally: the program finds it at {mount.src}")
        if mount.perm != "rwm":
            notes.append(f"perm {mount.perm} is not enforced locally: the device file's own permissions apply")
        if notes:
            warnings.append(f"{at}: {'; '.join(notes)}")
    elif kind == "nfs":
        export = f"{mount.server}:{mount.path}"
        mounted = _nfs_mountpoint(export, mounts_table)
        if mounted is None:
            refusals.append(Refusal(
                where,
                f"nfs export {export} is not mounted on this machine, and a local run cannot mount it",
                f"mount it (sudo mount -t nfs {export} <folder>) and run again, or mount a folder with the same "
                f"files instead: type=bind,src=<folder>,dst={mount.dst}",
            ))
        else:
            _at_own_path(at, f"nfs export {export} is mounted on this machine at {mounted}, not at {mount.dst}; "
                         f"the program sees it at {mounted}", mounted, mount.dst, readonly, warnings)
    elif kind == "emptyDir":
        warnings.append(
            f"{at}: emptyDir {mount.dst} is not created locally; write scratch files under a workingDir-relative "
            "folder or $TMPDIR instead"
        )
    else:
        what, instead = _MISSING.get(kind, ("a {m.type} mount exists only on a cluster", "a folder"))
        refusals.append(Refusal(
            where,
            f"{what.format(m=mount)}: a local run cannot provide it at {mount.dst}",
            f"to run locally, mount {instead.format(m=mount)} instead: type=bind,src=<folder>,dst={mount.dst}",
        ))


_MISSING = {
    "volume": ("PersistentVolumeClaim {m.src} exists only on a cluster", "a folder holding its data"),
    "configMap": ("ConfigMap {m.name} exists only on a cluster", "a folder holding its files"),
    "secret": ("Secret {m.name} exists only on a cluster", "a folder holding its files"),
    "s3": ("s3 bucket {m.bucket} is mounted by a CSI driver on a cluster",
           "the bucket where this machine has it (mountpoint-s3, s3fs or rclone mount it in a folder)"),
    "gitSync": ("gitSync of {m.repository} is cloned by an init container on a cluster",
                "a clone of it (git clone {m.repository} <folder>)"),
}
"""Mount type → why a local run has nothing for it, and what to mount in its place."""


def _at_own_path(at: str, moved: str, src: str, dst: str, readonly: bool, warnings: list[str]) -> None:
    """A mount whose files are on this machine at `src`: honoured if that is `dst`, else the program sees
    them at `src` (a warning); readonly is not enforced either way."""
    notes = []
    if os.path.normpath(src) != os.path.normpath(dst):
        notes.append(f"{moved} at its own path — use src paths, or a workingDir-relative path, in the program")
    if readonly:
        notes.append("readonly is not enforced locally")
    if notes:
        warnings.append(f"{at}: {'; '.join(notes)}")


def _nfs_mountpoint(export: str, mounts_table: str) -> str | None:
    """Where this machine has `server:/path` mounted (an nfs or nfs4 mount), if it has."""
    try:
        with open(mounts_table, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[2].startswith("nfs") and parts[0].rstrip("/") == export.rstrip("/"):
            return parts[1].replace("\\040", " ")
    return None


def _gpu_requests(plan: Plan) -> tuple[list[GpuRequest], list[str], dict[str, FieldPath]]:
    """What each replica asks for in GPUs, in replica order; the warnings about what is not applied; each
    request's path as written → as a field path."""
    from ...jobspec.types import parse_quantity
    from .gpus import GpuRequest

    spec = plan.job.spec
    requests: list[GpuRequest] = []
    notes: list[str] = []
    paths: dict[str, FieldPath] = {}
    for wiring in plan.roles:
        role = wiring.role
        settings = plan.settings[role]
        hosts = not wiring.processes
        res = settings.resources
        raw = next(((kind, v) for kind in ("limits", "requests") if (v := (getattr(settings, kind) or {}).get(
            "nvidia.com/gpu")) is not None), None)
        where: FieldPath = ("spec",)
        ask: dict[str, Any] = {}
        if raw is not None:
            where = setting_path(spec, role, raw[0], "nvidia.com/gpu")
            ask = {"whole": int(parse_quantity(raw[1]))}
        elif res is not None and res.mig_profile:
            where = setting_path(spec, role, "resources", "mig_profile")
            ask = {"whole": int(res.gpu or 1), "mig": res.mig_profile}
        elif res is not None and res.gpu is not None and res.gpu >= 1:
            where = setting_path(spec, role, "resources", "gpu")
            ask = {"whole": int(res.gpu)}
        elif res is not None and res.gpu:
            where = setting_path(spec, role, "resources", "gpu")
            ask = {"share": float(res.gpu), "shared": True}
        elif res is not None and res.gpu_memory is not None:
            where = setting_path(spec, role, "resources", "gpu_memory")
            ask = {"shared": True}
        if res is not None and ask.get("whole"):
            if res.gpu_memory is not None:
                notes.append(f"{_show(setting_path(spec, role, 'resources', 'gpu_memory'))}: is not reserved "
                             "locally: each replica has its whole GPUs")
            if res.gpu_limit is not None and res.gpu_limit > ask["whole"]:
                notes.append(f"{_show(setting_path(spec, role, 'resources', 'gpu_limit'))}: is not applied "
                             f"locally: each replica gets {ask['whole']} GPU{'s' if ask['whole'] != 1 else ''}, "
                             "its request")
        path = _show(where)
        paths[path] = where
        requests += [GpuRequest(f"{role}-{i}", role, path, hosts=hosts, **ask) for i in range(wiring.replicas)]
    return requests, notes, paths

__all__ = [
    "LAYOUT",
    "MOUNTS_TABLE",
    "LaunchProcess",
    "LaunchRecord",
    "LaunchReplica",
    "MachineFit",
    "Refusal",
    "RoleCount",
    "UserVar",
    "expand_user_env",
    "machine_fit",
    "missing_scripts",
    "role_working_dirs",
    "setting_path",
    "user_environment",
]
