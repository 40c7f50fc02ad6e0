"""A pod as kubetrain keeps it while it follows a job: the fields that status, Pending diagnosis, describe and
the log streams read, and nothing else, in one object (`KeptPod`) read as the pod. No I/O."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...contract.labels import INDEX_KEYS
from ...contract.logs import parse_time

JSON = dict[str, Any]

Pod = Mapping[str, Any]
"""A pod as read: a whole one (JSON) or one a watch keeps (`KeptPod`), read only."""

_SHARED_UP_TO = 128
"""Strings up to this length are shared between pods (keys by ``sys.intern``, values by `_one_string`): a pod's
keys, its labels' names and most of their values (the job's name, its role, its controller's uid), its phase, its
node, its container's name and most timestamps are the same text in thousands of pods, and a string parsed from
JSON is a new object each time. Longer text (a message) is rarely repeated."""

_POD_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations", "creationTimestamp",
                 "deletionTimestamp", "ownerReferences")
_POD_STATUS = ("phase", "reason", "message", "startTime", "conditions")
_CONTAINER_STATUS = ("name", "state", "lastState", "restartCount", "ready", "started")


def pod_essentials(pod: Mapping[str, Any], like: Mapping[str, Any] | None = None) -> KeptPod:
    """The part of a pod that kubetrain's status, Pending diagnosis, describe and log streams read, and nothing
    else: a follower of 10,000 replicas keeps 10,000 of these, where a whole pod (its spec's containers with
    their env, volumes, tolerations, managedFields) is ten times the size. What is read from a pod is what this
    keeps (tests compare every verb's answer from both): of its annotations, a replica index no label gives.

    ``like``: the pod's version kept before (this one's essentials), whose metadata this shares where it is
    unchanged (its name, uid, labels, annotations, owner: all but its resourceVersion, almost always). Readers
    hold the version they last looked at until their next look, so while thousands of pods change (a job
    starting) two versions of each are held: the second then costs its own version and little else."""
    md = pod.get("metadata") or {}
    before = like if isinstance(like, KeptPod) else None

    def kept(key: str, field: str, share: Callable[[Any], Any]) -> Any:
        value = md.get(key)
        if value is None:
            return None
        held = getattr(before, field) if before is not None else None
        return held if held is not None and held == value else share(value)

    labels, own_keys, own = _kept_labels(md.get("labels"), before)
    annotations = md.get("annotations")
    if isinstance(annotations, dict):
        annotations = _read_annotations(annotations, md.get("labels")) or None
        if annotations is not None:
            held = before.annotations if before is not None else None
            annotations = held if held == annotations else _keys_shared(_Annotations, annotations)
    spec, status = _kept_spec_and_status(pod)
    # What many pods hold alike is held once (`_one_copy`): their owner, their spec (containers' names, node) and
    # their status (phase, conditions and container states, to the second); and the parts of their metadata that
    # are not theirs alone, together (`_one_tuple`).
    parts = _one_tuple((kept("namespace", "namespace", _shared), labels, own_keys, annotations,
                        kept("creationTimestamp", "created", _shared), kept("deletionTimestamp", "deleting", _shared),
                        kept("ownerReferences", "owners", _one_copy), _one_copy(spec)))
    # A pod's own strings (its name, uid, version, index) are held as read: no other pod has them.
    return KeptPod(kept("name", "name", _as_is), kept("uid", "uid", _as_is), md.get("resourceVersion"), own, parts,
                   _one_copy(status))


def _as_is(value: Any) -> Any:
    return value


def _kept_labels(labels: Any, before: KeptPod | None) -> tuple[Any, tuple[str, ...], Any]:
    """A pod's labels as (those many pods have alike, held once; the keys of its own, held once; its own values:
    one string, a tuple of several, or None). A label whose value is a number (a replica's index, a restart's
    attempt) is one pod's; the others (the job, its role, its controller) are the same in every pod of a role:
    one dict for all of them, where a dict a pod was 150 bytes of each kept pod."""
    if not isinstance(labels, dict):
        return (_shared(labels) if labels is not None else None), (), None
    common: JSON = {}
    keys: list[str] = []
    values: list[str] = []
    for key, value in labels.items():
        if isinstance(value, str) and value.isdigit():
            keys.append(_key(key))
            values.append(value)
        else:
            common[_key(key)] = _shared(value)
    own: Any = values[0] if len(values) == 1 else (tuple(values) or None)
    own_keys: tuple[str, ...] = _one_copy(tuple(keys))
    if before is not None:
        if before.own == own:
            own = before.own
        if before.labels == common:  # the same object: the pod stands where it stood (`status_map._same_place`)
            return before.labels, own_keys, own
    return _one_copy(common), own_keys, own


class KeptPod(Mapping[str, Any]):
    """A pod's essentials (:func:`pod_essentials`), read as the pod (``pod["metadata"]["name"]``,
    ``pod.get("status")``, ``dict(pod)``, equality with a dict) and held as one small object: a follower of
    10,000 replicas holds 10,000 of these, and a second version of thousands while a job starts. As dicts (the
    pod, its metadata, its labels) a kept pod weighed 431 bytes beyond its own strings (name, uid, version,
    index); as this, under 100. It holds its own strings, its status, and one tuple of the rest of its metadata
    and its spec (`parts`), shared by the pods that have the same (a job's pods created in the same second on
    the same node). Its metadata is made when read. Not a dict: ``json.dumps`` takes ``dict(pod)``. Read only,
    as every kept pod."""

    __slots__ = ("name", "own", "parts", "status", "uid", "version")

    def __init__(self, name: Any, uid: Any, version: Any, own: Any, parts: tuple[Any, ...], status: Any) -> None:
        self.name, self.uid, self.version, self.own, self.parts, self.status = name, uid, version, own, parts, status

    # The parts of a pod that pods share: (namespace, labels but its own, the keys of its own labels,
    # annotations, creation and deletion times, owners, spec).
    namespace = property(lambda self: self.parts[0])
    labels = property(lambda self: self.parts[1])
    own_keys = property(lambda self: self.parts[2])
    annotations = property(lambda self: self.parts[3])
    created = property(lambda self: self.parts[4])
    deleting = property(lambda self: self.parts[5])
    owners = property(lambda self: self.parts[6])
    spec = property(lambda self: self.parts[7])

    def metadata(self) -> JSON:
        values = (self.name, self.namespace, self.uid, self.version, self.labels_read(), self.annotations,
                  self.created, self.deleting, self.owners)
        return {k: v for k, v in zip(_POD_METADATA, values, strict=True) if v is not None}

    def labels_read(self) -> Any:
        """The pod's labels, a dict of its own (the labels it shares are held once for many pods: a reader that
        changed them would change every pod's)."""
        labels, keys, own = self.labels, self.own_keys, self.own
        if not isinstance(labels, dict):
            return labels
        mine = dict(labels)
        if keys:
            mine.update(zip(keys, (own,) if isinstance(own, str) else own, strict=True))
        return mine

    def __getitem__(self, key: str) -> Any:
        if key == "metadata":
            return self.metadata()
        if key == "status":
            return self.status
        if key == "spec":
            return self.spec
        if key == "apiVersion":
            return "v1"
        if key == "kind":
            return "Pod"
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_POD_KEYS)

    def __len__(self) -> int:
        return len(_POD_KEYS)

    def __repr__(self) -> str:
        return repr(dict(self))


