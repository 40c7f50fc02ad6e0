"""The parity tests' oracle: what each backend makes of a job (`observe`: its refusals, warnings and what
would run, as `kubetrain validate` reports it), whether that is what a row of the table says (`discrepancies`,
which reads refusals' and warnings' text), and the fields of the JSON Schema the table must cover
(`schema_fields`). Test support only: the table (`kubetrain.parity`) is data the code reads; this holds it to
the code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubetrain.backends.base import Verdict
from kubetrain.backends.kubernetes.options import KubernetesOptions
from kubetrain.backends.local.options import LocalOptions
from kubetrain.jobspec import ReplicaSettings, TrainJob
from kubetrain.parity import APPROXIMATED, BACKENDS, IGNORED, KUBERNETES, REFUSED, Row

Observation = Verdict
"""One backend's verdict on one job (`backends.base.Verdict`, what `BackendOptions.verdicts` gives)."""


def observe(job: TrainJob, backend: str) -> Observation:
    """`backend`: `local` or a flavor's name (`BACKENDS`)."""
    if backend == "local":
        return observe_local(job)
    if backend in KUBERNETES:
        return observe_flavor(job, backend)
    raise ValueError(f"unknown backend {backend!r}: one of {', '.join(BACKENDS)}")


def observe_flavor(job: TrainJob, flavor: str) -> Observation:
    """Render `job` for `flavor`: every problem at once (one SpecError), or the objects and warnings."""
    return KubernetesOptions(flavor=flavor).verdicts(job)[0]


def observe_local(job: TrainJob) -> Observation:
    """The local backend's client dry run (what `kubetrain run --dry-run` shows): the launch record and the
    warnings, or its refusals. A throwaway job store: a dry run records nothing."""
    return LocalOptions().verdicts(job)[0]


# -- holding the table to the code -------------------------------------------------------------------------------


def discrepancies(row_: Row, backend: str, seen: Observation, before: Observation) -> list[str]:
    """How `backend`'s verdict on the row's sample (`seen`, against the baseline `before`) differs from the
    row's cell; empty when they agree. `observe` makes the observations."""
    cell = row_.cell(backend)
    if cell.unchecked:
        return []
    path = row_.path
    related = [p for p in seen.problems if related_paths(p.path, path)]
    # A problem the baseline has too is not the field's (trials are generic jobs: kubeflow refuses both).
    out = [f"refused at {p.path}, not {path}: {p.message}" for p in seen.problems
           if p not in related and not (cell.verdict == REFUSED and p in before.problems)]
    warned = [w for w in seen.warnings if w not in before.warnings and mentions(w, path, cell.mentions)]
    if cell.verdict == REFUSED:
        if not related:
            out.append(f"not refused at {path}")
        able = {f for f in KUBERNETES if row_.cell(f).verdict != REFUSED}
        for problem in related:
            named = able_flavors(problem.message)
            if named is not None and not able <= named:
                out.append(f"the refusal names {sorted(named)} as able, the table {sorted(able)}")
        return out
    if related:
        return out + [f"refused: {p}" for p in related]
    if before.problems:
        return out + [f"the baseline is refused: {p}" for p in before.problems]
    changed = seen.output != before.output
    if cell.verdict == APPROXIMATED:
        if not warned:
            out.append(f"no warning names {cell.mentions or path}")
    elif cell.verdict == IGNORED:
        if changed:
            out.append("it takes effect (what would run changes)")
        # The baseline may set the field too (every sample has an image): any warning naming it will do.
        if not any(mentions(w, path, cell.mentions) for w in seen.warnings):
            out.append(f"no warning says {path} is not used")
    elif cell.same and changed:
        out.append("it changes what would run, but the table says that is what happens without it")
    elif not cell.same and not changed:
        out.append("it changes nothing: dropped without a word?")
    elif cell.warns and not warned:
        out.append(f"no warning names {cell.mentions or path}")
    elif not cell.warns and warned:
        out.append(f"a warning names it (approximated?): {warned[0]}")
    return out


def _depth(path: str) -> int:
    return len(re.findall(r"[.\[]", path)) + 1


