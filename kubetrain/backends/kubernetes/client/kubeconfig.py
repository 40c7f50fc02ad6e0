"""The kubeconfig, read here for the users kubetrain can serve itself, without the ``kubernetes`` package.

Importing the official client costs 0.5–1 s (its models, every API, config, dynamic, watch): more than a
`kubetrain status` of a thousand pods. Most kubeconfigs name a bearer token, a token file or a client
certificate, and a CA: those are read here and served by :mod:`.light`. Anything else (``exec`` plugins,
``auth-provider``, username/password, impersonation, unknown keys) answers ``None``, and the caller falls back to
the official client, which knows them all: slower, never different.

Several files (``$KUBECONFIG=a:b``) merge as kubectl merges them: for each cluster, user and context name, the
first file that names it wins; the current context is the first file's that sets one. Relative paths in a file
are relative to that file's directory.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import block_yaml

#: User keys served here; any other (exec, auth-provider, username, password, as, ...) goes to the official client.
SERVED_USER_KEYS = frozenset(
    {"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data",
     "extensions"}
)
SERVED_CLUSTER_KEYS = frozenset(
    {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify", "proxy-url",
     "tls-server-name", "extensions", "disable-compression"}
)
_FILE_KEYS = ("tokenFile", "client-certificate", "client-key", "certificate-authority")


@dataclass(frozen=True)
class Target:
    """Where the cluster is and how to prove who we are: what a request needs, nothing of the official client."""

    server: str
    context: str  #: the context's name ("in-cluster" for the service account)
    source: str  #: "kubeconfig <path> (context <name>)", for messages
    namespace: str | None = None
    token: str | None = None
    token_file: str | None = None  #: re-read on use: a projected service-account token rotates
    client_cert: str | bytes | None = None  #: a path, or the PEM itself (``-data``)
    client_key: str | bytes | None = None
    ca: str | bytes | None = None  #: a path, or the PEM itself (``certificate-authority-data``)
    ca_field: str = ""  #: where the CA came from, named when a certificate fails to verify
    insecure: bool = False
    proxy_url: str | None = None
    tls_server_name: str | None = None


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text()
    data = block_yaml.load(text)  # the block YAML kubeconfigs are written in, without importing PyYAML
    if data is not None:
        return data if isinstance(data, dict) else {}
    import yaml  # on use: the flavor modules import this package and must stay light (tests/kubernetes/test_flavors.py)

    # libyaml's safe loader where PyYAML was built with it: a kubeconfig of many clusters parses in a fraction.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(text, Loader=loader) if text.strip() else {}  # a safe loader, C or Python
    return data if isinstance(data, dict) else {}


def _resolved(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    """``entry`` with its file paths made absolute against the directory of the file that named them."""
    out = dict(entry)
    for key in _FILE_KEYS:
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
            out[key] = str(base / value)
        elif isinstance(value, str) and value:
            out[key] = os.path.expanduser(value)
    return out


def merged(files: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]],
                                      dict[str, dict[str, Any]], str | None]:
    """Clusters, users and contexts by name, and the current context, from ``files`` merged as kubectl merges them."""
    sections: dict[str, dict[str, dict[str, Any]]] = {"clusters": {}, "users": {}, "contexts": {}}
    inner = {"clusters": "cluster", "users": "user", "contexts": "context"}
    current: str | None = None
    for name in files:
        path = Path(name).expanduser()
        if not path.exists():
            continue
        data = _load(path)
        if current is None and data.get("current-context"):
            current = str(data["current-context"])
        for section, key in inner.items():
            for item in data.get(section) or []:
                if isinstance(item, dict) and item.get("name") is not None:
                    body = item.get(key) or {}
                    sections[section].setdefault(str(item["name"]), _resolved(body, path.parent.resolve()))
    return sections["clusters"], sections["users"], sections["contexts"], current


def _data(value: Any) -> bytes:
    return base64.b64decode(value) if isinstance(value, str) else bytes(value)


def target(path: str, context: str | None) -> Target | None:
    """What the kubeconfig ``path`` (one file, or several joined by ``os.pathsep``) says for ``context`` (else its
    current one), or None when this reader does not serve it (the official client will, with its own messages)."""
    try:
        clusters, users, contexts, current = merged([p for p in path.split(os.pathsep) if p])
    except Exception:  # unreadable or not YAML: the official loader says what is wrong, as before
        return None
    name = context if context is not None else current
    if not name or name not in contexts:
        return None
    ctx = contexts[name]
    cluster = clusters.get(str(ctx.get("cluster") or ""))
    user = users.get(str(ctx.get("user") or ""), {}) if ctx.get("user") else {}
    if cluster is None or not str(cluster.get("server") or "").startswith(("https://", "http://")):
        return None  # no server, or one without a scheme: the official client's defaults apply
    if not set(cluster) <= SERVED_CLUSTER_KEYS or not set(user) <= SERVED_USER_KEYS:
        return None
    proxy = cluster.get("proxy-url")
    if proxy and not str(proxy).startswith(("http://", "https://")):
        return None  # socks5: the official client's
    try:
        ca: str | bytes | None = None
        ca_field = ""
        if cluster.get("certificate-authority-data"):
            ca, ca_field = _data(cluster["certificate-authority-data"]), "certificate-authority-data"
        elif cluster.get("certificate-authority"):
            ca = str(cluster["certificate-authority"])
            ca_field = f"certificate-authority ({ca})"
        cert = _data(user["client-certificate-data"]) if user.get("client-certificate-data") else (
            user.get("client-certificate"))
        key = _data(user["client-key-data"]) if user.get("client-key-data") else user.get("client-key")
    except (ValueError, TypeError):
        return None
    if bool(cert) != bool(key):
        return None  # half a client certificate: the official client says what is wrong
    return Target(
        server=str(cluster["server"]).rstrip("/"),
        context=name,
        source=f"kubeconfig {path} (context {name})",
        namespace=(ctx.get("namespace") or None),
        token=user.get("token") or None,
        token_file=user.get("tokenFile") or None,
        client_cert=cert or None,
        client_key=key or None,
        ca=ca,
        ca_field=f"the kubeconfig's {ca_field} of cluster {ctx.get('cluster')!r}" if ca_field else "",
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        proxy_url=str(proxy) if proxy else None,
        tls_server_name=cluster.get("tls-server-name") or None,
    )


__all__ = ["Target", "merged", "target"]