_POD_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")


class _Annotations:
    """A kept pod's annotations are the ``__dict__`` of one of these (see `_keys_shared`)."""


def _keys_shared(shape: type, items: Mapping[str, Any]) -> JSON:
    """``items`` as a dict that shares its table of keys with every other dict of the same ``shape``: the
    ``__dict__`` of an instance of ``shape`` (CPython's key-sharing dictionaries, PEP 412), which holds only its
    values, where a dict of its own holds its keys' table too. The annotations a kept pod holds (a replica index
    no label gives: a Volcano task's) have the same key in every pod of a job. It is an ordinary ``dict`` for
    every reader (equality, ``json.dumps``, copies); where keys are not shared (other key sets than the first
    ones seen, another interpreter) it is an ordinary dict's size, never wrong."""
    if not all(isinstance(k, str) for k in items):
        return dict(items)
    holder = shape()
    for key, value in items.items():
        setattr(holder, key, value)
    return holder.__dict__


def _read_annotations(annotations: Mapping[str, Any], labels: Any) -> JSON:
    """Of a pod's annotations, those kubetrain reads: a replica index where no label of the same name gives it
    (`status_map.pod_index` reads the label first). The Job controller writes the completion index as both: a
    dict a pod less."""
    given = labels if isinstance(labels, dict) else {}
    return {_key(k): _shared(annotations[k]) for k in INDEX_KEYS if k in annotations and k not in given}


def _kept_spec_and_status(pod: Mapping[str, Any]) -> tuple[JSON, JSON]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    kept_spec: JSON = {"containers": [{"name": c.get("name")} for c in spec.get("containers") or []]}
    if spec.get("nodeName"):
        kept_spec["nodeName"] = spec["nodeName"]
    kept_status: JSON = {k: status[k] for k in _POD_STATUS if k in status}
    if "conditions" in kept_status:
        kept_status["conditions"] = _kept_conditions(kept_status["conditions"])
    for key in ("containerStatuses", "initContainerStatuses"):
        if key in status:
            kept_status[key] = [{k: cs[k] for k in _CONTAINER_STATUS if k in cs} for cs in status[key] or []]
    return kept_spec, kept_status


def _kept_conditions(conditions: Any) -> list[Any]:
    """Of a pod's conditions, what kubetrain reads: every one that does not hold (PodScheduled=False says why a
    replica waits), and of those that do, the latest (a pod that failed without a container's end is dated by
    it). A Running pod's four or five true conditions are most of its status."""
    if not isinstance(conditions, list):
        return []
    dicts = [c for c in conditions if isinstance(c, dict)]
    held = [c for c in dicts if c.get("status") == "True"]
    latest = max(held, key=lambda c: parse_time(c.get("lastTransitionTime") or c.get("lastUpdateTime")
                                                 or c.get("lastProbeTime")) or 0.0, default=None)  # as cond_time
    return [c for c in dicts if c.get("status") != "True" or c is latest]


