"""Whatever goes in, only two things come out: a valid TrainJob or a SpecError a person can read.

Random data (biased towards the model's own field names, so it gets past the first level), random YAML
text, and mutations of the example documents are fed to `from_dict` and `load_text`. Any other exception
fails the test: that is a traceback a user would see.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubetrain.jobspec import SpecError, TrainJob, from_dict, load_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_TEXTS = {p.parent: p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.glob("*/job.yaml"))}
EXAMPLE_DOCS = [(folder, yaml.safe_load(text)) for folder, text in EXAMPLE_TEXTS.items()]

CONTRACT: dict[str, Any] = {
    "apiVersion": "kubetrain.dev/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "demo"},
    "spec": {"framework": "pytorch", "run": {"python": ["train.py", "--steps", "20"]}, "replicas": 2},
}

# Field names of the model and of the client models it holds, plus values that mean something to it:
# random documents built from these reach deep validators instead of stopping at "unknown field".
KEYS = [
    "apiVersion", "kind", "metadata", "spec", "name", "namePrefix", "generateName", "namespace", "labels",
    "annotations", "framework", "base", "replicas", "roles", "run", "python", "module", "exec", "customCommand",
    "otherArgs", "image", "imagePullPolicy", "workingDir", "procsPerReplica", "resources", "cpu", "cpuLimit",
    "memory", "memoryLimit", "gpu", "gpuLimit", "gpuMemory", "gpuSharing", "migProfile", "extendedResources",
    "shm", "capabilities", "mounts", "type", "src", "dst", "readonly", "subPath", "perm", "server", "path",
    "medium", "sizeLimit", "items", "defaultMode", "bucket", "repository", "env", "envFrom", "value",
    "valueFrom", "fieldRef", "fieldPath", "secretKeyRef", "key", "configMapRef", "prefix", "requests", "limits",
    "nodeSelector", "affinity", "nodeAffinity", "tolerations", "operator", "effect", "tolerationSeconds",
    "ports", "container", "external", "serviceType", "protocol", "security", "runAsUser", "runAsUid",
    "privileged", "seccompProfileType", "seccompLocalhostProfile", "scheduling", "queue", "minAvailable",
    "nodePools", "gang", "runPolicy", "backoffLimit", "activeDeadlineSeconds", "cleanPodPolicy", "suspend",
    "restartPolicy", "exitCodes", "retryable", "permanent", "runMode", "elastic", "minReplicas", "maxReplicas",
    "expectedReplicas", "maxRestarts", "worker", "master", "chief", "ps", "launcher", "evaluator", "localRank",
    "serviceAccount", "tty", "stdin"
]
WORDS = [
    "pytorch", "tensorflow", "deepspeed", "mpi", "jax", "generic", "demo", "worker", "ps", "chief", "launcher",
    "master", "bind", "volume", "device", "nfs", "emptyDir", "configMap", "secret", "s3", "gitSync", "/data",
    "/dev/fuse", "data", "500m", "2", "16Gi", "1g.5gb", "hami", "runai", "All", "Never", "ExitCode",
    "OnFailure", "Immediate", "Debug", "Pause", "Localhost", "RuntimeDefault", "Exists", "NoSchedule", "TCP",
    "ClusterIP", "auto", "train.py", "--steps", "type=bind,src=/a,dst=/b", "type=device,src=/dev/fuse",
    "status.podIP", "kubetrain.dev/v1alpha1", "TrainJob"
]

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
KEY = st.one_of(st.sampled_from(KEYS), st.sampled_from(KEYS), st.text(min_size=1, max_size=8))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEY, inner, max_size=5)),
    max_leaves=25,
)


def outcome(load: Callable[[], TrainJob]) -> TrainJob | SpecError:
    """Run `load`; a TrainJob or a well-formed SpecError passes, anything else propagates and fails."""
    try:
        job = load()
    except SpecError as exc:
        assert exc.errors, "a SpecError without errors"
        for error in exc.errors:
            assert error.message.strip(), f"an error without a message at {error.path}"
            assert isinstance(error.path, tuple)
            # pydantic's own report (of a client model) is not something a user can act on
            assert "validation error for" not in error.message, str(error)
            assert "errors.pydantic.dev" not in error.message, str(error)
        shown = str(exc)
        assert shown and "Traceback" not in shown
        assert exc.paths
        return exc
    assert isinstance(job, TrainJob)
    job.to_dict()  # a valid job can always be written back out
    return job


PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.dictionaries(KEY, VALUES, max_size=6))
def test_random_documents(data: dict[str, Any]) -> None:
    outcome(lambda: from_dict(data))


@PROPERTY
@given(
    metadata=st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["demo", "Demo", "a-b"])}), VALUES),
    spec=st.dictionaries(KEY, VALUES, max_size=8),
)
# Inputs that once escaped as other exceptions or as pydantic's raw report:
@example(metadata={"name": "demo"}, spec={"run": {"python": ["a.py"]}, "env": [None]})
@example(metadata={"name": "demo"}, spec={"run": {"python": ["a.py"]}, "resources": {"gpu": math.inf}})
@example(metadata={"name": "demo"}, spec={"run": {"python": ["a.py"]}, "resources": {"cpu": math.nan}})
@example(metadata={"name": "demo"}, spec={"run": {"python": ["a.py"]}, "env": [{"value": "x"}]})
@example(metadata={"name": "demo"}, spec={"run": {"python": ["a.py"]}, "affinity": {"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [None]}}}})
def test_random_specs(metadata: Any, spec: dict[str, Any]) -> None:
    outcome(lambda: from_dict({"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": metadata,
                               "spec": spec}))


@PROPERTY
@given(VALUES)
def test_random_yaml_of_any_shape(value: Any) -> None:
    text = yaml.safe_dump(value, allow_unicode=True)
    outcome(lambda: load_text(text))


YAML_CHARS = st.sampled_from(
    [*"abc:-[]{},#&*!|>'\"%@?\n\t 0123.~", "spec", "metadata", "name: x", "replicas", "<<", "\ufeff", "\x00"]
)


@PROPERTY
@given(st.lists(YAML_CHARS, max_size=40).map("".join))
def test_random_yaml_text(text: str) -> None:
    outcome(lambda: load_text(text))


# -- mutations of real documents -----------------------------------------------------------------------------


def containers(node: Any, out: list[Any] | None = None) -> list[Any]:
    """Every dict and list inside `node`, `node` included."""
    out = [] if out is None else out
    if isinstance(node, dict | list):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            containers(child, out)
    return out


MUTATIONS = st.sampled_from(["drop", "retype", "unknown", "replace", "null", "empty"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    example=st.integers(min_value=0, max_value=len(EXAMPLE_DOCS) - 1),
    picks=st.lists(st.tuples(st.integers(min_value=0), MUTATIONS, VALUES), min_size=1, max_size=3),
)
def test_mutated_examples(example: int, picks: list[tuple[int, str, Any]]) -> None:
    folder, original = EXAMPLE_DOCS[example]
    doc = copy.deepcopy(original)
    for index, kind, value in picks:
        places = containers(doc)
        place = places[index % len(places)]
        keys = list(place) if isinstance(place, dict) else list(range(len(place)))
        if not keys:
            continue
        key = keys[index % len(keys)]
        if kind == "drop":
            del place[key]
        elif kind == "retype":
            place[key] = _other_type(place[key])
        elif kind == "unknown" and isinstance(place, dict):
            place[f"unknownField{index % 7}"] = value
        elif kind == "null":
            place[key] = None
        elif kind == "empty":
            place[key] = type(place[key])() if isinstance(place[key], dict | list | str) else 0
        else:
            place[key] = value
    outcome(lambda: from_dict(doc, base_dir=folder))


def _other_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "true"
    if isinstance(value, int | float):
        return [value] if isinstance(value, int) else str(value)
    if isinstance(value, str):
        return {value: value} if value else 0
    if isinstance(value, list):
        return {"0": value[0]} if value else "[]"
    if isinstance(value, dict):
        return list(value.values())
    return math.inf


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    example=st.sampled_from(sorted(EXAMPLE_TEXTS)),
    position=st.integers(min_value=0),
    cut=st.integers(min_value=0, max_value=12),
    insert=st.lists(YAML_CHARS, max_size=6).map("".join),
)
def test_edited_example_text(example: Path, position: int, cut: int, insert: str) -> None:
    """A typo anywhere in a real file: a deleted run of characters, some inserted."""
    text = EXAMPLE_TEXTS[example]
    at = position % (len(text) + 1)
    edited = text[:at] + insert + text[at + cut:]
    outcome(lambda: load_text(edited, base_dir=example))


@PROPERTY
@given(
    path=st.lists(st.one_of(st.sampled_from(KEYS), st.integers(0, 3).map(lambda i: f"[{i}]")), min_size=1,
                  max_size=4).map(lambda parts: ".".join(parts).replace(".[", "[")),
    value=st.one_of(st.sampled_from(WORDS), st.text(max_size=10), st.sampled_from(["null", "[a, b]", "{a: 1}", "3"])),
)
def test_random_overrides(path: str, value: str) -> None:
    outcome(lambda: from_dict(copy.deepcopy(CONTRACT), overrides=[f"{path}={value}"]))


def test_the_contract_is_valid() -> None:
    assert isinstance(outcome(lambda: from_dict(CONTRACT)), TrainJob)
