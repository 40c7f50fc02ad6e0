"""``KubeEmulator``: the server, its store, and what a test does with them.

A test talks to the emulator two ways: through the official client (as the code under test does),
over HTTP, with a kubeconfig from :meth:`KubeEmulator.write_kubeconfig`; and directly, through the
methods here, to play the parts that are missing (scheduler, kubelet, controllers), to script
faults, and to inspect state and the request log.
"""

from __future__ import annotations

import base64
import re
import secrets
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from . import kubelet
from .copies import clone
from .patches import merge_patch
from .resources import DEFAULT_CRD_DIR, ResourceType, default_crd_keys
from .server import ApiServer
from .store import BodyValidator, Obj, Store, ValidationFailure, now
from .tls import Certificates, server_context
from .transport import Fault, RequestRecord

_DEFAULT_SETTINGS = {"strict_namespaces": True, "max_object_bytes": 1_572_864}


class KubeEmulator:
    """A stateful Kubernetes API server on 127.0.0.1 (a free port), for tests.

    ``crds`` names the CRDs installed after every :meth:`reset` (default: every file under
    ``crd_dir``, which defaults to the ``crds`` directory of this package). ``anonymous``: requests
    without credentials are served, as the plain-HTTP port of the API server served them (kubectl sends
    none to an ``http://`` server); a wrong bearer token is 401 either way. ``tls``: serve HTTPS with these
    certificates (:func:`.tls.make_certificates`); a client certificate signed by their CA authenticates a
    request as a token does (``require_client_cert``: the handshake fails without one).
    """

    def __init__(
        self,
        *,
        crd_dir: Path = DEFAULT_CRD_DIR,
        crds: Iterable[str] | None = None,
        history_limit: int = 10_000,
        token: str | None = None,
        anonymous: bool = True,
        tls: Certificates | None = None,
        require_client_cert: bool = False,
    ) -> None:
        self.store = Store(crd_dir, history_limit)
        self._history_limit = history_limit
        self.default_crds = default_crd_keys(self.store.available_crds) if crds is None else list(crds)
        self.token = token if token is not None else secrets.token_hex(16)
        self._api = ApiServer(self.store, self.token, anonymous)
        self.url = ""
        self.tls = tls
        self._tls_context = server_context(tls, require_client_cert=require_client_cert) if tls else None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> KubeEmulator:
        self.url = self._api.start(tls=self._tls_context)
        self.reset()
        return self

    def stop(self) -> None:
        self.end_streams()
        self._api.stop()

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def reset(self, crds: Iterable[str] | None = None) -> None:
        """Back to a fresh cluster: default namespaces, the given (or default) CRDs, no faults, no
        request log, no body validator. Open watch and log streams end. Costs about a millisecond."""
        self._api.faults.clear()
        self._api.requests.clear()
        self._api.server_errors.clear()
        self._api.watch_timeout = 60.0
        self._api.follow_timeout = 60.0
        for key, value in _DEFAULT_SETTINGS.items():
            setattr(self.store, key, value)
        self.store.body_validator = None
        self.store.history_limit = self._history_limit
        self.store.reset(self.default_crds if crds is None else crds)

    def end_streams(self) -> None:
        """End every open watch and followed log (they see the cluster 'restart')."""
        with self.store.cond:
            self.store.generation += 1
            self.store.cond.notify_all()

    # ------------------------------------------------------------------ client configuration

    def kubeconfig(self, namespace: str = "default", context: str = "kube-emulator") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": self._cluster_entry()}],
            "users": [{"name": context, "user": {"token": self.token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
            "current-context": context,
        }

    def _cluster_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"server": self.url}
        if self.tls is not None:
            entry["certificate-authority-data"] = base64.b64encode(self.tls.ca_cert.read_bytes()).decode()
        return entry

    def write_kubeconfig(self, path: Path | str, namespace: str = "default", context: str = "kube-emulator") -> Path:
        path = Path(path)
        path.write_text(yaml.safe_dump(self.kubeconfig(namespace, context)))
        return path

    def api_client(self, kubeconfig: Path | str) -> Any:
        """An ``ApiClient`` built from that kubeconfig file alone (never $KUBECONFIG or global state)."""
        from kubernetes import client, config

        cfg = type.__call__(client.Configuration)
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg, persist_config=False)
        cfg.proxy = None  # loopback: never through an HTTP(S)_PROXY from the environment
        return client.ApiClient(configuration=cfg)

    # ------------------------------------------------------------------ settings

    @property
    def body_validator(self) -> BodyValidator | None:
        """``callable(obj) -> list[str]`` run on every body the client creates, replaces or patches
        (the resulting object for patches); messages become a 422 with one cause each."""
        return self.store.body_validator

    @body_validator.setter
    def body_validator(self, fn: BodyValidator | None) -> None:
        self.store.body_validator = fn

    @property
    def validation_failures(self) -> list[ValidationFailure]:
        return list(self.store.validation_failures)

    @property
    def watch_timeout(self) -> float:
        """Seconds a watch without ``timeoutSeconds`` stays open (default 60)."""
        return self._api.watch_timeout

    @watch_timeout.setter
    def watch_timeout(self, seconds: float) -> None:
        self._api.watch_timeout = seconds

    @property
    def follow_timeout(self) -> float:
        """Seconds a followed log stays open at most if its container never ends (default 60)."""
        return self._api.follow_timeout

    @follow_timeout.setter
    def follow_timeout(self, seconds: float) -> None:
        self._api.follow_timeout = seconds

    @property
    def history_limit(self) -> int:
        """How many watch events are kept; older ones are compacted (a watch from before them gets 410)."""
        return self.store.history_limit

    @history_limit.setter
    def history_limit(self, events: int) -> None:
        self.store.history_limit = events

    @property
    def server_errors(self) -> list[str]:
        """Tracebacks of emulator bugs (answered 500); the pytest fixture fails a test that has any."""
        return list(self._api.server_errors)

    # ------------------------------------------------------------------ CRDs

    @property
    def available_crds(self) -> list[str]:
        """Keys for :meth:`install_crds`: CRD names (file stems where two files define one CRD)."""
        return sorted(self.store.available_crds)

    def installed_crds(self) -> list[str]:
        """Names of the CRDs the cluster has now."""
        return sorted(o["metadata"]["name"] for o in self.objects("customresourcedefinitions"))

    def install_crds(self, names: Iterable[str]) -> None:
        self.store.install_crds(names)

    def add_crd_dir(self, directory: Path | str) -> list[str]:
        """Make the CRDs of another folder installable (``install_crds``) beside ``crd_dir``'s; their keys.
        Idempotent (the session's server is shared). A CRD name already known from another file is keyed by
        its file stem (``mpijobs.kubeflow.org.v2beta1``)."""
        return self.store.add_crd_dir(Path(directory))

    def uninstall_crds(self, names: Iterable[str]) -> None:
        """Remove CRDs and every object of theirs (discovery stops listing the group)."""
        self.store.uninstall_crds(names)

    # ------------------------------------------------------------------ objects

    def resource(self, name: str, api_version: str | None = None) -> ResourceType:
        return self.store.registry.resolve(name, api_version)

    def create(self, obj: Mapping[str, Any]) -> Obj:
        """Store an object as a controller would, ``status`` included; defaults and validation apply."""
        rt = self.store.registry.for_object(dict(obj))
        meta = obj.get("metadata") or {}
        return clone(self.store.create(rt, meta.get("namespace"), dict(obj), trusted=True))

    def update(self, obj: Mapping[str, Any]) -> Obj:
        """Replace an object wholesale, ``status`` included, without resourceVersion checks."""
        rt = self.store.registry.for_object(dict(obj))
        return clone(self.store.write(rt, clone(dict(obj))))

    def find(self, resource: str, name: str, namespace: str | None = "default") -> Obj | None:
        obj = self.store.find(self.resource(resource), namespace, name)
        return clone(obj) if obj is not None else None

    def get(self, resource: str, name: str, namespace: str | None = "default") -> Obj:
        """The stored object (a copy); raises :class:`~kube_emulator.errors.ApiError` 404 if missing."""
        return clone(self.store.get(self.resource(resource), namespace, name))

    def objects(self, resource: str, namespace: str | None = None, label_selector: str | None = None) -> list[Obj]:
        """Stored objects of a type (all namespaces unless one is given), sorted by namespace and name."""
        items, _ = self.store.list_objects(self.resource(resource), namespace, label_selector)
        return clone(items)

    def patch_status(
        self, resource: str, name: str, status: Mapping[str, Any], namespace: str | None = "default"
    ) -> Obj:
        """Merge-patch ``status`` (a controller's status update); ``None`` values delete keys."""
        with self.store.cond:
            rt = self.resource(resource)
            obj = clone(self.store.get(rt, namespace, name))
            obj["status"] = merge_patch(obj.get("status") or {}, dict(status))
            return clone(self.store.write(rt, obj))

    def delete(
        self, resource: str, name: str, namespace: str | None = "default", propagation: str | None = "Background"
    ) -> None:
        self.store.delete(self.resource(resource), namespace, name, propagation=propagation)

    # ------------------------------------------------------------------ scheduler, kubelet, controllers

    def set_pod_phase(
        self,
        namespace: str,
        name: str,
        phase: str,
        *,
        exit_code: int | None = None,
        reason: str | None = None,
        message: str | None = None,
        restart: bool = False,
        container: str | None = None,
        pod_reason: str | None = None,
        node_name: str | None = None,
    ) -> Obj:
        """Move a pod to ``phase`` with the status a kubelet would write (see :func:`kubelet.apply_phase`).

        ``set_pod_phase(ns, p, "Pending", reason="Unschedulable")`` leaves it unscheduled with a
        PodScheduled=False condition; ``"Failed", exit_code=137, reason="OOMKilled"`` terminates
        it; ``"Running", restart=True, exit_code=1`` records a crash and restart (the log so far
        becomes ``previous``).
        """
        with self.store.cond:
            pods = self.resource("pods")
            pod = clone(self.store.get(pods, namespace, name))
            restarted = kubelet.apply_phase(
                pod,
                phase,
                now=now(),
                exit_code=exit_code,
                reason=reason,
                message=message,
                restart=restart,
                container=container,
                pod_reason=pod_reason,
                node_name=node_name,
            )
            for c in restarted:
                self.store.logs.restart(pod["metadata"]["uid"], c)
            return clone(self.store.write(pods, pod))

    def append_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """Append lines to a container's current log (the only container if ``container`` is None).
        A followed log sees them at once."""
        with self.store.cond:
            obj = self.store.get(self.resource("pods"), namespace, pod)
            spec = obj["spec"]
            containers = [c["name"] for c in spec.get("containers") or []]
            names = containers + [c["name"] for c in spec.get("initContainers") or []]
            if container is None:
                if len(containers) != 1:
                    raise ValueError(f"pod {pod} has containers {containers}: name one")
                container = containers[0]
            if container not in names:
                raise ValueError(f"pod {pod} has no container {container!r} (has {names})")
            self.store.logs.append(obj["metadata"]["uid"], container, text)
            self.store.cond.notify_all()

    def add_event(
        self,
        involved: Mapping[str, Any],
        reason: str,
        message: str,
        type: str = "Normal",
        *,
        component: str = "kubelet",
        count: int = 1,
    ) -> Obj:
        """Record a core/v1 Event about ``involved`` (a stored object, or at least kind/name/namespace)."""
        meta = involved.get("metadata") or {}
        kind = involved.get("kind") or "Pod"
        name = meta.get("name") or involved.get("name")
        namespace = meta.get("namespace") or involved.get("namespace") or "default"
        ref: dict[str, Any] = {
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "apiVersion": involved.get("apiVersion") or "v1",
        }
        for src, dst in (("uid", "uid"), ("resourceVersion", "resourceVersion")):
            if meta.get(src) or involved.get(src):
                ref[dst] = meta.get(src) or involved.get(src)
        t = now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type,
            "count": count,
            "firstTimestamp": t,
            "lastTimestamp": t,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": "",
        }
        return self.create(event)

    def create_job_pods(
        self, namespace: str, job: str, count: int | None = None, indexes: Iterable[int] | None = None
    ) -> list[Obj]:
        """Create a Job's pods the way the Job controller does (labels, ownerReference, and for
        Indexed Jobs the completion index label/annotation, ``JOB_COMPLETION_INDEX`` and the
        ``<job>-<index>`` hostname). Default: ``parallelism`` pods (capped by ``completions``)."""
        with self.store.cond:
            obj = self.store.get(self.resource("jobs"), namespace, job)
            spec = obj["spec"]
            indexed = spec.get("completionMode") == "Indexed"
            if indexes is None:
                n = spec.get("parallelism", 1)
                if spec.get("completions") is not None:
                    n = min(n, spec["completions"])
                indexes = range(n if count is None else count)
            owner = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job,
                "uid": obj["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
            pods = []
            for i in indexes:
                template = clone(spec["template"])
                tmeta = template.get("metadata") or {}
                labels = dict(tmeta.get("labels") or {})
                annotations = dict(tmeta.get("annotations") or {})
                pod_spec = template["spec"]
                if indexed:
                    labels["batch.kubernetes.io/job-completion-index"] = str(i)
                    annotations["batch.kubernetes.io/job-completion-index"] = str(i)
                    pod_spec.setdefault("hostname", f"{job}-{i}")
                    index_env = {
                        "name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {
                            "fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}
                        },
                    }
                    for c in (pod_spec.get("initContainers") or []) + pod_spec.get("containers", []):
                        c.setdefault("env", []).append(dict(index_env))
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": f"{job}-{i}-" if indexed else f"{job}-",
                        "namespace": namespace,
                        "labels": labels,
                        "annotations": annotations,
                        "ownerReferences": [owner],
                    },
                    "spec": pod_spec,
                }
                pods.append(self.create(pod))
            return pods

    def run_controller(
        self,
        namespace: str,
        deployment: str,
        *,
        ready: bool = True,
        lease: str | None = None,
        replicas: int = 1,
        renewed_seconds_ago: float = 0.0,
    ) -> Obj:
        """A controller's Deployment as the deployment controller reports it (``status.readyReplicas``,
        ``availableReplicas``, the ``Available`` condition), and optionally its leader-election Lease as the
        leader renews it (``spec.holderIdentity``, ``renewTime`` ``renewed_seconds_ago`` in the past,
        ``leaseDurationSeconds`` 15). ``ready=False``: the pods are not ready (CrashLoopBackOff, ImagePull...),
        and the Lease, if any, is not renewed. The namespace is created if missing."""
        with self.store.cond:
            if self.find("namespaces", namespace, None) is None:
                self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            labels = {"app.kubernetes.io/name": deployment}
            body: dict[str, Any] = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": deployment, "namespace": namespace, "labels": labels},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "manager", "image": f"{deployment}:latest"}]},
                    },
                },
            }
            existing = self.find("deployments", deployment, namespace)
            obj = self.create(body) if existing is None else existing
            ready_n = replicas if ready else 0
            t = now()
            status = {
                "observedGeneration": obj["metadata"].get("generation", 1),
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": ready_n or None,
                "availableReplicas": ready_n or None,
                "unavailableReplicas": (replicas - ready_n) or None,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True" if ready else "False",
                        "reason": "MinimumReplicasAvailable" if ready else "MinimumReplicasUnavailable",
                        "message": "Deployment has minimum availability."
                        if ready
                        else "Deployment does not have minimum availability.",
                        "lastUpdateTime": t,
                        "lastTransitionTime": t,
                    }
                ],
            }
            obj = self.patch_status("deployments", deployment, status, namespace)
            if lease is not None:
                renewed = _micro_time(time.time() - renewed_seconds_ago)
                spec = {
                    "holderIdentity": f"{deployment}-7d9f8c6b5-x2x4q_{uuid.uuid4()}",
                    "leaseDurationSeconds": 15,
                    "acquireTime": renewed,
                    "renewTime": renewed,
                    "leaseTransitions": 0,
                }
                current = self.find("leases", lease, namespace)
                if current is None:
                    self.create(
                        {
                            "apiVersion": "coordination.k8s.io/v1",
                            "kind": "Lease",
                            "metadata": {"name": lease, "namespace": namespace},
                            "spec": spec,
                        }
                    )
                elif ready:
                    current["spec"] = {**current.get("spec", {}), "renewTime": renewed}
                    self.update(current)
            return obj

    def compact(self) -> None:
        """Forget the watch history: resuming a watch from any earlier resourceVersion gets 410."""
        self.store.compact()

    # ------------------------------------------------------------------ faults

    def _fault(self, method: str | None, path_regex: str | None, **kwargs: Any) -> Fault:
        fault = Fault(method.upper() if method else None, re.compile(path_regex) if path_regex else None, **kwargs)
        self._api.faults.append(fault)
        return fault

    def fail_next(
        self,
        method: str | None = None,
        path_regex: str | None = None,
        status: int = 500,
        *,
        times: int = 1,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> Fault:
        """The next ``times`` matching requests fail with ``status`` before anything else happens
        (nothing is stored). ``path_regex`` is searched in the URL path; 429 gets ``Retry-After: 1``
        unless ``retry_after`` says otherwise."""
        if status == 429 and retry_after is None:
            retry_after = 1
        return self._fault(method, path_regex, status=status, times=times, message=message, retry_after=retry_after)

    def drop_next(self, method: str | None = None, path_regex: str | None = None, *, times: int = 1) -> Fault:
        """Close the connection of the next matching requests without any response (nothing stored).
        urllib3 retries idempotent methods on a dropped connection, so a GET may need ``times > 1``."""
        return self._fault(method, path_regex, status=None, times=times, drop=True)

    def delay_next(
        self, seconds: float, method: str | None = None, path_regex: str | None = None, *, times: int = 1
    ) -> Fault:
        """Hold the next matching requests for ``seconds`` before handling them normally."""
        return self._fault(method, path_regex, status=None, times=times, delay=seconds)

    def clear_faults(self) -> None:
        self._api.faults.clear()

    # ------------------------------------------------------------------ request log

    @property
    def requests(self) -> list[RequestRecord]:
        return list(self._api.requests)

    def count_requests(self, method: str | None = None, path_regex: str | None = None) -> int:
        pattern = re.compile(path_regex) if path_regex else None
        return sum(
            1
            for r in self._api.requests
            if (method is None or r.method == method.upper()) and (pattern is None or pattern.search(r.path))
        )

    def clear_requests(self) -> None:
        self._api.requests.clear()


def _micro_time(t: float) -> str:
    """A ``MicroTime`` (a Lease's renewTime): RFC 3339 with microseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"
