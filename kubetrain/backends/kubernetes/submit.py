"""Creating a rendered job on the cluster: root first, the rest owned by it; and the server-side dry run.

- Every object carries ``kubetrain.dev/submission: <random id>``. When a create fails in a way that
  may hide success (a 5xx, a dropped connection, a 409 on a retry), the object is read back by name:
  with our id it is ours (the lost request landed) and is not created again; with another id the name
  belongs to someone else. So retries never make duplicates, and a taken name is told apart from our
  own earlier attempt.
- A name that is taken is an error for a job with ``metadata.name``. A ``metadata.namePrefix`` job
  behaves like ``generateName``: the backend renders it again under a new random suffix (the name must
  be known before creation, since the replicas' addresses are derived from it).
- What the pods mount (the files ConfigMap, an MPI job's ssh Secret) is created before the root, whose
  controller may start pods at once, and then owned by it: a pod never waits for a missing volume, and
  deleting the root still deletes everything.
- If a child cannot be created, the root is deleted (its owner references take the rest): no
  half-submitted job stays behind.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...contract.labels import AS_WRITTEN_ANNOTATION, FLAVOR_ANNOTATION, JOB_LABEL, PAUSED_ANNOTATION, SUBMISSION_LABEL
from ...contract.naming import label_value
from .client.errors import ApiError, Cause, KubernetesError
from .client.kube import Kube
from .client.resources import Resource
from .client.transport import JSON

#: Used as the root's uid for children in a dry run when the server's answer for the root has none.
_DRY_RUN_UID = "00000000-0000-0000-0000-000000000000"


class NameTaken(KubernetesError):
    """An object of that name exists and was not made by this submission."""

    def __init__(self, kind: str, name: str, namespace: str, owner_job: str | None) -> None:
        self.kind, self.name, self.namespace = kind, name, namespace
        whose = f" (it belongs to kubetrain job {owner_job})" if owner_job else ""
        super().__init__(
            f"{kind} {name} already exists in namespace {namespace}{whose}: delete it first "
            f"(kubetrain delete {owner_job or name} --backend kubernetes), choose another metadata.name, or use "
            "metadata.namePrefix for a generated name"
        )


class SubmitError(KubernetesError):
    """The API server refused an object (or the connection failed past every retry)."""

    def __init__(self, kind: str, name: str, error: ApiError, rolled_back: bool = False) -> None:
        self.kind, self.name, self.error = kind, name, error
        text = f"{kind} {name} was refused: {error.describe()}"
        if error.status == 404 and "namespace" in error.message:
            text = f"cannot create {kind} {name}: {error.message} (create it, or choose another with -n)"
        if rolled_back:
            text += "\n  the objects already created were deleted again"
        super().__init__(text)


@dataclass
class Submission:
    """What a submit created."""

    name: str
    namespace: str
    flavor: str
    objects: list[JSON]
    warnings: list[str] = field(default_factory=list)
    submission_id: str = ""

    @property
    def root(self) -> JSON:
        return self.objects[0]


def _labels(obj: JSON) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def tag_objects(objects: Sequence[JSON], submission_id: str, flavor: str, paused: bool) -> list[JSON]:
    """Copies with the submission label on every object and the flavor annotation on the root."""
    out = []
    for i, obj in enumerate(objects):
        o = copy.deepcopy(obj)
        meta = o.setdefault("metadata", {})
        meta.setdefault("labels", {})[SUBMISSION_LABEL] = submission_id
        if i == 0:
            ann = meta.setdefault("annotations", {})
            ann[FLAVOR_ANNOTATION] = flavor
            if paused:
                ann[PAUSED_ANNOTATION] = "true"
        out.append(o)
    return out


def tag_as_written(doc: JSON, submission_id: str) -> JSON:
    """A copy of a foreign document with what kubetrain adds to submit it as written, and nothing else: its job
    label (``kubetrain.dev/job``: every verb finds it by that), the submission id, and the annotation that
    says it was not rendered (``kubetrain.dev/as-written``). The user's own labels and annotations stay."""
    out = copy.deepcopy(doc)
    meta = out.setdefault("metadata", {})
    labels = meta.get("labels") or {}
    meta["labels"] = {**labels, JOB_LABEL: label_value(str(meta["name"])), SUBMISSION_LABEL: submission_id}
    meta["annotations"] = {**(meta.get("annotations") or {}), AS_WRITTEN_ANNOTATION: "true"}
    return out


