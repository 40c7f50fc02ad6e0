"""The launch record: what the local supervisor starts a job from, and what `kubetrain attach` shows.

`plan()` wires the framework (its env, argv and files) once for every backend. A local run adds what only
it needs, here: the user's env list, expanded per process with Kubernetes' `$(VAR)` rules
(`contract.expansion`, the kubelet's own) so it means what it means in a pod, fieldRefs answered with the
local replica's name and address, and a warning for what cannot exist outside a pod (Secrets,
ConfigMaps), never its value. The Kubernetes render does neither: it lists the user's env in the
container and leaves the expansion to the kubelet.

The record is stored with the job as JSON (`JobStore.set_plan_json`) and read back typed. The supervisor
imports this module, so it imports only the standard library and kubetrain's stdlib-only modules; the
plan it is built from (`LaunchRecord.from_plan`) is only looked at, never imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ...contract import expansion
from ...restart_policy import RestartRules

if TYPE_CHECKING:
    from ...jobspec import ReplicaSettings
    from ...plan import Plan, ReplicaPlan


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
class LaunchRecord:
    """Everything the supervisor needs to run a job, and `attach` to stand in for one of its replicas."""

    job_id: str
    """The local job id (the job's name for a dry run): the plan's name, in `KUBETRAIN_JOB`."""
    framework: str
    replicas: tuple[LaunchReplica, ...]
    files: dict[str, str] = field(default_factory=dict)
    """Files the replicas read (name → content), written to `files_dir` before they start."""
    files_dir: str = ""
    cwd: str | None = None
    """Where every process starts (the job's workingDir, else the job file's folder); None: the supervisor's."""
    preload: tuple[str, ...] = ()
    """Modules the replicas import once, in a process that then forks each of them (empty: none)."""
    restart: RestartRules = field(default_factory=RestartRules)
    active_deadline_seconds: int | None = None
    run_mode: str = "Immediate"
    """Immediate | Pause | Debug (the replicas hold their program; `attach` runs it by hand)."""
    warnings: tuple[str, ...] = ()
    """What a local run leaves out (Secrets, ConfigMaps), said before it starts."""

    @classmethod
    def from_plan(cls, plan: Plan, *, cwd: str | None = None, preload: Sequence[str] = ()) -> LaunchRecord:
        """The record of `plan` (pure): its processes with the user's env added per process."""
        user_env: dict[str, list[UserVar]] = {}
        warnings: list[str] = []
        for wiring in plan.roles:
            user_env[wiring.role], notes = user_environment(plan.settings[wiring.role], wiring.role)
            warnings += notes
        spec = plan.job.spec
        return cls(
            job_id=plan.name,
            framework=spec.framework.value,
            replicas=tuple(_replica(r, plan.name, user_env[r.role]) for r in plan.replicas),
            files=dict(plan.files),
            files_dir=plan.files_dir,
            cwd=cwd,
            preload=tuple(preload),
            restart=plan.restart,
            active_deadline_seconds=spec.run_policy.active_deadline_seconds,
            run_mode=spec.run_mode,
            warnings=tuple(dict.fromkeys(warnings)),
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

    # -- JSON: the layout `kubetrain run --dry-run` prints and the job store holds --------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.job_id,
            "framework": self.framework,
            "files": dict(self.files),
            "filesDir": self.files_dir,
            "restart": self.restart.to_dict(),
            "activeDeadlineSeconds": self.active_deadline_seconds,
            "runMode": self.run_mode,
            "replicas": [
                {
                    "role": r.role,
                    "index": r.index,
                    "host": r.host,
                    "processes": [
                        {"key": p.key, "argv": list(p.argv), "env": dict(p.env), "localRank": p.local_rank}
                        for p in r.processes
                    ],
                }
                for r in self.replicas
            ],
            "warnings": list(self.warnings),
            "cwd": self.cwd,
            "preload": list(self.preload),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchRecord:
        """The record as `to_dict` wrote it; keys a record of an earlier kubetrain lacks take their defaults."""
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
            cwd=data.get("cwd"),
            preload=tuple(data.get("preload") or ()),
            restart=RestartRules.from_dict(data.get("restart") or {}),
            active_deadline_seconds=data.get("activeDeadlineSeconds"),
            run_mode=str(data.get("runMode") or "Immediate"),
            warnings=tuple(data.get("warnings") or ()),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> LaunchRecord:
        return cls.from_dict(json.loads(text))


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


def _replica(replica: ReplicaPlan, job_name: str, user_env: Sequence[UserVar]) -> LaunchReplica:
    # Locally the replica's "pod" is its processes on this host: the fieldRefs a pod answers, answered alike.
    pod_fields = {
        "metadata.name": f"{job_name}-{replica.role}-{replica.index}",
        "status.podIP": replica.host,
        "status.hostIP": replica.host,
    }
    processes = tuple(
        LaunchProcess(p.key, tuple(p.argv), {**p.env, **expand_user_env(user_env, p.env, pod_fields)}, p.local_rank)
        for p in replica.processes
    )
    return LaunchReplica(replica.role, replica.index, replica.host, processes)


__all__ = [
    "LaunchProcess",
    "LaunchRecord",
    "LaunchReplica",
    "RoleCount",
    "UserVar",
    "expand_user_env",
    "user_environment",
]
