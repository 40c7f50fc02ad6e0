"""Trials (`spec.trials`, Run:ai's completions and parallelism) on Kubernetes: the job flavor's Indexed Job runs
`completions` indexes, at most `parallelism` pods at a time, each retried alone; the flavors that start and restart
a job's pods together refuse it, naming the one that can."""

from __future__ import annotations

import pytest

from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.jobspec import SpecError, format_path, from_dict
from tests.support.manifest_schemas import assert_valid

TRIALS = {
    "apiVersion": "kubetrain.dev/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "sweep"},
    "spec": {"image": "python:3.12", "run": {"python": ["trial.py"]}, "trials": {"completions": 4, "parallelism": 2},
             "runPolicy": {"backoffLimit": 3}},
}


def test_the_job_flavor_runs_completions_indexes_at_most_parallelism_at_a_time() -> None:
    objects = render_manifests(from_dict(TRIALS), flavor="job").objects
    assert_valid(objects)
    job = next(o for o in objects if o["kind"] == "Job")
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 2)
    assert spec["backoffLimit"] == 3 and spec["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize("flavor", [name for name in FLAVORS if name != "job"])
def test_flavors_that_start_pods_together_refuse_trials_naming_the_job_flavor(flavor: str) -> None:
    with pytest.raises(SpecError) as info:
        render_manifests(from_dict(TRIALS), flavor=flavor)
    (trials,) = [e for e in info.value.errors if format_path(e.path) == "spec.trials"]
    assert "independent runs" in trials.message and "job flavor" in trials.message
