"""Schema validation of rendered Kubernetes manifests, for tests.

Core objects (Job, Service, ConfigMap, ...) are checked against the OpenAPI-derived JSON schemas that
``kubernetes-validate`` ships for one pinned Kubernetes minor, in their ``-strict`` form so that an
unknown field is an error. Custom resources (JobSet, Volcano Job, PyTorchJob, ...) are checked
against the ``openAPIV3Schema`` of the upstream CRDs that ship with the API emulator
(``testing/kube-emulator/kube_emulator/crds/``).

``kubernetes_validate.validate()`` is not used: it re-reads the schema files on every call and stops
at the first error. Here one validator per (apiVersion, kind) is built once and cached, and every
error is reported.

Schemas check structure only: they accept negative replica counts, unknown enum values in most core
fields, and names that the API server would refuse. The renderers' own semantic checks stay
necessary; this module only catches what the API server would reject (or silently drop) for shape.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from kube_emulator.resources import DEFAULT_CRD_DIR
from referencing import Registry, Resource

__all__ = ["CRD_DIR", "KUBERNETES_MINOR", "TEST_CRD_DIR", "assert_valid", "known_kinds", "validate_manifest"]

# The newest minor shipped by kubernetes-validate 1.37.0. Pinned rather than "latest" so that a
# kubernetes-validate upgrade cannot change what the tests accept without a visible diff here.
KUBERNETES_MINOR = "1.37"

CRD_DIR = DEFAULT_CRD_DIR
TEST_CRD_DIR = Path(__file__).resolve().parent.parent / "data" / "crds"
"""CRDs of kinds kubetrain only reads or submits as written (XGBoostJob, PaddleJob, MPIJob v2beta1, DeepSpeedJob,
TrainingWorkload): checked the same way."""

# `$id` of kubernetes-validate's shared definitions file; the per-kind schemas refer to it as
# "/api/_definitions.json#/$defs/...", which resolves against their own https://kubernetes.io/api/... ids.
_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META_REF = f"{_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# A message quoting a whole PodSpec helps nobody; the JSON path already says where the problem is.
_MAX_MESSAGE = 400


# --------------------------------------------------------------------------------------------------
# Core objects (kubernetes-validate)


@functools.cache
def _core_schema_dir() -> Path:
    root = Path(str(resources.files("kubernetes_validate"))) / "kubernetes-json-schema"
    candidates = sorted(root.glob(f"v{KUBERNETES_MINOR}.*-local-strict"))
    if not candidates:
        installed = sorted(p.name for p in root.glob("v*-local-strict"))
        raise RuntimeError(
            f"kubernetes-validate has no strict schemas for Kubernetes {KUBERNETES_MINOR} "
            f"(installed: {', '.join(installed) or 'none'}); update KUBERNETES_MINOR or the package"
        )
    return candidates[-1]


def _load_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


@functools.cache
def _registry() -> Registry[Any]:
    """The shared core definitions, parsed once: every validator (core and CRD) resolves into them."""
    definitions = Resource.from_contents(_load_json(_core_schema_dir() / "_definitions.json"))
    return definitions @ Registry()


def _core_schema_file(api_version: str, kind: str) -> Path:
    # kubernetes-validate's file naming: "<kind>-<first label of group>-<version>.json", or
    # "<kind>-<version>.json" for the core group ("rbac.authorization.k8s.io/v1" -> "rbac-v1").
    group, _, version = api_version.rpartition("/")
    stem = f"{kind.lower()}-{group.split('.')[0]}-{version}" if group else f"{kind.lower()}-{version}"
    return _core_schema_dir() / f"{stem}.json"


def _core_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    path = _core_schema_file(api_version, kind)
    if not path.is_file():
        return None
    schema: dict[str, Any] = _load_json(path)
    # The file name only encodes the first label of the group, so e.g. "batch.example.com/v1" Job
    # would land on batch/v1 Job. The schema's declared group-version-kind settles it.
    group, _, version = api_version.rpartition("/")
    declared = schema.get("x-kubernetes-group-version-kind", [])
    if {"group": group, "version": version, "kind": kind} not in declared:
        return None
    return schema


# --------------------------------------------------------------------------------------------------
# Custom resources (upstream CRDs)


def _list_map_keys(
    validator: Validator, keys: list[str], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """`x-kubernetes-list-type: map`: the API server rejects two items with the same key fields."""
    if not validator.is_type(instance, "array"):
        return
    seen: dict[str, int] = {}
    for index, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        values = {key: item.get(key) for key in keys}
        marker = json.dumps(values, sort_keys=True, default=str)
        if marker in seen:
            yield ValidationError(
                f"duplicate entry for key {values} (same as item {seen[marker]})", path=[index]
            )
        else:
            seen[marker] = index


# Draft 2020-12 plus the one list-type rule that matters for CRDs. Core objects use plain Draft
# 2020-12: their handwritten API validation, not the list-type marker, decides on duplicates
# (duplicate env names, for instance, are only a warning there).
_CrdValidator = validators.extend(Draft202012Validator, {"x-kubernetes-list-map-keys": _list_map_keys})


def _convert(node: Any, *, structural: bool) -> Any:
    """One node of a CRD's structural OpenAPI v3 schema → an equivalent, stricter JSON Schema.

    ``structural`` is False below anyOf/allOf/oneOf/not: those branches only add value checks on a
    structure declared elsewhere, so closing their objects would reject legitimate fields.
    """
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(sub, structural=structural) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, structural=structural)
        elif key == "not":
            out[key] = _convert(value, structural=False)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_convert(sub, structural=False) for sub in value]
        elif key in ("x-kubernetes-validations", "description", "nullable"):
            # CEL rules need a CEL engine; descriptions only weigh on memory.
            continue
        else:
            out[key] = value

    if node.get("x-kubernetes-int-or-string"):
        # The CRD leaves `type` unset here and repeats it as anyOf integer|string, which would report
        # each bad value twice; a pattern, if any, still applies to the string form.
        out["type"] = ["integer", "string"]
        if out.get("anyOf") == [{"type": "integer"}, {"type": "string"}]:
            del out["anyOf"]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True

    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if node.get("x-kubernetes-embedded-resource"):
        # An embedded object gets apiVersion/kind/metadata even when the schema does not list them.
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        if not props.get("metadata", {}).get("properties"):
            props["metadata"] = {"$ref": _OBJECT_META_REF}

    is_object = "properties" in out or out.get("type") == "object"
    if structural and is_object and not preserve and "additionalProperties" not in out:
        # The API server prunes fields its schema does not declare (an object with no declared
        # properties loses all of them): the object is created, the setting is silently gone.
        # Here that is an error, so a typo in a renderer fails a test instead of a training run.
        out["additionalProperties"] = False

    if node.get("nullable"):
        return {"anyOf": [{"type": "null"}, out]}
    return out


def _crd_to_jsonschema(open_api_v3: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = _convert(copy.deepcopy(open_api_v3), structural=True)
    # Root metadata is always ObjectMeta, whatever the CRD says (usually just `type: object`).
    schema.setdefault("properties", {})["metadata"] = {"$ref": _OBJECT_META_REF}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


@functools.cache
def _crd_index() -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, version, kind) → that served version's openAPIV3Schema, from every CRD file."""
    index: dict[tuple[str, str, str], dict[str, Any]] = {}
    origin: dict[tuple[str, str, str], str] = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader parses ~5 MB in 0.25 s
    for path in [*sorted(CRD_DIR.glob("*.yaml")), *sorted(TEST_CRD_DIR.glob("*.yaml"))]:
        with path.open(encoding="utf-8") as f:
            documents = [d for d in yaml.load_all(f, Loader=loader) if d]
        for crd in documents:
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                if not version.get("served", True):
                    continue
                key = (group, version["name"], kind)
                if key in origin:
                    # e.g. two copies of mpijobs.kubeflow.org serving the same version.
                    raise RuntimeError(f"{group}/{version['name']} {kind} is defined by both "
                                       f"{origin[key]} and {path.name}")
                index[key] = version["schema"]["openAPIV3Schema"]
                origin[key] = path.name
    return index


