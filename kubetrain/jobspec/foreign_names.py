"""The foreign job kinds kubetrain reads (DeepSpeedJob, TrainingWorkload, Kubeflow jobs, JobSet, Volcano Job):
their names and telltale fields only.

The job model cannot import `kubetrain.foreign` (it sits above), yet a file fed as a TrainJob that is really a
DeepSpeedJob deserves "this is a DeepSpeedJob: run it as is, or `kubetrain convert`" rather than a did-you-mean
per field. This table is that knowledge, and `kubetrain.foreign`'s registry reads it too, so the names live once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ForeignName:
    kind: str
    group: str
    versions: tuple[str, ...]
    module: str
    """The module of `kubetrain.foreign` that converts it."""
    telltales: frozenset[str]
    """Keys under `spec` that only this kind has (a TrainJob has none of them)."""

    @property
    def api_versions(self) -> tuple[str, ...]:
        return tuple(f"{self.group}/{version}" for version in self.versions)


def _name(kind: str, group: str, versions: tuple[str, ...], module: str, *telltales: str) -> ForeignName:
    return ForeignName(kind, group, versions, module, frozenset(telltales))


FOREIGN_NAMES: tuple[ForeignName, ...] = (
    _name(
        "DeepSpeedJob", "batch.tensorstack.dev", ("v1beta1",), "deepspeedjob", "worker", "config", "disableCustomEnv"
    ),
    _name(
        "TrainingWorkload",
        "run.ai",
        ("v2alpha1",),
        "runai",
        "environment",
        "completions",
        "parallelism",
        "gpu",
        "gpuMemory",
        "largeShm",
        "pvcs",
        "gitSync",
        "usage",
        "cpuLimit",
        "memoryLimit",
        "arguments",
    ),
    _name("PyTorchJob", "kubeflow.org", ("v1",), "kubeflow", "pytorchReplicaSpecs"),
    _name("TFJob", "kubeflow.org", ("v1",), "kubeflow", "tfReplicaSpecs"),
    _name("MPIJob", "kubeflow.org", ("v1", "v2beta1"), "kubeflow", "mpiReplicaSpecs"),
    _name("XGBoostJob", "kubeflow.org", ("v1",), "kubeflow", "xgbReplicaSpecs"),
    _name("PaddleJob", "kubeflow.org", ("v1",), "kubeflow", "paddleReplicaSpecs"),
    _name("JAXJob", "kubeflow.org", ("v1",), "kubeflow", "jaxReplicaSpecs"),
    _name("JobSet", "jobset.x-k8s.io", ("v1alpha2",), "jobset", "replicatedJobs"),
    _name("Job", "batch.volcano.sh", ("v1alpha1",), "volcano", "tasks"),
)


def foreign_name_of(doc: Mapping[str, Any]) -> ForeignName | None:
    """The foreign kind `doc` declares by apiVersion group and kind (any version: a wrong version is the
    converter's to report)."""
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return None
    group = api.rpartition("/")[0]
    return next((n for n in FOREIGN_NAMES if n.kind == kind and n.group == group), None)


def foreign_lookalike(doc: Mapping[str, Any]) -> tuple[ForeignName, list[str]] | None:
    """The foreign kind whose telltale fields `doc`'s spec has (the most of them wins), with those fields."""
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return None
    best: tuple[ForeignName, list[str]] | None = None
    for name in FOREIGN_NAMES:
        hits = [key for key in spec if key in name.telltales]
        if hits and (best is None or len(hits) > len(best[1])):
            best = (name, hits)
    return best


__all__ = ["FOREIGN_NAMES", "ForeignName", "foreign_lookalike", "foreign_name_of"]
