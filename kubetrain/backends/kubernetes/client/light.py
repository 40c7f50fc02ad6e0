"""Requests through the standard library's ``http.client``, for the users :mod:`.kubeconfig` serves: neither the
``kubernetes`` package nor urllib3 is imported (urllib3 alone cost ~25 ms of every verb, more than a page of pods).

A small pool of keep-alive connections (:class:`ConnectionPool`, safe across the threads an attached run's watches
and log streams use), TLS through an ``SSLContext`` built from the kubeconfig's CA and client certificate, an http
proxy (the request in absolute form for an ``http://`` server, a CONNECT tunnel for ``https://``, as Go's client and
urllib3 send them). Responses (:class:`Response`) have the few methods of urllib3's that :mod:`.transport`,
:mod:`.streams` and :mod:`..logs` read, so the official client's responses and these are read alike; connection
faults are ``OSError`` or ``http.client.HTTPException`` (:data:`CONNECTION_FAULTS`). An ``https://`` proxy (TLS to
the proxy, then TLS inside it) is the one case left to urllib3, imported then. Nothing is retried here
(:mod:`.retry` decides, as for the official client). Bearer tokens are sent as the official Python client sends
them (also to an ``http://`` server, which the tests' API emulator is). A certificate that fails to verify is a
:class:`TLSError` naming where the CA came from: no retry mends it.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import KubernetesError
from .kubeconfig import Target

if TYPE_CHECKING:
    import ssl

#: The service account's files inside a pod (``SERVICE_ACCOUNT_DIR`` is read when a client is built).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

#: Connections kept idle per client: the official client's (5 per CPU), and no fewer than an attached run's watches
#: and log streams use at once (beyond it a connection is made and closed after use).
POOL_SIZE = max(16, 5 * (os.cpu_count() or 1))


def connection_faults(*more: type[BaseException]) -> tuple[type[BaseException], ...]:
    """What a dropped or refused connection raises, whichever transport sent the request: ``OSError`` (sockets,
    TLS, timeouts), ``http.client``'s errors, and urllib3's when it is loaded (the official client's, or an https
    proxy's); urllib3 is not imported to ask. ``more``: other exceptions the caller treats alike."""
    faults: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException, *more)
    urllib3 = sys.modules.get("urllib3")
    if urllib3 is not None:
        faults += (urllib3.exceptions.HTTPError,)
    return faults


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
    import ssl

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
        import tempfile  # on use: most kubeconfigs name a token

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
    return proxy_url(proxy, f"${parts.scheme.upper()}_PROXY")


def proxy_url(proxy: str, where: str) -> str:
    """A proxy's URL as Go's client reads one: ``host:port`` alone is an ``http://`` proxy. Any other scheme
    (``socks5://``), or no host, is refused here, with where it came from: sent as it is, the request (and its
    bearer token) would go to whatever listens on localhost:80."""
    if "://" not in proxy:
        proxy = "http://" + proxy
    parts = urllib.parse.urlsplit(proxy)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = parts._replace(netloc="***@" + (parts.hostname or "")).geturl() if parts.username else proxy
        raise KubernetesError(f"{where}: proxy {shown!r} is not an http:// or https:// proxy with a host; "
                              f"hint: write it as http://HOST:PORT")
    return proxy


class _HTTPSConnection(http.client.HTTPSConnection):
    """``http.client``'s, with the name the certificate is checked against given apart from the address
    (the kubeconfig's ``tls-server-name``)."""

    def __init__(self, host: str, port: int, *, context: ssl.SSLContext, server_name: str | None) -> None:
        super().__init__(host, port, context=context)
        self.server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP, then the proxy's CONNECT tunnel when there is one
        name = self.server_name or self._tunnel_host or self.host  # type: ignore[attr-defined]
        self.sock = self._context.wrap_socket(self.sock, server_hostname=name)  # type: ignore[attr-defined]


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle keep-alive connection was closed by the server (it is then readable: at its end)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        poller = select.poll()  # not select.select: it refuses descriptors past 1024 (a process with many files)
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def _tls_fault(exc: BaseException) -> bool:
    """A TLS failure (a certificate refused either way, a protocol mismatch), not a connection the server closed."""
    import ssl

    return isinstance(exc, ssl.SSLError) and not isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError))


class ConnectionPool:
    """Idle keep-alive connections to one server, the latest first. A connection serves one request at a time:
    :meth:`take` gives an idle one (or a new one), :meth:`give_back` keeps it for the next request (at most
    ``size``, beyond which it is closed). Safe across threads."""

    def __init__(self, new: Callable[[], http.client.HTTPConnection], size: int = POOL_SIZE) -> None:
        self._new = new
        self.size = size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def idle(self) -> int:
        """Connections waiting for a request."""
        return len(self._idle)

    def take(self) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new()
            if not _dropped(conn):
                return conn
            conn.close()

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.size:
                self._idle.append(conn)
                return
        conn.close()

    def clear(self) -> None:
        """Close the idle connections; one given back later (a thread that finished after its client was closed:
        a page read ahead, pods listed ahead) is closed, not kept."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class Response:
    """An answer being read: the status, the headers, the body (whole, or as it arrives), with urllib3's names
    for them. The connection goes back to the pool once the body is read to its end and released; a response
    closed or released half-read closes its connection (the rest of the body would be read as the next answer)."""

    def __init__(self, resp: http.client.HTTPResponse, conn: http.client.HTTPConnection,
                 pool: ConnectionPool) -> None:
        self._resp = resp
        self._conn: http.client.HTTPConnection | None = conn
        self._pool = pool
        self.status = resp.status
        self.headers = resp.headers  # case-insensitive ``get``, as urllib3's

    @property
    def connection(self) -> http.client.HTTPConnection | None:
        """The connection it is read from (None once released): another thread may shut its socket down."""
        return self._conn

    def read(self, amt: int | None = None) -> bytes:
        return self._resp.read(amt)

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        """The body as it arrives (a chunk of a chunked body, or what the socket has): a watch's events and a
        followed log's lines are not held back to fill a buffer. No content coding is asked for, so there is
        none to decode."""
        while True:
            data = self._resp.read1(amt or 65536)
            if not data:
                # read1 leaves a body of known length unmarked at its end: read() marks it read, so
                # release_conn keeps the connection for the next request.
                self._resp.read()
                return
            yield data

    def close(self) -> None:
        """Drop the connection (a body not read to its end cannot leave it fit for another request)."""
        conn, self._conn = self._conn, None
        self._resp.close()
        if conn is not None:
            conn.close()

    def release_conn(self) -> None:
        """Back to the pool if the body was read to its end and the server keeps the connection open; else closed."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.isclosed() and not self._resp.will_close:
            self._pool.give_back(conn)
        else:
            self._resp.close()
            conn.close()


