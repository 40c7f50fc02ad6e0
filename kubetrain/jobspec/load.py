"""Load a TrainJob from YAML, a file, or plain data: templates (`spec.base`), `--set` overrides, validation.

Every failure is a SpecError listing each problem with its field path, value, hint, and file:line.
"""

from __future__ import annotations

import copy
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path as FsPath
from typing import Any

from pydantic import ValidationError

from ..contract import env_names
from .convert import convert_validation_error
from .errors import FieldError, Path, SpecError, did_you_mean
from .foreign_names import FOREIGN_NAMES, foreign_lookalike, foreign_name_of
from .model import API_VERSION, KIND, TrainJob
from .mounts import parse_mount_string
from .yaml_source import NO_LOCATION, Located, parse_scalar, parse_yaml

TEMPLATES_ENV = env_names.TEMPLATES
_MAX_BASE_DEPTH = 16


def load_file(
    path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    template_dirs: Sequence[str | os.PathLike[str]] = (),
) -> TrainJob:
    """Read one TrainJob from a YAML file."""
    jobs = load_all_files([path], overrides=overrides, template_dirs=template_dirs)
    if len(jobs) != 1:
        raise SpecError([FieldError((), f"expected one TrainJob, found {len(jobs)} documents", file=str(path))])
    return jobs[0]


def load_all_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    overrides: Sequence[str] = (),
    template_dirs: Sequence[str | os.PathLike[str]] = (),
) -> list[TrainJob]:
    """Every TrainJob in the files (several documents per file allowed); all problems reported together."""
    jobs: list[TrainJob] = []
    errors: list[FieldError] = []
    for path in paths:
        try:
            text = read_text(FsPath(path))
        except SpecError as exc:
            errors += exc.errors
            continue
        try:
            docs = parse_yaml(text, source_name(path))
        except SpecError as exc:
            errors += exc.errors
            continue
        if not docs:
            errors.append(FieldError((), "file holds no document", file=source_name(path)))
        for doc in docs:
            try:
                job = _finish(doc, FsPath(path).parent, overrides, template_dirs, (source_name(path),))
                jobs.append(job.with_base_dir(FsPath(path).parent))
            except SpecError as exc:
                errors += exc.errors
    if errors:
        raise SpecError(errors)
    return jobs


def load_document(
    doc: Located,
    base_dir: str | os.PathLike[str],
    *,
    source: str,
    overrides: Sequence[str] = (),
    template_dirs: Sequence[str | os.PathLike[str]] = (),
) -> TrainJob:
    """One parsed document of a job file (`source` names the file) as a TrainJob, errors at its lines: for a
    reader that has parsed the file already (stdin cannot be read twice)."""
    return _finish(doc, FsPath(base_dir), overrides, template_dirs, (source,)).with_base_dir(base_dir)


def load_text(
    text: str,
    *,
    source: str = "<string>",
    base_dir: str | os.PathLike[str] = ".",
    overrides: Sequence[str] = (),
    template_dirs: Sequence[str | os.PathLike[str]] = (),
) -> TrainJob:
    """Read one TrainJob from YAML text; `source` names it in errors, `base_dir` is where its templates and
    relative paths resolve (as a job file's folder does)."""
    docs = parse_yaml(text, source)
    if len(docs) != 1:
        raise SpecError([FieldError((), f"expected one TrainJob, found {len(docs)} documents", file=source)])
    return _finish(docs[0], FsPath(base_dir), overrides, template_dirs, (source,)).with_base_dir(base_dir)


def from_dict(
    data: Mapping[str, Any],
    *,
    overrides: Sequence[str] = (),
    base_dir: str | os.PathLike[str] = ".",
    template_dirs: Sequence[str | os.PathLike[str]] = (),
) -> TrainJob:
    """A TrainJob from plain data (e.g. a parsed document), with the same checks as a file.
    `data` is not modified."""
    if not isinstance(data, Mapping):
        raise SpecError([FieldError((), "a TrainJob must be a mapping (apiVersion, kind, metadata, spec)", data, True)])
    return _finish(
        Located(copy.deepcopy(dict(data)), {(): NO_LOCATION}), FsPath(base_dir), overrides, template_dirs, ()
    )


