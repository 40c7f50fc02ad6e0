"""Streamed GETs: watches (events as dicts) and pod logs (the response, read by :mod:`..logs`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .errors import ApiError, ConnectionLost
from .resources import PODS, Resource
from .transport import JSON, Transport, query


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

        Uses ``kubernetes.watch.Watch`` (an expired version becomes ``ApiException(410)``, re-raised
        here as ApiError 410). ``stopper`` receives the Watch so another thread can stop it; ``stopped``
        tells whether it was (checked around the request, which the Watch cannot interrupt before it has
        the response).
        """
        from kubernetes import watch as kwatch
        from kubernetes.client.exceptions import ApiException

        def list_fn(**kwargs: Any) -> Any:
            params = query(
                watch=True,
                resourceVersion=kwargs.get("resource_version"),
                timeoutSeconds=kwargs.get("timeout_seconds"),
                allowWatchBookmarks=True,
                labelSelector=label_selector,
                fieldSelector=field_selector,
            )
            if stopped is not None and stopped():
                raise ConnectionLost(InterruptedError("watch stopped"))
            # The server ends the stream at timeoutSeconds; the read timeout is a safety net on top.
            resp = self._send("GET", res.path(namespace), params, stream=True,
                              timeout=(self.timeout, timeout_seconds + 30))
            if stopped is not None and stopped():
                resp.close()  # not released to the pool: the stream is still being sent
                raise ConnectionLost(InterruptedError("watch stopped"))
            return resp

        # return_type "object": events stay dicts. (With deserialize=False the client cannot read an ERROR
        # event: it looks for the "raw_object" only its own unmarshalling sets.)
        w = kwatch.Watch(return_type="object")
        if stopper is not None:
            stopper(w)
        try:
            for event in w.stream(list_fn, resource_version=resource_version, timeout_seconds=timeout_seconds):
                if isinstance(event, dict):
                    yield {"type": event.get("type"), "object": event.get("raw_object") or event.get("object")}
        except ApiException as exc:
            raise ApiError(int(exc.status or 0), str(exc.reason or ""), str(exc.body or "")) from exc
        except ApiError:
            raise
        except Exception as exc:  # urllib3 protocol errors while reading the stream
            import urllib3

            if isinstance(exc, urllib3.exceptions.HTTPError | OSError | ValueError):
                raise ConnectionLost(exc) from exc
            raise

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
        """The log as a streamed urllib3 response (read it yourself: some client versions mangle
        plain-text log bodies when they decode them)."""
        params = query(container=container, follow=follow or None, previous=previous or None,
                       tailLines=tail_lines, sinceSeconds=since_seconds, sinceTime=since_time,
                       timestamps=timestamps or None)
        read_timeout = None if follow else self.timeout
        return self._send("GET", PODS.path(namespace, pod, "log"), params, stream=True,
                          timeout=(self.timeout, read_timeout) if read_timeout else (self.timeout, 3600.0 * 24))


__all__ = ["Streams"]
