"""The Kubernetes backend as `kubetrain.backends.base.Backend`: the protocol's signatures exactly, opened by
`open_backend`, dry runs (client: the manifests, nothing sent; server: the API server's verdict), warnings
before anything is created, `list` by the namespace it was opened with, errors of kubetrain's family, and an
import that costs nothing."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubetrain.backends import base
from kubetrain.backends.base import Backend, open_backend
from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.client.errors import ConfigError, KubernetesError
from kubetrain.backends.kubernetes.flavors import FlavorUnavailable
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.errors import JobNotFound, KubetrainError, UsageError
from kubetrain.jobspec import from_dict
from tests.support.cluster import FAST_RETRY, Cluster, emulated, job_doc  # noqa: F401

PACKAGE = Path(__file__).resolve().parents[2] / "kubetrain" / "backends" / "kubernetes"
VERBS = ["run", "status", "describe", "list", "logs", "metrics", "cancel", "suspend", "resume", "scale", "delete",
         "changes", "framework", "processes", "close", "__enter__", "__exit__"]


def _shape(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_the_protocols_signature(verb: str) -> None:
    assert _shape(getattr(KubernetesBackend, verb)) == _shape(getattr(Backend, verb))


def test_the_constructor_takes_the_options_open_backend_documents() -> None:
    params = inspect.signature(KubernetesBackend).parameters
    expected = {"namespace": None, "context": None, "kubeconfig": None, "flavor": None, "all_namespaces": False,
                "timeout": None}
    assert {k: params[k].default for k in expected} == expected
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert KubernetesBackend.name == "kubernetes"


def test_open_backend_gives_a_backend(kube_emulator: object, kube_config_file: Path) -> None:
    with open_backend("k8s", kubeconfig=kube_config_file, flavor="jobset", namespace="ml") as b:
        assert isinstance(b, KubernetesBackend) and isinstance(b, Backend)
        assert (b.flavor, b.namespace) == ("jobset", "ml")


def test_errors_are_kubetrains() -> None:
    for error in (KubernetesError, ConfigError, FlavorUnavailable, JobNotFound):
        assert issubclass(error, KubetrainError)
    assert ConfigError.exit_code == 2 and FlavorUnavailable.exit_code == 2 and KubernetesError.exit_code == 1
    with pytest.raises(UsageError, match="unknown flavor 'argo': one of job, jobset, volcano, kubeflow"):
        KubernetesBackend(flavor="argo")  # before any configuration is read
    with pytest.raises(UsageError, match="k8s is a backend, not a flavor"):
        KubernetesBackend(flavor="k8s")


def test_client_dry_run_is_the_manifests_and_sends_nothing(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    job = from_dict(job_doc("dry"))
    emu.clear_requests()
    result = emulated.backend(flavor="volcano").run(job, dry_run="client")
    assert emu.count_requests() == 0
    assert result.plan == {"apiVersion": "v1", "kind": "List",
                           "items": render_manifests(job, "volcano", "default").objects}
    assert (result.job_id, result.backend, result.namespace, result.flavor) == ("dry", "kubernetes", "default",
                                                                                 "volcano")
    assert result.exit_code == 0 and result.status is None and result.dry_run is None
    # no flavor named: the one the cluster would run (discovery, and reads that its controller is alive), still
    # nothing created
    emu.run_controller("jobset-system", "jobset-controller-manager")
    emu.clear_requests()
    auto = emulated.backend(liveness_ttl=0).run(job, dry_run="client")
    assert auto.flavor == "jobset" and auto.plan is not None and auto.plan["items"][0]["kind"] == "JobSet"
    assert emu.count_requests("GET", "^/apis$") == 1 and emu.count_requests("GET", "deployments") == 1
    assert emu.count_requests() == emu.count_requests("GET")
    assert emu.objects("jobsets") == [] and emu.objects("jobs") == []


def test_server_dry_run_is_the_servers_verdict(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    result = emulated.backend(flavor="jobset").run(from_dict(job_doc("dry")), dry_run="server")
    assert result.dry_run is not None and result.dry_run.ok and result.exit_code == 0
    assert (result.job_id, result.namespace, result.flavor, result.plan) == ("dry", "default", "jobset", None)
    assert emu.objects("jobsets") == []


def test_warnings_are_said_before_anything_is_created(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    events: list[str] = []
    job = from_dict(job_doc("fuse", mounts=["type=device,src=/dev/fuse"]))

    def on_event(text: str) -> None:
        if text.startswith("warning: "):
            assert emu.objects("jobs") == [], "a warning after the job was created"
        events.append(text)

    result = emulated.backend(flavor="job").run(job, detach=True, on_event=on_event)
    warnings = [e.removeprefix("warning: ") for e in events if e.startswith("warning: ")]
    assert warnings and warnings == result.warnings and any("PRIVILEGED" in w for w in warnings)
    assert events.index(f"warning: {warnings[-1]}") < next(i for i, e in enumerate(events) if e.startswith("created"))
    dry: list[str] = []
    emulated.backend(flavor="job").run(job, dry_run="client", on_event=dry.append)
    assert dry == [f"warning: {w}" for w in warnings]


def test_list_is_the_namespace_opened_or_all_of_them_newest_first(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    here = KubernetesBackend(kubeconfig=emulated.kubeconfig, flavor="job", retry=FAST_RETRY)
    there = KubernetesBackend(kubeconfig=emulated.kubeconfig, flavor="job", namespace="ml", retry=FAST_RETRY)
    everywhere = KubernetesBackend(kubeconfig=emulated.kubeconfig, all_namespaces=True, retry=FAST_RETRY)
    try:
        here.run(from_dict(job_doc("a")), detach=True)
        there.run(from_dict(job_doc("b")), detach=True)
        assert [s.job_id for s in here.list()] == ["a"]
        assert [(s.job_id, s.namespace) for s in there.list()] == [("b", "ml")]
        assert sorted((s.job_id, s.namespace) for s in everywhere.list()) == [("a", "default"), ("b", "ml")]
        assert len(everywhere.list(limit=1)) == 1 and everywhere.list(limit=0) == []
        assert there.status("b").namespace == "ml"
        with pytest.raises(JobNotFound):
            here.status("b")
    finally:
        for b in (here, there, everywhere):
            b.close()


def test_the_namespace_opened_wins_over_the_jobs(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    doc = job_doc("placed")
    doc["metadata"]["namespace"] = "ml"
    unset = KubernetesBackend(kubeconfig=emulated.kubeconfig, flavor="job", retry=FAST_RETRY)
    opened = KubernetesBackend(kubeconfig=emulated.kubeconfig, flavor="job", namespace="default", retry=FAST_RETRY)
    try:
        assert unset.run(from_dict(doc), detach=True).namespace == "ml"  # none asked for: the job's
        assert emu.find("jobs", "placed-worker", "ml") is not None
        doc["metadata"]["name"] = "moved"
        assert opened.run(from_dict(doc), detach=True).namespace == "default"  # -n wins
        assert emu.find("jobs", "moved-worker", "default") is not None
    finally:
        unset.close()
        opened.close()


def test_importing_the_package_costs_nothing() -> None:
    """`import kubetrain.backends.kubernetes` loads the standard library and kubetrain.contract, nothing else."""
    code = "import sys, kubetrain.backends.kubernetes; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    ours = {m for m in loaded if m.split(".")[0] == "kubetrain"}
    assert ours - {"kubetrain", "kubetrain.backends", "kubetrain.backends.kubernetes"} <= {
        m for m in ours if m == "kubetrain.contract" or m.startswith("kubetrain.contract.")}
    foreign = {m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names) - {"kubetrain"}
    assert {m for m in foreign if not m.startswith("_") and m not in ("sitecustomize", "usercustomize")} == set()


CREATING_ONLY = ("kubetrain.backends.kubernetes.submit", "kubetrain.backends.kubernetes.ssh_keys",
                 "kubetrain.backends.kubernetes.as_written", "kubetrain.backends.kubernetes.changes",
                 "kubetrain.backends.kubernetes.follow")
"""Modules only creating or following a job (and the web view's change feed) use: the reading verbs must not pay
for them."""


@pytest.mark.parametrize("verb", ["status", "describe", "list"])
def test_the_reading_verbs_import_nothing_only_creating_a_job_uses(emulated: Cluster, verb: str,
                                                                    tmp_path: Path) -> None:
    b = emulated.backend(flavor="job")
    b.submit(from_dict(job_doc("lean", replicas=2)))
    modules = tmp_path / "modules"
    code = ("import sys; from kubetrain.cli.main import main; rc = main(sys.argv[2:]); "
            "open(sys.argv[1], 'w').write('\\n'.join(sorted(sys.modules))); sys.exit(rc)")
    argv = [sys.executable, "-c", code, str(modules), verb, *(["lean"] if verb != "list" else []),
            "--backend", "kubernetes", "--kubeconfig", str(emulated.kubeconfig)]
    got = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "KUBETRAIN_HOME": str(tmp_path)},
                         timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "lean" in got.stdout
    imported = set(modules.read_text().split())
    assert "kubetrain.backends.kubernetes.backend" in imported  # the command did reach the backend
    assert imported.isdisjoint(CREATING_ONLY), sorted(imported.intersection(CREATING_ONLY))


def test_the_kubernetes_backend_never_imports_the_local_one() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+(\S*backends\.local\b|\.\.\.?local\b|\.\.local\b)", re.MULTILINE)
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
    code = ("import sys, kubetrain.backends.kubernetes.backend, kubetrain.backends.kubernetes.render; "
            "print(any(m.startswith('kubetrain.backends.local') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_backend_registry_opens_this_class() -> None:
    assert base.BACKENDS["kubernetes"] == f"{KubernetesBackend.__module__}:{KubernetesBackend.__name__}"


def test_what_a_caller_reads_of_a_job_comes_through_the_protocol(emulated: Cluster) -> None:
    """The web view's job page, table and feed, and `kubetrain attach`, ask the protocol, never the backend's
    insides: the spec as submitted (the root object without what the API server keeps beside it), the
    framework (from the objects, then from what a change feed's watches hold) and a change feed that fires."""
    import threading

    backend = emulated.backend()
    sub = backend.submit(emulated.job("protocol"), flavor="job")
    spec = backend.describe(sub.name).spec
    assert spec is not None and spec["kind"] == "Job" and spec["metadata"]["name"] == sub.root["metadata"]["name"]
    assert "status" not in spec and "managedFields" not in spec["metadata"]
    assert list(backend.describe(sub.name).diagnoses) == []  # nothing waits: no pod yet, nothing said
    assert backend.framework(sub.name) == "pytorch"  # no feed running: read from its objects
    changed = threading.Event()
    feed = backend.changes(changed.set)
    try:
        assert changed.wait(10), "the feed's first list is a change"
        changed.clear()
        emulated.start_pods(backend, "job", sub.name)
        assert changed.wait(10), "pods created: a change"
        # From the watches' objects: the first change may be the pods' informer's, before the workloads' has
        # listed, so wait for the workloads' to hold the job rather than read it once.
        deadline = time.monotonic() + 10
        while backend.framework(sub.name) != "pytorch" and time.monotonic() < deadline:
            changed.wait(0.1)
        assert backend.framework(sub.name) == "pytorch"
        assert feed.error is None
    finally:
        feed.stop()
    with pytest.raises(UsageError, match=r"a pod of the cluster, not a process here: .*kubectl exec -it -n "):
        backend.processes(sub.name)
