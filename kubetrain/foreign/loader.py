"""Read a job file that holds a TrainJob or a foreign kind (DeepSpeedJob, TrainingWorkload, ...), as `kubetrain
run|validate|render|explain|convert FILE` do: a foreign document is converted (its notes kept for the warnings),
a TrainJob loads as it always has.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

from ..jobspec.errors import FieldError, SpecError
from ..jobspec.foreign_names import foreign_name_of
from ..jobspec.load import (
    apply_override,
    deep_merge,
    find_template,
    load_document,
    read_text,
    source_name,
)
from ..jobspec.model import TrainJob
from ..jobspec.yaml_source import NO_LOCATION, Located, parse_yaml
from .conversion import Conversion
from .registry import convert
from .walker import FieldNote

_MAX_BASE_DEPTH = 16


def load_job_file(
    path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    strict: bool = False,
    document: int | None = None,
) -> tuple[TrainJob, Conversion | None]:
    """The one job in `path`, and its Conversion when the file holds a foreign kind (else None).

    `overrides` (`--set path=value`) name the fields of the document as written: a DeepSpeedJob's own paths
    (`spec.worker.replicas=3`), applied before the conversion, so the notes and errors speak of them too.

    A file of several documents needs `document` (1-based), the one to take: running "the file" would otherwise
    have to guess which job the user meant."""
    jobs = load_job_documents(path, overrides=overrides, strict=strict)
    if document is not None:
        if not 1 <= document <= len(jobs):
            raise SpecError(
                [
                    FieldError(
                        (),
                        f"has no document {document}: it holds {len(jobs)}",
                        hint=f"pick one of 1..{len(jobs)} with --document N",
                        file=source_name(path),
                    )
                ]
            )
        return jobs[document - 1]
    if len(jobs) != 1:
        names = ", ".join(f"{i} {job.name}" for i, (job, _) in enumerate(jobs, 1))
        raise SpecError(
            [
                FieldError(
                    (),
                    f"holds {len(jobs)} jobs ({names}); one job runs at a time",
                    hint="pick one with --document N (1 is the first); `kubetrain render` and `kubetrain validate` "
                    "take every document",
                    file=source_name(path),
                )
            ]
        )
    return jobs[0]


def load_job_documents(
    path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    strict: bool = False,
) -> list[tuple[TrainJob, Conversion | None]]:
    """Every job in `path` (several documents allowed), each with its Conversion when it is a foreign kind;
    `overrides` apply to each document, in its own kind's paths."""
    file = source_name(path)
    folder = FsPath(path).parent  # for `-` (stdin): the current folder
    docs = parse_yaml(read_text(FsPath(path)), file)
    if not docs:
        raise SpecError([FieldError((), "file holds no document", file=file)])
    out: list[tuple[TrainJob, Conversion | None]] = []
    errors: list[FieldError] = []
    for doc in docs:
        try:
            if isinstance(doc.data, dict) and foreign_name_of(doc.data):
                for i, text in enumerate(overrides):  # the kind's own paths, as its users write them
                    apply_override(doc, text, i)
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
                # The document as written (after --set; a Run:ai base by name stays a name): what a cluster that
                # runs this kind's controller is given as is.
                out.append((conversion.job.with_base_dir(folder).with_source(dict(doc.data)), conversion))
            else:  # a TrainJob (alone, or beside foreign documents)
                out.append((load_document(doc, folder, source=file, overrides=overrides), None))
        except SpecError as exc:
            kind = doc.data.get("kind") if isinstance(doc.data, dict) else None
            errors += [_about_set(error, kind) for error in exc.errors]
    if errors:
        raise SpecError(errors)
    return out


