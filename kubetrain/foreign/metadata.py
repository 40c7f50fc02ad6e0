"""An object's `apiVersion`, `kind`, `metadata` and `status` → a TrainJob's metadata, for every foreign kind.

Two readers, for two kinds of source. A kind kubetrain never renders (DeepSpeedJob, Run:ai's workloads) has
only its user's labels and annotations: `take_metadata_as_written` keeps them all. A kind kubetrain renders
(Kubeflow's jobs, JobSet, Volcano's Job) may be a job kubetrain rendered, converting back to the job it was:
`take_metadata_without_own` leaves kubetrain's own labels (and kubectl's last-applied note) to the next render.
Both refuse what the API server writes on a stored object, with why.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..contract import labels as kt_labels
from ..jobspec.errors import Path
from .walker import FieldTree, SourceWalker

SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
"""The metadata fields the API server writes on an object it stored: never part of a job's definition."""

_SERVER_SET = (*SERVER_METADATA, "ownerReferences", "finalizers")


def take_metadata_as_written(walker: SourceWalker) -> dict[str, Any]:
    """`metadata` → TrainJob metadata: name, generateName (namePrefix), namespace, labels, annotations; what the
    API server writes (uid, resourceVersion, managedFields, ...) is refused with that reason."""
    out: dict[str, Any] = {}
    for src, dst in (
        ("name", "name"),
        ("generateName", "namePrefix"),
        ("namespace", "namespace"),
        ("labels", "labels"),
        ("annotations", "annotations"),
    ):
        if walker.has(("metadata", src)):
            out[dst] = copy.deepcopy(walker.take(("metadata", src), f"metadata.{dst}"))
    for name in _SERVER_SET:
        walker.refuse(("metadata", name), "written by the API server, not part of a job's definition")
    return out


def refuse_status(walker: SourceWalker) -> None:
    walker.refuse("status", "written by the controller; a new job starts without one")


def take_header(walker: SourceWalker) -> None:
    """apiVersion and kind: read (they chose the converter), replaced by kubetrain's own."""
    walker.take("apiVersion", "apiVersion")
    walker.take("kind", "kind")


SERVER_SET = "set by the API server for the object it stored; a conversion describes a new job"
KUBETRAIN_OWN = "kubetrain's own rendering, produced again when the converted job is rendered"

METADATA_FIELDS: FieldTree = dict.fromkeys(
    ("name", "generateName", "namespace", "labels", "annotations", *SERVER_METADATA, "ownerReferences", "finalizers")
)
"""ObjectMeta's fields (a typo in `metadata` gets a did-you-mean from these)."""

_KUBECTL_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def is_kubetrain_label(key: str, value: Any) -> bool:
    """A label kubetrain puts on what it renders (and puts there again on the next render)."""
    return key.startswith("kubetrain.dev/") or (key == kt_labels.MANAGED_BY and value == kt_labels.MANAGER)


def take_metadata_without_own(walker: SourceWalker) -> dict[str, Any]:
    """The object's metadata → TrainJob metadata. kubetrain's own labels (a job it rendered) are left to the
    next render; what the API server set (uid, resourceVersion, ...) is refused with why."""
    out: dict[str, Any] = {}
    for src, dst in (("name", "name"), ("generateName", "namePrefix"), ("namespace", "namespace")):
        value = walker.take(("metadata", src), f"metadata.{dst}")
        if value is not None:
            out[dst] = value
    labels = own_filtered(walker, ("metadata", "labels"), "metadata.labels", is_kubetrain_label)
    if labels:
        out["labels"] = labels
    annotations = own_filtered(
        walker,
        ("metadata", "annotations"),
        "metadata.annotations",
        lambda key, _v: key.startswith("kubetrain.dev/") or key == _KUBECTL_LAST_APPLIED,
    )
    if annotations:
        out["annotations"] = annotations
    for name in SERVER_METADATA:
        walker.refuse(("metadata", name), SERVER_SET)
    walker.refuse(
        ("metadata", "ownerReferences"),
        "an owner is the object's creator's to set; kubetrain's job owns what it creates",
    )
    walker.refuse(("metadata", "finalizers"), "finalizers belong to the controllers of a stored object")
    walker.refuse(("status",), "the state of a job that ran; a conversion starts a new one")
    return out


def take_object_metadata(walker: SourceWalker) -> dict[str, Any]:
    """apiVersion and kind, read only (they chose the converter; the TrainJob has its own), then the metadata
    (`take_metadata_without_own`): the start of a kind whose kind says nothing about the job (JobSet, Volcano's Job)."""
    walker.take("apiVersion", None)
    walker.take("kind", None)
    return take_metadata_without_own(walker)


def own_filtered(walker: SourceWalker, path: Path, target: str, own: Any) -> dict[str, Any]:
    """A string map at `path` without the entries `own(key, value)` says kubetrain (or kubectl) set: those
    are noted as kubetrain's own, the rest taken to `target` (the map is consumed either way)."""
    values = walker.get(path)
    if not isinstance(values, Mapping) or walker.consumed(path):
        return {}
    kept = {str(k): v for k, v in values.items() if not own(str(k), v)}
    if not kept:
        walker.approx(path, None, KUBETRAIN_OWN)
        return {}
    for key, value in values.items():
        if own(str(key), value) and not walker.consumed((*path, str(key))):
            walker.approx((*path, str(key)), None, KUBETRAIN_OWN)
    walker.take(path, target)
    return kept


__all__ = [
    "KUBETRAIN_OWN",
    "METADATA_FIELDS",
    "SERVER_METADATA",
    "SERVER_SET",
    "is_kubetrain_label",
    "own_filtered",
    "refuse_status",
    "take_header",
    "take_metadata_as_written",
    "take_metadata_without_own",
    "take_object_metadata",
]
