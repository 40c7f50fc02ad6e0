"""The object store: API semantics without HTTP.

Every stored object is a read-only snapshot: a write builds a new dict and swaps it in, so lists,
watch events and the event history can share objects without copying. Every write takes the next
value of one global counter as its ``resourceVersion`` and appends a watch event to a bounded
history; a watch from a version older than the history answers 410 Expired.

All public methods take ``self.cond`` (a re-entrant lock), which streams also wait on: any write,
log line or reset wakes them.
"""

from __future__ import annotations

import bisect
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import defaults, validation
from .copies import clone
from .errors import ApiError, Cause, already_exists, bad_request, conflict, internal, invalid, not_found
from .logs import LogBook, rfc3339
from .patches import json_patch, merge_patch, strategic_merge_patch
from .resources import CRD_TYPE, DEFAULT_CRD_DIR, Registry, ResourceType, load_crd_dir
from .selectors import labels_of, parse_field_selector, parse_label_selector

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace or "", name)
BodyValidator = Callable[[Obj], Iterable[str]]

CRD_KEY = CRD_TYPE.storage_key
NAMESPACE_KEY = ("", "namespaces")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Deleting these returns the object; every other type answers with a Status.
_DELETE_RETURNS_OBJECT = {("", "pods"), ("", "services"), ("", "serviceaccounts"), ("", "persistentvolumeclaims")}
# batch/v1 Jobs default to orphaning their pods when deleted without a propagationPolicy.
_DEFAULT_ORPHAN = {("batch", "jobs")}
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    key: tuple[str, str]  # storage key (group, plural)
    obj: Obj
    old: Obj | None


@dataclass(frozen=True)
class ValidationFailure:
    """A body the ``body_validator`` refused (the request was answered 422)."""

    verb: str
    resource: str
    name: str
    messages: list[str] = field(default_factory=list)


def now() -> str:
    return rfc3339(time.time())


def _meta(obj: Obj) -> dict[str, Any]:
    meta: dict[str, Any] = obj["metadata"]
    return meta


