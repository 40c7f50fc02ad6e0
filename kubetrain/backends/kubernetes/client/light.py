"""Requests through urllib3 alone, for the users :mod:`.kubeconfig` serves: no ``kubernetes`` import.

One ``PoolManager`` (or ``ProxyManager``) with an ``SSLContext`` built from the kubeconfig's CA and client
certificate. urllib3's own retries are off (:mod:`.retry` decides, as for the official client). Bearer tokens
are sent as the official Python client sends them (also to an ``http://`` server, which the tests' API emulator
is). A certificate that fails to verify is a :class:`TLSError` naming where the CA came from: no retry mends it.
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import urllib3

from .errors import KubernetesError
from .kubeconfig import Target

#: The service account's files inside a pod (``SERVICE_ACCOUNT_DIR`` is read when a client is built).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class TLSError(KubernetesError):
    """The server's certificate did not verify (or ours was refused): a configuration fault, not a transient one."""


def _pem_file(data: str | bytes, directory: str, name: str) -> str:
    """A path for a PEM that may be inline (``ssl`` loads certificates and keys only from files)."""
    if isinstance(data, str):
        return data
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def ssl_context(target: Target) -> ssl.SSLContext:
    """Trust the kubeconfig's CA alone when it names one (as client-go does: the system's store is not added,
    which also spares loading it), else the system's store."""
    if target.insecure:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif target.ca:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and the host name
        if isinstance(target.ca, bytes):
            ctx.load_verify_locations(cadata=target.ca.decode("ascii", "replace"))
        else:
            ctx.load_verify_locations(cafile=target.ca)
    else:
        ctx = ssl.create_default_context()
    if target.client_cert and target.client_key:
        # Inline keys go through a private temporary directory, removed as soon as they are loaded.
        with tempfile.TemporaryDirectory(prefix="kubetrain-tls-") as tmp:
            ctx.load_cert_chain(_pem_file(target.client_cert, tmp, "cert.pem"),
                                _pem_file(target.client_key, tmp, "key.pem"))
    return ctx


def _env_proxy(server: str) -> str | None:
    """``HTTPS_PROXY``/``HTTP_PROXY`` for ``server`` unless ``NO_PROXY`` lets it through (as kubectl does).
    ``urllib.request`` (which knows these rules) is imported only when a proxy is set: most runs have none."""
    parts = urllib.parse.urlsplit(server)
    if not (os.environ.get(f"{parts.scheme}_proxy") or os.environ.get(f"{parts.scheme.upper()}_PROXY")):
        return None
    from urllib.request import getproxies_environment, proxy_bypass

    proxy = getproxies_environment().get(parts.scheme)
    if not proxy or proxy_bypass(parts.hostname or ""):  # NO_PROXY (the environment's, on POSIX)
        return None
    return proxy


class LightClient:
    """A configured connection pool to one API server, in place of the official ``ApiClient``."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.host = target.server
        # Connections kept per server: the official client's (5 per CPU), and no fewer than an attached run's
        # watches and log streams use at once (beyond it a connection is made and dropped after use).
        options: dict[str, Any] = {"retries": False, "maxsize": max(16, 5 * (os.cpu_count() or 1)), "block": False}
        if target.server.startswith("https://"):
            options["ssl_context"] = ssl_context(target)
            if target.tls_server_name:
                options["server_hostname"] = target.tls_server_name
            if target.insecure:
                options["cert_reqs"] = ssl.CERT_NONE
                options["assert_hostname"] = False
        proxy = target.proxy_url or _env_proxy(target.server)
        self.pool: urllib3.PoolManager = (
            urllib3.ProxyManager(proxy, **options) if proxy else urllib3.PoolManager(**options)
        )

    def close(self) -> None:
        self.pool.clear()

    def _token(self) -> str | None:
        """The token file's (read each time: it rotates), else the token; as client-go, a token file that cannot
        be read leaves the token, when there is one."""
        if self.target.token_file:
            try:
                with open(self.target.token_file) as f:
                    return f.read().strip() or self.target.token
            except OSError as exc:
                if self.target.token:
                    return self.target.token
                raise KubernetesError(f"{self.target.source}: cannot read its tokenFile: {exc}") from None
        return self.target.token

    def send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]],
        headers: Mapping[str, str],
        body: Any,
        timeout: float | tuple[float, float],
    ) -> Any:
        """One request; the urllib3 response, its body not read. Connection faults raise urllib3's or OSError."""
        url = self.host + path
        if query:
            url += "?" + urllib.parse.urlencode([(k, str(v)) for k, v in query])
        hdrs = dict(headers)
        token = self._token()
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else (
                body.encode() if isinstance(body, str) else json.dumps(body).encode())
        t = urllib3.Timeout(connect=timeout[0], read=timeout[1]) if isinstance(timeout, tuple) else urllib3.Timeout(
            connect=timeout, read=timeout)
        try:
            return self.pool.request(method, url, body=data, headers=hdrs, timeout=t, preload_content=False,
                                     redirect=False, retries=False)
        except urllib3.exceptions.SSLError as exc:
            raise self._tls_error(exc) from None

    def _tls_error(self, exc: BaseException) -> TLSError:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLCertVerificationError):
            cause = cause.__cause__ or cause.__context__ or (cause.args[0] if cause.args and isinstance(
                cause.args[0], BaseException) else None)
        if cause is not None or "certificate verify failed" in str(exc):
            reason = getattr(cause, "verify_message", "") or str(exc)
            where = self.target.ca_field or "the system's trust store (the kubeconfig names no certificate-authority)"
            return TLSError(
                f"{self.target.server}: certificate verify failed ({reason}), checked against {where} "
                f"({self.target.source}); hint: give the cluster's CA there (insecure-skip-tls-verify only for a "
                f"test cluster)"
            )
        return TLSError(f"{self.target.server}: TLS failed ({self.target.source}): {exc}")


def in_cluster_target() -> Target | None:
    """The service account's token, CA and the API server from the environment, as the official client reads them."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    ca_file = os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    if not host or not port or not os.path.exists(token_file) or not os.path.exists(ca_file):
        return None  # the official loader says what is missing
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace")) as f:
            namespace = f.read().strip() or None
    except OSError:
        namespace = None
    server_host = f"[{host}]" if ":" in host else host
    return Target(server=f"https://{server_host}:{port}", context="in-cluster", source="in-cluster service account",
                  namespace=namespace, token_file=token_file, ca=ca_file,
                  ca_field=f"the service account's CA ({ca_file})")


__all__ = ["SERVICE_ACCOUNT_DIR", "LightClient", "TLSError", "in_cluster_target"]
