"""Streamed GETs: watches (events as dicts) and pod logs (the response, read by :mod:`..logs`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from .errors import ApiError, ConnectionLost
from .light import connection_faults
from .resources import PODS, Resource
from .transport import JSON, Transport, query


class WatchHandle:
    """What a watch's ``stopper`` receives: ``stop()`` ends the stream after the event being read."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def _lines(resp: Any) -> Iterator[bytes]:
    """The response's non-empty lines as they arrive (a watch sends one JSON event per line)."""
    pending: list[bytes] = []
    for chunk in resp.stream(amt=None, decode_content=False):
        while (cut := chunk.find(b"\n")) >= 0:
            pending.append(chunk[:cut])
            line = b"".join(pending)
            pending = []
            chunk = chunk[cut + 1:]
            if line.strip():
                yield line
        if chunk:
            pending.append(chunk)
    tail = b"".join(pending)
    if tail.strip():
        yield tail


class Streams(Transport):
    """Long-lived responses: a watch's events, a pod's log."""

    def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        stopper: Callable[[Any], None] | None = None,
        stopped: Callable[[], bool] | None = None,
    ) -> Iterator[JSON]:
        """Events (``{"type", "object"}``) after ``resource_version``, until the server ends the stream.

        Read here, line by line, as the official client's ``Watch`` reads them (which would import the whole
        ``kubernetes`` package): an ERROR event (an expired version: 410) is raised as ApiError. ``stopper``
        receives a handle whose ``stop()`` ends the stream after the event being read (another thread's way
        out); ``stopped`` tells whether it was (checked around the request, which cannot be interrupted before
        the response has begun).
        """
        handle = WatchHandle()
        if stopper is not None:
            stopper(handle)
        params = query(watch=True, resourceVersion=resource_version, timeoutSeconds=timeout_seconds,
                       allowWatchBookmarks=True, labelSelector=label_selector, fieldSelector=field_selector)
        if stopped is not None and stopped():
            raise ConnectionLost(InterruptedError("watch stopped"))
        # The server ends the stream at timeoutSeconds; the read timeout is a safety net on top.
        resp = self._send("GET", res.path(namespace), params, stream=True, timeout=(self.timeout, timeout_seconds + 30))
        try:
            if stopped is not None and stopped():
                raise ConnectionLost(InterruptedError("watch stopped"))
            for line in _lines(resp):
                event = json.loads(line)
                if not isinstance(event, dict):
                    continue
                obj = event.get("object")
                if event.get("type") == "ERROR":
                    status = obj if isinstance(obj, dict) else {}
                    raise ApiError(int(status.get("code") or 500), str(status.get("reason") or ""),
                                   str(status.get("message") or ""))
                yield {"type": event.get("type"), "object": obj}
                if handle.stopped:
                    break
        except ApiError:
            raise
        except connection_faults(ValueError) as exc:  # a dropped stream, a torn line
            raise ConnectionLost(exc) from exc
        finally:
            resp.close()  # not released to the pool: the stream may still be being sent
            resp.release_conn()

    def pod_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str | None = None,
        follow: bool = False,
        previous: bool = False,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        since_time: str | None = None,
        timestamps: bool = True,
    ) -> Any:
        """The log as a streamed response (urllib3's methods; read it yourself: some client versions mangle
        plain-text log bodies when they decode them)."""
        params = query(container=container, follow=follow or None, previous=previous or None,
                       tailLines=tail_lines, sinceSeconds=since_seconds, sinceTime=since_time,
                       timestamps=timestamps or None)
        read_timeout = None if follow else self.timeout
        return self._send("GET", PODS.path(namespace, pod, "log"), params, stream=True,
                          timeout=(self.timeout, read_timeout) if read_timeout else (self.timeout, 3600.0 * 24))


__all__ = ["Streams", "WatchHandle"]
