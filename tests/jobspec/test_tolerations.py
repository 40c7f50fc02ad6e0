"""Tolerations are checked as the API server checks them, with each field's path and the values allowed: an
operator such as `Sometimes` was accepted, and reached the API server (or, locally, nothing) as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.jobspec import DistributedConfig, SpecError, load_file


def test_an_unknown_operator_is_refused_with_its_path_line_and_the_allowed_values(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\nspec:\n"
        "  run: {python: [train.py]}\n  tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"
        "  roles:\n    worker:\n      tolerations:\n      - key: spot\n        operator: Sometimes\n"
    )
    with pytest.raises(SpecError) as info:
        load_file(path)
    (error,) = info.value.errors
    assert str(error).startswith(f"{path}:12: spec.roles.worker.tolerations[0].operator: must be Equal or Exists")
    assert "(got 'Sometimes')" in str(error)


@pytest.mark.parametrize(("toleration", "where", "says"), [
    ({"key": "a", "operator": "Equal", "value": "b", "effect": "Never"}, "[0].effect",
     "must be one of NoSchedule, PreferNoSchedule, NoExecute"),
    ({"key": "a", "operator": "Exists", "value": "b"}, "[0].value", "must be empty with operator Exists"),
    ({"operator": "Equal", "value": "b"}, "[0].operator", "must be Exists when no key is given"),
    ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 30}, "[0].tolerationSeconds",
     "applies only with effect NoExecute"),
])
def test_the_api_servers_other_toleration_rules(toleration: dict[str, object], where: str, says: str) -> None:
    with pytest.raises(SpecError) as info:
        DistributedConfig(tolerations=[toleration])
    (error,) = info.value.errors
    assert str(error).startswith(f"tolerations{where}: {says}")


def test_valid_tolerations_pass() -> None:
    config = DistributedConfig(tolerations=[{"operator": "Exists"},
                                            {"key": "spot", "value": "yes", "effect": "NoExecute",
                                             "tolerationSeconds": 60}])
    assert config.tolerations is not None and len(config.tolerations) == 2
