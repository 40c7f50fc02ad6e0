"""The light transport (urllib3 alone, no ``kubernetes`` import) against the API emulator served over HTTPS with
a CA and certificates made here: every way a kubeconfig names who we are and whom to trust, merged files, the
service account, a wrong CA, and the fall back to the official client for what it alone serves (an exec plugin).
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_emulator import KubeEmulator
from kube_emulator.tls import Certificates, make_certificates

from kubetrain.backends.kubernetes.client import light
from kubetrain.backends.kubernetes.client.config import connect
from kubetrain.backends.kubernetes.client.errors import ApiError, ConfigError, KubernetesError
from kubetrain.backends.kubernetes.client.kube import Kube
from kubetrain.backends.kubernetes.client.kubeconfig import merged, target
from kubetrain.backends.kubernetes.client.light import LightClient, TLSError
from kubetrain.backends.kubernetes.client.resources import CONFIGMAPS
from tests.support.cluster import FAST_RETRY


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_emulator(certs: Certificates) -> Iterator[KubeEmulator]:
    """HTTPS, a token required unless a client certificate signed by the CA is shown (as the API server)."""
    with KubeEmulator(anonymous=False, tls=certs, crds=[]) as emu:
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        yield emu


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(tmp_path: Path, emu: KubeEmulator, cluster: dict[str, Any], user: dict[str, Any],
               namespace: str = "team-a", name: str = "kubeconfig") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "tls",
        "clusters": [{"name": "tls", "cluster": {"server": emu.url, **cluster}}],
        "users": [{"name": "me", "user": user}],
        "contexts": [{"name": "tls", "context": {"cluster": "tls", "user": "me", "namespace": namespace}}],
    }))
    return path


def round_trip(path: Path) -> None:
    """Create, get, patch, list, watch and delete through the kubeconfig, on the light transport."""
    conn = connect(path)
    assert isinstance(conn.api_client, LightClient)
    assert conn.namespace == "team-a"
    kube = Kube(conn.api_client, FAST_RETRY)
    try:
        kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                 "data": {"a": "1"}}, "team-a")
        kube.merge_patch(CONFIGMAPS, "c", "team-a", {"data": {"b": "2"}})
        assert kube.get(CONFIGMAPS, "c", "team-a")["data"] == {"a": "1", "b": "2"}
        items, rv = kube.list(CONFIGMAPS, "team-a")
        assert [i["metadata"]["name"] for i in items] == ["c"]
        kube.delete(CONFIGMAPS, "c", "team-a")
        events = [e for e in kube.watch(CONFIGMAPS, "team-a", rv, timeout_seconds=1) if e["type"] != "BOOKMARK"]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("DELETED", "c")]
    finally:
        kube.close()


CA_DATA: Callable[[Certificates], dict[str, Any]] = lambda c: {"certificate-authority-data": b64(c.ca_cert)}  # noqa: E731
CA_FILE: Callable[[Certificates], dict[str, Any]] = lambda c: {"certificate-authority": str(c.ca_cert)}  # noqa: E731


@pytest.mark.parametrize(("cluster", "user"), [
    pytest.param(CA_DATA, lambda c, t, tf: {"token": t}, id="ca-data+token"),
    pytest.param(CA_FILE, lambda c, t, tf: {"token": t}, id="ca-file+token"),
    pytest.param(CA_DATA, lambda c, t, tf: {"tokenFile": str(tf)}, id="ca-data+token-file"),
    pytest.param(CA_FILE, lambda c, t, tf: {"client-certificate": str(c.client_cert), "client-key": str(c.client_key)},
                 id="ca-file+client-cert-files"),
    pytest.param(CA_DATA, lambda c, t, tf: {"client-certificate-data": b64(c.client_cert),
                                            "client-key-data": b64(c.client_key)}, id="ca-data+client-cert-data"),
    pytest.param(lambda c: {"insecure-skip-tls-verify": True}, lambda c, t, tf: {"token": t}, id="insecure+token",
                 marks=pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")),
])
def test_every_served_kubeconfig_reaches_the_https_emulator(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path,
        cluster: Callable[[Certificates], dict[str, Any]], user: Callable[..., dict[str, Any]]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(tls_emulator.token + "\n")
    round_trip(kubeconfig(tmp_path, tls_emulator, cluster(certs), user(certs, tls_emulator.token, token_file)))


def test_credentials_are_really_checked(tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path) -> None:
    """The round trips above are not anonymous: a wrong token is refused (401), and so is no credential at all."""
    for user in ({"token": "wrong"}, {}):
        kube = Kube(connect(kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), user)).api_client, FAST_RETRY)
        with pytest.raises(ApiError) as err:
            kube.list(CONFIGMAPS, "team-a")
        assert err.value.status == 401


def test_a_relative_file_path_is_relative_to_its_kubeconfig(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "kube"
    here.mkdir()
    (here / "ca.pem").write_bytes(certs.ca_cert.read_bytes())
    (here / "tok").write_text(tls_emulator.token)
    monkeypatch.chdir(tmp_path)  # not where the kubeconfig is
    round_trip(kubeconfig(here, tls_emulator, {"certificate-authority": "ca.pem"}, {"tokenFile": "tok"}))


def test_a_wrong_ca_fails_naming_the_kubeconfig_field(
        tls_emulator: KubeEmulator, tmp_path: Path) -> None:
    other = make_certificates(tmp_path / "other")
    for cluster, field in ((CA_DATA(other), "certificate-authority-data"),
                           (CA_FILE(other), f"certificate-authority ({other.ca_cert})")):
        kube = Kube(connect(kubeconfig(tmp_path, tls_emulator, cluster, {"token": tls_emulator.token})).api_client,
                    FAST_RETRY)
        with pytest.raises(TLSError, match="certificate verify failed") as err:
            kube.list(CONFIGMAPS, "team-a")
        assert f"the kubeconfig's {field} of cluster 'tls'" in str(err.value)
        assert "Traceback" not in str(err.value)
    # The system's trust store does not know a test CA either, and the message says that is what was used.
    kube = Kube(connect(kubeconfig(tmp_path, tls_emulator, {}, {"token": tls_emulator.token})).api_client, FAST_RETRY)
    with pytest.raises(TLSError, match="system's trust store"):
        kube.list(CONFIGMAPS, "team-a")


def test_a_missing_ca_file_is_a_configuration_error(tls_emulator: KubeEmulator, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, tls_emulator, {"certificate-authority": str(tmp_path / "nope.pem")}, {"token": "t"})
    with pytest.raises(ConfigError, match=r"kubeconfig .* \(context tls\): cannot load its certificates"):
        connect(path)


def test_several_kubeconfig_files_merge_as_kubectl_merges_them(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """For every name the first file that names it wins, and so does the first current-context; files that do
    not exist are skipped."""
    first = tmp_path / "first"
    first.write_text(yaml.safe_dump({
        "current-context": "tls",
        "contexts": [{"name": "tls", "context": {"cluster": "tls", "user": "me", "namespace": "team-a"}}],
        "users": [{"name": "me", "user": {"token": tls_emulator.token}}],
    }))
    second = kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), {"token": "the second file's, not used"},
                        namespace="not-used", name="second")
    second_doc = yaml.safe_load(second.read_text())
    second_doc["current-context"] = "elsewhere"
    second.write_text(yaml.safe_dump(second_doc))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(tmp_path / "absent"), str(second)]))
    clusters, users, _contexts, current = merged(os.environ["KUBECONFIG"].split(os.pathsep))
    assert current == "tls" and users["me"] == {"token": tls_emulator.token} and set(clusters) == {"tls"}
    round_trip(Path(os.environ["KUBECONFIG"]))  # connect(path) with the joined list, as $KUBECONFIG is read


def test_the_service_account_inside_a_pod(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(tls_emulator.token)
    (sa / "ca.crt").write_bytes(certs.ca_cert.read_bytes())
    (sa / "namespace").write_text("team-a\n")
    monkeypatch.setattr(light, "SERVICE_ACCOUNT_DIR", str(sa))
    host, port = tls_emulator.url.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    conn = connect(in_cluster=True)
    assert isinstance(conn.api_client, LightClient)
    assert (conn.source, conn.namespace, conn.context) == ("in-cluster service account", "team-a", "in-cluster")
    assert Kube(conn.api_client, FAST_RETRY).list(CONFIGMAPS, "team-a")[0] == []


def test_an_exec_plugin_goes_to_the_official_client_and_just_works(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path) -> None:
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json
        print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                          "status": {{"token": {tls_emulator.token!r}}}}}))
        """))
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    path = kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                 "interactiveMode": "Never"}})
    conn = connect(path)
    assert not isinstance(conn.api_client, LightClient)
    assert conn.namespace == "team-a"
    kube = Kube(conn.api_client, FAST_RETRY)
    items, rv = kube.list(CONFIGMAPS, "team-a")
    assert items == []
    assert [e["type"] for e in kube.watch(CONFIGMAPS, "team-a", rv, timeout_seconds=1)] in ([], ["BOOKMARK"])