def related_paths(problem: str, path: str) -> bool:
    """A problem at `problem` is about the field at `path`: the same, or one contains the other (a
    problem at `spec.mounts[0]` is about `spec.mounts[0].bucket`), never the bare `spec`."""
    if _depth(problem) < 2:
        return False
    return problem == path or path.startswith((problem + ".", problem + "[")) or problem.startswith(
        (path + ".", path + "["))


def mentions(text: str, path: str, extra: str = "") -> bool:
    """A warning names the field at `path` (or a field containing it, or `extra`); `spec.` may be left out."""
    if extra:
        return extra in text
    parts = re.split(r"(?=[.\[])", path)
    candidates = ["".join(parts[:n]) for n in range(len(parts), 1, -1)]
    short = [c[len("spec."):] for c in candidates if c.startswith("spec.")]
    return any(c in text for c in candidates + [s for s in short if "." in s or "[" in s])


def able_flavors(message: str) -> set[str] | None:
    """The flavors a refusal names as able (`manifests.errors.flavors_phrase`), or None if it names none."""
    if "no Kubernetes flavor can express it" in message:
        return set()
    only = re.search(r"only the (\S+) flavor can express it", message)
    if only:
        return {only.group(1)}
    listed = re.search(r"flavors that can express it: ([a-z, ]+)", message)
    if listed:
        return {name.strip() for name in listed.group(1).split(",")}
    return None



# -- the schema's fields ---------------------------------------------------------------------------------------


def schema_fields(schema: Mapping[str, Any], shared: set[str] | None = None) -> list[str]:
    """Every field of a TrainJob JSON Schema, as the table names them: leaves (`spec.image`), list items'
    fields (`spec.ports[].name`), each mount type and its fields (`spec.mounts[type=s3]`, `...bucket`), the
    roles (`spec.roles.*`, `spec.roles.*.replicas`). Client models (`V1Affinity`, `V1EnvVar`) are leaves;
    the settings a role shares with the job (`shared`, default: `ReplicaSettings`' fields) are the job's."""
    if shared is None:
        shared = {f.alias or name for name, f in ReplicaSettings.model_fields.items()}
    defs: Mapping[str, Any] = schema.get("$defs", {})
    out: list[str] = []

    def deref(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node and not _is_kube(node):
            node = defs[node["$ref"].split("/")[-1]]
        return node

    def members(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        node = deref(node)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return [m for sub in node[key] for m in members(sub)]
        return [] if node.get("type") == "null" else [node]

    def walk(node: Mapping[str, Any], path: str) -> None:
        found = members(node)
        kinds = [m for m in found if _is_kube(m) or m.get("type") in ("object", "array")]
        if any(_is_kube(m) for m in kinds) or not kinds:
            out.append(path)  # a scalar, a client model, or a list/map of them: one field
            return
        objects = [m for m in kinds if m.get("type") == "object" and "properties" in m]
        arrays = [m for m in kinds if m.get("type") == "array"]
        maps = [m for m in kinds if m.get("type") == "object" and isinstance(m.get("additionalProperties"), dict)
                and "properties" not in m]
        if objects:
            typed = len(objects) > 1 and all("const" in o["properties"].get("type", {}) for o in objects)
            for obj in objects:
                base = path
                if typed:
                    base = f"{path[:-2]}[type={obj['properties']['type']['const']}]"
                    out.append(base)
                for name, sub in obj["properties"].items():
                    if typed and name == "type":
                        continue
                    if base == "spec.roles.*" and name in shared:
                        continue
                    child = f"{base}.{name}" if base else name
                    walk(sub, child)
        elif arrays:
            items = [m for a in arrays for m in members(a.get("items", {}))]
            if any(m.get("type") == "object" and "properties" in m for m in items):
                walk({"anyOf": items}, path + "[]")
            else:
                out.append(path)
        elif maps and any(deref(m["additionalProperties"]).get("properties") for m in maps):
            out.append(path + ".*")
            walk(maps[0]["additionalProperties"], path + ".*")
        else:
            out.append(path)

    walk(schema, "")
    return [p for p in dict.fromkeys(out) if p]


def _is_kube(node: Mapping[str, Any]) -> bool:
    return "$ref" in node and node["$ref"].split("/")[-1].startswith("k8s.")


__all__ = ["Observation", "able_flavors", "discrepancies", "mentions", "observe", "observe_flavor", "observe_local",
           "related_paths", "schema_fields"]
