"""A small, dict-based layer over the official ``kubernetes`` client: configuration, requests, retries, watches.

Every object is a plain dict (as rendered, as the API server sends it), core kinds and custom resources
alike, so one code path serves Jobs, Pods, JobSets, Volcano Jobs and Kubeflow jobs. Requests go through
``ApiClient.param_serialize``/``call_api`` of the official client (its authentication, TLS and proxy
handling) with ``_preload_content=False``: we read the bytes ourselves.

Decisions:

- **The kubeconfig is loaded explicitly.** The client reads ``$KUBECONFIG`` once, at import; we read it
  when a backend is built, honour ``--context``, and fall back to the in-cluster service account.
- **urllib3's own retries are off** (``retries=False``): it silently repeats GET/PUT/DELETE on a dropped
  connection and some 429/503s, which would hide faults and double-count requests. Retries happen here,
  with capped exponential backoff and jitter, honouring ``Retry-After``; idempotent verbs only (GET,
  DELETE, PATCH). Creation retries live in :mod:`.submit`, which first checks whether the lost request
  landed, so a retry never makes a duplicate.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...contract.errors import EXIT_USAGE, KubetrainError

JSON = dict[str, Any]

IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

#: Status codes worth another try: throttling, server trouble, timeouts at the gateway.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class KubernetesError(KubetrainError):
    """Something the Kubernetes backend cannot do, with a message for the user (no traceback needed)."""


class ConfigError(KubernetesError):
    """No usable kubeconfig / in-cluster configuration."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Cause:
    """One item of a Status's ``details.causes``: which field, and what is wrong with it."""

    field: str | None
    message: str
    reason: str | None = None

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ApiError(KubernetesError):
    """An answer other than 2xx (``status`` 0: the connection dropped or could not be made)."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        *,
        causes: Sequence[Cause] = (),
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = list(causes)
        self.retry_after = retry_after
        self.details = dict(details or {})
        super().__init__(self.describe())

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status in TRANSIENT_STATUS

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410

    def describe(self) -> str:
        head = f"{self.status} {self.reason}".strip() if self.status else "connection lost"
        text = f"{head}: {self.message}" if self.message else head
        if self.causes and not all(c.message in self.message for c in self.causes):
            text += "".join(f"\n  {c}" for c in self.causes)
        return text

    @classmethod
    def from_response(cls, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> ApiError:
        retry_after: float | None = None
        if headers is not None:
            raw = headers.get("Retry-After")
            if raw is not None:
                try:
                    retry_after = float(raw)
                except ValueError:
                    retry_after = None
        try:
            body = json.loads(data) if data else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict) or body.get("kind") != "Status":
            text = data.decode("utf-8", "replace").strip()[:500]
            return cls(status, "", text, retry_after=retry_after)
        details = body.get("details") or {}
        causes = [
            Cause(c.get("field"), c.get("message") or "", c.get("reason"))
            for c in details.get("causes") or []
            if isinstance(c, dict)
        ]
        if retry_after is None and details.get("retryAfterSeconds") is not None:
            retry_after = float(details["retryAfterSeconds"])
        return cls(
            int(body.get("code") or status),
            body.get("reason") or "",
            body.get("message") or "",
            causes=causes,
            retry_after=retry_after,
            details=details,
        )


class ConnectionLost(ApiError):
    def __init__(self, error: BaseException) -> None:
        super().__init__(0, "ConnectionError", f"{type(error).__name__}: {error}")


# --------------------------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class Resource:
    """A kind the backend talks to: where it lives in the API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if sub:
                base += f"/{sub}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")
JOBS = Resource("batch", "v1", "jobs", "Job")
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
VOLCANO_JOBS = Resource("batch.volcano.sh", "v1alpha1", "jobs", "Job")
PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
VOLCANO_QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False)
KUBEFLOW_KINDS = {
    "PyTorchJob": Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    "TFJob": Resource("kubeflow.org", "v1", "tfjobs", "TFJob"),
    "MPIJob": Resource("kubeflow.org", "v1", "mpijobs", "MPIJob"),
    "JAXJob": Resource("kubeflow.org", "v1", "jaxjobs", "JAXJob"),
}
KUEUE_GROUP = "kueue.x-k8s.io"

_KNOWN: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r
    for r in (PODS, SERVICES, CONFIGMAPS, EVENTS, JOBS, JOBSETS, VOLCANO_JOBS, PODGROUPS, VOLCANO_QUEUES,
              Resource("", "v1", "secrets", "Secret"), Resource("", "v1", "serviceaccounts", "ServiceAccount"),
              Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
              Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
              Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
              *KUBEFLOW_KINDS.values())
}


def known_resource(api_version: str, kind: str) -> Resource | None:
    return _KNOWN.get((api_version, kind))


