"""`podTemplate` (job level and per role): a Kubernetes PodTemplateSpec that kubetrain renders on top of.

The escape hatch for what the job model does not type: imagePullSecrets, sidecars, init containers, volume
types kubetrain does not model, probes, hostAliases... and the way pod templates of other kinds
(DeepSpeedJob's `worker.template`, a Kubeflow job's `replicaSpecs.*.template`) reach a TrainJob.

This module is pure data: the shape check run when a job is loaded (field-pathed, with did-you-means),
which container of a template is the MAIN one (the one kubetrain's container is merged into), what the
main container gives the job where it sets nothing itself (command, args, env, workingDir, image), and the
security relaxations a template asks for. The merge itself is the render's
(`backends/kubernetes/manifests/pod_template_merge.py`); what the PodSpec's other fields may hold is checked
where manifests are checked (the API server, and the tests' schema validation).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

from ..contract.frameworks import RECORDS
from ..contract.labels import RESERVED_LABELS
from ..contract.naming import is_env_name, is_label_key, is_label_value
from .errors import FieldError, Path, SpecError, did_you_mean
from .kube_models import _convert, kube_to_dict, model_class, to_kube_model
from .program import Run
from .relaxations import template_relaxations
from .types import KubeType, source_text

if TYPE_CHECKING:
    from .replica_settings import ReplicaSettings

TEMPLATE_KEYS = ("metadata", "spec")
"""A PodTemplateSpec's fields."""
METADATA_KEYS = ("labels", "annotations")
"""What kubetrain takes of a template's metadata: it names and owns the pods itself."""

MAIN_CONTAINER_NAMES = (
    "main", *dict.fromkeys(record.kubeflow.container for record in RECORDS.values() if record.kubeflow is not None)
)
"""The names kubetrain gives its container: `main`, or the training operator's name for the framework
(the kubeflow flavor). The template container with one of these names is the main one, else its first
container: the same container on every backend, whatever the flavor."""

_WRAP_HINT = "podTemplate is a PodTemplateSpec: put pod spec fields under `spec:`, e.g. podTemplate: {spec: {%s: ...}}"


# -- shape ---------------------------------------------------------------------------------------------------


def check_pod_template(value: Any) -> Any:
    """The shape check of a podTemplate (pydantic BeforeValidator): a client model becomes its API dict;
    errors carry paths relative to the field (the loader prefixes them and adds file:line)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) and hasattr(value, "attribute_map"):
        if type(value).__name__ != "V1PodTemplateSpec":
            raise SpecError.single(
                (),
                f"must be a PodTemplateSpec, not a {type(value).__name__}",
                hint="wrap a V1PodSpec: V1PodTemplateSpec(spec=...)",
            )
        value = kube_to_dict(value)
    if not isinstance(value, Mapping):
        raise SpecError.single(
            (), "must be a PodTemplateSpec mapping {metadata: ..., spec: ...}", value=value, has_value=True
        )
    errors: list[FieldError] = []
    pod_spec_keys = set(_attribute_keys("V1PodSpec"))
    for key in value:
        if key in TEMPLATE_KEYS:
            continue
        if key in pod_spec_keys:
            errors.append(
                FieldError((str(key),), "is a pod spec field, not a PodTemplateSpec field", hint=_WRAP_HINT % key)
            )
        else:
            guess = did_you_mean(str(key), TEMPLATE_KEYS)
            errors.append(
                FieldError(
                    (str(key),),
                    "unknown field for a PodTemplateSpec",
                    hint=f"did you mean '{guess}'?" if guess else "its fields: metadata, spec",
                )
            )
    if errors:
        raise SpecError(errors)
    metadata = value.get("metadata")
    if metadata is not None:
        _check_metadata(metadata, errors)
    spec = value.get("spec")
    if spec is not None:
        _check_spec(spec, ("spec",), errors)
    if errors:
        raise SpecError(errors)
    return _plain(value)


def _check_metadata(metadata: Any, errors: list[FieldError]) -> None:
    if not isinstance(metadata, Mapping):
        errors.append(FieldError(("metadata",), "must be a mapping {labels: ..., annotations: ...}", metadata, True))
        return
    for key, item in metadata.items():
        path: Path = ("metadata", str(key))
        if key not in METADATA_KEYS:
            guess = did_you_mean(str(key), METADATA_KEYS)
            errors.append(
                FieldError(
                    path,
                    "is not taken from a pod template: kubetrain names and owns the pods",
                    hint=f"did you mean '{guess}'?" if guess else "only labels and annotations",
                )
            )
            continue
        if item is None:
            continue
        if not isinstance(item, Mapping):
            errors.append(FieldError(path, "must be a mapping of text", item, True))
            continue
        for name, text in item.items():
            if not isinstance(name, str) or not is_label_key(name):
                errors.append(
                    FieldError(
                        (*path, str(name)), f"is not a valid {key[:-1]} key", hint="[prefix/]name, name ≤ 63 chars"
                    )
                )
            elif not isinstance(text, str):
                errors.append(FieldError((*path, name), "must be text; quote it", text, True))
            elif key == "labels" and not is_label_value(text):
                errors.append(
                    FieldError(
                        (*path, name),
                        "is not a valid label value",
                        text,
                        True,
                        hint="≤ 63 alphanumerics, '-', '_', '.', starting and ending alphanumeric",
                    )
                )
        errors.extend(reserved_key_errors(item, path))


def reserved_key_errors(given: Mapping[str, Any], path: Path) -> list[FieldError]:
    """kubetrain's own keys (`contract.labels.RESERVED_LABELS`: managed-by and the job, role and replica
    index that select and order a job's pods) in `given`, labels or annotations at `path`. The render
    refuses them in `metadata.labels` and `labels` with the same message; a template's metadata merges under
    kubetrain's, so a label given there would be silently replaced, and an annotation would be read as the
    pod's replica index by the resolver and the status (`contract.labels.INDEX_KEYS`)."""
    return [
        FieldError(
            (*path, key),
            "is set by kubetrain and cannot be given",
            hint="kubetrain selects and orders the job's pods by its own keys; use a key of your own",
        )
        for key in RESERVED_LABELS
        if key in given
    ]


