"""Submitting: root first and owning the rest, taken names, retries without duplicates, rollback, and the
server-side dry run."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.client.errors import ConnectionLost
from kubetrain.backends.kubernetes.client.kube import Kube
from kubetrain.backends.kubernetes.submit import NameTaken, SubmitError
from kubetrain.jobspec import from_dict
from tests.support.cluster import FAST_RETRY, Cluster, cluster, emulated, job_doc  # noqa: F401
from tests.support.manifest_schemas import validate_manifest

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator

#: Something only the API server refuses (422): tolerations are passed through as written, and "In" is not a
#: toleration operator. What kubetrain knows the server refuses (a fractional extended resource) never gets there.
# What only the API server refuses: kubetrain checks the job's own tolerations when it loads them, not those of a
# podTemplate, which it passes on as written.
REFUSED_BY_SERVER = {"podTemplate": {"spec": {"tolerations": [{"key": "example.com/dev", "operator": "In",
                                                               "value": "x"}]}}}


def test_root_first_then_the_rest_owned_by_it(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("owned", ports=[{"container": 8080, "name": "http"}])), flavor="job")
    posts = [r for r in emu.requests if r.method == "POST"]
    kinds = [r.body["kind"] for r in posts]
    assert kinds[0] == "Job" and sorted(kinds[1:]) == ["Service", "Service"]
    root = emu.get("jobs", "owned-worker")
    assert root["metadata"]["annotations"]["kubetrain.dev/flavor"] == "job"
    tag = root["metadata"]["labels"]["kubetrain.dev/submission"]
    assert tag == sub.submission_id
    for post in posts[1:]:
        [ref] = post.body["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "batch/v1", "kind": "Job", "name": "owned-worker", "uid": root["metadata"]["uid"]}
        assert post.body["metadata"]["labels"]["kubetrain.dev/submission"] == tag
    emu.delete("jobs", "owned-worker", propagation="Background")  # deleting the root takes everything
    assert emu.objects("services") == [s for s in emu.objects("services") if s["metadata"]["name"] == "kubernetes"]


def test_a_taken_name_is_a_clear_error(emulated: Cluster) -> None:
    b = emulated.backend()
    b.submit(from_dict(job_doc("taken")), flavor="job")
    with pytest.raises(NameTaken, match=r"Job taken-worker already exists in namespace default \(it belongs to "
                                         r"kubetrain job taken\): delete it first"):
        b.submit(from_dict(job_doc("taken")), flavor="job")


def test_name_prefix_gets_another_name_when_taken(emulated: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    b = emulated.backend()
    names = iter(["run-aaaaa", "run-bbbbb"])
    render_module = importlib.import_module("kubetrain.backends.kubernetes.render")
    monkeypatch.setattr(render_module, "generated_name", lambda prefix: next(names))
    first = from_dict({**job_doc("unused"), "metadata": {"namePrefix": "run-"}})
    emulated.emu.create({"apiVersion": "batch/v1", "kind": "Job",  # type: ignore[union-attr]
                         "metadata": {"name": "run-aaaaa-worker", "namespace": "default"},
                         "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                        "containers": [{"name": "c", "image": "busybox"}]}}}})
    sub = b.submit(first, flavor="job")
    assert sub.name == "run-bbbbb" and sub.root["metadata"]["name"] == "run-bbbbb-worker"


def test_a_500_on_create_is_retried_once_without_a_duplicate(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    emu.fail_next("POST", path_regex="/jobs$", status=500, message="etcdserver: leader changed")
    b.submit(from_dict(job_doc("retry")), flavor="job")
    assert emu.count_requests("POST", "/jobs$") == 2
    assert emu.count_requests("GET", "/jobs/retry-worker$") == 1  # looked for it before trying again
    assert [j["metadata"]["name"] for j in emu.objects("jobs")] == ["retry-worker"]


def test_a_dropped_connection_or_429_on_create_is_retried(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    emu.drop_next("POST", path_regex="/jobs$")
    emu.fail_next("POST", path_regex="/services$", status=429, retry_after=30)
    b.submit(from_dict(job_doc("flaky")), flavor="job")
    assert emu.count_requests("POST", "/jobs$") == 2 and emu.count_requests("POST", "/services$") == 2
    assert len(emu.objects("jobs")) == 1 and len(emu.objects("services", label_selector="kubetrain.dev/job")) == 1


def test_a_lost_answer_after_the_object_was_stored_makes_no_duplicate(emulated: Cluster,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    real_create = Kube.create
    lost: list[str] = []

    def create(self: Kube, res: Any, body: dict[str, Any], namespace: str | None, *, dry_run: bool = False) -> Any:
        out = real_create(self, res, body, namespace, dry_run=dry_run)
        if not lost:
            lost.append(body["metadata"]["name"])
            raise ConnectionLost(ConnectionResetError("connection reset by peer"))
        return out

    monkeypatch.setattr(Kube, "create", create)
    sub = b.submit(from_dict(job_doc("lost")), flavor="job")
    assert lost == ["lost-worker"] and sub.root["metadata"]["name"] == "lost-worker"
    assert emu.count_requests("POST", "/jobs$") == 1  # found by its submission label: not sent again
    assert len(emu.objects("jobs")) == 1 and len(sub.objects) == 2


def test_a_refused_child_rolls_the_job_back(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None

    def no_services(obj: dict[str, Any]) -> list[str]:
        problems = validate_manifest(obj)
        if obj["kind"] == "Service":
            problems.append("spec.clusterIP: Invalid value: \"None\": not allowed in this namespace")
        return problems

    emu.body_validator = no_services
    b = emulated.backend()
    with pytest.raises(SubmitError, match=r"Service rollback was refused: 422 Invalid.*\n.*deleted again"):
        b.submit(from_dict(job_doc("rollback")), flavor="job")
    assert emu.objects("jobs") == [] and emu.objects("pods") == []
    emu.validation_failures.clear()


def test_a_missing_namespace_is_named(emulated: Cluster) -> None:
    b = emulated.backend()
    with pytest.raises(SubmitError, match=r'namespaces "nowhere" not found \(create it, or choose another with -n\)'):
        b.submit(from_dict(job_doc("lost-ns")), flavor="job", namespace="nowhere")


def test_server_dry_run_shows_the_422_field_paths_and_creates_nothing(cluster: Cluster) -> None:
    b = cluster.backend()
    job = cluster.job("dry", **REFUSED_BY_SERVER)
    report = b.dry_run(job, flavor="job")
    assert not report.ok
    [refused] = [v for v in report.verdicts if not v.accepted]
    assert refused.kind == "Job" and refused.status == 422 and refused.reason == "Invalid"
    fields = [c.field for c in refused.causes]
    assert "spec.template.spec.tolerations[0].operator" in fields
    text = report.format()
    assert "Job/dry-worker: refused (422 Invalid)" in text.replace(job.metadata.name or "", "dry")
    assert "spec.template.spec.tolerations[0].operator: " in text
    assert "Unsupported value" in text and "nothing was created" in text
    assert any(v.kind == "Service" and v.accepted for v in report.verdicts)
    with pytest.raises(Exception, match="no kubetrain job"):
        b.status(job.metadata.name or "")
    result = cluster.backend(flavor="job").run(job, dry_run="server")
    assert result.exit_code == 1 and result.dry_run is not None and result.status is None
    if cluster.emu is not None:
        assert all(r.query.get("dryRun") == "All" for r in cluster.emu.requests if r.method == "POST")
        assert cluster.emu.objects("jobs") == []


def test_server_dry_run_shows_quota_refusals(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    quota = ('jobsets.jobset.x-k8s.io "dry" is forbidden: exceeded quota: ml-quota, requested: '
             "count/jobsets.jobset.x-k8s.io=1, used: count/jobsets.jobset.x-k8s.io=4, limited: "
             "count/jobsets.jobset.x-k8s.io=4")
    emu.fail_next("POST", path_regex="/jobsets$", status=403, message=quota)
    report = b.dry_run(from_dict(job_doc("dry")), flavor="jobset")
    assert not report.ok
    assert report.format().splitlines()[1:3] == ["  JobSet/dry: refused (403 Forbidden)", f"    {quota}"]
    ok = b.dry_run(from_dict(job_doc("dry")), flavor="jobset")
    assert ok.ok and "all 1 objects accepted; nothing was created" in ok.format()
    assert ok.to_dict()["verdicts"][0]["accepted"] is True


def test_submit_uses_the_kubeconfig_namespace(kube_emulator: KubeEmulator, tmp_path: Path) -> None:
    kube_emulator.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    path = kube_emulator.write_kubeconfig(tmp_path / "kc", namespace="ml")
    b = KubernetesBackend(kubeconfig=path, retry=FAST_RETRY)
    sub = b.submit(from_dict(job_doc("here")), flavor="job")
    assert sub.namespace == "ml" and kube_emulator.find("jobs", "here-worker", "ml") is not None
    assert b.status("here").namespace == "ml"


def test_api_access_objects_are_created_and_owned(emulated: Cluster) -> None:
    """Replicas that read the API (the cluster resolver) get a ServiceAccount, Role and RoleBinding: created after
    the root, owned by it, no discovery needed."""
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("resolver", apiAccess=True)), flavor="jobset")
    kinds = [o["kind"] for o in sub.objects]
    assert kinds[0] == "JobSet" and {"ServiceAccount", "Role", "RoleBinding"} <= set(kinds)
    uid = sub.root["metadata"]["uid"]
    for obj in sub.objects[1:]:
        assert obj["metadata"]["ownerReferences"][0]["uid"] == uid
    assert emu.count_requests("GET", "^/apis/rbac") == 0
