"""A default flavor that runs: engines chosen by a live controller, and a job nothing acts on said to be.

On the API emulator the CRDs are served and no controller runs unless a test plays one
(``KubeEmulator.run_controller``: its Deployment's ready replicas and its leader Lease, as the deployment
controller and the leader write them). No test races a clock: the untouched time is a setting, and the tests
wait for the condition (a bound on the wait only fails a test that would hang).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kube_emulator import KubeEmulator
from kube_emulator.controllers import Controllers

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.flavors import get_flavor
from kubetrain.backends.kubernetes.liveness import cache_file
from kubetrain.contract.labels import JOB_LABEL, ROLE_LABEL
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase
from tests.support.cluster import FAST_RETRY, job_doc
from tests.support.manifest_schemas import validate_manifest


def backend(config: Path, **options: Any) -> KubernetesBackend:
    options.setdefault("liveness_ttl", 0)
    return KubernetesBackend(kubeconfig=config, retry=FAST_RETRY, diagnose_every=0.2, log_grace=0.5, **options)


def jobset_controller(emu: KubeEmulator, *, ready: bool = True, lease: bool = False, **kw: Any) -> None:
    emu.run_controller("jobset-system", "jobset-controller-manager", ready=ready,
                       lease="6d4f6a47.jobset.x-k8s.io" if lease else None, **kw)


def test_crd_served_without_a_controller_auto_picks_job(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube_emulator.body_validator = validate_manifest
    b = backend(kube_config_file)
    events: list[str] = []
    result = b.run(from_dict(job_doc("autoflav")), detach=True, on_event=events.append)
    assert result.flavor == "job"
    assert [o["kind"] for o in kube_emulator.objects("jobs")] == ["Job"]
    assert any(e.startswith("warning: not the jobset flavor: this cluster serves its API") for e in events)


def test_a_dead_jobset_controller_is_not_picked_and_says_why(kube_emulator: KubeEmulator,
                                                             kube_config_file: Path) -> None:
    jobset_controller(kube_emulator, ready=False)  # CrashLoopBackOff: the Deployment has no ready replica
    events: list[str] = []
    result = backend(kube_config_file).run(from_dict(job_doc("crashing")), detach=True, on_event=events.append)
    assert result.flavor == "job"
    assert any("Deployment jobset-system/jobset-controller-manager has 0/1 ready replicas" in e for e in events)


@pytest.mark.parametrize("evidence", ["deployment", "lease"])
def test_a_live_jobset_controller_is_picked(kube_emulator: KubeEmulator, kube_config_file: Path,
                                            evidence: str) -> None:
    if evidence == "deployment":
        jobset_controller(kube_emulator)
    else:  # installed under another Deployment name (a Helm release): its leader's Lease says it is alive
        kube_emulator.run_controller("jobset-system", "jobset-controller-manager", lease="6d4f6a47.jobset.x-k8s.io")
        kube_emulator.delete("deployments", "jobset-controller-manager", "jobset-system")
    b = backend(kube_config_file)
    seen = b.liveness(get_flavor("jobset"))
    assert seen.live, seen
    assert ("Deployment" if evidence == "deployment" else "Lease") in seen.evidence
    assert b.run(from_dict(job_doc(f"live-{evidence}")), detach=True).flavor == "jobset"


def test_a_lease_no_longer_renewed_is_a_dead_controller(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube_emulator.run_controller("jobset-system", "jobset-controller-manager", lease="6d4f6a47.jobset.x-k8s.io",
                                 renewed_seconds_ago=600)
    kube_emulator.delete("deployments", "jobset-controller-manager", "jobset-system")
    seen = backend(kube_config_file).liveness(get_flavor("jobset"))
    assert seen.state == "dead" and "last renewed" in seen.evidence


def test_status_written_on_an_old_object_is_a_sign_of_life(kube_emulator: KubeEmulator,
                                                           kube_config_file: Path) -> None:
    """No Deployment or Lease readable: the objects the controller handles tell (an older JobSet with status)."""
    b = backend(kube_config_file, untouched_after=0)
    b.submit(from_dict(job_doc("older")), flavor="jobset")
    assert b.liveness(get_flavor("jobset")).state == "dead"  # untouched: nothing acted on it
    Controllers(kube_emulator, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL).acknowledge("jobset", "older")
    assert b.liveness(get_flavor("jobset")).live


def test_an_explicit_flavor_stays_the_users_word_with_a_warning(kube_emulator: KubeEmulator,
                                                               kube_config_file: Path) -> None:
    events: list[str] = []
    result = backend(kube_config_file, flavor="jobset").run(from_dict(job_doc("mine")), detach=True,
                                                            on_event=events.append)
    assert result.flavor == "jobset" and kube_emulator.find("jobsets", "mine") is not None
    assert any(e.startswith("warning: the jobset flavor: kubetrain cannot tell whether the JobSet controller runs")
               for e in events)
    jobset_controller(kube_emulator, ready=False)
    events.clear()
    backend(kube_config_file, flavor="jobset").run(from_dict(job_doc("mine2")), detach=True, on_event=events.append)
    assert any("the JobSet controller shows no sign of life (Deployment jobset-system/jobset-controller-manager has "
               "0/1 ready replicas)" in e for e in events)


def test_an_untouched_jobset_is_said_within_the_stated_time(kube_emulator: KubeEmulator,
                                                            kube_config_file: Path) -> None:
    b = backend(kube_config_file, flavor="jobset", untouched_after=0.5)
    b.run(from_dict(job_doc("idle")), detach=True)
    # The watch wakes at the stated time by itself (no event comes): wait for the message, bounded only in case
    # it never comes.
    status = b.wait("idle", until=lambda s: s.reason == "NoController", timeout=30)
    assert status.reason == "NoController" and status.phase is JobPhase.PENDING
    assert status.message is not None
    assert status.message.startswith("no controller has acted on this JobSet for ")
    assert status.message.endswith(
        "is the JobSet controller installed and running? (kubectl get pods -n jobset-system)")
    lines = b.describe("idle").status_lines()
    assert any(line.strip().startswith("NoController (worker-0, worker-1): no controller has acted") and
               "--flavor job" in line for line in lines)
    text = b.describe("idle").text()
    assert "NoController" in text
    [listed] = b.list()
    assert listed.reason == "NoController"


def test_an_attached_run_says_so_too(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    """The attached run's follow prints it once the time has passed, though no event came."""
    b = backend(kube_config_file, flavor="jobset", untouched_after=0.3)
    said: list[str] = []

    def on_event(text: str) -> None:
        said.append(text)
        if "no controller has acted" in text:
            raise KeyboardInterrupt  # the user, having read it, presses Ctrl-C: the job is cancelled

    result = b.run(from_dict(job_doc("attached")), on_event=on_event)
    assert any(t.startswith("pending: NoController") for t in said)
    assert result.status is not None and result.status.phase is JobPhase.CANCELLED