def test_status_list_and_describe_do_not_import_the_kubernetes_package(
        kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path) -> None:
    """The short verbs, each a process of its own as a user runs it: the official client (0.5–1 s to import)
    is never loaded for a token kubeconfig."""
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: demo}\nspec:\n"
                   "  framework: pytorch\n  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
                   "  run: {python: [train.py]}\n  replicas: 2\n")
    k8s = ["--backend", "kubernetes", "--kubeconfig", str(kube_config_file)]
    wrapper = textwrap.dedent("""\
        import atexit, sys
        atexit.register(lambda: print("loaded:", sorted(m for m in sys.modules
                                                        if m.split(".")[0] in ("kubernetes", "pydantic")),
                                      file=sys.stderr))
        from kubetrain.cli.main import command
        sys.argv = ["kubetrain", *sys.argv[1:]]
        command()
        """)
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}
    submit = subprocess.run([sys.executable, "-c", wrapper, "run", str(job), "--detach", "--flavor", "job", *k8s],
                            capture_output=True, text=True, env=env)
    assert submit.returncode == 0, submit.stderr
    for argv in (["status", "demo"], ["describe", "demo"], ["list"]):
        proc = subprocess.run([sys.executable, "-c", wrapper, *argv, *k8s], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "demo" in proc.stdout
        assert proc.stderr.splitlines()[-1] == "loaded: []", (argv, proc.stderr)


def test_a_server_that_requires_a_client_certificate_gets_ours(certs: Certificates, tmp_path: Path) -> None:
    with KubeEmulator(anonymous=False, tls=certs, crds=[], require_client_cert=True) as emu:
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        round_trip(kubeconfig(tmp_path, emu, CA_DATA(certs), {"client-certificate-data": b64(certs.client_cert),
                                                              "client-key-data": b64(certs.client_key)}))


def test_an_https_proxy_from_the_environment_is_used_unless_no_proxy_says_otherwise(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As kubectl: HTTPS_PROXY is honoured (here a proxy that is not there: the request cannot be made), and
    NO_PROXY naming the server's host lets it through."""
    path = kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), {"token": tls_emulator.token})
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "example.invalid")
    monkeypatch.delenv("no_proxy", raising=False)
    kube = Kube(connect(path).api_client, FAST_RETRY)
    with pytest.raises(ApiError) as err:
        kube.list(CONFIGMAPS, "team-a")
    assert err.value.status == 0  # the connection to the proxy was refused
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert Kube(connect(path).api_client, FAST_RETRY).list(CONFIGMAPS, "team-a")[0] == []


