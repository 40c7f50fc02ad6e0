"""The resource types the emulator serves: built-in ones and those of installed CRDs.

A :class:`ResourceType` is one (group, version, plural). Objects are stored per (group, plural), so
a CRD that serves two versions (Kueue: v1beta1 and v1beta2) shows one set of objects through both;
only ``apiVersion`` is rewritten on the way out (no schema conversion).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")

DEFAULT_CRD_DIR = Path(__file__).resolve().parent / "crds"


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Subresources this emulator implements: "status" and (pods only) "log".
    subresources: frozenset[str] = frozenset()
    # Field selector labels beyond metadata.name / metadata.namespace.
    field_labels: tuple[str, ...] = ()
    # The CRD that defines this type; None for built-in types.
    crd: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def is_builtin(self) -> bool:
        return self.crd is None

    def discovery(self) -> list[dict[str, Any]]:
        """This type's entries in an APIResourceList (the resource, then its subresources)."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(ALL_VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        for sub in sorted(self.subresources):
            verbs = ["get"] if sub == "log" else list(STATUS_VERBS)
            out.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": verbs,
                }
            )
        return out


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

_STATUS = frozenset({"status"})

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        "namespace",
        ("ns",),
        subresources=_STATUS,
        field_labels=("status.phase",),
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        "pod",
        ("po",),
        ("all",),
        subresources=frozenset({"status", "log"}),
        field_labels=_POD_FIELDS,
    ),
    ResourceType("", "v1", "services", "Service", True, "service", ("svc",), ("all",), subresources=_STATUS),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",)),
    ResourceType("", "v1", "secrets", "Secret", True, "secret", field_labels=("type",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",)),
    ResourceType("", "v1", "events", "Event", True, "event", ("ev",), field_labels=_EVENT_FIELDS),
    ResourceType(
        "", "v1", "nodes", "Node", False, "node", ("no",), subresources=_STATUS, field_labels=("spec.unschedulable",)
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        "persistentvolumeclaim",
        ("pvc",),
        subresources=_STATUS,
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        True,
        "job",
        (),
        ("all",),
        subresources=_STATUS,
        field_labels=("status.successful",),
    ),
    # What a controller's liveness is read from: its Deployment (the deployment controller writes
    # readyReplicas) and its leader-election Lease (the holder renews renewTime).
    ResourceType(
        "apps", "v1", "deployments", "Deployment", True, "deployment", ("deploy",), ("all",), subresources=_STATUS
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease"),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, "role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, "rolebinding"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, "clusterrole"),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, "clusterrolebinding"
    ),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, "priorityclass", ("pc",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        "customresourcedefinition",
        ("crd", "crds"),
        subresources=_STATUS,
    ),
)

CRD_TYPE = BUILTIN_TYPES[-1]


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key for Kubernetes version priority: GA before beta before alpha, higher numbers first."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), version)