def test_a_controller_that_writes_status_gets_no_message(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    b = backend(kube_config_file, flavor="jobset", untouched_after=0)
    b.run(from_dict(job_doc("handled")), detach=True)
    assert b.status("handled").reason == "NoController"
    Controllers(kube_emulator, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL).acknowledge("jobset", "handled")
    status = b.status("handled")
    assert status.reason != "NoController" and "no controller" not in (status.message or "")


def test_pods_are_a_controllers_act_too(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    b = backend(kube_config_file, flavor="job", untouched_after=0)
    b.run(from_dict(job_doc("podded")), detach=True)
    assert b.status("podded").message is not None
    assert "is the Job controller (kube-controller-manager) installed" in (b.status("podded").message or "")
    Controllers(kube_emulator, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL).create_pods("job", "podded")
    assert b.status("podded").reason != "NoController"


def test_liveness_is_cached_per_context(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    jobset_controller(kube_emulator)
    first = backend(kube_config_file, liveness_ttl=60)
    assert first.liveness(get_flavor("jobset")).live
    assert cache_file().is_file()
    kube_emulator.clear_requests()
    second = backend(kube_config_file, liveness_ttl=60)  # as the next CLI verb would be
    assert second.liveness(get_flavor("jobset")).live
    assert kube_emulator.count_requests(path_regex="deployments|leases") == 0
    other = kube_emulator.write_kubeconfig(kube_config_file.parent / "other", context="other-context")
    backend(other, liveness_ttl=60).liveness(get_flavor("jobset"))
    assert kube_emulator.count_requests(path_regex="deployments") >= 1


def test_server_dry_run_says_what_the_cluster_can_run(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    jobset_controller(kube_emulator)
    kube_emulator.run_controller("kubeflow", "training-operator", ready=False)
    report = backend(kube_config_file).run(from_dict(job_doc("dry")), dry_run="server").dry_run
    assert report is not None
    engines = "\n".join(report.engines)
    assert "flavor job: runs here (part of Kubernetes)" in engines
    assert "flavor jobset: runs here (Deployment jobset-system/jobset-controller-manager 1/1 ready)" in engines
    assert "flavor kubeflow: API served, controller not running (Deployment kubeflow/training-operator has 0/1" \
        in engines
    assert "flavor volcano: API served, controller not seen" in engines
    assert report.flavor == "jobset"


@pytest.mark.kube_crds("jobsets.jobset.x-k8s.io")
def test_flavors_not_served_are_said(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    lines = backend(kube_config_file).engines()
    assert lines[-1] == "not served: flavor volcano, flavor kubeflow"


def test_the_web_view_reads_it(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    """The web view's job page and table take describe and list as they are: the message reaches the page's data
    (its message line, its Pending list) and the table's reason column, without a change of its own."""
    from kubetrain.ui.pages import status_fragments
    from kubetrain.ui.sources import Source

    b = backend(kube_config_file, flavor="jobset", untouched_after=0)
    b.run(from_dict(job_doc("viewed")), detach=True)
    detail = Source(b).detail("viewed")
    assert detail.message is not None and detail.message.startswith("no controller has acted on this JobSet")
    pending = status_fragments(detail)["pending"]  # the page's Pending list, as the page renders it
    assert "NoController" in pending and "kubectl get pods -n jobset-system" in pending
    [row] = [s for s in b.list() if s.job_id == "viewed"]
    assert row.reason == "NoController"