def _without_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": meta}


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    def __init__(self, crd_dir: Path = DEFAULT_CRD_DIR, history_limit: int = 10_000) -> None:
        self.cond = threading.Condition(threading.RLock())
        self.available_crds = dict(load_crd_dir(crd_dir))
        self.history_limit = history_limit
        self.rv = 0
        # Bumped by reset(): streams opened before it end.
        self.generation = 0
        self.objects: dict[tuple[str, str], dict[ObjKey, Obj]] = {}
        self.history: list[WatchEvent] = []
        self.compacted_rv = 0
        self.logs = LogBook()
        self.body_validator: BodyValidator | None = None
        self.validation_failures: list[ValidationFailure] = []
        self.strict_namespaces = True
        self.max_object_bytes = 1_572_864  # etcd's default request limit (1.5 MiB)
        self._registry: Registry | None = None

    # ------------------------------------------------------------------ registry, reset, history

    @property
    def registry(self) -> Registry:
        with self.cond:
            if self._registry is None:
                self._registry = Registry(self.objects.get(CRD_KEY, {}).values())
            return self._registry

    def reset(self, crds: Iterable[str]) -> None:
        with self.cond:
            self.generation += 1
            self.objects.clear()
            self.history.clear()
            self.logs.clear()
            self.validation_failures.clear()
            self.compacted_rv = self.rv
            self._registry = None
            ns_type = self.registry.resolve("namespaces")
            for ns in DEFAULT_NAMESPACES:
                self.create(ns_type, None, {"metadata": {"name": ns}}, trusted=True)
            self.install_crds(crds)
            self.cond.notify_all()

    def add_crd_dir(self, directory: Path) -> list[str]:
        """Make the CRDs of another folder installable (not installed); their keys. A CRD whose name is
        taken already (mpijobs.kubeflow.org at another version) is keyed by its file stem."""
        added = []
        with self.cond:
            taken = {src.name: key for key, src in self.available_crds.items()}
            for key, src in load_crd_dir(directory).items():
                if key in self.available_crds and self.available_crds[key].path == src.path:
                    added.append(key)
                    continue
                if (src.name in taken and taken[src.name] != key) or key in self.available_crds:
                    key = src.path.stem
                self.available_crds[key] = src
                added.append(key)
        return added

    def install_crds(self, names: Iterable[str]) -> None:
        with self.cond:
            for key in names:
                if key not in self.available_crds:
                    raise KeyError(f"unknown CRD {key!r}; available: {sorted(self.available_crds)}")
                crd = self.available_crds[key].summary
                installed = self.objects.get(CRD_KEY, {}).get(("", crd["metadata"]["name"]))
                if installed is not None:
                    if installed["spec"] is not crd["spec"]:
                        raise ValueError(f"{key} conflicts with the installed CRD {crd['metadata']['name']}")
                    continue
                # Shared, never mutated: reset() runs per test and must stay cheap.
                meta = {**crd["metadata"], "uid": str(uuid.uuid4()), "creationTimestamp": now(), "generation": 1}
                self._commit(CRD_KEY, "ADDED", {**crd, "metadata": meta, "status": self._crd_status(crd)}, None)

    def uninstall_crds(self, names: Iterable[str]) -> None:
        with self.cond:
            for name in names:
                crd = self.objects.get(CRD_KEY, {}).get(("", name))
                if crd is not None:
                    self._delete_tree(CRD_TYPE, crd, "Background")

    @staticmethod
    def _crd_status(crd: Obj) -> Obj:
        storage = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        t = now()
        return {
            "acceptedNames": crd["spec"]["names"],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": t,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": t,
                },
            ],
            "storedVersions": storage,
        }

    def compact(self) -> None:
        """Forget every event so far: a watch from any older resourceVersion gets 410."""
        with self.cond:
            self.compacted_rv = self.rv
            self.history.clear()
            self.cond.notify_all()

    def events_after(self, rv: int) -> list[WatchEvent]:
        """Events with a resourceVersion above ``rv``; raises 410 Expired if some were forgotten."""
        with self.cond:
            if rv < self.compacted_rv:
                raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.compacted_rv + 1})")
            start = bisect.bisect_right(self.history, rv, key=lambda e: e.rv)
            return self.history[start:]

    def _commit(self, key: tuple[str, str], etype: str, obj: Obj, old: Obj | None) -> Obj:
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        meta = obj["metadata"]
        okey = (meta.get("namespace", ""), meta["name"])
        bucket = self.objects.setdefault(key, {})
        if etype == "DELETED":
            bucket.pop(okey, None)
        else:
            bucket[okey] = obj
        self.history.append(WatchEvent(self.rv, etype, key, obj, old))
        if len(self.history) > self.history_limit:
            drop = len(self.history) - self.history_limit
            self.compacted_rv = self.history[drop - 1].rv
            del self.history[:drop]
        if key == CRD_KEY:
            self._registry = None
        self.cond.notify_all()
        return obj

    # ------------------------------------------------------------------ reads

    def find(self, rt: ResourceType, ns: str | None, name: str) -> Obj | None:
        with self.cond:
            return self.objects.get(rt.storage_key, {}).get(((ns or "") if rt.namespaced else "", name))

    def get(self, rt: ResourceType, ns: str | None, name: str) -> Obj:
        obj = self.find(rt, ns, name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def list_objects(
        self, rt: ResourceType, ns: str | None, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[Obj], int]:
        match = self.matcher(rt, ns, label_selector, field_selector)
        with self.cond:
            items = [o for _, o in sorted(self.objects.get(rt.storage_key, {}).items()) if match(o)]
            return items, self.rv

    @staticmethod
    def matcher(
        rt: ResourceType, ns: str | None, label_selector: str | None, field_selector: str | None
    ) -> Callable[[Obj], bool]:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.field_labels)

        def match(obj: Obj) -> bool:
            meta = obj["metadata"]
            if ns and rt.namespaced and meta.get("namespace") != ns:
                return False
            return labels(labels_of(obj)) and fields(obj)

        return match

    def dependents(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        out = []
        for key, bucket in self.objects.items():
            for obj in bucket.values():
                if any(ref.get("uid") == uid for ref in _meta(obj).get("ownerReferences") or []):
                    out.append((self._type_of(key), obj))
        return out

    def _type_of(self, key: tuple[str, str]) -> ResourceType:
        return next(t for t in self.registry.types if t.storage_key == key)

    # ------------------------------------------------------------------ create

    def _decode(self, rt: ResourceType, ns: str | None, body: Any, url_name: str | None = None) -> Obj:
        """Check a request body against the endpoint and return an owned copy with apiVersion/kind set."""
        if not isinstance(body, dict):
            raise bad_request(f"the body of the request must be a JSON object, not {type(body).__name__}")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if not rt.is_builtin and not kind:
            raise bad_request(f"Object 'Kind' is missing in '{json.dumps(body)[:200]}'")
        if not rt.is_builtin and not api_version:
            raise bad_request(f"Object 'apiVersion' is missing in '{json.dumps(body)[:200]}'")
        if api_version and api_version != rt.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        obj = clone(body)
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced and meta.get("namespace") and ns and meta["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if url_name is not None and meta.get("name") and meta["name"] != url_name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({url_name})"
            )
        return obj

    def _check_body(self, rt: ResourceType, verb: str, obj: Obj) -> list[Cause]:
        if self.body_validator is None:
            return []
        messages = [str(m) for m in self.body_validator(obj)]
        if messages:
            name = _meta(obj).get("name") or f"{_meta(obj).get('generateName', '')}*"
            self.validation_failures.append(ValidationFailure(verb, rt.plural, name, messages))
        return [Cause("", m, "FieldValueInvalid") for m in messages]

    def _check_size(self, obj: Obj) -> None:
        if len(json.dumps(obj, separators=(",", ":"))) > self.max_object_bytes:
            raise internal("etcdserver: request is too large")

    def _namespace_exists(self, ns: str) -> None:
        if self.strict_namespaces and ("", ns) not in self.objects.get(NAMESPACE_KEY, {}):
            raise not_found("namespaces", "", ns)

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        base = prefix[:58]  # the server keeps room for the 5-character suffix within 63
        bucket = self.objects.get(rt.storage_key, {})
        for _ in range(100):
            name = base + "".join(random.choices(_NAME_CHARS, k=5))
            if (ns, name) not in bucket:
                return name
        raise already_exists(rt.plural, rt.group, base)

    def create(
        self, rt: ResourceType, ns: str | None, body: Any, *, dry_run: bool = False, trusted: bool = False
    ) -> Obj:
        """POST. ``trusted`` writes (from the test, playing a controller) keep ``status`` and skip the
        body validator."""
        with self.cond:
            obj = self._decode(rt, ns, body)
            sent = clone(obj)
            meta = obj["metadata"]
            if meta.get("resourceVersion"):
                raise internal("resourceVersion should not be set on objects to be created")
            namespace = (ns or meta.get("namespace") or "default") if rt.namespaced else ""
            if rt.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
                meta["name"] = self._generate_name(rt, namespace, meta["generateName"])
            uid = str(uuid.uuid4())
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
                meta.pop(k, None)
            meta.update(uid=uid, creationTimestamp=now())
            if "spec" in obj:
                meta["generation"] = 1
            if rt.has_status and not trusted:
                obj.pop("status", None)
            if rt.is_builtin:
                defaults.apply(rt.group, rt.plural, obj, uid, None)
            causes = validation.validate(rt.group, rt.plural, obj)
            if rt.storage_key == CRD_KEY:
                causes += self._check_crd(obj)
            if not trusted:
                causes += self._check_body(rt, "create", sent)
            if causes:
                raise invalid(rt.kind, rt.group, meta.get("name") or "", causes)
            if rt.namespaced:
                self._namespace_exists(namespace)
            if (namespace, meta["name"]) in self.objects.get(rt.storage_key, {}):
                raise already_exists(rt.plural, rt.group, meta["name"])
            self._check_size(obj)
            if rt.storage_key == CRD_KEY and not obj.get("status"):
                obj["status"] = self._crd_status(obj)
            if dry_run:
                return obj
            return self._commit(rt.storage_key, "ADDED", obj, None)

    def _check_crd(self, crd: Obj) -> list[Cause]:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        if not (spec.get("group") and names.get("plural") and names.get("kind") and spec.get("versions")):
            return [Cause("spec", "Required value: group, names.plural, names.kind and versions", "FieldValueRequired")]
        expected = f"{names['plural']}.{spec['group']}"
        if crd["metadata"].get("name") != expected:
            return [
                Cause(
                    "metadata.name",
                    f'Invalid value: "{crd["metadata"].get("name")}": must be spec.names.plural+"."+spec.group',
                )
            ]
        return []

    # ------------------------------------------------------------------ update and patch

    def replace(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """PUT on the resource or its /status."""
        with self.cond:
            existing = self.get(rt, ns, name)
            new = self._decode(rt, ns, body, url_name=name)
            rv = _meta(new).get("resourceVersion")
            if rv:
                if rv != _meta(existing)["resourceVersion"]:
                    raise conflict(rt.plural, rt.group, name)
            elif not rt.is_builtin:
                raise invalid(
                    rt.kind,
                    rt.group,
                    name,
                    [Cause("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")],
                )
            return self._update(rt, existing, new, subresource=subresource, dry_run=dry_run, verb="update")

    def patch(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> Obj:
        with self.cond:
            if content_type == "application/apply-patch+yaml":
                return self._apply(rt, ns, name, patch, subresource, dry_run, field_manager)
            existing = self.get(rt, ns, name)
            if content_type == "application/json-patch+json":
                new = json_patch(existing, patch)
            elif content_type == "application/merge-patch+json":
                if not isinstance(patch, dict):
                    raise bad_request("a merge patch must be a JSON object")
                new = merge_patch(existing, patch)
            elif content_type == "application/strategic-merge-patch+json" and rt.is_builtin:
                if not isinstance(patch, dict):
                    raise bad_request("a strategic merge patch must be a JSON object")
                new = strategic_merge_patch(existing, patch)
            else:
                accepted = [t for t in PATCH_TYPES if rt.is_builtin or "strategic" not in t]
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}",
                )
            if isinstance(patch, dict):
                rv = (patch.get("metadata") or {}).get("resourceVersion")
                if rv and rv != _meta(existing)["resourceVersion"]:
                    raise conflict(rt.plural, rt.group, name)
            new = clone(new)  # patch results share subtrees with the stored object
            return self._update(
                rt, existing, new, subresource=subresource, dry_run=dry_run, verb="patch", check_body=True
            )

    def _apply(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        dry_run: bool,
        field_manager: str | None,
    ) -> Obj:
        """Server-side apply, simplified: create if missing, else a merge without field ownership."""
        if not field_manager:
            raise invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                [Cause("fieldManager", "Required value: is required for apply patch", "FieldValueRequired")],
            )
        obj = self._decode(rt, ns, body, url_name=name)
        _meta(obj).setdefault("name", name)
        existing = self.find(rt, ns, name)
        if existing is None:
            return self.create(rt, ns, obj, dry_run=dry_run)
        merge = strategic_merge_patch if rt.is_builtin else merge_patch
        new = clone(merge(existing, obj))
        return self._update(rt, existing, new, subresource=subresource, dry_run=dry_run, verb="apply", check_body=True)

    def _update(
        self,
        rt: ResourceType,
        existing: Obj,
        new: Obj,
        *,
        subresource: str | None,
        dry_run: bool,
        verb: str,
        trusted: bool = False,
        check_body: bool = False,
    ) -> Obj:
        """The common tail of PUT, PATCH and trusted writes; ``new`` is owned by this call."""
        old_meta = _meta(existing)
        name = old_meta["name"]
        causes = self._check_body(rt, verb, new) if verb == "update" and not trusted else []
        if subresource == "status":
            result = {**existing, "metadata": dict(old_meta)}
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            new = result
        else:
            meta = new.setdefault("metadata", {})
            for k in (
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if k in old_meta:
                    meta[k] = old_meta[k]
                else:
                    meta.pop(k, None)
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            if rt.has_status and not trusted:
                if "status" in existing:
                    new["status"] = existing["status"]
                else:
                    new.pop("status", None)
            if rt.is_builtin:
                defaults.apply(rt.group, rt.plural, new, old_meta["uid"], existing)
            if _spec_part(new) != _spec_part(existing) and "generation" in old_meta:
                meta["generation"] = old_meta["generation"] + 1
            causes += validation.validate(rt.group, rt.plural, new)
            if not trusted:
                causes += validation.check_update(rt.group, rt.plural, existing, new)
            if check_body and not trusted:
                causes += self._check_body(rt, verb, new)
        if causes:
            raise invalid(rt.kind, rt.group, name, causes)
        self._check_size(new)
        if _without_rv(new) == _without_rv(existing):
            return existing  # a no-op write does not bump the resourceVersion
        if dry_run:
            return new
        meta = _meta(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # The last finalizer is gone: the deletion that was waiting for it completes now.
            self._delete_tree(rt, new, "Background")
            return new
        return self._commit(rt.storage_key, "MODIFIED", new, existing)

    def write(self, rt: ResourceType, obj: Obj) -> Obj:
        """A trusted create-or-replace of the whole object, status included (the test as controller)."""
        with self.cond:
            meta = obj.get("metadata") or {}
            existing = self.find(rt, meta.get("namespace"), meta.get("name", ""))
            if existing is None:
                return self.create(rt, meta.get("namespace"), obj, trusted=True)
            new = self._decode(rt, meta.get("namespace"), obj)
            return self._update(rt, existing, new, subresource=None, dry_run=False, verb="update", trusted=True)

    # ------------------------------------------------------------------ delete

    def delete(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        *,
        propagation: str | None = None,
        dry_run: bool = False,
        preconditions: dict[str, Any] | None = None,
    ) -> Obj:
        with self.cond:
            existing = self.get(rt, ns, name)
            meta = _meta(existing)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise conflict(
                    rt.plural,
                    rt.group,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise conflict(
                    rt.plural,
                    rt.group,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}",
                )
            if propagation not in (None, "Orphan", "Background", "Foreground"):
                raise invalid(
                    "DeleteOptions",
                    "meta.k8s.io",
                    "",
                    [
                        Cause(
                            "propagationPolicy",
                            f'Unsupported value: "{propagation}": supported values: '
                            '"Foreground", "Background", "Orphan", "nil"',
                            "FieldValueNotSupported",
                        )
                    ],
                )
            policy = propagation or ("Orphan" if rt.storage_key in _DEFAULT_ORPHAN else "Background")
            if dry_run:
                return self._deleted_response(rt, existing)
            final = self._delete_tree(rt, existing, policy)
            return self._deleted_response(rt, final)

    def _deleted_response(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.storage_key in _DELETE_RETURNS_OBJECT or _meta(obj).get("deletionTimestamp"):
            return obj
        details: dict[str, Any] = {"name": _meta(obj)["name"], "kind": rt.plural, "uid": _meta(obj)["uid"]}
        if rt.group:
            details["group"] = rt.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _delete_tree(self, rt: ResourceType, obj: Obj, policy: str) -> Obj:
        """Delete ``obj`` and, per ``policy``, its dependents; an object with finalizers is only marked."""
        meta = _meta(obj)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            marked = {**obj, "metadata": {**meta, "deletionTimestamp": now(), "deletionGracePeriodSeconds": 0}}
            return self._commit(rt.storage_key, "MODIFIED", marked, obj)
        uid = meta["uid"]
        if policy == "Foreground":
            for dep_type, dep in self.dependents(uid):
                self._delete_tree(dep_type, dep, "Foreground")
        if rt.storage_key == NAMESPACE_KEY:
            for key, bucket in list(self.objects.items()):
                for (ns, child_name), child in list(bucket.items()):
                    if ns == meta["name"] and self.find(self._type_of(key), ns, child_name) is child:
                        self._delete_tree(self._type_of(key), child, "Background")
        if rt.storage_key == CRD_KEY:
            served = crd_storage_key(obj)
            for child in list(self.objects.get(served, {}).values()):
                self._commit(served, "DELETED", child, child)
        final = self._commit(rt.storage_key, "DELETED", obj, obj)
        if rt.storage_key == ("", "pods"):
            self.logs.drop(uid)
        if policy == "Background":
            for dep_type, dep in self.dependents(uid):
                if self.find(dep_type, _meta(dep).get("namespace"), _meta(dep)["name"]) is dep:
                    self._delete_tree(dep_type, dep, "Background")
        elif policy == "Orphan":
            for dep_type, dep in self.dependents(uid):
                dmeta = _meta(dep)
                refs = [r for r in dmeta.get("ownerReferences") or [] if r.get("uid") != uid]
                new_meta = (
                    {**dmeta, "ownerReferences": refs}
                    if refs
                    else {k: v for k, v in dmeta.items() if k != "ownerReferences"}
                )
                self._commit(dep_type.storage_key, "MODIFIED", {**dep, "metadata": new_meta}, dep)
        return final

    def delete_collection(
        self,
        rt: ResourceType,
        ns: str | None,
        label_selector: str | None,
        field_selector: str | None,
        *,
        propagation: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        with self.cond:
            items, _ = self.list_objects(rt, ns, label_selector, field_selector)
            for obj in items:
                meta = _meta(obj)
                if self.find(rt, meta.get("namespace"), meta["name"]) is obj:
                    self.delete(rt, meta.get("namespace"), meta["name"], propagation=propagation, dry_run=dry_run)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def crd_storage_key(crd: Obj) -> tuple[str, str]:
    return (crd["spec"]["group"], crd["spec"]["names"]["plural"])