MAX_FILE_BYTES = 8 << 20
"""Largest job file read (8 MiB; a job spec is a few KiB): `kubetrain validate /dev/zero` must end."""


STDIN = "-"
"""The file name that reads standard input (`cat job.yaml | kubetrain validate -`); its relative paths and
templates resolve against the current folder, the folder a piped file has."""


def source_name(path: str | os.PathLike[str]) -> str:
    """How errors name a job file: `<stdin>` for `-`."""
    return "<stdin>" if str(path) == STDIN else str(path)


def read_text(path: FsPath) -> str:
    try:
        if str(path) == STDIN:
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
            path = FsPath(source_name(path))
        else:
            with path.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise SpecError([FieldError((), f"is too large for a job file (over {MAX_FILE_BYTES >> 20} MiB)",
                                        file=str(path))])
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([FieldError((), f"is not UTF-8 text (byte {exc.start})", file=str(path))]) from None
    except OSError as exc:
        raise SpecError([FieldError((), f"cannot read file: {exc.strerror}", file=str(path))]) from None


def _finish(
    doc: Located,
    base_dir: FsPath,
    overrides: Sequence[str],
    template_dirs: Sequence[str | os.PathLike[str]],
    chain: tuple[str, ...],
) -> TrainJob:
    if not isinstance(doc.data, dict):
        file, line = doc.line_of(())
        raise SpecError(
            [FieldError((), "a TrainJob must be a mapping (apiVersion, kind, metadata, spec)", file=file, line=line)]
        )
    doc = _resolve_base(doc, base_dir, [FsPath(d) for d in template_dirs], chain)
    for i, text in enumerate(overrides):
        apply_override(doc, text, i)
    _desugar_mounts(doc)
    return validate(doc)


def _desugar_mounts(doc: Located) -> None:
    """TorchX-style mount strings → mappings before validation, so errors name the field (`.src`)."""
    spec = doc.data.get("spec")
    if not isinstance(spec, dict):
        return
    holders: list[tuple[Path, Any]] = [(("spec",), spec)]
    roles = spec.get("roles")
    if isinstance(roles, dict):
        holders += [(("spec", "roles", name), role) for name, role in roles.items() if isinstance(role, dict)]
    problems: list[FieldError] = []
    for path, holder in holders:
        mounts = holder.get("mounts")
        if not isinstance(mounts, list):
            continue
        for i, mount in enumerate(mounts):
            if isinstance(mount, str):
                try:
                    mounts[i] = parse_mount_string(mount)
                except SpecError as exc:
                    problems += [
                        _locate(doc, FieldError((*path, "mounts", i, *e.path), e.message, e.value, e.has_value, e.hint))
                        for e in exc.errors
                    ]
    if problems:
        raise SpecError(problems)


# -- templates ---------------------------------------------------------------------------------------


def _resolve_base(doc: Located, base_dir: FsPath, template_dirs: list[FsPath], chain: tuple[str, ...]) -> Located:
    spec = doc.data.get("spec")
    base = spec.get("base") if isinstance(spec, dict) else None
    if base is None:
        return doc
    file, line = doc.line_of(("spec", "base"))
    if not isinstance(base, str) or not base:
        raise SpecError(
            [FieldError(("spec", "base"), "must name a template file or template", base, True, file=file, line=line)]
        )
    path = find_template(base, base_dir, template_dirs)
    if path is None:
        searched = [str(base_dir)] + [str(d) for d in _template_dirs(base_dir, template_dirs)]
        raise SpecError(
            [
                FieldError(
                    ("spec", "base"),
                    f"template {base!r} not found",
                    hint=f"looked for {base!r}, {base}.yaml in: {', '.join(searched)}; "
                    f"set {TEMPLATES_ENV} to add folders",
                    file=file,
                    line=line,
                )
            ]
        )
    key = str(path.resolve())
    if key in chain or len(chain) > _MAX_BASE_DEPTH:
        raise SpecError(
            [
                FieldError(
                    ("spec", "base"), f"templates inherit in a loop: {' → '.join((*chain, key))}", file=file, line=line
                )
            ]
        )
    docs = parse_yaml(read_text(path), str(path))
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        raise SpecError([FieldError((), "a template must be one mapping document", file=str(path))])
    parent = _resolve_base(docs[0], path.parent, template_dirs, (*chain, key))
    parent_meta = parent.data.get("metadata")
    if isinstance(parent_meta, dict):  # a name identifies one job: never inherited
        for field in ("name", "namePrefix", "generateName"):
            parent_meta.pop(field, None)
    where = {**parent.where, **doc.where}
    for own in _paths(doc.data):  # the child's own values are never blamed on the template
        where[own] = doc.where.get(own, NO_LOCATION)
    merged = Located(deep_merge(parent.data, doc.data), where)
    merged.data["spec"].pop("base", None)  # resolved: the loaded job stands on its own
    return merged