def as_written_stand_in(
    path: str | os.PathLike[str],
    error: SpecError,
    *,
    overrides: Sequence[str] = (),
    document: int | None = None,
) -> TrainJob | None:
    """A foreign document kubetrain could not convert (``error``: an entrypoint image, a field it refuses ...) may
    still run as written where the cluster runs its controller, which needs no conversion: a job that only
    stands in for it (its name, the document), carrying ``error`` for anything else (every backend raises it
    instead of running the stand-in). None when the file is not one foreign document."""
    file = source_name(path)
    try:
        docs = parse_yaml(read_text(FsPath(path)), file)
    except SpecError:
        return None
    if document is not None:
        docs = docs[document - 1 : document] if 1 <= document <= len(docs) else []
    if len(docs) != 1 or not isinstance(docs[0].data, dict) or not foreign_name_of(docs[0].data):
        return None
    doc = docs[0]
    try:
        for i, text in enumerate(overrides):
            apply_override(doc, text, i)
    except SpecError:
        return None
    meta = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
    name = str(meta.get("name") or meta.get("generateName") or "job").rstrip("-")
    from ..jobspec.load import from_dict

    try:
        job = from_dict({"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
                         "spec": {"framework": "generic", "run": {"exec": ["true"]}}})
    except SpecError:
        return None
    return job.with_base_dir(FsPath(path).parent).with_source(dict(doc.data), error)


def _about_set(error: FieldError, kind: object) -> FieldError:
    """An error in a `--set` value on a foreign document says that `--set` takes that kind's paths: a user who
    reached for a TrainJob path learns why it was refused."""
    if not (error.file or "").startswith("--set ") or not isinstance(kind, str) or kind == "TrainJob":
        return error
    note = f"--set takes the {kind}'s own paths, as written in the file (not the converted TrainJob's)"
    return dataclasses.replace(error, hint=f"{error.hint}; {note}" if error.hint else note)


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
    try:
        located = _base_by_file(name, folder) or _base_by_name(name, folder)
    except SpecError as exc:
        file, line = doc.line_of(("spec", "baseWorkload"))
        raise SpecError([e if e.file else e.located(file, line) for e in exc.errors]) from None
    if located is None:
        return doc
    found, base = located
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


def _base_by_file(name: str, folder: FsPath) -> tuple[FsPath, Located] | None:
    """The base named as a file (`team-defaults.yaml`, or `team-defaults` in a templates folder)."""
    found = find_template(name, folder, [])
    if found is None:
        return None
    docs = parse_yaml(read_text(found), str(found))
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        return None
    return found, docs[0]


def _base_by_name(name: str, folder: FsPath) -> tuple[FsPath, Located] | None:
    """The TrainingWorkload template (`usage: Template`) whose metadata.name is `name`, in a file beside the
    workload or in its templates folder: Run:ai names a base workload by its name, not by a file. Two such
    templates are an error (which one the workload meant cannot be told)."""
    matches: list[tuple[FsPath, Located]] = []
    for where in (folder, folder / "templates"):
        try:
            files = sorted(p for p in where.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        except OSError:
            continue
        for path in files:
            try:
                text = read_text(path)
                if "TrainingWorkload" not in text or name not in text:
                    continue  # most files: not read as YAML at all
                docs = parse_yaml(text, str(path))
            except SpecError:
                continue  # a broken file beside the workload is not its base
            matches += [(path, d) for d in docs if _is_template_named(d.data, name)]
    if len(matches) > 1:
        where_ = ", ".join(str(path) for path, _ in matches)
        raise SpecError(
            [
                FieldError(
                    ("spec", "baseWorkload"),
                    f"several TrainingWorkload templates are named {name!r}: {where_}",
                    hint="rename one, or name the base by its file (baseWorkload: FILE.yaml)",
                )
            ]
        )
    return matches[0] if matches else None


def _is_template_named(data: Any, name: str) -> bool:
    if not isinstance(data, dict) or data.get("kind") != "TrainingWorkload":
        return False
    meta, spec = data.get("metadata"), data.get("spec")
    return (
        isinstance(meta, dict)
        and meta.get("name") == name
        and isinstance(spec, dict)
        and spec.get("usage") == "Template"
    )


__all__ = ["as_written_stand_in", "load_job_documents", "load_job_file", "resolve_base_workload"]