# --------------------------------------------------------------------------------------------- retries


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with jitter: ``base * 2**n``, at most ``cap`` seconds, ``attempts`` tries."""

    attempts: int = 6
    base: float = 0.2
    cap: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def delay(self, attempt: int, error: ApiError | None = None) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 0)."""
        if error is not None and error.retry_after is not None:
            return min(self.cap, max(0.0, error.retry_after))
        step = min(self.cap, self.base * (2**attempt))
        return step * (0.5 + random.random() / 2)

    def wait(self, attempt: int, error: ApiError | None = None) -> None:
        self.sleep(self.delay(attempt, error))


# --------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class Connection:
    """A configured ``ApiClient`` and what the configuration says about the namespace."""

    api_client: Any
    namespace: str | None
    source: str  #: "kubeconfig <path> (context <name>)" or "in-cluster", for messages


def _new_configuration() -> Any:
    from kubernetes import client

    cfg = client.Configuration()
    # Retries are ours (see the module doc): urllib3 must not repeat requests behind our back.
    cfg.retries = False
    cfg.client_go_retries = False
    return cfg


def _context_namespace(path: str, context: str | None) -> tuple[str | None, str | None]:
    from kubernetes import config

    contexts, active = config.list_kube_config_contexts(config_file=path)
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts or [] if c.get("name") == context), None)
        if chosen is None:
            names = ", ".join(c.get("name", "?") for c in contexts or []) or "none"
            raise ConfigError(f"context {context!r} is not in the kubeconfig {path} (contexts: {names})")
    if not chosen:
        return None, None
    return (chosen.get("context") or {}).get("namespace"), chosen.get("name")