def _template_dirs(base_dir: FsPath, extra: list[FsPath]) -> list[FsPath]:
    env = [FsPath(p) for p in os.environ.get(TEMPLATES_ENV, "").split(os.pathsep) if p]
    return [*extra, *env, base_dir / "templates"]


def _paths(data: Any, prefix: Path = ()) -> list[Path]:
    out: list[Path] = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += _paths(value, (*prefix, i))
    return out


def _is_file(path: FsPath) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, say: not a template that exists
        return False


def find_template(name: str, base_dir: FsPath, template_dirs: list[FsPath]) -> FsPath | None:
    """A file path relative to the job file, or a named template `<name>.yaml` in a templates folder."""
    direct = base_dir / name
    if _is_file(direct):
        return direct
    if "/" in name or name.endswith((".yaml", ".yml")):
        return None
    for folder in _template_dirs(base_dir, template_dirs):
        for candidate in (folder / f"{name}.yaml", folder / f"{name}.yml"):
            if _is_file(candidate):
                return candidate
    return None


def deep_merge(base: Any, child: Any) -> Any:
    """Mappings merge recursively and the child wins; lists and scalars are replaced; `null` removes a key."""
    if isinstance(base, dict) and isinstance(child, dict):
        out = dict(base)
        for key, value in child.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = deep_merge(base.get(key), value) if key in base else value
        return out
    return child


# -- --set overrides -----------------------------------------------------------------------------------

_SEGMENT = re.compile(r'"([^"]+)"|([^.\[\]"]+)|\[(\d+)\]')


def parse_override_path(text: str) -> Path:
    """`spec.roles.worker.replicas` / `spec.run.python[1]` / `metadata.labels."kubetrain.dev/x"`."""
    path: list[str | int] = []
    pos = 0
    while pos < len(text):
        if text[pos] == "." and path:
            pos += 1
        m = _SEGMENT.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read the path {text!r} at {text[pos:]!r}")
        path.append(int(m.group(3)) if m.group(3) is not None else (m.group(1) or m.group(2)))
        pos = m.end()
    if not path:
        raise ValueError("empty path")
    return tuple(path)


def apply_override(doc: Located, text: str, index: int = 0) -> None:
    """Apply `path=value` to the document in place (before validation, so the result is checked)."""
    source = f"--set {text}"
    key, eq, raw = text.partition("=")
    if not eq:
        raise SpecError(
            [
                FieldError(
                    (), f"override {text!r} needs the form path=value", hint="e.g. --set spec.replicas=4", file=source
                )
            ]
        )
    try:
        path = parse_override_path(key.strip())
    except ValueError as exc:
        raise SpecError([FieldError((), str(exc), file=source)]) from None
    node: Any = doc.data
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise SpecError([FieldError(path[: i + 1], "no such list item", file=source)])
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise SpecError([FieldError(path[:i], "is not a mapping, cannot set a field in it", file=source)])
        if part not in node:  # made by this --set: an error about it names the --set, not the file
            doc.where[path[: i + 1]] = (source, 0)
        node = node.setdefault(part, [] if isinstance(nxt, int) else {})
    last = path[-1]
    value = parse_scalar(raw)
    if isinstance(last, int):
        if not isinstance(node, list) or last > len(node):
            raise SpecError([FieldError(path, "no such list item", file=source)])
        if last == len(node):
            node.append(value)
        else:
            node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise SpecError([FieldError(path[:-1], "is not a mapping, cannot set a field in it", file=source)])
    doc.where[path] = (source, 0)