class LightClient:
    """A configured connection pool to one API server, in place of the official ``ApiClient``."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.host = target.server
        parts = urllib.parse.urlsplit(target.server)
        self._https = parts.scheme == "https"
        self._address = (parts.hostname or "localhost", parts.port or (443 if self._https else 80))
        self._context = ssl_context(target) if self._https else None
        proxy = proxy_url(target.proxy_url, f"{target.source}: proxy-url") if target.proxy_url else (
            _env_proxy(target.server))
        self._proxy = urllib.parse.urlsplit(proxy) if proxy else None
        #: The request line's target: the path, or through a proxy to an ``http://`` server the whole URL.
        self._prefix = target.server if self._proxy is not None and not self._https else ""
        self._urllib3: Any = None
        if self._proxy is not None and self._proxy.scheme == "https":
            self._urllib3 = _urllib3_proxy(target, proxy or "", self._context)
        self.pool = ConnectionPool(self._connection)

    def _proxy_headers(self) -> dict[str, str]:
        """``Proxy-Authorization`` from the proxy URL's user and password, as Go's client sends it."""
        if self._proxy is None or self._proxy.username is None:
            return {}
        user = urllib.parse.unquote(self._proxy.username)
        password = urllib.parse.unquote(self._proxy.password or "")
        return {"Proxy-Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    def _connection(self) -> http.client.HTTPConnection:
        """A new connection (not yet open) to the server, or to the proxy in front of it."""
        host, port = self._address
        if self._proxy is not None:
            assert self._proxy.hostname  # proxy_url refuses a proxy without one
            via = (self._proxy.hostname, self._proxy.port or (443 if self._proxy.scheme == "https" else 80))
            if not self._https:
                return http.client.HTTPConnection(*via)
            conn = _HTTPSConnection(*via, context=self._context,  # type: ignore[arg-type]
                                    server_name=self.target.tls_server_name)
            conn.set_tunnel(host, port, headers=self._proxy_headers())
            return conn
        if self._https:
            return _HTTPSConnection(host, port, context=self._context,  # type: ignore[arg-type]
                                    server_name=self.target.tls_server_name)
        return http.client.HTTPConnection(host, port)

    def close(self) -> None:
        self.pool.clear()
        if self._urllib3 is not None:
            self._urllib3.clear()

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
        """One request; the :class:`Response`, its body not read. Connection faults raise :func:`connection_faults`."""
        url = path
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
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        if self._urllib3 is not None:
            return self._send_urllib3(method, self.host + url, hdrs, data, connect_timeout, read_timeout)
        if self._prefix:
            hdrs.update(self._proxy_headers())
        conn = self.pool.take()
        try:
            if conn.sock is None:
                conn.timeout = connect_timeout
                conn.connect()
            conn.sock.settimeout(read_timeout)
            conn.request(method, self._prefix + url, body=data, headers=hdrs)
            resp = conn.getresponse()
        except BaseException as exc:
            conn.close()  # half a request or half an answer: not fit for another
            if self._https and _tls_fault(exc):
                raise self._tls_error(exc) from None
            raise
        return Response(resp, conn, self.pool)

    def _send_urllib3(self, method: str, url: str, headers: dict[str, str], data: bytes | None,
                      connect_timeout: float, read_timeout: float) -> Any:
        import urllib3

        try:
            return self._urllib3.request(method, url, body=data, headers=headers, preload_content=False,
                                         redirect=False, retries=False,
                                         timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout))
        except urllib3.exceptions.SSLError as exc:
            raise self._tls_error(exc) from None

    def _tls_error(self, exc: BaseException) -> TLSError:
        import ssl

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


def _urllib3_proxy(target: Target, proxy: str, context: ssl.SSLContext | None) -> Any:
    """urllib3's pool through an ``https://`` proxy (TLS to the proxy, the server's TLS inside it)."""
    import urllib3

    options: dict[str, Any] = {"retries": False, "maxsize": POOL_SIZE, "block": False}
    if context is not None:
        options["ssl_context"] = context
        if target.tls_server_name:
            options["server_hostname"] = target.tls_server_name
        if target.insecure:
            import ssl

            options["cert_reqs"] = ssl.CERT_NONE
            options["assert_hostname"] = False
    return urllib3.ProxyManager(proxy, **options)


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


__all__ = ["POOL_SIZE", "SERVICE_ACCOUNT_DIR", "ConnectionPool", "LightClient", "Response", "TLSError",
           "connection_faults", "in_cluster_target"]
