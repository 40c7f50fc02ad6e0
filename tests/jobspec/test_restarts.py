"""restartPolicy, backoffLimit and elastic in the job model: what a spec means before any backend sees it
(the planner, the local supervisor and every flavor's render read these views), and what `explain` says."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.jobspec import DistributedConfig, RunPolicy, SpecError, from_dict
from kubetrain.jobspec.model import DEFAULT_BACKOFF_LIMIT, JobSpec
from kubetrain.jobspec.schema import explain


def spec_of(**spec: Any) -> JobSpec:
    base: dict[str, Any] = {"framework": "pytorch", "replicas": 2, "run": {"python": ["t.py"]}}
    return from_dict({"metadata": {"name": "demo"}, "spec": {**base, **spec}}).spec


def deepspeed(**spec: Any) -> JobSpec:
    base: dict[str, Any] = {"framework": "deepspeed", "run": {"python": ["t.py"]},
                            "roles": {"worker": {"replicas": 2}}}
    return from_dict({"metadata": {"name": "ds"}, "spec": {**base, **spec}}).spec


def described(path: str) -> str:
    """What `kubetrain explain PATH` says of the field, on one line."""
    return " ".join(explain(path).description.split())


def restarts(spec: JobSpec, role: str = "worker") -> tuple[str, int]:
    return spec.restart_policy_of(role), spec.backoff_limit_of()


# -- restartPolicy and backoffLimit ------------------------------------------------------------------------


def test_a_backoff_limit_alone_means_on_failure() -> None:
    """Kubeflow's runPolicy, a DeepSpeedJob's, Run:ai's backoffLimit: written without a restartPolicy, it is
    what the job restarts by."""
    assert restarts(spec_of(runPolicy={"backoffLimit": 2})) == ("OnFailure", 2)
    assert restarts(spec_of(runPolicy={"backoffLimit": 0})) == ("OnFailure", 0)
    # The document stays as written.
    assert "restartPolicy" not in from_dict({"metadata": {"name": "d"}, "spec": {
        "run": {"python": ["t.py"]}, "runPolicy": {"backoffLimit": 2}}}).to_dict()["spec"]


def test_kales_run_policy_backoff_limit_restarts() -> None:
    """DistributedConfig(run_policy=V1RunPolicy(backoff_limit=2)) applied to a job that names no policy."""
    job = from_dict({"metadata": {"name": "k"}, "spec": {"framework": "pytorch", "replicas": 2,
                                                          "run": {"python": ["t.py"]}}})
    configured = job.with_config(DistributedConfig(run_policy=RunPolicy(backoff_limit=2)))
    assert restarts(configured.spec) == ("OnFailure", 2)
    assert restarts(job.spec) == ("Never", 0)


@pytest.mark.parametrize("policy", ["OnFailure", "Always", "ExitCode"])
def test_a_restarting_policy_without_backoff_limit_allows_the_default(policy: str) -> None:
    assert DEFAULT_BACKOFF_LIMIT == 6  # the Kubernetes Job controller's and Run:ai's
    assert restarts(spec_of(restartPolicy=policy)) == (policy, 6)
    assert restarts(spec_of(restartPolicy=policy, runPolicy={"backoffLimit": 1})) == (policy, 1)


def test_nothing_given_restarts_nothing() -> None:
    assert restarts(spec_of()) == ("Never", 0)
    assert restarts(spec_of(restartPolicy="Never")) == ("Never", 0)
    assert restarts(spec_of(restartPolicy="Never", runPolicy={"backoffLimit": 0})) == ("Never", 0)


def test_never_with_a_backoff_limit_is_an_error_with_path_and_hint() -> None:
    with pytest.raises(SpecError) as info:
        spec_of(restartPolicy="Never", runPolicy={"backoffLimit": 3})
    assert info.value.paths == ["spec.restartPolicy"]
    (error,) = info.value.errors
    assert "backoffLimit allows 3 restarts" in error.message
    assert error.hint is not None and "OnFailure" in error.hint and "backoffLimit: 0" in error.hint


def test_a_role_has_its_own_restart_policy() -> None:
    """DeepSpeedJob's worker.restartPolicy: the role's own policy wins over the job's."""
    spec = deepspeed(restartPolicy="Never", roles={"launcher": {}, "worker": {"replicas": 2,
                                                                               "restartPolicy": "OnFailure"}})
    assert spec.job_restart_policy() == "Never"
    assert restarts(spec, "launcher") == ("Never", 6)
    assert restarts(spec, "worker") == ("OnFailure", 6)
    # A job-level Never with a backoffLimit is fine when a role restarts.
    spec = deepspeed(restartPolicy="Never", runPolicy={"backoffLimit": 2},
                     roles={"worker": {"replicas": 2, "restartPolicy": "ExitCode"}}, exitCodes={"permanent": [3]})
    assert restarts(spec) == ("ExitCode", 2)
    # A role may opt out of the job's restarts.
    spec = deepspeed(runPolicy={"backoffLimit": 2}, roles={"launcher": {"restartPolicy": "Never"},
                                                           "worker": {"replicas": 2}})
    assert (restarts(spec, "launcher"), restarts(spec, "worker")) == (("Never", 2), ("OnFailure", 2))
    # Role settings (what a replica gets) are unchanged by it.
    assert not hasattr(spec.role_settings("launcher"), "restart_policy")