def _check_spec(spec: Any, path: Path, errors: list[FieldError]) -> None:
    """Unknown pod spec fields (did-you-mean), and the types of the fields kubetrain merges."""
    if not isinstance(spec, Mapping):
        errors.append(FieldError(path, "must be a mapping (a PodSpec)", spec, True))
        return
    known = _attribute_keys("V1PodSpec")
    for key in spec:
        if key not in known:
            guess = did_you_mean(str(key), known)
            errors.append(
                FieldError(
                    (*path, str(key)), "unknown field for a PodSpec", hint=f"did you mean '{guess}'?" if guess else None
                )
            )
    names: dict[str, Path] = {}
    for list_key in ("initContainers", "containers"):
        items = spec.get(list_key)
        if items is None:
            continue
        if not isinstance(items, list):
            errors.append(FieldError((*path, list_key), "must be a list of containers", items, True))
            continue
        for i, container in enumerate(items):
            where: Path = (*path, list_key, i)
            _check_container(container, where, errors)
            name = container.get("name") if isinstance(container, Mapping) else None
            if isinstance(name, str):
                if name in names:
                    errors.append(
                        FieldError(
                            (*where, "name"), f"is used twice in the pod (also at {_show(names[name])})", name, True
                        )
                    )
                names[name] = where
    for key, type_name in _MERGED_POD_FIELDS.items():
        if spec.get(key) is not None:
            _check_model(type_name, spec[key], (*path, key), errors)
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        _check_unique(volumes, "name", (*path, "volumes"), errors)


_MERGED_POD_FIELDS = {
    "volumes": "list[V1Volume]",
    "tolerations": "list[V1Toleration]",
    "imagePullSecrets": "list[V1LocalObjectReference]",
    "nodeSelector": "dict(str, str)",
    "affinity": "V1Affinity",
    "securityContext": "V1PodSecurityContext",
    "hostNetwork": "bool",
    "hostPID": "bool",
    "hostIPC": "bool",
    "automountServiceAccountToken": "bool",
    "serviceAccountName": "str",
    "priorityClassName": "str",
    "schedulerName": "str",
    "dnsPolicy": "str",
}
"""Pod spec fields kubetrain sets too, so merges with a template's: their types are checked at load."""


def _check_container(container: Any, path: Path, errors: list[FieldError]) -> None:
    if not isinstance(container, Mapping):
        errors.append(FieldError(path, "must be a mapping (a Container)", container, True))
        return
    name = container.get("name")
    if name is None or name == "":
        errors.append(FieldError((*path, "name"), "is required (containers merge by name)"))
    elif not isinstance(name, str):
        errors.append(FieldError((*path, "name"), "must be text", name, True))
    for key in ("command", "args"):
        items = container.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            errors.append(FieldError((*path, key), "must be a list of text", items, True))
            continue
        for i, item in enumerate(items):
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                errors.append(FieldError((*path, key, i), "must be text; quote it", item, True))
    resources = container.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        errors.append(
            FieldError((*path, "resources"), "must be a mapping {requests: ..., limits: ...}", resources, True)
        )
    # The rest through the client model, for types and did-you-means; `resources` apart, as the client's
    # quantities are text only while the API also takes numbers (`cpu: 2`).
    rest = {k: v for k, v in container.items() if k not in ("name", "command", "args", "resources")}
    rest["name"] = "checked-above"
    _check_model("V1Container", rest, path, errors)
    env = container.get("env")
    if isinstance(env, list):
        for i, var in enumerate(env):
            name = var.get("name") if isinstance(var, Mapping) else None
            if isinstance(name, str) and not is_env_name(name):
                errors.append(
                    FieldError(
                        (*path, "env", i, "name"),
                        "is not a valid environment variable name",
                        name,
                        True,
                        hint="letters, digits, '_', '-', '.'; not starting with a digit",
                    )
                )
    for key, unique in (("ports", "containerPort"), ("volumeMounts", "mountPath"), ("env", "name")):
        items = container.get(key)
        if isinstance(items, list):
            _check_unique(items, unique, (*path, key), errors)


