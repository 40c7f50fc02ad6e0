"""Loading job specs: the minimal contract file, YAML rules, `--set` overrides, and template inheritance."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml

from kubetrain.jobspec import SpecError, TrainJob, from_dict, load_all_files, load_file, load_text

# The smallest useful job. Other tools and docs rely on these exact field names: never rename them.
CONTRACT = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo}
spec:
  framework: pytorch
  run: {python: [train.py, --steps, "20"]}
  replicas: 2
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def check_contract(job: TrainJob) -> None:
    assert job.name == "demo"
    assert job.metadata.name == "demo"
    assert job.spec.framework.value == "pytorch"
    assert job.spec.run is not None
    assert job.spec.run.python == ["train.py", "--steps", "20"]
    assert job.spec.replicas == 2
    assert job.spec.roles is None
    assert job.spec.role_replicas() == {"worker": 2}


# -- the minimal contract -----------------------------------------------------------------------------


def test_contract_file(tmp_path: Path) -> None:
    check_contract(load_file(write(tmp_path / "job.yaml", CONTRACT)))


def test_contract_text_and_dict() -> None:
    check_contract(load_text(CONTRACT))
    check_contract(from_dict(yaml.safe_load(CONTRACT)))


def test_contract_defaults() -> None:
    spec = load_text(CONTRACT).spec
    assert spec.restart_policy is None  # not given: Never, as no backoffLimit is given either
    assert (spec.job_restart_policy(), spec.restart_policy_of("worker")) == ("Never", "Never")
    assert spec.backoff_limit_of() == 0
    assert spec.run_mode == "Immediate"
    assert spec.run_policy.backoff_limit is None and spec.run_policy.suspend is False
    assert spec.elastic is None and spec.exit_codes is None and spec.base is None
    assert spec.procs_per_replica is None and spec.local_rank is False


def test_contract_round_trips_through_to_dict() -> None:
    job = load_text(CONTRACT)
    data = job.to_dict()
    assert data == {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "demo"},
        "spec": {"framework": "pytorch", "run": {"python": ["train.py", "--steps", "20"]}, "replicas": 2},
    }
    assert from_dict(data) == job


def test_api_version_and_kind_may_be_left_out() -> None:
    job = from_dict({"metadata": {"name": "demo"}, "spec": {"run": {"python": ["a.py"]}}})
    assert job.to_dict()["apiVersion"] == "kubetrain.dev/v1alpha1"
    assert job.spec.framework.value == "generic"
    assert job.spec.role_replicas() == {"worker": 1}


def test_python_names_are_accepted_too() -> None:
    job = from_dict({"metadata": {"name": "demo"}, "spec": {"run": {"python": ["a.py"]}, "restart_policy": "OnFailure",
                                                             "image_pull_policy": "Always"}})
    assert job.spec.restart_policy == "OnFailure"
    assert job.spec.image_pull_policy == "Always"


def test_name_prefix_instead_of_name() -> None:
    job = from_dict({"metadata": {"generateName": "sweep-"}, "spec": {"run": {"python": ["a.py"]}}})
    assert job.metadata.name is None and job.metadata.name_prefix == "sweep-"
    assert job.name == "sweep"


# -- YAML rules ----------------------------------------------------------------------------------------


def contract_with(spec_lines: str = "", metadata: str = "{name: demo}") -> str:
    extra = textwrap.indent(textwrap.dedent(spec_lines).strip("\n"), "  ")
    return CONTRACT.replace("metadata: {name: demo}", f"metadata: {metadata}") + (extra + "\n" if extra else "")


def test_yaml_1_2_booleans_country_no_stays_text() -> None:
    job = load_text(contract_with(metadata="{name: demo, labels: {country: NO, enabled: off, answer: Yes}}"))
    assert job.metadata.labels == {"country": "NO", "enabled": "off", "answer": "Yes"}


def test_yaml_1_2_booleans_arguments_stay_text() -> None:
    job = load_text(CONTRACT.replace('"20"]', '"20", --flag, yes, --other, off, n]'))
    assert job.spec.run is not None
    assert job.spec.run.python == ["train.py", "--steps", "20", "--flag", "yes", "--other", "off", "n"]


def test_true_and_false_are_booleans() -> None:
    job = load_text(contract_with("tty: true\nstdin: False"))
    assert job.spec.tty is True and job.spec.stdin is False


def test_numbers_in_arguments_become_text() -> None:
    job = load_text(CONTRACT.replace('"20"]', "20, --lr, 0.5, --epochs, -3]"))
    assert job.spec.run is not None
    assert job.spec.run.python == ["train.py", "--steps", "20", "--lr", "0.5", "--epochs", "-3"]


def test_arguments_keep_the_text_as_written() -> None:
    """An argument is text: `1.10` is a version, not the float 1.1; `010` is not octal 8."""
    job = load_text(CONTRACT.replace('"20"]', "20, --version, 1.10, --seed, 010, --mask, 0x1F, --n, 1_000]"))
    assert job.spec.run is not None
    assert job.spec.run.python[3:] == ["--version", "1.10", "--seed", "010", "--mask", "0x1F", "--n", "1_000"]


def test_env_map_values_keep_the_text_as_written() -> None:
    job = load_text(contract_with("env: {TORCH_VERSION: 2.10, ANSWER: 42, DEBUG: true, NAME: yes}"))
    assert {v.name: v.value for v in job.spec.env} == {
        "TORCH_VERSION": "2.10",
        "ANSWER": "42",
        "DEBUG": "true",
        "NAME": "yes",
    }


def test_dates_stay_text() -> None:
    job = load_text(contract_with("image: 2024-01-31", metadata="{name: demo, labels: {day: 2024-01-31}}"))
    assert job.spec.image == "2024-01-31"
    assert job.metadata.labels == {"day": "2024-01-31"}


def test_anchors_and_merge_keys() -> None:
    job = load_text(contract_with("""
        labels: &common {team: vision, tier: train}
        annotations: *common
        nodeSelector: {<<: *common, zone: a}
        """))
    assert job.spec.labels == {"team": "vision", "tier": "train"}
    assert job.spec.annotations == {"team": "vision", "tier": "train"}
    assert job.spec.node_selector == {"team": "vision", "tier": "train", "zone": "a"}


def test_alias_bombs_are_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    with pytest.raises(SpecError) as info:
        load_text("\n".join(lines) + "\n")
    assert "too large" in str(info.value)


def test_source_name_in_errors_of_load_text() -> None:
    with pytest.raises(SpecError) as info:
        load_text(CONTRACT.replace("replicas: 2", "replicas: 0"), source="inline.yaml")
    assert str(info.value).startswith("inline.yaml:7: spec.replicas: ")


def test_several_documents_in_one_file(tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.yaml", CONTRACT + "---\n" + CONTRACT.replace("name: demo", "name: demo-2"))
    assert [j.name for j in load_all_files([path])] == ["demo", "demo-2"]
    with pytest.raises(SpecError) as info:
        load_file(path)
    assert "expected one TrainJob, found 2" in str(info.value)


def test_problems_of_several_files_are_reported_together(tmp_path: Path) -> None:
    good = write(tmp_path / "good.yaml", CONTRACT)
    bad1 = write(tmp_path / "bad1.yaml", CONTRACT.replace("replicas: 2", "replicas: 0"))
    bad2 = write(tmp_path / "bad2.yaml", CONTRACT.replace("pytorch", "pytorh"))
    with pytest.raises(SpecError) as info:
        load_all_files([good, bad1, bad2])
    assert [(e.file, e.line) for e in info.value.errors] == [(str(bad1), 7), (str(bad2), 5)]


# -- --set overrides -------------------------------------------------------------------------------------


@pytest.fixture
def contract_file(tmp_path: Path) -> Path:
    return write(tmp_path / "job.yaml", CONTRACT)


ROLES_JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo}
spec:
  framework: tensorflow
  run: {python: [train.py]}
  roles:
    chief: {replicas: 1}
    worker: {replicas: 2}
"""


