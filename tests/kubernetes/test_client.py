"""Configuration, retries and capability detection of the Kubernetes backend, against the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.client import light
from kubetrain.backends.kubernetes.client.config import connect
from kubetrain.backends.kubernetes.client.errors import ApiError, ConfigError
from kubetrain.backends.kubernetes.client.kube import Kube
from kubetrain.backends.kubernetes.client.resources import JOBS
from kubetrain.backends.kubernetes.client.retry import RetryPolicy
from kubetrain.backends.kubernetes.flavors import FlavorUnavailable
from kubetrain.jobspec import from_dict
from tests.support.cluster import FAST_RETRY, job_doc

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator


def two_contexts(emu: KubeEmulator, path: Path) -> Path:
    """A kubeconfig whose current context points nowhere; context ``emu`` (namespace ``ml``) is the emulator."""
    config = emu.kubeconfig()
    config["clusters"].append({"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}})
    config["contexts"] = [
        {"name": "gone", "context": {"cluster": "gone", "user": "kube-emulator"}},
        {"name": "emu", "context": {"cluster": "kube-emulator", "user": "kube-emulator", "namespace": "ml"}},
    ]
    config["current-context"] = "gone"
    path.write_text(yaml.safe_dump(config))
    return path


def test_kubeconfig_is_read_when_the_backend_is_made_not_at_import(
        kube_emulator: KubeEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes  # noqa: F401 - imported before $KUBECONFIG is set, as in a long-lived process

    path = kube_emulator.write_kubeconfig(tmp_path / "kc", namespace="team-a")
    monkeypatch.setenv("KUBECONFIG", str(path))
    b = KubernetesBackend()
    assert b.namespace == "team-a"
    assert b.kube.api_groups()["kind"] == "APIGroupList"


def test_context_selects_cluster_and_namespace(kube_emulator: KubeEmulator, tmp_path: Path) -> None:
    path = two_contexts(kube_emulator, tmp_path / "kc")
    b = KubernetesBackend(kubeconfig=path, context="emu", retry=FAST_RETRY)
    assert b.namespace == "ml"
    assert "batch" in b.capabilities().groups
    assert KubernetesBackend(kubeconfig=path, context="emu", namespace="other").namespace == "other"
    with pytest.raises(ConfigError, match=r"context 'nope' is not in the kubeconfig .*contexts: gone, emu"):
        KubernetesBackend(kubeconfig=path, context="nope")


def test_no_configuration_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="no cluster configured"):
        connect()
    with pytest.raises(ConfigError, match="does not exist"):
        connect(tmp_path / "missing")
    with pytest.raises(ConfigError, match="in-cluster"):
        connect(in_cluster=True)


def test_in_cluster_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kube_emulator: KubeEmulator) -> None:
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text(kube_emulator.token)
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot used by this test\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    # The official client's loader (kubetrain's own, for a service account whose files it finds, is tested in
    # test_light_client.py): no files where kubetrain looks, even when the tests run inside a pod.
    monkeypatch.setattr(light, "SERVICE_ACCOUNT_DIR", str(tmp_path / "no-service-account"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    conn = connect()
    assert conn.source == "in-cluster service account"
    assert conn.api_client.configuration.host == "https://127.0.0.1:443"


def test_transient_errors_are_retried_with_capped_backoff(kube_emulator: KubeEmulator,
                                                          kube_config_file: Path) -> None:
    sleeps: list[float] = []
    kube = Kube(connect(kube_config_file).api_client, RetryPolicy(attempts=6, base=0.01, cap=0.04,
                                                                  sleep=sleeps.append))
    kube_emulator.fail_next("GET", path_regex="/jobs$", status=503, times=2)
    kube_emulator.drop_next("GET", path_regex="/jobs$")
    kube_emulator.fail_next("GET", path_regex="/jobs$", status=429, retry_after=7)
    items, rv = kube.list(JOBS, "default")
    assert items == [] and rv
    # 503, 503, dropped, 429 (Retry-After 7, capped at 0.04), then the answer: every attempt reached the server
    assert kube_emulator.count_requests("GET", "/jobs$") == 5
    assert sleeps[-1] == 0.04 and all(s <= 0.04 for s in sleeps) and len(sleeps) == 4
    kube_emulator.fail_next("GET", path_regex="/jobs$", status=500, times=10)
    with pytest.raises(ApiError) as err:
        kube.list(JOBS, "default")
    assert err.value.status == 500 and kube_emulator.count_requests("GET", "/jobs$") == 5 + 6


def test_errors_that_will_not_change_are_not_retried(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube = Kube(connect(kube_config_file).api_client, FAST_RETRY)
    kube_emulator.fail_next("GET", path_regex="/jobs$", status=403, message="jobs.batch is forbidden: User cannot list")
    with pytest.raises(ApiError, match=r"403 Forbidden: jobs\.batch is forbidden"):
        kube.list(JOBS, "default")
    assert kube_emulator.count_requests("GET", "/jobs$") == 1


@pytest.mark.kube_crds()
def test_without_crds_only_the_job_flavor_runs(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    b = KubernetesBackend(kubeconfig=kube_config_file, retry=FAST_RETRY)
    caps = b.capabilities()
    assert caps.flavors() == ["job"] and not caps.kueue
    job = from_dict(job_doc("auto"))
    assert b.render(job).flavor == "job"
    for flavor, what in (("jobset", "JobSet controller"), ("volcano", "Volcano"), ("kubeflow", "training operator")):
        with pytest.raises(FlavorUnavailable, match=f"the {flavor} flavor needs .*{what}.*does not serve"):
            b.submit(job, flavor=flavor)
    assert kube_emulator.count_requests("POST") == 0  # refused before anything was sent


@pytest.mark.kube_crds("jobsets.jobset.x-k8s.io", "pytorchjobs.kubeflow.org")
def test_auto_flavor_prefers_jobset_and_kubeflow_kinds_are_checked(kube_emulator: KubeEmulator,
                                                                   kube_config_file: Path) -> None:
    b = KubernetesBackend(kubeconfig=kube_config_file, retry=FAST_RETRY, liveness_ttl=0)
    assert b.capabilities().flavors() == ["job", "jobset", "kubeflow"]
    kube_emulator.run_controller("jobset-system", "jobset-controller-manager")  # served, and its controller alive
    sub = b.submit(from_dict(job_doc("auto")))
    assert sub.flavor == "jobset" and sub.root["kind"] == "JobSet"
    assert b.status("auto").phase.value == "Pending"
    tf = from_dict(job_doc("tf", framework="tensorflow"))
    with pytest.raises(FlavorUnavailable, match=r"renders this job as a TFJob .*\(it serves PyTorchJob\)"):
        b.submit(tf, flavor="kubeflow")
    assert b.submit(from_dict(job_doc("pt")), flavor="kubeflow").root["kind"] == "PyTorchJob"


@pytest.mark.kube_crds("jobsets.jobset.x-k8s.io")
def test_a_spec_the_chosen_flavor_cannot_express_is_refused_before_sending(kube_emulator: KubeEmulator,
                                                                          kube_config_file: Path) -> None:
    from kubetrain.jobspec import SpecError

    b = KubernetesBackend(kubeconfig=kube_config_file, retry=FAST_RETRY)
    job = from_dict(job_doc("gang", scheduling={"gang": True}))
    with pytest.raises(SpecError, match=r"spec\.scheduling\.gang"):
        b.submit(job)
    assert kube_emulator.count_requests("POST") == 0


@pytest.mark.kube_crds("jobsets.jobset.x-k8s.io")
def test_a_kueue_queue_needs_kueue(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    b = KubernetesBackend(kubeconfig=kube_config_file, retry=FAST_RETRY)
    job = from_dict(job_doc("queued", scheduling={"queue": "team-a"}))
    with pytest.raises(FlavorUnavailable, match="Kueue LocalQueue, but this cluster does not serve Kueue"):
        b.submit(job, flavor="jobset")


def test_a_missing_local_queue_is_refused_at_submit(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    b = KubernetesBackend(kubeconfig=kube_config_file, retry=FAST_RETRY)
    job = from_dict(job_doc("queued", scheduling={"queue": "team-a"}))
    with pytest.raises(FlavorUnavailable, match="LocalQueue team-a does not exist in namespace default"):
        b.submit(job, flavor="jobset")
    kube_emulator.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "team-a", "namespace": "default"},
                          "spec": {"clusterQueue": "cluster"}})
    sub = b.submit(job, flavor="jobset")
    assert sub.root["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
