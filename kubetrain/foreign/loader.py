"""Read a job file that holds a TrainJob or a foreign kind (DeepSpeedJob, TrainingWorkload, ...), as `kubetrain
run|validate|render|explain|convert FILE` do: a foreign document is converted (its notes kept for the warnings),
a TrainJob loads as it always has.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path as FsPath

from ..jobspec.errors import FieldError, SpecError
from ..jobspec.foreign_names import foreign_name_of
from ..jobspec.load import deep_merge, find_template, from_dict, load_all_files, read_text
from ..jobspec.model import TrainJob
from ..jobspec.yaml_source import NO_LOCATION, Located, parse_yaml
from .base import Conversion, FieldNote
from .registry import convert

_MAX_BASE_DEPTH = 16


def load_job_file(
    path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    strict: bool = False,
) -> tuple[TrainJob, Conversion | None]:
    """The one job in `path`, and its Conversion when the file holds a foreign kind (else None).

    `overrides` (`--set path=value`) apply to the TrainJob, after the conversion: they name TrainJob fields."""
    jobs = load_job_documents(path, overrides=overrides, strict=strict)
    if len(jobs) != 1:
        raise SpecError([FieldError((), f"expected one job, found {len(jobs)} documents", file=str(path))])
    return jobs[0]


def load_job_documents(
    path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    strict: bool = False,
) -> list[tuple[TrainJob, Conversion | None]]:
    """Every job in `path` (several documents allowed), each with its Conversion when it is a foreign kind."""
    file = str(path)
    folder = FsPath(path).parent
    docs = parse_yaml(read_text(FsPath(path)), file)
    if not any(isinstance(doc.data, dict) and foreign_name_of(doc.data) for doc in docs):
        return [(job, None) for job in load_all_files([path], overrides=overrides)]
    out: list[tuple[TrainJob, Conversion | None]] = []
    errors: list[FieldError] = []
    for doc in docs:
        try:
            if isinstance(doc.data, dict) and foreign_name_of(doc.data):
                resolved = resolve_base_workload(doc, folder)
                conversion = convert(resolved, file=file, strict=strict, base_dir=str(folder))
                if resolved is not doc:
                    base = doc.data["spec"]["baseWorkload"]
                    line = doc.line_of(("spec", "baseWorkload"))[1]
                    conversion.notes.insert(
                        0,
                        FieldNote(
                            "spec.baseWorkload",
                            "mapped",
                            "spec",
                            f"the template {base!r} merged under this workload",
                            line,
                        ),
                    )
                job = conversion.job
                if overrides:
                    job = from_dict(conversion.data, overrides=overrides, base_dir=folder)
                out.append((job.with_base_dir(folder), conversion))
            else:  # a TrainJob beside foreign documents
                out.append((from_dict(doc.data, overrides=overrides, base_dir=folder).with_base_dir(folder), None))
        except SpecError as exc:
            errors += exc.errors
    if errors:
        raise SpecError(errors)
    return out


def resolve_base_workload(doc: Located, folder: FsPath, chain: tuple[str, ...] = ()) -> Located:
    """A Run:ai TrainingWorkload's `baseWorkload` that names a TrainingWorkload template (`usage: Template`) in
    a file beside it or in a templates folder: the template's spec merged under the workload's own (the workload
    wins), as Run:ai does. A base that names a TrainJob template is left for `spec.base` (the converter maps it
    there); one that is not found too, so the error names it."""
    data = doc.data
    spec = data.get("spec") if isinstance(data, dict) else None
    if data.get("kind") != "TrainingWorkload" or not isinstance(spec, dict):
        return doc
    name = spec.get("baseWorkload")
    if not isinstance(name, str) or not name:
        return doc
    found = find_template(name, folder, [])
    if found is None:
        return doc
    base_docs = parse_yaml(read_text(found), str(found))
    if len(base_docs) != 1 or not isinstance(base_docs[0].data, dict):
        return doc
    base = base_docs[0]
    if base.data.get("kind") != "TrainingWorkload":
        return doc  # a TrainJob template: spec.base resolves it
    key = str(found.resolve())
    file, line = doc.line_of(("spec", "baseWorkload"))
    if key in chain or len(chain) > _MAX_BASE_DEPTH:
        raise SpecError(
            [
                FieldError(
                    ("spec", "baseWorkload"),
                    f"templates inherit in a loop: {' → '.join((*chain, key))}",
                    file=file,
                    line=line,
                )
            ]
        )
    if base.data.get("spec", {}).get("usage") != "Template":
        raise SpecError(
            [
                FieldError(
                    ("spec", "baseWorkload"),
                    f"{found} is a TrainingWorkload without usage: Template",
                    hint="a base workload is a template: set its spec.usage to Template",
                    file=file,
                    line=line,
                )
            ]
        )
    base = resolve_base_workload(base, found.parent, (*chain, key))
    base_spec = dict(base.data.get("spec", {}))
    base_spec.pop("usage", None)  # the template's own: the workload is submitted
    where = {p: w for p, w in base.where.items() if p[:2] != ("spec", "usage") and p[:1] == ("spec",)}
    where.update(doc.where)
    merged_spec = deep_merge(base_spec, {k: v for k, v in spec.items() if k != "baseWorkload"})
    merged = dict(data)
    merged["spec"] = merged_spec
    body = {**{p: w for p, w in base.body.items() if p[:1] == ("spec",)}, **doc.body}
    where.setdefault(("spec",), NO_LOCATION)
    return Located(merged, where, body)


__all__ = ["load_job_documents", "load_job_file", "resolve_base_workload"]
