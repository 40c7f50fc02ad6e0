"""Properties over generated input: any text the user writes reaches the program unchanged and is never
run by the shell; any job name gives valid, distinct object names."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.contract.naming import is_dns_label
from kubetrain.plan import plan
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, kubelet_env, main_container, pod_templates, run_container

# Text the kernel can pass in argv and env: anything but NUL (surrogates cannot be encoded either).
# Weighted towards what a shell would act on.
SHELL_SYNTAX = st.sampled_from([*"$()`'\"\\;&|<>*?[]{}~#!= \n\t", "$(", "$$", "${", "'\\''"])
CHARACTER = st.characters(exclude_categories=["Cs"], exclude_characters="\0")
TEXT = st.lists(st.one_of(SHELL_SYNTAX, CHARACTER), max_size=30).map("".join)
ENV_NAME = st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not n.startswith(("KUBETRAIN_", "JOB_COMPLETION", "PYTHON", "LC_"))
    and n not in {"PWD", "PATH", "_", "DERIVED", "OLDPWD", "SHLVL"})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=st.lists(TEXT, min_size=1, max_size=4), value=TEXT, name=ENV_NAME, index=st.integers(0, 3))
def test_any_text_reaches_the_program_unchanged(argv: list[str], value: str, name: str, index: int,
                                                tmp_path: Path) -> None:
    job = make_job({"framework": "generic", "replicas": 4, "run": {"exec": [*argv]},
                    # The value as a literal (`$` escaped for Kubernetes), and as written after a per-replica
                    # reference, which makes kubetrain compute it in the start-up script.
                    "env": {name: value.replace("$", "$$"), "DERIVED": f"$(KUBETRAIN_REPLICA_INDEX){value}"}},
                   image=IMAGE)
    rendered = render_manifests(job, "job")
    assert rendered.topology is not None
    # The local reference is the process as the local backend starts it: the framework's env, then the
    # user's, expanded (its launch record).
    local = LaunchRecord.from_plan(plan(job, rendered.topology, launcher_procs=False)).replicas[index].processes[0]
    container = main_container(pod_templates(rendered.objects)["worker"])
    env = kubelet_env(container, {}, {"JOB_COMPLETION_INDEX": str(index)})
    code, seen, err = run_container(container, env, cwd=tmp_path)
    assert code == 0, err
    assert seen is not None
    assert seen["argv"] == argv == list(local.argv)
    assert seen["env"][name] == value == local.env[name]
    assert seen["env"]["DERIVED"] == local.env["DERIVED"]
    assert seen["env"]["DERIVED"].startswith(str(index))
    assert not list(tmp_path.iterdir())  # nothing ran that could create a file in the working directory


@settings(max_examples=60, deadline=None)
@given(name=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True),
       role=st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True),
       replicas=st.integers(1, 100_000))
def test_any_job_name_gives_valid_names_and_hostnames(name: str, role: str, replicas: int) -> None:
    job = make_job({"framework": "generic", "roles": {role: {"replicas": replicas}}, "run": {"exec": ["x"]}},
                   name=name, image=IMAGE)
    for flavor in ("job", "jobset", "volcano"):
        rendered = render_manifests(job, flavor)
        assert rendered.topology is not None
        for obj in rendered.objects:
            assert is_dns_label(obj["metadata"]["name"])
        for index in (0, replicas - 1):
            assert all(is_dns_label(part) for part in rendered.topology.host(role, index).split("."))
