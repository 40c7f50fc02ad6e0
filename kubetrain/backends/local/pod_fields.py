"""The downward API's fields a local replica answers, as a pod would answer them.

Locally a replica's "pod" is its processes on this host: its name and namespace are the job's, its
addresses this machine's, its labels and annotations those a controller gives it (from the plan). The launch
record expands the user's fieldRefs with them (`launch`), and this machine's verdict warns of any other
fieldRef, which no local replica can answer (`machine_fit`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...plan import ReplicaPlan

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
