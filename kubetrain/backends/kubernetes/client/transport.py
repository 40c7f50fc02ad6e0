"""One request to the API server, through :class:`.light.LightClient` (the standard library's ``http.client``, for
the kubeconfigs kubetrain reads itself) or the official client's ``ApiClient`` (its authentication, TLS and proxy
handling through urllib3, for the rest), with the bytes read here (the body not preloaded), and retried here when
idempotent. Both hand back a response with urllib3's reading methods (``read``, ``stream``, ``close``,
``release_conn``); a connection fault is any of :func:`.light.connection_faults`.

Every object is a plain dict (as rendered, as the API server sends it), core kinds and custom resources
alike, so one code path serves Jobs, Pods, JobSets, Volcano Jobs and Kubeflow jobs. Only idempotent verbs
(GET, DELETE, PATCH) are retried, on 429, 5xx and dropped connections (:mod:`.retry`); a POST is sent once
(:mod:`..submit` decides about creates).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from .errors import ApiError, ConnectionLost
from .light import connection_faults
from .retry import RetryPolicy

JSON = dict[str, Any]

Query = Sequence[tuple[str, Any]]


def query(**params: Any) -> list[tuple[str, Any]]:
    """Query parameters, None left out, booleans as the API writes them."""
    out: list[tuple[str, Any]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((key, value))
    return out


def server_of(api_client: Any) -> str:
    """The server a LightClient or an official ``ApiClient`` talks to."""
    host = getattr(api_client, "host", None)
    if isinstance(host, str):
        return host
    return str(getattr(getattr(api_client, "configuration", None), "host", "") or "")


class Transport:
    """Requests to one cluster. Thread-safe (both transports' pools are)."""

    def __init__(self, api_client: Any, retry: RetryPolicy | None = None, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        #: Requests sent (every attempt, streams included): what the benchmarks count.
        self.request_count = 0
        self._count_lock = threading.Lock()

    def close(self) -> None:
        self.api_client.close()

    @property
    def host(self) -> str:
        """The API server's URL (what messages and the liveness cache name)."""
        return server_of(self.api_client)

    def _send(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        *,
        stream: bool = False,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """One attempt. Returns the response (``stream``) or the body's bytes; raises ApiError."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        with self._count_lock:
            self.request_count += 1
        try:
            if hasattr(self.api_client, "send"):  # a LightClient
                raw = self.api_client.send(method, path, query, headers, body, timeout or self.timeout)
            else:
                m, url, hdrs, data, post = self.api_client.param_serialize(
                    method, path, query_params=list(query), header_params=headers, body=body,
                    auth_settings=["BearerToken"]
                )
                raw = self.api_client.call_api(m, url, hdrs, data, post,
                                               _request_timeout=timeout or self.timeout).response
        except connection_faults() as exc:
            raise ConnectionLost(exc) from exc
        if not 200 <= raw.status <= 299:
            try:
                payload = raw.read()
            except connection_faults():
                payload = b""
                raw.close()  # a half-read connection must not go back to the pool
            finally:
                raw.release_conn()
            raise ApiError.from_response(raw.status, payload, raw.headers)
        if stream:
            return raw
        try:
            return raw.read()
        except connection_faults() as exc:
            raw.close()  # a half-read connection must not go back to the pool
            raise ConnectionLost(exc) from exc
        finally:
            raw.release_conn()

    def request(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        *,
        retry: bool | None = None,
    ) -> JSON:
        """A JSON request; idempotent verbs (all but POST) are retried on transient errors."""
        data = self.fetch(method, path, query, body, content_type, retry=retry)
        return json.loads(data) if data else {}

    def fetch(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        *,
        retry: bool | None = None,
    ) -> bytes:
        """The answer's body, not decoded; retried as :meth:`request` is."""
        if retry is None:
            retry = method != "POST"
        attempt = 0
        while True:
            try:
                return bytes(self._send(method, path, query, body, content_type))
            except ApiError as exc:
                if not (retry and exc.transient) or attempt + 1 >= self.retry.attempts:
                    raise
                self.retry.wait(attempt, exc)
                attempt += 1


__all__ = ["JSON", "Query", "Transport", "query", "server_of"]
