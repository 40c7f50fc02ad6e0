"""Shared fixtures of the Kubernetes backend tests (this module holds no tests).

The ``cluster`` fixture runs a test twice: against the API emulator (always), and against a real
cluster when ``KUBETRAIN_TEST_KUBECONFIG`` names a kubeconfig (not collected otherwise). A test drives the
backend only through its API; the parts a real cluster does by itself (the Job/JobSet/Volcano/Kubeflow
controllers creating pods, the kubelet running them, the controllers concluding) are methods of
:class:`Cluster` that play them on the emulator and, on a real cluster, do nothing (the job's own
command does it) or wait for it. So the same assertions hold in both places.

The controllers played on the emulator are the emulator's own (``kube_emulator.controllers``), on kubetrain's
labels. Import what you use: ``from tests.support.cluster import cluster, emulated  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kube_emulator.controllers import Controllers, now

from kubetrain.backends.kubernetes import flavors
from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.client.retry import RetryPolicy
from kubetrain.backends.kubernetes.flavors import FlavorUnavailable
from kubetrain.contract.labels import JOB_LABEL, ROLE_LABEL
from kubetrain.jobspec import TrainJob, from_dict
from kubetrain.status import JobStatus
from tests.support.manifest_schemas import validate_manifest

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator

REAL_KUBECONFIG = os.environ.get("KUBETRAIN_TEST_KUBECONFIG")
REAL_NAMESPACE = os.environ.get("KUBETRAIN_TEST_NAMESPACE", "default")
IMAGE = os.environ.get("KUBETRAIN_TEST_IMAGE", "busybox:1.36")
FAST_RETRY = RetryPolicy(attempts=5, base=0.01, cap=0.05)

FLAVORS = tuple(flavors.FLAVORS)
"""Every flavor kubetrain knows (the registry's names)."""


def job_doc(name: str, *, framework: str = "pytorch", replicas: int = 2, script: str = "echo hello",
            **spec: Any) -> dict[str, Any]:
    """A small TrainJob whose replicas run ``sh -c script`` in busybox (real clusters run it as is)."""
    body: dict[str, Any] = {"framework": framework, "replicas": replicas, "image": IMAGE,
                            "run": {"exec": ["sh", "-c", script]}, "resources": {"cpu": "10m", "memory": "16Mi"}}
    body.update(spec)
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": body}


def controllers(emu: KubeEmulator, namespace: str) -> Controllers:
    """The workload controllers played on the emulator (kube_emulator.controllers), on kubetrain's labels."""
    return Controllers(emu, namespace, job_label=JOB_LABEL, role_label=ROLE_LABEL)


class Cluster:
    """A cluster for one test: the emulator (``real`` False) or the one in KUBETRAIN_TEST_KUBECONFIG."""

    def __init__(self, kubeconfig: Path | str, namespace: str, emulator: KubeEmulator | None) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.emu = emulator
        self.real = emulator is None
        self.timeout = 180.0 if self.real else 10.0
        self.controllers = controllers(emulator, namespace) if emulator is not None else None
        self._backends: list[KubernetesBackend] = []
        self.created: list[str] = []

    def backend(self, **options: Any) -> KubernetesBackend:
        options.setdefault("retry", FAST_RETRY)
        options.setdefault("log_grace", 1.0)
        options.setdefault("diagnose_every", 0.2)
        b = KubernetesBackend(kubeconfig=self.kubeconfig, namespace=self.namespace, **options)
        self._backends.append(b)
        return b

    def name(self, base: str) -> str:
        """Job names: as given on the emulator, with a random suffix on a shared real cluster."""
        name = base if not self.real else f"{base}-{secrets.token_hex(3)}"
        self.created.append(name)
        return name

    def job(self, base: str, **options: Any) -> TrainJob:
        return from_dict(job_doc(self.name(base), **options))

    def require(self, backend: KubernetesBackend, flavor: str) -> bool:
        """Whether ``flavor`` can run here. On a real cluster without its controller, what a user meets
        instead is checked (submit refuses, naming what is missing) and the test ends there."""
        missing = backend.capabilities().missing(flavor)
        if missing is None:
            return True
        assert self.real, f"the emulator serves every flavor: {missing}"
        with pytest.raises(FlavorUnavailable) as refused:
            backend.submit(self.job(f"unavailable-{flavor}"), flavor=flavor)
        assert str(refused.value) == missing
        return False

    # -- what the cluster does by itself ------------------------------------------------------------

    def start_pods(self, backend: KubernetesBackend, flavor: str, name: str) -> dict[str, str]:
        """Every replica's pod: created by the played controller, or waited for."""
        if self.controllers is not None:
            return self.controllers.create_pods(flavor, name)
        backend.wait(name, until=lambda s: all(r.reason != "NoPod" for r in s.replicas), timeout=self.timeout)
        return {k: str(v["name"]) for k, v in backend.describe(name).pods.items()}

    def kubelet(self, pod: str, phase: str, *lines: str, **kwargs: Any) -> None:
        """The kubelet: the pod's phase, and what its container printed (emulator only)."""
        if self.emu is None:
            return
        if phase in ("Succeeded", "Failed"):
            current = self.emu.get("pods", pod, self.namespace)
            if current["status"].get("phase") == "Pending":
                self.emu.set_pod_phase(self.namespace, pod, "Running")
            for line in lines:
                self.emu.append_log(self.namespace, pod, line + "\n")
            self.emu.set_pod_phase(self.namespace, pod, phase, **kwargs)
            return
        self.emu.set_pod_phase(self.namespace, pod, phase, **kwargs)
        for line in lines:
            self.emu.append_log(self.namespace, pod, line + "\n")

    def conclude(self, flavor: str, name: str, outcome: str, **kwargs: Any) -> None:
        if self.controllers is not None:
            self.controllers.conclude(flavor, name, outcome, **kwargs)

    def expect(self, backend: KubernetesBackend, name: str, until: Callable[[JobStatus], bool]) -> JobStatus:
        """The job's status once ``until`` holds (at once on the emulator; waited for on a real cluster)."""
        status = backend.wait(name, until=until, timeout=self.timeout)
        assert until(status), status.to_dict()
        return status

    def close(self) -> None:
        if self.real and self._backends:
            for name in self.created:
                with contextlib.suppress(Exception):  # already deleted by the test
                    self._backends[0].delete(name)
        for b in self._backends:
            b.close()


@pytest.fixture(params=["emulator", *(["real"] if REAL_KUBECONFIG else [])])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """The emulator, then a real cluster (a variant that exists only with KUBETRAIN_TEST_KUBECONFIG)."""
    if request.param == "real":
        assert REAL_KUBECONFIG
        c = Cluster(REAL_KUBECONFIG, REAL_NAMESPACE, None)
    else:
        emu = request.getfixturevalue("kube_emulator")
        emu.body_validator = validate_manifest
        c = Cluster(emu.write_kubeconfig(tmp_path / "kubeconfig"), "default", emu)
    try:
        yield c
    finally:
        c.close()
        if c.emu is not None:
            assert c.emu.validation_failures == [], c.emu.validation_failures


@pytest.fixture
def emulated(kube_emulator: KubeEmulator, tmp_path: Path) -> Iterator[Cluster]:
    """The emulator only: for what a real cluster cannot be made to do on demand (faults, 410s)."""
    kube_emulator.body_validator = validate_manifest
    c = Cluster(kube_emulator.write_kubeconfig(tmp_path / "kubeconfig"), "default", kube_emulator)
    try:
        yield c
    finally:
        c.close()


__all__ = ["FAST_RETRY", "FLAVORS", "IMAGE", "Cluster", "Controllers", "cluster", "controllers", "emulated",
           "job_doc", "now"]