def crd_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD serves, one per served version."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = frozenset({"status"}) if "status" in (ver.get("subresources") or {}) else frozenset()
        out.append(
            ResourceType(
                group=spec["group"],
                version=ver["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=subs,
                crd=crd["metadata"]["name"],
            )
        )
    return out


class Registry:
    """The types served right now: the built-ins plus those of the stored (installed) CRDs."""

    def __init__(self, crds: Iterable[dict[str, Any]]) -> None:
        self.types: list[ResourceType] = list(BUILTIN_TYPES)
        for crd in crds:
            self.types.extend(crd_types(crd))
        self._by_gvr = {(t.group, t.version, t.plural): t for t in self.types}

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def groups(self) -> dict[str, list[str]]:
        """Group name → served versions, preferred (highest priority) first; core group excluded."""
        versions: dict[str, set[str]] = {}
        for t in self.types:
            if t.group:
                versions.setdefault(t.group, set()).add(t.version)
        return {g: sorted(vs, key=version_priority) for g, vs in sorted(versions.items())}

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and t.version == version]

    def preferred(self, t: ResourceType) -> ResourceType:
        """The same resource in its group's preferred version."""
        versions = [x for x in self.types if x.storage_key == t.storage_key]
        return min(versions, key=lambda x: version_priority(x.version))

    def for_object(self, obj: dict[str, Any]) -> ResourceType:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        for t in self.types:
            if t.api_version == api_version and t.kind == kind:
                return t
        raise LookupError(f"no served resource for apiVersion={api_version!r} kind={kind!r}")

    def resolve(self, name: str, api_version: str | None = None) -> ResourceType:
        """A type from what a test writes: ``pods``, ``Pod``, ``po``, ``jobs.batch``, ``jobsets.jobset.x-k8s.io``.

        Like kubectl, a bare name prefers built-in types (``jobs`` is batch/v1, not Volcano's), and a
        multi-version CRD resolves to its preferred version unless ``api_version`` says otherwise.
        """
        low = name.lower()
        candidates = [
            t
            for t in self.types
            if low in (t.plural, t.singular, t.kind.lower(), f"{t.plural}.{t.group}") or low in t.short_names
        ]
        if api_version:
            candidates = [t for t in candidates if t.api_version == api_version]
        if not candidates:
            raise LookupError(f"no served resource named {name!r}")
        builtin = [t for t in candidates if t.is_builtin]
        if builtin:
            return builtin[0]
        keys = {t.storage_key for t in candidates}
        if len(keys) > 1:
            raise LookupError(f"{name!r} is ambiguous: {sorted('.'.join(k[::-1]) for k in keys)}")
        return candidates[0] if api_version else self.preferred(candidates[0])


@dataclass
class CrdSource:
    """One CRD file: a summary (without the OpenAPI schemas) parsed up front, the full CRD on demand.

    The upstream files are large (JobSet's is 800 kB, Kueue's Workload 1.4 MB) and the schemas are
    most of it; discovery needs none of it, so it is parsed only if a client reads the CRD itself.
    """

    name: str
    path: Path
    summary: dict[str, Any]
    _full: dict[str, Any] | None = None

    def full(self) -> dict[str, Any]:
        with _crd_cache_lock:
            if self._full is None:
                with self.path.open() as f:
                    docs = [d for d in yaml.load_all(f, Loader=_LOADER) if isinstance(d, dict)]
                self._full = next(d for d in docs if d.get("metadata", {}).get("name") == self.name)
            return self._full


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCHEMA_LINE = re.compile(r"^(\s*)(- )?schema:\s*$")
_crd_cache: dict[Path, dict[str, CrdSource]] = {}
_crd_cache_lock = threading.RLock()


def _strip_schemas(text: str) -> str:
    """Drop every ``schema:`` block (by indentation) from block-style YAML."""
    out, skip = [], -1
    for line in text.splitlines():
        if skip >= 0:
            if not line.strip() or len(line) - len(line.lstrip(" ")) > skip:
                continue
            skip = -1
        m = _SCHEMA_LINE.match(line)
        if m:
            skip = len(m.group(1)) + (2 if m.group(2) else 0)
            continue
        out.append(line)
    return "\n".join(out)


def load_crd_dir(directory: Path) -> dict[str, CrdSource]:
    """Key → source for every CRD in ``directory``'s ``*.yaml``; read once per process.

    The key is the CRD's name, except where two files define the same CRD (``/work/shared/crds``
    has MPIJob from both the training operator and the MPI operator): then it is the file stem.
    """
    directory = directory.resolve()
    with _crd_cache_lock:
        cached = _crd_cache.get(directory)
        if cached is not None:
            return cached
        found: list[tuple[str, Path, dict[str, Any]]] = []
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.load_all(_strip_schemas(path.read_text()), Loader=_LOADER):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    found.append((doc["metadata"]["name"], path, doc))
        names = [name for name, _, _ in found]
        crds: dict[str, CrdSource] = {}
        for name, path, doc in found:
            key = name if names.count(name) == 1 else path.stem
            crds[key] = CrdSource(name, path, doc)
        _crd_cache[directory] = crds
        return crds


def default_crd_keys(crds: dict[str, CrdSource]) -> list[str]:
    """Every CRD, but only the first file of a CRD defined twice (a cluster can hold only one)."""
    keys, seen = [], set()
    for key in sorted(crds):
        if crds[key].name not in seen:
            keys.append(key)
            seen.add(crds[key].name)
    return keys
