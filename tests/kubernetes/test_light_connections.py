"""The light transport's connections: kept open and reused between requests, never reused half-read, and through an
http proxy (the request in absolute form to an ``http://`` server, a CONNECT tunnel to an ``https://`` one, with the
proxy URL's credentials), against the API emulator and a small proxy run here.
"""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kube_emulator import KubeEmulator
from kube_emulator.tls import Certificates, make_certificates

from kubetrain.backends.kubernetes.client.config import connect
from kubetrain.backends.kubernetes.client.errors import KubernetesError
from kubetrain.backends.kubernetes.client.kube import Kube
from kubetrain.backends.kubernetes.client.light import LightClient
from kubetrain.backends.kubernetes.client.resources import CONFIGMAPS
from tests.support.cluster import FAST_RETRY


def light_kube(path: Path) -> tuple[Kube, LightClient]:
    conn = connect(path)
    assert isinstance(conn.api_client, LightClient)
    return Kube(conn.api_client, FAST_RETRY), conn.api_client


def local_address(kube: Kube) -> Any:
    """The client side of the connection a request went over (its body read to the end, then released)."""
    resp = kube._send("GET", CONFIGMAPS.path("default"), stream=True)
    address = resp.connection.sock.getsockname()
    assert b'"items"' in resp.read()
    resp.release_conn()
    return address


def test_a_connection_is_kept_open_and_reused(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube, client = light_kube(kube_config_file)
    try:
        first = local_address(kube)
        assert client.pool.idle == 1
        assert local_address(kube) == first  # the same TCP connection, not a new one
        assert kube.list(CONFIGMAPS, "default")[0] == []
        assert client.pool.idle == 1
    finally:
        kube.close()
    assert client.pool.idle == 0


def test_a_connection_the_server_closed_is_not_used_again(
        kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube, client = light_kube(kube_config_file)
    try:
        first = local_address(kube)
        idle = client.pool._idle[0]
        assert idle.sock is not None
        idle.sock.shutdown(socket.SHUT_WR)  # the server reads the end and closes its side: the connection is done
        assert select.select([idle.sock], [], [], 30)[0]  # closed by the server (its end is there to read)
        # A create is sent once (never retried): over a new connection, not into the closed one.
        kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "default")
        assert local_address(kube) != first
    finally:
        kube.close()


def test_a_half_read_response_does_not_go_back_to_the_pool(
        kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    """Its unread rest would be read as the next request's answer."""
    kube, client = light_kube(kube_config_file)
    try:
        for i in range(200):
            kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"},
                                     "data": {"text": "x" * 200}}, "default")
        resp = kube._send("GET", CONFIGMAPS.path("default"), stream=True)
        assert next(resp.stream(amt=100))  # a first piece, the rest unread
        resp.release_conn()
        assert client.pool.idle == 0
        assert len(kube.list(CONFIGMAPS, "default")[0]) == 200
    finally:
        kube.close()


def test_a_watch_left_early_does_not_go_back_to_the_pool(
        kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube, client = light_kube(kube_config_file)
    try:
        _, rv = kube.list(CONFIGMAPS, "default")
        for name in ("a", "b"):
            kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}, "default")
        events = cast("Generator[dict[str, Any], None, None]",
                      kube.watch(CONFIGMAPS, "default", rv, timeout_seconds=30))
        first = next(e for e in events if e["type"] != "BOOKMARK")
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
        events.close()  # the stream still open on the server's side
        assert client.pool.idle == 0  # the one connection the watch took, then closed
        assert {c["metadata"]["name"] for c in kube.list(CONFIGMAPS, "default")[0]} == {"a", "b"}
    finally:
        kube.close()