def test_tls_server_name_is_the_name_the_certificate_is_checked_against(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path) -> None:
    """The server certificate names 127.0.0.1 and localhost: ``tls-server-name: localhost`` verifies, a name it
    does not carry fails (the address alone would have verified)."""
    round_trip(kubeconfig(tmp_path, tls_emulator, {**CA_DATA(certs), "tls-server-name": "localhost"},
                          {"token": tls_emulator.token}))
    path = kubeconfig(tmp_path, tls_emulator, {**CA_DATA(certs), "tls-server-name": "api.example.invalid"},
                      {"token": tls_emulator.token})
    with pytest.raises(TLSError, match=r"certificate verify failed .*api\.example\.invalid"):
        Kube(connect(path).api_client, FAST_RETRY).list(CONFIGMAPS, "team-a")


def test_a_token_file_is_read_on_every_request_as_a_rotated_token_must_be(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("expired")
    kube = Kube(connect(kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), {"tokenFile": str(token_file)})).api_client,
                FAST_RETRY)
    with pytest.raises(ApiError) as err:
        kube.list(CONFIGMAPS, "team-a")
    assert err.value.status == 401
    token_file.write_text(tls_emulator.token)  # the kubelet rotated it
    assert kube.list(CONFIGMAPS, "team-a")[0] == []
    token_file.unlink()
    with pytest.raises(KubernetesError, match="cannot read its tokenFile"):
        kube.list(CONFIGMAPS, "team-a")


def test_what_the_reader_does_not_know_goes_to_the_official_client(
        tls_emulator: KubeEmulator, certs: Certificates, tmp_path: Path) -> None:
    """Username and password, an auth-provider, a socks proxy, a server without a scheme: not served here."""
    for cluster, user in (({}, {"username": "u", "password": "p"}),
                          ({}, {"auth-provider": {"name": "oidc", "config": {"id-token": "x"}}}),
                          ({"proxy-url": "socks5://127.0.0.1:1080"}, {"token": "t"})):
        path = kubeconfig(tmp_path, tls_emulator, {**CA_DATA(certs), **cluster}, user)
        assert target(str(path), None) is None, (cluster, user)
    path = kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), {"token": "t"})
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["server"] = tls_emulator.url.removeprefix("https://")
    path.write_text(yaml.safe_dump(doc))
    assert target(str(path), None) is None
    assert target(str(kubeconfig(tmp_path, tls_emulator, CA_DATA(certs), {"token": "t"})), None) is not None
