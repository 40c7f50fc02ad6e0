"""restartPolicy + backoffLimit as one decision, shared by the plan and the local supervisor.

Standard library only: the supervisor imports it without paying for the spec layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def exit_code_of(returncode: int) -> int:
    """A death by signal N counts as exit code 128+N, as a shell (and Kubernetes) reports it."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass(frozen=True)
class RestartRules:
    policy: str = "Never"
    """Never | OnFailure | Always | ExitCode. Always acts as OnFailure for a job: a replica that exits 0
    is done, not restarted."""
    backoff_limit: int = 0
    retryable: frozenset[int] = field(default_factory=frozenset)
    permanent: frozenset[int] = field(default_factory=frozenset)

    def retryable_exit(self, returncode: int) -> bool:
        """Whether this exit may be retried (backoffLimit aside). ExitCode: 1–127 permanent, 128–255
        retried, with the job's overrides."""
        if returncode == 0 or self.policy == "Never":
            return False
        code = exit_code_of(returncode)
        if self.policy == "ExitCode":
            return code not in self.permanent and (code in self.retryable or code >= 128)
        return True

    def why_not(self, returncode: int) -> str:
        if self.policy == "ExitCode":
            return f"not retried: exit code {exit_code_of(returncode)} is permanent under restartPolicy ExitCode"
        return f"not retried: restartPolicy {self.policy}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "backoffLimit": self.backoff_limit,
            "retryable": sorted(self.retryable),
            "permanent": sorted(self.permanent),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestartRules:
        return cls(
            data.get("policy", "Never"),
            int(data.get("backoffLimit", 0)),
            frozenset(data.get("retryable", ())),
            frozenset(data.get("permanent", ())),
        )