def test_a_body_streamed_to_its_end_leaves_its_connection_for_the_next_request(
        kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    """A body of known length read piece by piece to its end is whole: its connection is kept."""
    kube, client = light_kube(kube_config_file)
    try:
        resp = kube._send("GET", CONFIGMAPS.path("default"), stream=True)
        assert resp.headers.get("Content-Length")
        assert b'"items"' in b"".join(resp.stream(amt=16))
        resp.release_conn()
        assert client.pool.idle == 1
    finally:
        kube.close()


def test_a_connection_given_back_after_its_client_closed_is_closed(
        kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    """A thread that finishes after the client was closed (a page read ahead) leaves no socket open behind it."""
    kube, client = light_kube(kube_config_file)
    resp = kube._send("GET", CONFIGMAPS.path("default"), stream=True)
    conn = resp.connection
    kube.close()
    assert b'"items"' in resp.read()
    resp.release_conn()
    assert client.pool.idle == 0 and conn is not None and conn.sock is None


class Proxy(socketserver.ThreadingTCPServer):
    """An http proxy: ``CONNECT host:port`` opens a tunnel; a request in absolute form is passed to its host (with
    the rest of the connection). Each request line and ``Proxy-Authorization`` header is recorded."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.seen: list[tuple[str, str | None]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class ProxyHandler(socketserver.StreamRequestHandler):
    server: Proxy

    def handle(self) -> None:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            byte = self.rfile.read(1)
            if not byte:
                return
            head += byte
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        auth = next((line.split(":", 1)[1].strip() for line in lines[1:]
                     if line.lower().startswith("proxy-authorization:")), None)
        self.server.seen.append((lines[0], auth))
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            host, port = target.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            upstream.sendall(head)
        self.wfile.flush()
        pump = threading.Thread(target=self._copy, args=(upstream, self.connection), daemon=True)
        pump.start()
        self._copy_from_client(upstream)
        pump.join(timeout=30)

    def _copy_from_client(self, upstream: socket.socket) -> None:
        while data := self.rfile.read1(65536):
            upstream.sendall(data)
        upstream.shutdown(socket.SHUT_WR)

    @staticmethod
    def _copy(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    server = Proxy()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"))


def with_proxy(kubeconfig: Path, proxy_url: str, cluster: dict[str, Any] | None = None) -> Path:
    doc = yaml.safe_load(kubeconfig.read_text())
    doc["clusters"][0]["cluster"].update({"proxy-url": proxy_url, **(cluster or {})})
    path = kubeconfig.with_name("proxied")
    path.write_text(yaml.safe_dump(doc))
    return path


def round_trip(kube: Kube) -> None:
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "default")
    items, rv = kube.list(CONFIGMAPS, "default")
    assert [i["metadata"]["name"] for i in items] == ["c"]
    kube.delete(CONFIGMAPS, "c", "default")
    events = [e for e in kube.watch(CONFIGMAPS, "default", rv, timeout_seconds=1) if e["type"] != "BOOKMARK"]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("DELETED", "c")]


def test_an_http_server_through_a_proxy_gets_the_request_in_absolute_form(
        kube_emulator: KubeEmulator, kube_config_file: Path, proxy: Proxy) -> None:
    kube, _ = light_kube(with_proxy(kube_config_file, proxy.url.replace("//", "//me:s%40cret@")))
    try:
        round_trip(kube)
    finally:
        kube.close()
    line, auth = proxy.seen[0]
    assert line.startswith(f"POST {kube_emulator.url}/api/v1/namespaces/default/configmaps ")
    assert auth == "Basic " + base64.b64encode(b"me:s@cret").decode()


def test_an_https_server_through_a_proxy_is_reached_by_a_tunnel(
        certs: Certificates, tmp_path: Path, proxy: Proxy) -> None:
    """The server's certificate is checked inside the tunnel (against the kubeconfig's CA and tls-server-name)."""
    with KubeEmulator(anonymous=False, tls=certs, crds=[]) as emu:
        plain = emu.write_kubeconfig(tmp_path / "kubeconfig")
        ca = base64.b64encode(certs.ca_cert.read_bytes()).decode()
        path = with_proxy(plain, proxy.url, {"certificate-authority-data": ca, "tls-server-name": "localhost"})
        kube, _ = light_kube(path)
        try:
            round_trip(kube)
        finally:
            kube.close()
        host_port = emu.url.removeprefix("https://")
        assert proxy.seen and all(line.startswith(f"CONNECT {host_port} ") for line, _ in proxy.seen)


def test_a_proxy_in_the_environment_without_a_scheme_is_an_http_proxy(
        kube_emulator: KubeEmulator, kube_config_file: Path, proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY=host:port``, as Go's client reads it (sent as it was, the request and its token went to
    localhost:80)."""
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url.removeprefix("http://"))
    kube, _ = light_kube(kube_config_file)
    try:
        round_trip(kube)
    finally:
        kube.close()
    assert proxy.seen and proxy.seen[0][0].startswith(f"POST {kube_emulator.url}/api/v1/namespaces/default/")


@pytest.mark.parametrize("value", ["socks5://me:s3cret@127.0.0.1:1080", "http://:3128"])
def test_a_proxy_in_the_environment_that_is_not_an_http_one_is_refused_with_where_it_came_from(
        kube_config_file: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", value)
    with pytest.raises(KubernetesError, match=r"\$HTTP_PROXY: proxy .* not an http:// or https:// proxy") as caught:
        connect(kube_config_file)
    assert "s3cret" not in str(caught.value)


def test_the_light_transport_does_not_import_urllib3(
        kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    """urllib3 cost ~25 ms of every short verb's start."""
    script = textwrap.dedent(f"""\
        import sys
        from kubetrain.backends.kubernetes.client.config import connect
        from kubetrain.backends.kubernetes.client.kube import Kube
        from kubetrain.backends.kubernetes.client.resources import CONFIGMAPS
        kube = Kube(connect({str(kube_config_file)!r}).api_client)
        assert kube.list(CONFIGMAPS, "default")[0] == []
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("urllib3", "kubernetes", "requests")))
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
