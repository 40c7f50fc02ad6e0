"""Configuration: which cluster, as whom, and the namespace the configuration names.

A kubeconfig whose user is a token, a token file or a client certificate (and the in-cluster service account) is
read by :mod:`.kubeconfig` and served by :mod:`.light`, without importing the ``kubernetes`` package (0.5–1 s of
every verb); any other (``exec``, ``auth-provider``, username/password) by the official client, as before.

The kubeconfig is loaded explicitly: the official client reads ``$KUBECONFIG`` once, at import; here it is
read when a backend is built, honouring ``--context``, with the in-cluster service account as the fallback.
urllib3's own retries are switched off (``retries=False``): it silently repeats GET/PUT/DELETE on a dropped
connection and some 429/503s, which would hide faults and double-count requests (:mod:`.retry` decides).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .kubeconfig import Target, target
from .light import LightClient, in_cluster_target

IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Connection:
    """A configured client (a :class:`.light.LightClient` or the official ``ApiClient``) and what the
    configuration says about the namespace."""

    api_client: Any
    namespace: str | None
    source: str  #: "kubeconfig <path> (context <name>)" or "in-cluster", for messages
    context: str = ""  #: the kubeconfig context's name, "in-cluster" for the service account: what kubetrain
    #: keeps on this machine about a cluster's jobs (their logs) is filed under it


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


def _light_client(t: Target) -> LightClient:
    try:
        return LightClient(t)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a CA or key file missing or not PEM
        raise ConfigError(f"{t.source}: cannot load its certificates: {exc}") from None


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
        light = target(path, context)
        if light is not None:
            return Connection(_light_client(light), light.namespace, light.source, light.context)
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        cfg = _new_configuration()
        try:
            namespace, ctx_name = _context_namespace(path, context)
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                    persist_config=False)
        except ConfigException as exc:
            raise ConfigError(f"kubeconfig {path}: {exc}") from None
        source = f"kubeconfig {path}" + (f" (context {ctx_name})" if ctx_name else "")
        return Connection(client.ApiClient(configuration=cfg), namespace, source, ctx_name or cfg.host)
    if in_cluster is False or (in_cluster is None and not os.environ.get("KUBERNETES_SERVICE_HOST")):
        raise ConfigError(
            "no cluster configured: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not "
            "running inside a pod"
        )
    sa = in_cluster_target()
    if sa is not None:
        return Connection(_light_client(sa), sa.namespace, sa.source, sa.context)
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = _new_configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except ConfigException as exc:
        raise ConfigError(f"in-cluster configuration: {exc}") from None
    try:
        in_cluster_ns: str | None = IN_CLUSTER_NAMESPACE_FILE.read_text().strip() or None
    except OSError:
        in_cluster_ns = None
    return Connection(client.ApiClient(configuration=cfg), in_cluster_ns, "in-cluster service account", "in-cluster")


__all__ = ["IN_CLUSTER_NAMESPACE_FILE", "Connection", "connect"]
