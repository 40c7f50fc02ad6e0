"""The two long-lived responses: watch streams and pod logs (plain and followed).

Both wait on the store's condition variable, which every write, log line and reset notifies, and
write outside the lock so a slow client never holds up the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .errors import ApiError, bad_request
from .logs import LogLine, parse_rfc3339, render, select
from .resources import ResourceType
from .store import Obj, Store, WatchEvent
from .transport import Request, Response, Stream

Presenter = Callable[[ResourceType, Obj], Obj]


def translate(event: WatchEvent, rt: ResourceType, match: Callable[[Obj], bool]) -> tuple[str, Obj] | None:
    """The event a filtered watch sees: entering the selection is ADDED, leaving it DELETED."""
    if event.key != rt.storage_key:
        return None
    now_in = match(event.obj)
    if event.type != "MODIFIED":
        return (event.type, event.obj) if now_in else None
    was_in = event.old is not None and match(event.old)
    if now_in:
        return ("MODIFIED" if was_in else "ADDED", event.obj)
    return ("DELETED", event.obj) if was_in else None


def serve_watch(
    store: Store, req: Request, rt: ResourceType, ns: str | None, name: str | None, present: Presenter, timeout: float
) -> None:
    """Stream events as JSON lines until ``timeoutSeconds`` (else ``timeout``), a 410, a reset, or the client
    leaving. ``name`` is set for the legacy ``/watch/.../{name}`` form."""
    fields = req.q("fieldSelector")
    if name is not None:
        fields = f"metadata.name={name}" + (f",{fields}" if fields else "")
    labels = req.q("labelSelector")
    match = store.matcher(rt, ns, labels, fields)
    rv_param = req.q("resourceVersion")
    seconds = req.integer("timeoutSeconds") or timeout
    initial: list[Obj] = []
    with store.cond:
        generation = store.generation
        if rv_param in (None, "", "0"):
            # No version (or "0"): the current state first, as synthetic ADDED events.
            initial, last = store.list_objects(rt, ns, labels, fields)
        else:
            try:
                last = int(rv_param)
            except ValueError:
                raise bad_request(f"invalid resource version: {rv_param!r}") from None
    stream = Stream(req.handler, "application/json")

    def send(etype: str, obj: Obj) -> bool:
        body = obj if etype in ("ERROR", "BOOKMARK") else present(rt, obj)
        return stream.write(json.dumps({"type": etype, "object": body}).encode() + b"\n")

    for obj in initial:
        if not send("ADDED", obj):
            return
    deadline = time.monotonic() + seconds
    timed_out = False
    while stream.open:
        with store.cond:
            if store.generation != generation:
                break
            try:
                events = store.events_after(last)
            except ApiError as gone:  # the real server sends this as an event in a 200 stream
                send("ERROR", gone.status())
                break
            if not events:
                last = max(last, store.rv)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                store.cond.wait(remaining)
                continue
        for event in events:
            last = event.rv
            out = translate(event, rt, match)
            if out and not send(*out):
                return
    if timed_out and req.flag("allowWatchBookmarks"):
        send("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(last)}})
    stream.end()


def container_state(pod: Obj, container: str) -> tuple[str, str]:
    """("waiting" | "running" | "terminated", reason) of one container, from the pod's status."""
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container:
            state = cs.get("state") or {}
            for kind in ("terminated", "running", "waiting"):
                if kind in state:
                    return kind, (state[kind] or {}).get("reason", "")
    if status.get("phase") in ("Succeeded", "Failed"):
        return "terminated", ""
    return "waiting", "ContainerCreating"


def _log_container(pod: Obj, container: str | None) -> str:
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    containers = [c["name"] for c in spec.get("containers") or []]
    init = [c["name"] for c in spec.get("initContainers") or []]
    if not container:
        if len(containers) == 1:
            return containers[0]
        msg = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        if init:
            msg += f" or one of the init containers: [{' '.join(init)}]"
        raise bad_request(msg)
    if container not in containers + init:
        raise bad_request(f"container {container} is not valid for pod {name}")
    return container


def _since(req: Request) -> float | None:
    seconds = req.integer("sinceSeconds")
    if seconds is not None:
        return time.time() - seconds
    if req.q("sinceTime"):
        try:
            return parse_rfc3339(req.q("sinceTime") or "")
        except ValueError:
            raise bad_request(f"invalid sinceTime {req.q('sinceTime')!r}") from None
    return None


def serve_log(store: Store, req: Request, ns: str, name: str, follow_timeout: float) -> Response | None:
    """``GET .../pods/{name}/log``: text/plain, or a chunked stream when following."""
    pods = store.registry.resolve("pods")
    pod = store.get(pods, ns, name)
    container = _log_container(pod, req.q("container"))
    if not (pod.get("spec") or {}).get("nodeName"):
        # Like the real server: a pod not yet on a node has no kubelet to ask, and an empty log.
        return Response(200, b"", "text/plain")
    uid = pod["metadata"]["uid"]
    tail, since, stamps, previous = req.integer("tailLines"), _since(req), req.flag("timestamps"), req.flag("previous")
    with store.cond:
        if previous:
            prev = store.logs.lines(uid, container, previous=True)
            if prev is None:
                raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            lines = prev
        else:
            state, reason = container_state(pod, container)
            if state == "waiting":
                raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
            lines = store.logs.current.setdefault((uid, container), [])
        text = render(select(lines, tail=tail, since=since), stamps).encode()
        sent = len(lines)
    if not req.flag("follow") or previous:
        limit = req.integer("limitBytes")
        return Response(200, text[:limit] if limit else text, "text/plain")
    stream = Stream(req.handler, "text/plain")
    stream.write(text)
    _follow(store, stream, pod, container, lines, sent, stamps, follow_timeout)
    return None


def _follow(
    store: Store,
    stream: Stream,
    pod: Obj,
    container: str,
    lines: list[LogLine],
    sent: int,
    stamps: bool,
    timeout: float,
) -> None:
    """Stream new lines of one container instance until it terminates, restarts, or its pod goes."""
    pods = store.registry.resolve("pods")
    meta: dict[str, Any] = pod["metadata"]
    generation = store.generation
    deadline = time.monotonic() + timeout
    while stream.open:
        with store.cond:
            current = store.find(pods, meta["namespace"], meta["name"])
            gone = store.generation != generation or current is None or current["metadata"]["uid"] != meta["uid"]
            # A restart moves this instance's lines to "previous": the list we hold is no longer current.
            restarted = store.logs.current.get((meta["uid"], container)) is not lines
            state = container_state(current, container)[0] if current is not None else "terminated"
            done = gone or restarted or state == "terminated" or time.monotonic() >= deadline
            new = lines[sent:]
            sent = len(lines)
            if not new and not done:
                store.cond.wait(max(0.0, deadline - time.monotonic()))
                continue
        stream.write(render(new, stamps).encode())
        if done:
            break
    stream.end()