def connect(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    in_cluster: bool | None = None,
) -> Connection:
    """A client for the cluster: ``kubeconfig`` (else ``$KUBECONFIG``, read now, else ``~/.kube/config``)
    with ``context`` (else its current context); else, inside a pod, the service account.

    ``in_cluster=True`` forces the service account, ``False`` forbids it.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = _new_configuration()
    path: str | None = None
    if in_cluster is not True:
        if kubeconfig is not None:
            path = os.fspath(kubeconfig)
        elif os.environ.get("KUBECONFIG"):
            path = os.environ["KUBECONFIG"]
        elif (Path.home() / ".kube" / "config").exists():
            path = str(Path.home() / ".kube" / "config")
    if path is not None:
        files = [p for p in path.split(os.pathsep) if p]
        if not any(Path(p).expanduser().exists() for p in files):
            raise ConfigError(f"kubeconfig {path} does not exist")
        try:
            namespace, ctx_name = _context_namespace(path, context)
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                    persist_config=False)
        except ConfigException as exc:
            raise ConfigError(f"kubeconfig {path}: {exc}") from None
        source = f"kubeconfig {path}" + (f" (context {ctx_name})" if ctx_name else "")
        return Connection(client.ApiClient(configuration=cfg), namespace, source)
    if in_cluster is False or (in_cluster is None and not os.environ.get("KUBERNETES_SERVICE_HOST")):
        raise ConfigError(
            "no cluster configured: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not "
            "running inside a pod"
        )
    try:
        config.load_incluster_config(client_configuration=cfg)
    except ConfigException as exc:
        raise ConfigError(f"in-cluster configuration: {exc}") from None
    try:
        in_cluster_ns: str | None = IN_CLUSTER_NAMESPACE_FILE.read_text().strip() or None
    except OSError:
        in_cluster_ns = None
    return Connection(client.ApiClient(configuration=cfg), in_cluster_ns, "in-cluster service account")


# --------------------------------------------------------------------------------------------- the API


Query = Sequence[tuple[str, Any]]


def _query(**params: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((key, value))
    return out


class Kube:
    """Requests to one cluster, objects as dicts. Thread-safe (urllib3's pool is)."""

    def __init__(self, api_client: Any, retry: RetryPolicy | None = None, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        #: Requests sent (every attempt, streams included): what the benchmarks count.
        self.request_count = 0
        self._count_lock = threading.Lock()
        self._discovered: dict[str, list[JSON]] = {}

    def close(self) -> None:
        self.api_client.close()

    # -- raw ------------------------------------------------------------------------------------------

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
        """One attempt. Returns the urllib3 response (``stream``) or the body's bytes; raises ApiError."""
        import urllib3

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        m, url, hdrs, data, post = self.api_client.param_serialize(
            method, path, query_params=list(query), header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        with self._count_lock:
            self.request_count += 1
        try:
            resp = self.api_client.call_api(m, url, hdrs, data, post, _request_timeout=timeout or self.timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ConnectionLost(exc) from exc
        raw = resp.response
        if not 200 <= raw.status <= 299:
            try:
                payload = raw.read()
            except (urllib3.exceptions.HTTPError, OSError):
                payload = b""
                raw.close()  # a half-read connection must not go back to the pool
            finally:
                raw.release_conn()
            raise ApiError.from_response(raw.status, payload, raw.headers)
        if stream:
            return raw
        try:
            return raw.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
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
        if retry is None:
            retry = method != "POST"
        attempt = 0
        while True:
            try:
                data = self._send(method, path, query, body, content_type)
                return json.loads(data) if data else {}
            except ApiError as exc:
                if not (retry and exc.transient) or attempt + 1 >= self.retry.attempts:
                    raise
                self.retry.wait(attempt, exc)
                attempt += 1

    # -- verbs ----------------------------------------------------------------------------------------

    def get(self, res: Resource, name: str, namespace: str | None) -> JSON:
        return self.request("GET", res.path(namespace, name))

    def find(self, res: Resource, name: str, namespace: str | None) -> JSON | None:
        try:
            return self.get(res, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def create(self, res: Resource, body: JSON, namespace: str | None, *, dry_run: bool = False) -> JSON:
        """One POST, never retried here (see :mod:`.submit`)."""
        return self.request("POST", res.path(namespace), _query(dryRun="All" if dry_run else None), body)

    def merge_patch(self, res: Resource, name: str, namespace: str | None, patch: JSON) -> JSON:
        return self.request("PATCH", res.path(namespace, name), (), patch, "application/merge-patch+json")

    def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        *,
        propagation: str | None = "Background",
        dry_run: bool = False,
    ) -> JSON | None:
        """Delete; None if it was already gone."""
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        try:
            return self.request("DELETE", res.path(namespace, name), _query(dryRun="All" if dry_run else None), body)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def delete_collection(self, res: Resource, namespace: str, label_selector: str,
                          field_selector: str | None = None) -> None:
        self.request("DELETE", res.path(namespace),
                     _query(labelSelector=label_selector, fieldSelector=field_selector),
                     {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})

    # -- watch ----------------------------------------------------------------------------------------

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
            query = _query(
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
            resp = self._send("GET", res.path(namespace), query, stream=True,
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

    # -- logs -----------------------------------------------------------------------------------------

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
        query = _query(container=container, follow=follow or None, previous=previous or None,
                       tailLines=tail_lines, sinceSeconds=since_seconds, sinceTime=since_time,
                       timestamps=timestamps or None)
        read_timeout = None if follow else self.timeout
        return self._send("GET", PODS.path(namespace, pod, "log"), query, stream=True,
                          timeout=(self.timeout, read_timeout) if read_timeout else (self.timeout, 3600.0 * 24))

    # -- discovery ------------------------------------------------------------------------------------

    def api_groups(self) -> JSON:
        """``/apis``: the APIGroupList."""
        return self.request("GET", "/apis")

    def group_resources(self, group_version: str) -> list[JSON]:
        """``/apis/<group>/<version>``'s resources ([] when the version is not served); cached."""
        if group_version not in self._discovered:
            path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
            try:
                out = self.request("GET", path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                out = {}
            self._discovered[group_version] = list(out.get("resources") or [])
        return self._discovered[group_version]

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """Where objects of ``kind`` live; known kinds without a request, others by discovery."""
        known = known_resource(api_version, kind)
        if known is not None:
            return known
        group, _, version = api_version.rpartition("/")
        for r in self.group_resources(api_version):
            if r.get("kind") == kind and "/" not in r.get("name", ""):
                return Resource(group, version, r["name"], kind, bool(r.get("namespaced", True)))
        raise KubernetesError(f"the cluster does not serve {kind} ({api_version})")

    # Last in the class: a method named `list` shadows the builtin in the annotations that follow it.
    def list(
        self,
        res: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JSON], str]:
        """(items, the list's resourceVersion), every page."""
        items: list[JSON] = []
        token: str | None = None
        while True:
            out = self.request(
                "GET",
                res.path(namespace),
                _query(labelSelector=label_selector, fieldSelector=field_selector, limit=500, **{"continue": token}),
            )
            for item in out.get("items") or []:
                # Items of built-in lists carry no apiVersion/kind.
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(item)
            meta = out.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")


__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "JOBS",
    "JOBSETS",
    "KUBEFLOW_KINDS",
    "PODGROUPS",
    "PODS",
    "SERVICES",
    "VOLCANO_JOBS",
    "ApiError",
    "Cause",
    "ConfigError",
    "Connection",
    "ConnectionLost",
    "Kube",
    "KubernetesError",
    "Resource",
    "RetryPolicy",
    "connect",
    "known_resource",
]
