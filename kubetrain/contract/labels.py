"""Labels and annotations kubetrain puts on what it creates in a cluster, and the engines' keys it reads.

The job label selects a job's workloads and pods: the render writes it, the Kubernetes backend watches
by it, and the in-replica resolver lists peers by it, so all three take it from here.
"""

from __future__ import annotations

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kubetrain"
"""The value of `MANAGED_BY` on everything kubetrain creates."""
JOB_LABEL = "kubetrain.dev/job"
"""The job's name (as a label value: `naming.label_value`), on every object and pod of the job."""
ROLE_LABEL = "kubetrain.dev/role"
INDEX_LABEL = "kubetrain.dev/replica-index"
"""Set by kubetrain on the pod of a single-replica role, whose index is known before the engine runs it."""
SUBMISSION_LABEL = "kubetrain.dev/submission"
"""A random id per submission, so a retried create can tell its own objects from another's."""
RESERVED_LABELS = (MANAGED_BY, JOB_LABEL, ROLE_LABEL, INDEX_LABEL)
"""Labels kubetrain sets that a spec may not give."""

FLAVOR_ANNOTATION = "kubetrain.dev/flavor"
AS_WRITTEN_ANNOTATION = "kubetrain.dev/as-written"
"""On a foreign document kubetrain submitted as its author wrote it (nothing rendered): `"true"`."""
PAUSED_ANNOTATION = "kubetrain.dev/paused"
ELASTIC_ANNOTATION = "kubetrain.dev/elastic"
"""On an elastic role's workload object: its bounds, "MIN:MAX" (spec.elastic), which `kubetrain scale` keeps to."""
SSH_KEYS_ANNOTATION = "kubetrain.dev/ssh-keys"
"""On a rendered Secret left without data: the submitter puts a new ssh key pair in it (an MPI job's)."""

NODE_POOL_LABEL = "kubetrain.dev/node-pool"
"""Default node label of `spec.scheduling.nodePools`."""
NODE_TYPE_LABEL = "kubetrain.dev/node-type"
"""Default node label of `spec.scheduling.nodeType`."""

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

INDEX_KEYS = (
    INDEX_LABEL,  # kubetrain, on the pods of single-replica roles
    "batch.kubernetes.io/job-completion-index",  # Indexed Jobs (job, jobset flavors)
    "training.kubeflow.org/replica-index",  # the Kubeflow training operator
    "volcano.sh/task-index",  # Volcano
)
"""Labels (or annotations) that carry a pod's replica index, in the order they are trusted."""

__all__ = [
    "AS_WRITTEN_ANNOTATION",
    "ELASTIC_ANNOTATION",
    "FLAVOR_ANNOTATION",
    "INDEX_KEYS",
    "INDEX_LABEL",
    "JOB_LABEL",
    "KUEUE_QUEUE_LABEL",
    "MANAGED_BY",
    "MANAGER",
    "NODE_POOL_LABEL",
    "NODE_TYPE_LABEL",
    "PAUSED_ANNOTATION",
    "RESERVED_LABELS",
    "ROLE_LABEL",
    "SSH_KEYS_ANNOTATION",
    "SUBMISSION_LABEL",
]
