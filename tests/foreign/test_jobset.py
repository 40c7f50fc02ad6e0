"""JobSets (jobset.x-k8s.io/v1alpha2) as kubetrain jobs: valid against the upstream CRD, converted field by
field, rendered for every flavor (manifests valid against the upstream schemas), round-tripped through
kubetrain's own jobset render, and run here."""

from __future__ import annotations

import copy

import pytest

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign import convert
from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import SpecError, load_file
from kubetrain.status import JobPhase
from tests.foreign.test_kubeflow import FOREIGN, crd_errors, read
from tests.support.helpers import EXAMPLES, log_lines, no_process_left_behind, parse_json_lines, run_job  # noqa: F401
from tests.support.manifest_schemas import assert_valid


@pytest.mark.parametrize("name", ["jobset.yaml", "jobset-kitchen-sink.yaml"])
def test_the_example_is_valid_against_the_upstream_crd(name: str) -> None:
    assert crd_errors(read(name)) == []


def test_replicated_jobs_become_roles_of_a_generic_job() -> None:
    job, conversion = load_job_file(FOREIGN / "jobset.yaml")
    assert conversion is not None and conversion.kind == "JobSet"
    assert conversion.refused() == [], conversion.warnings()
    assert job.spec.framework.value == "generic"
    assert job.spec.role_replicas() == {"driver": 1, "workers": 2}
    workers = job.spec.role_settings("workers")
    assert workers.run is not None and workers.run.python == ["../generic/print_env.py", "--show-peers"]
    assert workers.env is not None and [(v.name, v.value) for v in workers.env] == [("GREETING", "asking")]
    # failurePolicy.maxRestarts: the whole set restarts, kubetrain's backoffLimit (OnFailure)
    assert job.spec.run_policy.backoff_limit == 1 and job.spec.job_restart_policy() == "OnFailure"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_example_renders_valid_manifests_for_every_flavor_that_can_express_it(flavor: str) -> None:
    job, _ = load_job_file(FOREIGN / "jobset.yaml")
    if flavor == "kubeflow":  # the training operator has no kind for a generic job: refused, with the others named
        with pytest.raises(SpecError, match="framework generic"):
            render_manifests(job, flavor)
        return
    objects = render_manifests(job, flavor).objects
    assert_valid(objects)
    assert objects[0]["kind"] == {"job": "Job", "jobset": "JobSet", "volcano": "Job"}[flavor]


def test_every_field_of_the_kitchen_sink_is_accounted_for() -> None:
    job, conversion = load_job_file(FOREIGN / "jobset-kitchen-sink.yaml")
    assert conversion is not None
    verdicts = {n.source: (n.verdict, n.target) for n in conversion.notes}
    rj0, rj1 = "spec.replicatedJobs[0]", "spec.replicatedJobs[1]"
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == {
        "spec.failurePolicy.rules[1]",
        "spec.coordinator",
        f"{rj0}.template.metadata.labels",
        f"{rj1}.dependsOn",
    }
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == {
        "spec.managedBy",
        "spec.startupPolicy",
        "spec.successPolicy",
        "spec.failurePolicy.restartStrategy",
        f"{rj0}.template.spec.activeDeadlineSeconds",
        f"{rj0}.template.spec.template.spec.restartPolicy",
        f"{rj1}.template.spec.backoffLimit",
        f"{rj1}.template.spec.template.spec.restartPolicy",
    }
    mapped = {s: t for s, (v, t) in verdicts.items() if v == "mapped"}
    assert mapped["spec.failurePolicy.maxRestarts"] == "spec.runPolicy.backoffLimit"
    assert mapped["spec.failurePolicy.rules[0]"] == "spec.roles.*.restartPolicy"
    assert mapped["spec.suspend"] == "spec.runPolicy.suspend"
    assert mapped[f"{rj1}.template.spec.template.spec.nodeSelector"] == "spec.roles.workers.nodeSelector"
    # JobSet's contract keeps the names and indexes its pods see: 2 Jobs of 4 pods, the subdomain
    assert mapped[f"{rj1}.replicas"] == "spec.controller.roles.workers.jobs"
    assert mapped[f"{rj1}.template.spec.parallelism"] == "spec.roles.workers.replicas"
    assert mapped["spec.network.subdomain"] == "spec.controller.subdomain"
    spec = job.spec
    assert spec.role_replicas() == {"driver": 1, "workers": 8}  # 2 Jobs × 4 pods
    assert spec.restart_policy_of("driver") == "Never"  # FailJobSet on the driver's failures
    assert spec.restart_policy_of("workers") == "OnFailure"  # the rest restart the set, 3 times
    policy = spec.run_policy
    assert (
        policy.backoff_limit,
        policy.suspend,
        policy.ttl_seconds_after_finished,
        policy.active_deadline_seconds,
    ) == (3, True, 300, 3600)
    assert spec.role_settings("workers").limits == {"google.com/tpu": "4"}


@pytest.mark.parametrize("example", ["generic", "pytorch-ddp"])
def test_a_job_rendered_by_the_jobset_flavor_converts_back_to_the_same_manifests(example: str) -> None:
    job = load_file(EXAMPLES / example / "job.yaml")
    first = render_manifests(job, "jobset").objects
    conversion = convert(copy.deepcopy(first[0]))
    assert conversion.refused() == [], conversion.warnings()
    assert conversion.job.spec.framework == job.spec.framework
    assert render_manifests(conversion.job, "jobset").objects == first


def test_the_jobset_runs_here_and_its_replicas_find_each_other() -> None:
    job, _ = load_job_file(FOREIGN / "jobset.yaml")
    status = run_job(job, FOREIGN)
    logs = log_lines(status.job_id)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert sorted(logs) == ["driver-0", "workers-0", "workers-1"]
    peers = [line for line in logs["workers-1"] if line.startswith("peer ")]
    assert [p.split()[1:3] for p in peers] == [["driver", "0"], ["workers", "0"], ["workers", "1"]]
    seen = parse_json_lines(logs["driver-0"])
    assert seen and seen[0]["KUBETRAIN_ROLE"] == "driver"
    assert "greeting asking" in logs["workers-0"] and "greeting serving" in logs["driver-0"]