def test_exit_codes_apply_to_a_roles_exit_code_policy_too() -> None:
    spec = deepspeed(roles={"worker": {"replicas": 2, "restartPolicy": "ExitCode"}}, exitCodes={"retryable": [3]})
    assert spec.exit_codes is not None and spec.exit_codes.retryable == [3]


def test_explain_says_what_the_defaults_are() -> None:
    backoff = described("spec.runPolicy.backoffLimit")
    assert "OnFailure" in backoff and "6" in backoff and "Never" in backoff
    policy = described("spec.restartPolicy")
    assert "OnFailure when runPolicy.backoffLimit is given" in policy
    assert "roles.<role>.restartPolicy" in policy
    assert "over the job's" in described("spec.roles.restartPolicy")


# -- elastic ---------------------------------------------------------------------------------------------


def test_expected_replicas_given_alone_is_the_start_size() -> None:
    spec = spec_of(replicas=None, elastic={"minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 4})
    assert spec.role_replicas() == {"worker": 4}
    roles = spec_of(replicas=None, roles={"master": {}, "worker": {}},
                    elastic={"minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3})
    assert roles.role_replicas() == {"master": 1, "worker": 3}
    # The document keeps both, consistent: loading it again gives the same job.
    again = from_dict({"metadata": {"name": "demo"}, "spec": spec.model_dump(by_alias=True, exclude_unset=True)})
    assert again.spec.role_replicas() == {"worker": 4}


def test_expected_replicas_with_the_replicas_must_equal_them() -> None:
    same = spec_of(replicas=3, elastic={"minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3})
    assert same.role_replicas() == {"worker": 3}
    with pytest.raises(SpecError) as info:
        spec_of(replicas=3, elastic={"minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 2})
    assert info.value.paths == ["spec.elastic.expectedReplicas"]
    with pytest.raises(SpecError) as info:
        spec_of(replicas=None, roles={"worker": {"replicas": 2}},
                elastic={"minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3})
    assert info.value.paths == ["spec.elastic.expectedReplicas"]


def test_without_expected_replicas_the_job_starts_with_the_worker_replicas() -> None:
    spec = spec_of(replicas=3, elastic={"minReplicas": 2, "maxReplicas": 4})
    assert spec.elastic is not None and spec.elastic.expected_replicas is None
    assert spec.role_replicas() == {"worker": 3}


def test_elastic_enabled_false_ignores_the_block() -> None:
    """DeepSpeedJob's `elastic.enabled`: false, and the job is not elastic, whatever else the block says."""
    assert deepspeed(elastic={"enabled": False}).elastic is None
    assert deepspeed(elastic={"enabled": False, "minReplicas": 8, "maxReplicas": 9, "expectedReplicas": 9}
                     ).role_replicas() == {"worker": 2}
    tf = from_dict({"metadata": {"name": "tf"}, "spec": {"framework": "tensorflow", "replicas": 2,
                                                          "run": {"python": ["t.py"]}, "elastic": {"enabled": False}}})
    assert tf.spec.elastic is None
    enabled = deepspeed(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4})
    assert enabled.elastic is not None and (enabled.elastic.min_replicas, enabled.elastic.max_replicas) == (1, 4)


def test_explain_tells_what_expected_replicas_and_enabled_mean() -> None:
    expected = described("spec.elastic.expectedReplicas")
    assert "starts with" in expected and "must equal" in expected
    assert "Replicas to start with; defaults to" not in expected
    assert "ignored" in described("spec.elastic.enabled")
    assert "enabled: false" in described("spec.elastic")
