"""Typos in a foreign document: every key its kind does not know, with a did-you-mean from the kind's own
fields and the key's source line, before anything is converted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..jobspec.errors import FieldError, Path, did_you_mean
from ..jobspec.yaml_source import Located
from .template_split import pod_template_fields
from .walker import ANY_KEY, FieldTree

_MISSING = object()


def unknown_fields(doc: Any, tree: FieldTree, *, lines: Located | None = None, kind: str = "") -> list[FieldError]:
    """Every key of `doc` that `tree` does not know, each with a did-you-mean from the kind's own fields and its
    source line: a typo in a DeepSpeedJob is answered with DeepSpeedJob's names, not TrainJob's."""
    errors: list[FieldError] = []
    _check(doc, tree, (), errors, kind)
    if lines is None:
        return errors
    return [e.located(*lines.line_of(e.path)) for e in errors]


def _check(node: Any, tree: FieldTree, path: Path, errors: list[FieldError], kind: str) -> None:
    if tree is None:
        if not _is_pod_template(node, path):
            return
        tree = pod_template_fields()
        if tree is None:
            return
    if isinstance(node, list):
        for i, item in enumerate(node):
            _check(item, tree, (*path, i), errors, kind)
        return
    if not isinstance(node, Mapping):
        return
    free = tree.get(ANY_KEY, _MISSING)
    for key, value in node.items():
        key = str(key)
        if key in tree:
            _check(value, tree[key], (*path, key), errors, kind)
        elif free is not _MISSING:
            _check(value, free, (*path, key), errors, kind)  # type: ignore[arg-type]
        else:
            known = [name for name in tree if name != ANY_KEY]
            guess = did_you_mean(key, known)
            where = f"a {kind}" if kind else "this object"
            hint = f"did you mean {guess!r}?" if guess else f"{where} takes: {', '.join(sorted(known))}"
            errors.append(FieldError((*path, key), f"is not a field of {where}", hint=hint))


def _is_pod_template(node: Any, path: Path) -> bool:
    """An unchecked `template` shaped as a PodTemplateSpec (metadata and a spec with containers): the pod template
    of a Kubeflow replica spec, a Volcano task, a JobSet's Job. Its typos are checked here, against the API's own
    fields, because once converted the pod template only meets the TrainJob model, whose error would name the
    TrainJob's path, not the line the user wrote."""
    if not path or path[-1] != "template" or not isinstance(node, Mapping) or not set(node) <= {"metadata", "spec"}:
        return False
    spec = node.get("spec")
    return isinstance(spec, Mapping) and "containers" in spec




__all__ = ["unknown_fields"]