def test_override_replicas(contract_file: Path) -> None:
    assert load_file(contract_file, overrides=["spec.replicas=4"]).spec.role_replicas() == {"worker": 4}


def test_override_role_replicas(tmp_path: Path) -> None:
    job = load_file(write(tmp_path / "job.yaml", ROLES_JOB), overrides=["spec.roles.worker.replicas=3"])
    assert job.spec.role_replicas() == {"chief": 1, "worker": 3}


def test_override_quoted_label_key(contract_file: Path) -> None:
    job = load_file(contract_file, overrides=['metadata.labels."a.b/c"=x'])
    assert job.metadata.labels == {"a.b/c": "x"}


def test_overrides_apply_in_order(contract_file: Path) -> None:
    job = load_file(contract_file, overrides=["spec.replicas=4", "spec.replicas=null", "spec.roles.worker.replicas=3",
                                              'metadata.labels."a.b/c"=x'])
    assert job.spec.replicas is None
    assert job.spec.role_replicas() == {"worker": 3}
    assert job.metadata.labels == {"a.b/c": "x"}


def test_replicas_and_role_replicas_together_conflict(contract_file: Path) -> None:
    """`replicas` is the short form of roles.worker.replicas: a job gives one or the other."""
    with pytest.raises(SpecError) as info:
        load_file(contract_file, overrides=["spec.replicas=4", "spec.roles.worker.replicas=3",
                                            'metadata.labels."a.b/c"=x'])
    assert info.value.paths == ["spec.replicas"]