# --------------------------------------------------------------------------------------------------
# Public API


@functools.cache
def _validator(api_version: str, kind: str) -> Validator | None:
    """One validator per (apiVersion, kind), built on first use and kept for the whole test run."""
    group, _, version = api_version.rpartition("/")
    crd_schema = _crd_index().get((group, version, kind))
    if crd_schema is not None:
        return _CrdValidator(_crd_to_jsonschema(crd_schema), registry=_registry())
    core = _core_schema(api_version, kind)
    if core is not None:
        return Draft202012Validator(core, registry=_registry())
    return None


def known_kinds() -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs of the custom resources loaded from ``CRD_DIR``."""
    return sorted((f"{g}/{v}", k) for g, v, k in _crd_index())


def _describe(error: ValidationError) -> str:
    message = error.message
    if error.context:
        # anyOf/oneOf failures say only "not valid under any of the given schemas"; the closest
        # branch says why.
        message += f" (closest: {best_match(error.context).message})"
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 1] + "…"
    return f"{error.json_path}: {message}"


def validate_manifest(obj: dict[str, Any]) -> list[str]:
    """Every schema error of one manifest, as ``"<Kind>/<name>: <json path>: <message>"``.

    The schema is chosen by apiVersion and kind; a pair with no schema is an error, never a pass.
    """
    if not isinstance(obj, dict):
        # Client models (V1Job, ...) use snake_case attributes and would validate wrongly or not at
        # all; the renderers hand dicts to the API, so dicts are what is checked.
        return [f"?/?: $: expected a manifest dict, got {type(obj).__name__}"]
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    metadata = obj.get("metadata")
    name: Any = None
    if isinstance(metadata, dict):
        name = metadata.get("name") or (
            f"{metadata['generateName']}*" if isinstance(metadata.get("generateName"), str) else None
        )
    prefix = f"{kind or '?'}/{name or '?'}"

    if not isinstance(kind, str) or not kind or not isinstance(api_version, str) or not api_version:
        return [f"{prefix}: $: apiVersion and kind must both be non-empty strings "
                f"(got apiVersion={api_version!r}, kind={kind!r})"]
    validator = _validator(api_version, kind)
    if validator is None:
        return [f"{prefix}: $: no schema for apiVersion={api_version!r} kind={kind!r} "
                f"(not a Kubernetes {KUBERNETES_MINOR} kind nor a CRD under {CRD_DIR.name}/)"]

    errors = sorted(validator.iter_errors(obj), key=lambda e: (e.json_path, e.message))
    found = [f"{prefix}: {_describe(e)}" for e in errors]
    if name is None:
        # The schemas leave metadata optional; the API server does not.
        found.append(f"{prefix}: $.metadata: metadata.name (or generateName) is required")
    return found


def assert_valid(objs: Iterable[dict[str, Any]]) -> None:
    """Raise AssertionError listing every schema error of every manifest, if there is any."""
    errors = [error for obj in objs for error in validate_manifest(obj)]
    if errors:
        raise AssertionError(f"{len(errors)} manifest schema error(s):\n  " + "\n  ".join(errors))
