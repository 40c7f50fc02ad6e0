"""Every example on every flavor: rendered, each container run through the kubelet stand-in and a real
/bin/sh, and what the program sees (argv, env) compared with the local launch record (`check_parity`);
or, where a flavor cannot express the example, refused at the fields it names, all at once. Nothing is
skipped: a pair is either compared or asserted refused.

Also: hostile text in argv, env values and Secret values reaches the program literally on every flavor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.jobspec import TrainJob, from_dict, load_file
from kubetrain.plan import plan, replica_counts
from tests.kubernetes.render.test_env import check_parity, engine_env
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, kubelet_env, main_container, pod_templates, run_container
from tests.support.parity import observe_flavor

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
JOB_FILES = sorted(EXAMPLES.glob("*/job.yaml"))

REFUSED: dict[tuple[str, str], set[str]] = {
    # all-fields shows every field and renders for jobset; the others each refuse one field of it.
    ("all-fields", "job"): {"spec.scheduling.minAvailable"},  # gang scheduling
    ("all-fields", "volcano"): {"spec.runPolicy.activeDeadlineSeconds"},
    ("all-fields", "kubeflow"): {"spec.exitCodes"},
    ("generic", "kubeflow"): {"spec.framework"},  # the training operator has no kind for generic jobs
    # A local-only example: no image. With one it runs on every flavor (test_local_only_example_with_an_image).
    **{("mpi-allreduce", flavor): {"spec.image"} for flavor in FLAVORS},
}
"""(example, flavor) → the paths of every problem the flavor reports. Every other pair must render."""


def test_every_refusal_is_about_an_example_and_a_flavor() -> None:
    assert {name for name, _ in REFUSED} <= {p.parent.name for p in JOB_FILES}
    assert {flavor for _, flavor in REFUSED} <= set(FLAVORS)


def pod_only_env(job: TrainJob) -> TrainJob:
    """`job` without what only a pod can provide (env from Secrets, ConfigMaps, resources; envFrom): the local
    backend leaves it out with a warning, checked here, so the rest is compared variable by variable."""
    record = LaunchRecord.from_plan(plan(job))
    data = job.to_dict()
    dropped: list[str] = []
    for owner in [data["spec"], *data["spec"].get("roles", {}).values()]:
        kept = []
        for var in owner.get("env", []):
            source = var.get("valueFrom")
            if source is not None and "fieldRef" not in source:
                dropped.append(var["name"])
            else:
                kept.append(var)
        if "env" in owner:
            owner["env"] = kept
        if owner.pop("envFrom", None) is not None:
            dropped.append("envFrom")
    for name in dropped:
        assert any(name in w and "not set locally" in w for w in record.warnings), (name, record.warnings)
    return from_dict(data, base_dir=job.base_dir or ".") if dropped else job


@pytest.mark.parametrize(("path", "flavor"), [(p, f) for p in JOB_FILES for f in FLAVORS],
                         ids=[f"{p.parent.name}-{f}" for p in JOB_FILES for f in FLAVORS])
def test_example_runs_as_locally_or_is_refused(path: Path, flavor: str, tmp_path: Path) -> None:
    job = load_file(path)
    expected = REFUSED.get((path.parent.name, flavor))
    seen = observe_flavor(job, flavor)
    if expected is not None:
        assert {p.path for p in seen.problems} == expected, seen.problems
        return
    assert not seen.refused, seen.problems
    compared = check_parity(pod_only_env(job), flavor, tmp_path=tmp_path)
    assert compared == sum(replica_counts(job.spec).values())


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_local_only_example_with_an_image(flavor: str, tmp_path: Path) -> None:
    job = load_file(EXAMPLES / "mpi-allreduce" / "job.yaml", overrides=["spec.image=registry.example.com/mpi:1"])
    assert check_parity(job, flavor, tmp_path=tmp_path) == sum(replica_counts(job.spec).values())


# -- hostile text -------------------------------------------------------------------------------------------

HOSTILE = [
    "it's \"quoted\"",
    "$(touch {canary})",
    "$$(RANK) and $$ and $$$",
    "`touch {canary}`",
    "line one\nline two; touch {canary}",
    "$(RANK)",
    "\\ $HOME ${HOME} $((1+1)) '$(RANK)'",
]


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_hostile_argv_and_env_arrive_literally(flavor: str, tmp_path: Path) -> None:
    """Quotes, `$(...)`, `$$`, backticks and newlines in the program's argv and in env values (plain, and
    referring to a per-replica variable, which the start-up script computes) mean on every flavor what
    they mean locally; nothing is executed."""
    canary = tmp_path / "pwned"
    texts = [t.replace("{canary}", str(canary)) for t in HOSTILE]
    env = [{"name": f"PLAIN_{i}", "value": text} for i, text in enumerate(texts)]
    env += [{"name": f"PER_REPLICA_{i}", "value": f"{text}@$(RANK)"} for i, text in enumerate(texts)]
    job = make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["train.py", *texts]}, "env": env},
                   image=IMAGE)
    assert check_parity(job, flavor, tmp_path=tmp_path) == 2
    assert not canary.exists()


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_hostile_secret_values_arrive_literally(flavor: str, tmp_path: Path) -> None:
    """A Secret's value (which only the kubelet knows) is the variable's value byte for byte, and text in a
    variable or an argument that names it stays text, even when computed at container start."""
    canary = tmp_path / "pwned"
    secret = f"'\"; touch {canary}; echo `touch {canary}` $(touch {canary}) $$ $$(RANK)\nsecond line'"
    job = make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["train.py", "$(TOKEN)", "$$(TOKEN)"]},
                    "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
                            {"name": "REF", "value": "token=$(TOKEN)"},
                            {"name": "PER_REPLICA", "value": "$(TOKEN)/$(RANK)"}]}, image=IMAGE)
    rendered = render_manifests(job, flavor)
    for role, template in pod_templates(rendered.objects).items():
        container = main_container(template)
        engine, fields = engine_env(flavor, role, 1)
        env = kubelet_env(container, fields, engine, secrets={("s", "token"): secret})
        code, seen, err = run_container(container, env)
        assert code == 0, err
        assert seen is not None
        assert seen["env"]["TOKEN"] == secret
        assert seen["env"]["REF"] == f"token={secret}"
        rank = seen["env"]["RANK"]
        # $(TOKEN) before $(RANK): the kubelet expands it when it is defined earlier (Kubernetes' rule)
        assert seen["env"]["PER_REPLICA"] == f"{secret}/{rank}"
        assert seen["argv"] == ["python", "train.py", "$(TOKEN)", "$$(TOKEN)"]
    assert not canary.exists()