# -- validation ----------------------------------------------------------------------------------------


def validate(doc: Located) -> TrainJob:
    data = doc.data
    foreign = _foreign_problem(data)
    if foreign is not None:  # one line that says what the file is, not a did-you-mean per field
        raise SpecError([_locate(doc, foreign)])
    problems = _header_problems(data)
    if problems:
        raise SpecError([_locate(doc, p) for p in problems])
    try:
        return TrainJob.model_validate(data)
    except ValidationError as exc:
        located = [_locate(doc, p) for p in convert_validation_error(exc, data, TrainJob)]
        raise SpecError(sorted(located, key=lambda e: (e.file or "", e.line or 0))) from None


def _foreign_problem(data: dict[str, Any]) -> FieldError | None:
    """A DeepSpeedJob, TrainingWorkload, Kubeflow job, ... fed as a TrainJob: by its apiVersion/kind, or (with
    a TrainJob's header or none) by the fields only that kind has."""
    name = foreign_name_of(data)
    if name is not None:
        return FieldError(
            ("kind",),
            f"this is a {name.kind} ({data.get('apiVersion')}), not a TrainJob: run it as is "
            "(`kubetrain run|validate|render FILE`), or `kubetrain convert FILE` for its TrainJob",
        )
    if data.get("kind") not in (None, KIND) or data.get("apiVersion") not in (None, API_VERSION):
        return None
    lookalike = foreign_lookalike(data)
    if lookalike is None:
        return None
    kind, fields = lookalike
    shown = ", ".join(f"spec.{f}" for f in fields)
    return FieldError(
        ("spec", fields[0]),
        f"this looks like a {kind.kind} ({shown} are {kind.kind} fields), not a TrainJob",
        hint=f"fix the header first: write apiVersion: {kind.api_versions[0]} and kind: {kind.kind}; then kubetrain "
        "runs it as is, and `kubetrain convert FILE` prints its TrainJob",
    )


def _header_problems(data: dict[str, Any]) -> list[FieldError]:
    api, kind = data.get("apiVersion"), data.get("kind")
    if api in (None, API_VERSION) and kind in (None, KIND):
        return []
    if api in (None, API_VERSION):  # kubetrain's apiVersion, another kind: most likely a typo of TrainJob
        guess = did_you_mean(str(kind), [KIND])
        hint = f"did you mean {guess!r}?" if guess else _KINDS_READ
        return [FieldError(("kind",), "must be TrainJob", kind, True, hint=hint)]
    if kind in (None, KIND):  # another system's TrainJob (Kubeflow Trainer's), or a typo in kubetrain's apiVersion
        what = f": {api} {kind} is not a kind kubetrain reads" if kind else ""
        return [FieldError(("apiVersion",), f"must be {API_VERSION}{what}", api, True, hint=_KINDS_READ)]
    # another system's object (a Deployment, a kind kubetrain does not read): say what kubetrain reads
    names = {n.kind: n for n in FOREIGN_NAMES}
    guess = did_you_mean(str(kind), names)
    hint = _KINDS_READ
    if guess is not None and guess != kind:
        hint = f"did you mean kind: {guess} ({names[guess].api_versions[0]})? {hint}"
    return [FieldError(("kind",), f"not a kind kubetrain reads: {api} {kind}", hint=hint)]


_KINDS_READ = f"kubetrain reads {KIND} ({API_VERSION}) and: " + ", ".join(
    f"{n.kind} ({'|'.join(n.api_versions)})" for n in FOREIGN_NAMES
)


def _locate(doc: Located, error: FieldError) -> FieldError:
    if error.file:
        return error
    file, line = doc.line_of(error.path)
    return error.located(file, line or None)