def submit_as_written(kube: Kube, doc: JSON, res: Resource, namespace: str, *, what: str,
                      warnings: Sequence[str] = ()) -> Submission:
    """Create a foreign document as written (``tag_as_written``), with the same guard against duplicates as a
    rendered job. ``what`` names it in messages (``PyTorchJob as written``)."""
    submission_id = uuid.uuid4().hex[:12]
    body = tag_as_written(doc, submission_id)
    ns = _namespace(body, namespace)
    created = create_once(kube, res, body, ns, submission_id)
    return Submission(str(body["metadata"]["name"]), ns, what, [created], list(warnings), submission_id)


def _namespace(obj: JSON, default: str) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or default)


def create_once(kube: Kube, res: Resource, body: JSON, namespace: str, submission_id: str) -> JSON:
    """POST ``body``; on an answer that may hide success, read it back before trying again."""
    name = body["metadata"]["name"]
    attempt = 0
    while True:
        try:
            return kube.create(res, body, namespace)
        except ApiError as exc:
            if not (exc.already_exists or exc.transient):
                raise SubmitError(body["kind"], name, exc) from None
            error = exc
        existing = kube.find(res, name, namespace)
        if existing is not None:
            labels = _labels(existing)
            if labels.get(SUBMISSION_LABEL) == submission_id:
                return existing  # our earlier attempt landed; its answer was lost
            raise NameTaken(body["kind"], name, namespace, labels.get(JOB_LABEL))
        if attempt + 1 >= kube.retry.attempts:
            raise SubmitError(body["kind"], name, error)
        kube.retry.wait(attempt, error)
        attempt += 1


def mounted_first(obj: JSON) -> bool:
    """An object the job's pods mount (the files ConfigMap, the ssh Secret): created before the root."""
    return obj.get("apiVersion") == "v1" and obj.get("kind") in ("ConfigMap", "Secret")


def submit(kube: Kube, objects: Sequence[JSON], namespace: str, *, flavor: str, name: str,
           paused: bool = False, warnings: Sequence[str] = ()) -> Submission:
    """Create ``objects`` (rendered, root first, without owner references): what the pods mount, the root, then
    the rest; everything but the root owned by it."""
    if not objects:
        raise KubernetesError("nothing to submit")
    submission_id = uuid.uuid4().hex[:12]
    tagged = tag_objects(objects, submission_id, flavor, paused)
    root = tagged[0]
    root_ns = _namespace(root, namespace)
    root_res = kube.resource_for(root["apiVersion"], root["kind"])
    first = [obj for obj in tagged[1:] if mounted_first(obj)]
    rest = [obj for obj in tagged[1:] if not mounted_first(obj)]
    created_first: list[JSON] = []
    try:
        for obj in first:
            res = kube.resource_for(obj["apiVersion"], obj["kind"])
            created_first.append(create_once(kube, res, obj, _namespace(obj, namespace), submission_id))
        created_root = create_once(kube, root_res, root, root_ns, submission_id)
    except BaseException as exc:
        if created_first and not _delete_all(kube, created_first, namespace):
            raise exc from None
        if isinstance(exc, SubmitError) and created_first:
            raise SubmitError(exc.kind, exc.name, exc.error, rolled_back=True) from None
        raise
    uid = created_root["metadata"]["uid"]
    ref = {"apiVersion": root["apiVersion"], "kind": root["kind"], "name": root["metadata"]["name"], "uid": uid}
    created = [created_root]
    try:
        for obj in created_first:
            meta = obj["metadata"]
            res = kube.resource_for(obj["apiVersion"], obj["kind"])
            created.append(kube.merge_patch(res, meta["name"], _namespace(obj, namespace),
                                            {"metadata": {"ownerReferences": [dict(ref)]}}))
        for obj in rest:
            obj["metadata"]["ownerReferences"] = [dict(ref)]
            res = kube.resource_for(obj["apiVersion"], obj["kind"])
            created.append(create_once(kube, res, obj, _namespace(obj, namespace), submission_id))
    except BaseException as exc:  # a refusal, a lost cluster, Ctrl-C: no half-created job stays
        try:
            kube.delete(root_res, root["metadata"]["name"], root_ns, propagation="Background")
        except ApiError:
            raise exc from None
        _delete_all(kube, created_first, namespace)  # not owned yet if their patch failed
        if isinstance(exc, SubmitError):
            raise SubmitError(exc.kind, exc.name, exc.error, rolled_back=True) from None
        raise
    return Submission(name, root_ns, flavor, created, list(warnings), submission_id)


def _delete_all(kube: Kube, objects: Sequence[JSON], namespace: str) -> bool:
    """Delete what a failed submission created before its root; False if one could not be."""
    done = True
    for obj in objects:
        try:
            kube.delete(kube.resource_for(obj["apiVersion"], obj["kind"]), obj["metadata"]["name"],
                        _namespace(obj, namespace))
        except ApiError as exc:
            done = done and exc.status == 404
    return done