def test_override_values_are_yaml(contract_file: Path) -> None:
    job = load_file(contract_file, overrides=[
        "spec.run.python=[main.py, --fast]",
        "spec.tty=true",
        "spec.image=registry.example.com/train:1.0",
        "spec.env.GREETING=hello world",
        "metadata.labels.country=NO",
        "spec.resources.cpu=500m",
    ])
    assert job.spec.run is not None and job.spec.run.python == ["main.py", "--fast"]
    assert job.spec.tty is True
    assert job.spec.image == "registry.example.com/train:1.0"
    assert [(v.name, v.value) for v in job.spec.env] == [("GREETING", "hello world")]
    assert job.metadata.labels == {"country": "NO"}
    assert job.spec.resources is not None and job.spec.resources.cpu == "500m"


def test_override_list_items(contract_file: Path) -> None:
    job = load_file(contract_file, overrides=["spec.run.python[2]=50", "spec.run.python[3]=--fast"])
    assert job.spec.run is not None and job.spec.run.python == ["train.py", "--steps", "50", "--fast"]


def test_override_wins_over_template(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", "spec: {replicas: 3, image: base:1}\n")
    path = write(tmp_path / "job.yaml", "metadata: {name: demo}\nspec: {base: base.yaml, run: {python: [a.py]}}\n")
    job = load_file(path, overrides=["spec.replicas=5"])
    assert job.spec.replicas == 5 and job.spec.image == "base:1"


def test_from_dict_does_not_change_its_argument() -> None:
    data = yaml.safe_load(CONTRACT)
    before = yaml.safe_dump(data)
    from_dict(data, overrides=["spec.replicas=7", "metadata.labels.x=y"])
    assert yaml.safe_dump(data) == before


# -- templates ---------------------------------------------------------------------------------------------

BASE = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata:
  name: base-name
  labels: {team: vision, tier: gold}
spec:
  framework: pytorch
  image: base:1
  imagePullPolicy: IfNotPresent
  run: {python: [base.py, --from-base]}
  replicas: 2
  resources: {cpu: 2, memory: 4Gi}
  env: {A: from-base, B: from-base}
  tolerations:
    - {key: a, operator: Exists}
    - {key: b, operator: Exists}
  runPolicy: {backoffLimit: 3, activeDeadlineSeconds: 600}
  scheduling: {queue: research, priorityClass: high}
"""


def child_of(base: str, spec: str = "", metadata: str = "name: child") -> str:
    body = textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ")
    header = f"apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {{{metadata}}}\n"
    return f"{header}spec:\n  base: {base}\n{body}\n"


@pytest.fixture
def base_dir(tmp_path: Path) -> Path:
    write(tmp_path / "base.yaml", BASE)
    return tmp_path


def test_template_child_wins_and_merges_deeply(base_dir: Path) -> None:
    job = load_file(write(base_dir / "job.yaml", child_of("base.yaml", """
        image: child:2
        resources: {memory: 8Gi}
        env: {B: from-child, C: from-child}
        scheduling: {queue: urgent}
        """, metadata="name: child, labels: {tier: silver}")))
    assert job.name == "child"
    assert job.spec.image == "child:2"  # scalar: the child's
    assert job.spec.image_pull_policy == "IfNotPresent"  # untouched: the base's
    assert job.spec.resources is not None
    assert (job.spec.resources.cpu, job.spec.resources.memory) == ("2", "8Gi")  # mapping: merged
    assert {v.name: v.value for v in job.spec.env} == {"A": "from-base", "B": "from-child", "C": "from-child"}
    assert job.metadata.labels == {"team": "vision", "tier": "silver"}
    assert (job.spec.scheduling.queue, job.spec.scheduling.priority_class) == ("urgent", "high")
    assert job.spec.replicas == 2 and job.spec.framework.value == "pytorch"
    assert job.spec.base is None  # resolved when loaded: to_dict() then loads back from anywhere


def test_template_lists_are_replaced(base_dir: Path) -> None:
    job = load_file(write(base_dir / "job.yaml", child_of("base.yaml", """
        run: {python: [child.py]}
        tolerations: [{key: c, operator: Exists}]
        """)))
    assert job.spec.run is not None and job.spec.run.python == ["child.py"]
    assert [t.key for t in job.spec.tolerations] == ["c"]


def test_template_lists_are_inherited_whole(base_dir: Path) -> None:
    job = load_file(write(base_dir / "job.yaml", child_of("base.yaml")))
    assert job.spec.run is not None and job.spec.run.python == ["base.py", "--from-base"]
    assert [t.key for t in job.spec.tolerations] == ["a", "b"]


def test_template_null_removes_a_key(base_dir: Path) -> None:
    job = load_file(write(base_dir / "job.yaml", child_of("base.yaml", """
        image: null
        runPolicy: {activeDeadlineSeconds: null}
        scheduling: {priorityClass: ~}
        """)))
    assert job.spec.image is None
    assert job.spec.run_policy.backoff_limit == 3 and job.spec.run_policy.active_deadline_seconds is None
    assert job.spec.scheduling.queue == "research" and job.spec.scheduling.priority_class is None


def test_template_null_switches_replicas_to_roles(base_dir: Path) -> None:
    job = load_file(write(base_dir / "job.yaml", child_of("base.yaml", """
        replicas: null
        roles: {master: {replicas: 1}, worker: {replicas: 3}}
        """)))
    assert job.spec.role_replicas() == {"master": 1, "worker": 3}


def test_template_name_is_never_inherited(base_dir: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_file(write(base_dir / "job.yaml", child_of("base.yaml", metadata="labels: {a: b}")))
    assert info.value.paths == ["metadata.name"]
    assert "set exactly one of name and namePrefix" in str(info.value)


def test_template_name_prefix_is_never_inherited(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", "metadata: {namePrefix: base-}\nspec: {run: {python: [a.py]}}\n")
    job = load_file(write(tmp_path / "job.yaml", child_of("base.yaml")))
    assert job.metadata.name == "child" and job.metadata.name_prefix is None


def test_template_without_header(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", "spec: {framework: jax, run: {python: [a.py]}}\n")
    job = load_file(write(tmp_path / "job.yaml", child_of("base.yaml", "replicas: 3")))
    assert job.spec.framework.value == "jax" and job.spec.replicas == 3


def test_template_roles_merge_and_null_removes_a_role(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", """\
        spec:
          framework: tensorflow
          run: {python: [a.py]}
          roles:
            chief: {replicas: 1, env: {ROLE: chief}}
            worker: {replicas: 2, env: {ROLE: worker}, image: worker:1}
            ps: {replicas: 1}
        """)
    job = load_file(write(tmp_path / "job.yaml", child_of("base.yaml", "roles: {worker: {replicas: 4}, ps: null}")))
    assert job.spec.role_replicas() == {"chief": 1, "worker": 4}
    assert job.spec.roles is not None
    worker = job.spec.roles["worker"]
    assert worker.image == "worker:1" and [(v.name, v.value) for v in worker.env] == [("ROLE", "worker")]


def test_named_template_from_templates_folder(tmp_path: Path) -> None:
    write(tmp_path / "templates" / "gpu-node.yaml", "spec: {framework: pytorch, image: gpu:1, replicas: 4}\n")
    job = load_file(write(tmp_path / "job.yaml", child_of("gpu-node", "run: {python: [a.py]}")))
    assert (job.spec.image, job.spec.replicas) == ("gpu:1", 4)


def test_named_template_with_yml_extension(tmp_path: Path) -> None:
    write(tmp_path / "templates" / "cpu.yml", "spec: {image: cpu:1}\n")
    job = load_file(write(tmp_path / "job.yaml", child_of("cpu", "run: {python: [a.py]}")))
    assert job.spec.image == "cpu:1"


def test_named_template_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared, other = tmp_path / "shared", tmp_path / "other"
    write(other / "unrelated.yaml", "spec: {image: unrelated}\n")
    write(shared / "team.yaml", "spec: {image: team:1, labels: {team: x}}\n")
    monkeypatch.setenv("KUBETRAIN_TEMPLATES", os.pathsep.join([str(other), str(shared)]))
    job = load_file(write(tmp_path / "project" / "job.yaml", child_of("team", "run: {python: [a.py]}")))
    assert job.spec.image == "team:1" and job.spec.labels == {"team": "x"}


def test_named_template_from_template_dirs_argument(tmp_path: Path) -> None:
    write(tmp_path / "lib" / "team.yaml", "spec: {image: team:2}\n")
    path = write(tmp_path / "project" / "job.yaml", child_of("team", "run: {python: [a.py]}"))
    assert load_file(path, template_dirs=[tmp_path / "lib"]).spec.image == "team:2"
    with pytest.raises(SpecError):
        load_file(path)


def test_named_template_in_load_text_and_from_dict(tmp_path: Path) -> None:
    write(tmp_path / "templates" / "team.yaml", "spec: {image: team:3, run: {python: [a.py]}}\n")
    text = child_of("team")
    assert load_text(text, base_dir=tmp_path).spec.image == "team:3"
    assert from_dict(yaml.safe_load(text), base_dir=tmp_path).spec.image == "team:3"


def test_chain_of_two_templates(tmp_path: Path) -> None:
    write(tmp_path / "lib" / "root.yaml", """\
        metadata: {labels: {level: root, root: "yes"}}
        spec: {framework: pytorch, image: root:1, replicas: 2, resources: {cpu: 1, memory: 1Gi}}
        """)
    write(tmp_path / "templates" / "mid.yaml", """\
        metadata: {labels: {level: mid}}
        spec: {base: ../lib/root.yaml, image: mid:1, resources: {memory: 2Gi}}
        """)
    job = load_file(write(tmp_path / "job.yaml", child_of("mid", "run: {python: [a.py]}\nreplicas: 3",
                                                          metadata="name: child, labels: {level: child}")))
    assert job.metadata.labels == {"level": "child", "root": "yes"}
    assert (job.spec.image, job.spec.replicas, job.spec.framework.value) == ("mid:1", 3, "pytorch")
    assert job.spec.resources is not None
    assert (job.spec.resources.cpu, job.spec.resources.memory) == ("1", "2Gi")
    assert job.spec.base is None


def test_template_path_is_relative_to_the_file_naming_it(tmp_path: Path) -> None:
    write(tmp_path / "a" / "b" / "inner.yaml", "spec: {image: inner:1}\n")
    write(tmp_path / "a" / "outer.yaml", "spec: {base: b/inner.yaml, replicas: 2}\n")
    job = load_file(write(tmp_path / "job.yaml", child_of("a/outer.yaml", "run: {python: [a.py]}")))
    assert (job.spec.image, job.spec.replicas) == ("inner:1", 2)


def test_template_loop_of_three(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "spec: {base: b.yaml}\n")
    write(tmp_path / "b.yaml", "spec: {base: c.yaml}\n")
    write(tmp_path / "c.yaml", "spec: {base: a.yaml}\n")
    with pytest.raises(SpecError) as info:
        load_file(write(tmp_path / "job.yaml", child_of("a.yaml", "run: {python: [a.py]}")))
    assert info.value.paths == ["spec.base"]
    assert "templates inherit in a loop" in str(info.value)


def test_same_template_twice_in_a_chain_is_not_a_loop_when_it_is_not(tmp_path: Path) -> None:
    """Two jobs sharing one base, loaded together, each inherit it once."""
    write(tmp_path / "base.yaml", "spec: {image: shared:1, run: {python: [a.py]}}\n")
    one = write(tmp_path / "one.yaml", child_of("base.yaml", metadata="name: one"))
    two = write(tmp_path / "two.yaml", child_of("base.yaml", metadata="name: two"))
    jobs = load_all_files([one, two])
    assert [(j.name, j.spec.image) for j in jobs] == [("one", "shared:1"), ("two", "shared:1")]


def test_to_dict_of_a_templated_job_loads_back_anywhere(base_dir: Path, tmp_path: Path) -> None:
    """`to_dict()` is the merged document (what the local store keeps and `kubetrain resume` reloads): it loads
    back to the same job without the template files, and a key the job removed with `null` stays removed."""
    job = load_file(write(base_dir / "job.yaml", child_of("base.yaml", "runPolicy: {activeDeadlineSeconds: null}")))
    assert job.spec.run_policy.active_deadline_seconds is None
    assert from_dict(job.to_dict(), base_dir=base_dir) == job
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert from_dict(job.to_dict(), base_dir=elsewhere) == job
