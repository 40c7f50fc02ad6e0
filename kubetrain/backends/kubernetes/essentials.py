"""A pod as kubetrain keeps it while it follows a job: the fields that status, Pending diagnosis, describe and
the log streams read, and nothing else. Plain functions over dicts, no I/O."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from ...contract.labels import INDEX_KEYS
from ...contract.logs import parse_time

JSON = dict[str, Any]

_SHARED_UP_TO = 128
"""Strings up to this length are shared between pods (keys by ``sys.intern``, values by `_one_string`): a pod's
keys, its labels' names and most of their values (the job's name, its role, its controller's uid), its phase, its
node, its container's name and most timestamps are the same text in thousands of pods, and a string parsed from
JSON is a new object each time. Longer text (a message) is rarely repeated."""

_POD_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations", "creationTimestamp",
                 "deletionTimestamp", "ownerReferences")
_OWN = ("name", "uid", "resourceVersion")
"""A pod's own metadata: strings no other pod holds (interning them would only add a table entry)."""
_POD_STATUS = ("phase", "reason", "message", "startTime", "conditions")
_CONTAINER_STATUS = ("name", "state", "lastState", "restartCount", "ready", "started")


def pod_essentials(pod: Mapping[str, Any], like: Mapping[str, Any] | None = None) -> JSON:
    """The part of a pod that kubetrain's status, Pending diagnosis, describe and log streams read, and nothing
    else: a follower of 10,000 replicas keeps 10,000 of these, where a whole pod (its spec's containers with
    their env, volumes, tolerations, managedFields) is ten times the size. What is read from a pod is what this
    keeps (tests compare every verb's answer from both): of its annotations, a replica index no label gives.

    ``like``: the pod's version kept before (this one's essentials), whose metadata this shares where it is
    unchanged (its name, uid, labels, annotations, owner: all but its resourceVersion, almost always). Readers
    hold the version they last looked at until their next look, so while thousands of pods change (a job
    starting) two versions of each are held: the second then costs its own version and little else."""
    md = pod.get("metadata") or {}
    before = (like.get("metadata") or {}) if like is not None else {}
    metadata: JSON = {}
    for key in _POD_METADATA:  # in the order the API writes them
        if key not in md:
            continue
        value = md[key]
        if key in before and key != "resourceVersion" and before[key] == value:
            value = before[key]
        elif key in _OWN:
            pass  # one pod's: nothing to share
        elif key == "annotations" and isinstance(value, dict):
            value = _read_annotations(value, md.get("labels"))
            if not value:
                continue
            value = _keys_shared(_Annotations, value)
        elif key == "labels" and isinstance(value, dict):
            value = _keys_shared(_Labels, {_key(k): _shared(v) for k, v in value.items()})
        elif key == "ownerReferences":
            # What many pods hold alike is held once (`_one_copy`): their owner, their spec (containers' names,
            # node) and their status (phase, conditions and container states, to the second).
            value = _one_copy(value)
        else:
            value = _shared(value)
        metadata[sys.intern(key)] = value
    spec, status = _kept_spec_and_status(pod)
    return _keys_shared(_Pod, {"apiVersion": _shared(pod.get("apiVersion", "v1")),
                               "kind": _shared(pod.get("kind", "Pod")), "metadata": _keys_shared(_Metadata, metadata),
                               "spec": _one_copy(spec), "status": _one_copy(status)})


class _Pod:
    """A kept pod's dict is the ``__dict__`` of one of these (see `_keys_shared`)."""


class _Metadata:
    """A kept pod's metadata, as `_Pod`."""


class _Labels:
    """A kept pod's labels, as `_Pod`."""


class _Annotations:
    """A kept pod's annotations, as `_Pod`."""


def _keys_shared(shape: type, items: Mapping[str, Any]) -> JSON:
    """``items`` as a dict that shares its table of keys with every other dict of the same ``shape``: the
    ``__dict__`` of an instance of ``shape`` (CPython's key-sharing dictionaries, PEP 412), which holds only its
    values, where a dict of its own holds its keys' table too. A pod's metadata, labels and annotations have the
    same keys in the same order in every pod of a job, and each kept pod holds three or four such dicts: at
    10,000 pods this is about 4 MB less. It is an ordinary ``dict`` for every reader (equality, ``json.dumps``, copies);
    where keys are not shared (other key sets than the first ones seen, another interpreter) it is an ordinary
    dict's size, never wrong."""
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
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    if any(ma.get(k) != mb.get(k) for k in _POD_METADATA if k != "resourceVersion"):
        return False
    return a.get("spec") == b.get("spec") and a.get("status") == b.get("status")


__all__ = ["pod_essentials", "remembered", "same_essentials"]