def _key(key: Any) -> Any:
    return sys.intern(key) if isinstance(key, str) else key


def _shared(value: Any) -> Any:
    """``value`` with its short strings shared, keys and values (see ``_SHARED_UP_TO``)."""
    if isinstance(value, str):
        return _one_string(value) if len(value) <= _SHARED_UP_TO else value
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value


_STRINGS: dict[str, str] = {}
"""A value's text → the one string kept for it (see `_one_string`)."""


def _one_string(value: str) -> str:
    """``value``, or the equal string kept before. Keys are interned (``sys.intern``: few, and looked up);
    values are shared through this bounded table instead: some are one pod's (its replica index), and the
    interpreter's table of interned strings only grows (at 10,000 pods it doubled, a block of 2 MB), where
    this one forgets every `_COPIES_HELD` strings (what was shared stays shared)."""
    held: str = remembered(_STRINGS, value, lambda: value)
    return held


_COPIES: dict[Any, Any] = {}
"""Frozen form → the one copy of a value kept (see `_one_copy`)."""

_COPIES_HELD = 4096
"""How many distinct values `_one_copy` remembers: the values of a job's pods at a moment are few (a phase, a
node, a second); when more are seen the memory is forgotten (what was shared stays shared)."""


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return ("{", tuple((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[", tuple(_frozen(v) for v in value))
    return (type(value).__name__, value)  # True and 1, 1 and 1.0 stay apart


def _one_copy(value: Any) -> Any:
    """``value`` (`_shared`), or an equal one kept before: the same object for every pod that holds it. Safe
    because a kept pod is read, never changed (the watch replaces a pod with its next version)."""
    try:
        return remembered(_COPIES, _frozen(value), lambda: _shared(value))
    except TypeError:  # unhashable: not JSON
        return _shared(value)


_TUPLES: dict[tuple[int, ...], tuple[Any, ...]] = {}
"""The ids of a tuple's items → the one tuple kept with them (see `_one_tuple`)."""


def _one_tuple(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """``items``, or the tuple of the same objects kept before: the parts of their metadata that a job's pods hold
    alike are one tuple for all of them. Keyed by the items' identities (each already held once: shared strings,
    `_one_copy` values), which stay theirs while the tuple kept holds them. Bounded as `_one_copy`'s table."""
    held: tuple[Any, ...] = remembered(_TUPLES, tuple(map(id, items)), lambda: items)
    return held


_UNSEEN = object()


def remembered(table: dict[Any, Any], key: Any, make: Callable[[], Any]) -> Any:
    """``table[key]``, made by ``make()`` and kept when missing: the tables of values many pods share, bounded (all
    forgotten every `_COPIES_HELD` keys; what was shared stays shared). One lookup, never a check then a read:
    another thread's look (statuses are worked out on several) may empty the table between the two."""
    held = table.get(key, _UNSEEN)
    if held is _UNSEEN:
        if len(table) >= _COPIES_HELD:
            table.clear()
        held = table[key] = make()
    return held


def same_essentials(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two versions of a pod (both :func:`pod_essentials`) say the same to kubetrain: a change of the
    resourceVersion alone (a field kubetrain does not read changed, an IP, a label's neighbour) is no change."""
    if isinstance(a, KeptPod) and isinstance(b, KeptPod):
        return all(getattr(a, f) == getattr(b, f) for f in KeptPod.__slots__ if f != "version")  # parts: by item
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    if any(ma.get(k) != mb.get(k) for k in _POD_METADATA if k != "resourceVersion"):
        return False
    return a.get("spec") == b.get("spec") and a.get("status") == b.get("status")


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pod's labels, to read (never change), without making a kept pod's whole metadata: where a pod stands
    (its role, its index) is read from them for every pod of a look at a job."""
    if isinstance(pod, KeptPod):
        return pod.labels_read() or {}
    labels: Mapping[str, Any] = (pod.get("metadata") or {}).get("labels") or {}
    return labels


def pod_annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pod's annotations, to read (never change), as `pod_labels`."""
    if isinstance(pod, KeptPod):
        return pod.annotations or {}
    annotations: Mapping[str, Any] = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations


def name_and_version(pod: Mapping[str, Any]) -> tuple[Any, Any]:
    """A pod's name and resourceVersion, read without making its metadata (a kept pod's is made when read; a
    look at 10,000 pods reads these of each)."""
    if isinstance(pod, KeptPod):
        return pod.name, pod.version
    md = pod.get("metadata") or {}
    return md.get("name"), md.get("resourceVersion")


__all__ = ["KeptPod", "Pod", "name_and_version", "pod_annotations", "pod_essentials", "pod_labels", "remembered",
           "same_essentials"]