# --------------------------------------------------------------------------------------------- dry run


@dataclass
class Verdict:
    """The API server's answer to one object in a dry run."""

    kind: str
    name: str
    api_version: str
    accepted: bool
    status: int = 201
    reason: str = ""
    message: str = ""
    causes: list[Cause] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = f"{self.kind}/{self.name}"
        if self.accepted:
            return [f"{head}: accepted"]
        out = [f"{head}: refused ({self.status} {self.reason})".replace(" )", ")")]
        # A 422's message repeats its causes, which carry the field paths: show those.
        if self.message and not self.causes:
            out.append(f"  {self.message}")
        out += [f"  {c}" for c in self.causes]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "apiVersion": self.api_version,
            "accepted": self.accepted,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "causes": [{"field": c.field, "message": c.message, "reason": c.reason} for c in self.causes],
        }


@dataclass
class DryRunReport:
    namespace: str
    flavor: str
    verdicts: list[Verdict]
    warnings: list[str] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    """What the cluster can run: a line per engine (flavor, kind followed as written) whose API is served, with
    whether its controller is alive (:mod:`.liveness`)."""

    @property
    def ok(self) -> bool:
        return all(v.accepted for v in self.verdicts)

    def format(self) -> str:
        lines = [f"server dry run (dryRun=All), namespace {self.namespace}, flavor {self.flavor}:"]
        for v in self.verdicts:
            lines += ["  " + line for line in v.lines()]
        refused = sum(1 for v in self.verdicts if not v.accepted)
        if refused:
            lines.append(f"{refused} of {len(self.verdicts)} objects refused; nothing was created")
        else:
            lines.append(f"all {len(self.verdicts)} objects accepted; nothing was created")
        if self.engines:
            lines.append("what this cluster can run:")
            lines += ["  " + line for line in self.engines]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "flavor": self.flavor, "ok": self.ok,
                "verdicts": [v.to_dict() for v in self.verdicts], "warnings": list(self.warnings),
                "engines": list(self.engines)}


def dry_run(kube: Kube, objects: Sequence[JSON], namespace: str, *, flavor: str,
            warnings: Sequence[str] = (), tag: bool = True) -> DryRunReport:
    """Send every object with ``dryRun=All``; collect each verdict (the server stores nothing). ``tag=False``:
    the objects carry kubetrain's labels already (a document as written)."""
    tagged = tag_objects(objects, "dry-run", flavor, False) if tag else [copy.deepcopy(o) for o in objects]
    verdicts: list[Verdict] = []
    uid = _DRY_RUN_UID
    root = tagged[0]
    for i, obj in enumerate(tagged):
        if i > 0:
            obj["metadata"]["ownerReferences"] = [{"apiVersion": root["apiVersion"], "kind": root["kind"],
                                                   "name": root["metadata"]["name"], "uid": uid}]
        kind, name = obj["kind"], obj["metadata"]["name"]
        try:
            res = kube.resource_for(obj["apiVersion"], kind)
            answer = _dry_create(kube, res, obj, _namespace(obj, namespace))
        except ApiError as exc:
            verdicts.append(Verdict(kind, name, obj["apiVersion"], False, exc.status, exc.reason, exc.message,
                                    exc.causes))
            continue
        except KubernetesError as exc:
            verdicts.append(Verdict(kind, name, obj["apiVersion"], False, 404, "NotFound", str(exc)))
            continue
        if i == 0:
            uid = (answer.get("metadata") or {}).get("uid") or _DRY_RUN_UID
        verdicts.append(Verdict(kind, name, obj["apiVersion"], True))
    return DryRunReport(namespace, flavor, verdicts, list(warnings))


def _dry_create(kube: Kube, res: Resource, body: JSON, namespace: str) -> JSON:
    """A dry-run create stores nothing, so retrying it is safe."""
    attempt = 0
    while True:
        try:
            return kube.create(res, body, namespace, dry_run=True)
        except ApiError as exc:
            if not exc.transient or attempt + 1 >= kube.retry.attempts:
                raise
            kube.retry.wait(attempt, exc)
            attempt += 1


__all__ = [
    "FLAVOR_ANNOTATION",
    "JOB_LABEL",
    "PAUSED_ANNOTATION",
    "SUBMISSION_LABEL",
    "DryRunReport",
    "NameTaken",
    "Submission",
    "SubmitError",
    "Verdict",
    "create_once",
    "dry_run",
    "submit",
    "submit_as_written",
    "tag_as_written",
]