def _check_model(type_name: str, value: Any, path: Path, errors: list[FieldError]) -> None:
    # Conversion only as a check: the template stays plain data, exactly as written.
    _convert(type_name, value, path, errors)


def _check_unique(items: list[Any], key: str, path: Path, errors: list[FieldError]) -> None:
    seen: set[Any] = set()
    for i, item in enumerate(items):
        value = item.get(key) if isinstance(item, Mapping) else None
        if value is None:
            continue
        if value in seen:
            errors.append(FieldError((*path, i, key), f"is given twice ({key} is what items merge by)", value, True))
        seen.add(value)


def _attribute_keys(type_name: str) -> list[str]:
    attribute_map: dict[str, str] = model_class(type_name).attribute_map  # type: ignore[attr-defined]
    return list(attribute_map.values())


def _plain(value: Any) -> Any:
    """A deep copy with plain scalars: YAML numbers and text remember their source, manifests must not."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return copy.deepcopy(value)


def _show(path: Path) -> str:
    from .errors import format_path

    return format_path(path)


PodTemplate = Annotated[
    Any,
    BeforeValidator(check_pod_template),
    PlainSerializer(lambda value: value, when_used="always"),
    KubeType("V1PodTemplateSpec"),
]
"""A Kubernetes PodTemplateSpec as plain data (camelCase, as the API writes it), or a V1PodTemplateSpec."""


# -- the main container ------------------------------------------------------------------------------------


def main_container_index(template: Mapping[str, Any] | None) -> int | None:
    """Index of the template's main container: the one named as kubetrain names its container
    (`MAIN_CONTAINER_NAMES`), else the first; None when the template has no container."""
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    for i, container in enumerate(containers):
        if container.get("name") in MAIN_CONTAINER_NAMES:
            return i
    return 0 if containers else None


def main_container(template: Mapping[str, Any] | None) -> dict[str, Any] | None:
    index = main_container_index(template)
    if index is None:
        return None
    container: dict[str, Any] = (template or {})["spec"]["containers"][index]
    return container


def template_program(template: Mapping[str, Any] | None) -> list[str] | None:
    """The main container's command and args, the program a replica runs when the job has no `run`; None
    when it gives no command (args alone run the image's entrypoint, which kubetrain cannot know)."""
    container = main_container(template)
    if container is None or not container.get("command"):
        return None
    return [source_text(a) for a in [*container["command"], *(container.get("args") or [])]]


def has_args_only(template: Mapping[str, Any] | None) -> bool:
    container = main_container(template)
    return container is not None and not container.get("command") and bool(container.get("args"))


def template_working_dir(template: Mapping[str, Any] | None) -> str | None:
    """The main container's workingDir, if it gives one."""
    container = main_container(template)
    value = container.get("workingDir") if container is not None else None
    return value if isinstance(value, str) else None


def with_template_defaults(settings: ReplicaSettings) -> ReplicaSettings:
    """`settings` completed from its podTemplate's main container where the job sets nothing: run (command
    and args, as `run.exec`), image, workingDir; the container's env goes under the job's (merged by name,
    the job's wins; the template's first, so the job's may refer to them). Every backend plans from this."""
    template = settings.pod_template
    container = main_container(template)
    if container is None:
        return settings
    update: dict[str, Any] = {}
    program = template_program(template)
    if settings.run is None and program is not None:
        update["run"] = _exec_run(program)
    if settings.image is None and isinstance(container.get("image"), str):
        update["image"] = container["image"]
    if settings.working_dir is None and template_working_dir(template) is not None:
        update["working_dir"] = template_working_dir(template)
    if container.get("env"):
        own = list(settings.env or [])
        names = {var.name for var in own}
        inherited = [var for var in to_kube_model("list[V1EnvVar]", container["env"]) if var.name not in names]
        update["env"] = [*inherited, *own]
    if not update:
        return settings
    fields_set = set(settings.model_fields_set) | set(update)
    merged = settings.model_copy(update=update)
    object.__setattr__(merged, "__pydantic_fields_set__", fields_set)
    return merged


def _exec_run(program: list[str]) -> Run:
    return Run(exec=program)


# -- security ------------------------------------------------------------------------------------------------


def relaxations(template: Mapping[str, Any] | None) -> Iterator[tuple[Path, str]]:
    """(path in the template, what it allows and why that matters) for each setting that loosens kubetrain's
    security defaults: the one list of `jobspec.relaxations`, read from a PodTemplateSpec."""
    for found in template_relaxations(template):
        yield found.path, found.what


__all__ = [
    "MAIN_CONTAINER_NAMES",
    "PodTemplate",
    "check_pod_template",
    "has_args_only",
    "main_container",
    "main_container_index",
    "relaxations",
    "reserved_key_errors",
    "template_program",
    "template_working_dir",
    "with_template_defaults",
]
