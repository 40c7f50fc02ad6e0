"""Foreign job files — T9k DeepSpeedJob, Run:ai TrainingWorkload, Kubeflow jobs, JobSet, Volcano Job — as
TrainJobs: every field mapped, approximated (and how) or refused (and why), never dropped silently.

`convert(doc)` converts one document; `load_job_file(path)` reads a file that holds a TrainJob or a foreign kind
(what `kubetrain run|validate|render|explain|convert` call).
"""

from __future__ import annotations

from .conversion import Conversion, ForeignKind
from .registry import FOREIGN_KINDS, all_kinds, convert, kind_of
from .walker import FieldNote, SourceWalker, Verdict

__all__ = [
    "FOREIGN_KINDS",
    "Conversion",
    "FieldNote",
    "ForeignKind",
    "SourceWalker",
    "Verdict",
    "all_kinds",
    "convert",
    "kind_of",
]
