"""restartPolicy (per role) + backoffLimit + the back-off between restarts as one decision, shared by the
plan and the local supervisor.

The spec's meaning (`jobspec.model.JobSpec`, the same on every backend): a failed replica either ends the
job or, under its role's OnFailure/Always/ExitCode (retryable codes), restarts it, at most
runPolicy.backoffLimit times. Locally a restart restarts the whole replica group, after a back-off that
doubles from `LOCAL_BACKOFF_BASE` up to `LOCAL_BACKOFF_MAX` seconds (the Kubernetes Job controller waits
10 s doubling up to 6 min; its values are `KUBERNETES_BACKOFF_BASE`/`_MAX`, for the docs and messages).

Standard library only: the supervisor imports it without paying for the spec layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

POLICIES = ("Never", "OnFailure", "Always", "ExitCode")

LOCAL_BACKOFF_BASE = 1.0
"""Seconds the local backend waits before the first restart of a job's replica group; doubled before
each next one."""
LOCAL_BACKOFF_MAX = 60.0
"""The longest local back-off, in seconds."""
KUBERNETES_BACKOFF_BASE = 10.0
"""The Kubernetes Job controller's first back-off (seconds); doubled per failure."""
KUBERNETES_BACKOFF_MAX = 360.0
"""The Kubernetes Job controller's longest back-off (6 minutes)."""


def exit_code_of(returncode: int) -> int:
    """A death by signal N counts as exit code 128+N, as a shell (and Kubernetes) reports it."""
    return 128 - returncode if returncode < 0 else returncode


def backoff_delay(restarts: int, base: float = LOCAL_BACKOFF_BASE, cap: float = LOCAL_BACKOFF_MAX) -> float:
    """Seconds to wait before the next restart when `restarts` restarts have happened already:
    base, 2·base, 4·base, ..., at most `cap`."""
    if base <= 0:
        return 0.0
    # 2**restarts grows past any cap quickly: stop doubling once there, not overflow.
    delay = base
    for _ in range(max(0, restarts)):
        delay *= 2
        if delay >= cap:
            return cap
    return min(delay, cap)


@dataclass(frozen=True)
class RestartRules:
    policy: str = "Never"
    """The job's restartPolicy: Never | OnFailure | Always | ExitCode. Always acts as OnFailure for a job:
    a replica that exits 0 is done, not restarted."""
    backoff_limit: int = 0
    """Restarts of the replica group allowed before the job fails (resolved: the default already applied)."""
    retryable: frozenset[int] = field(default_factory=frozenset)
    permanent: frozenset[int] = field(default_factory=frozenset)
    roles: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Roles whose restartPolicy is not the job's (`roles.<role>.restartPolicy`): role → policy."""
    backoff_base: float = LOCAL_BACKOFF_BASE
    """Seconds before the first restart; doubled before each next one, up to `backoff_max`."""
    backoff_max: float = LOCAL_BACKOFF_MAX

    def policy_of(self, role: str | None) -> str:
        """The restartPolicy a failure of a replica of `role` is judged by (None: the job's)."""
        if role is None:
            return self.policy
        return self.roles.get(role, self.policy)

    def may_restart(self) -> bool:
        """Whether any failure could be retried at all."""
        return self.backoff_limit > 0 and any(p != "Never" for p in (self.policy, *self.roles.values()))

    def retryable_exit(self, returncode: int, role: str | None = None) -> bool:
        """Whether this exit of a replica of `role` may be retried (backoffLimit aside). ExitCode: 1–127
        permanent, 128–255 retried, with the job's overrides."""
        policy = self.policy_of(role)
        if returncode == 0 or policy == "Never":
            return False
        code = exit_code_of(returncode)
        if policy == "ExitCode":
            return code not in self.permanent and (code in self.retryable or code >= 128)
        return True

    def why_not(self, returncode: int, role: str | None = None) -> str:
        policy = self.policy_of(role)
        whose = f"role {role}'s " if role is not None and role in self.roles else ""
        if policy == "ExitCode":
            return (f"not retried: exit code {exit_code_of(returncode)} is permanent under {whose}"
                    "restartPolicy ExitCode")
        return f"not retried: {whose}restartPolicy {policy}"

    def delay(self, restarts: int) -> float:
        """Seconds to wait before the next restart when `restarts` have happened already."""
        return backoff_delay(restarts, self.backoff_base, self.backoff_max)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy": self.policy,
            "backoffLimit": self.backoff_limit,
            "retryable": sorted(self.retryable),
            "permanent": sorted(self.permanent),
        }
        # Only what differs from the defaults: a record without them reads back the same.
        if self.roles:
            out["roles"] = dict(self.roles)
        if (self.backoff_base, self.backoff_max) != (LOCAL_BACKOFF_BASE, LOCAL_BACKOFF_MAX):
            out["backoffSeconds"] = {"base": self.backoff_base, "max": self.backoff_max}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestartRules:
        backoff = data.get("backoffSeconds") or {}
        return cls(
            data.get("policy", "Never"),
            int(data.get("backoffLimit", 0)),
            frozenset(data.get("retryable", ())),
            frozenset(data.get("permanent", ())),
            {str(role): str(policy) for role, policy in (data.get("roles") or {}).items()},
            float(backoff.get("base", LOCAL_BACKOFF_BASE)),
            float(backoff.get("max", LOCAL_BACKOFF_MAX)),
        )


__all__ = [
    "KUBERNETES_BACKOFF_BASE",
    "KUBERNETES_BACKOFF_MAX",
    "LOCAL_BACKOFF_BASE",
    "LOCAL_BACKOFF_MAX",
    "POLICIES",
    "RestartRules",
    "backoff_delay",
    "exit_code_of",
]
