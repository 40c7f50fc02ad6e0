"""The render tests' kubelet stand-in (tests/support/kubelet.py), checked itself, so the tests built on it
can be trusted."""

from __future__ import annotations

import pytest

from tests.support.kubelet import SHELLS, expand, kubelet_env, run_container


def test_expand_follows_kubernetes_rules() -> None:
    env = {"A": "x"}
    assert expand("$(A)-$(B)-$$(A)-$$$(A)-$", env) == "x-$(B)-$(A)-$x-$"


def test_kubelet_env_expands_against_earlier_variables_only() -> None:
    container = {"env": [{"name": "B", "value": "$(A)/$(C)"}, {"name": "A", "value": "1"},
                         {"name": "C", "value": "$(A)"}]}
    assert kubelet_env(container, {}, {}) == {"B": "$(A)/$(C)", "A": "1", "C": "1"}


def test_run_container_expands_command_and_args_as_the_kubelet_does() -> None:
    """The stand-in must expand what the kubelet expands, or tests of the escaping would prove nothing."""
    container = {"command": ["/bin/sh", "-c", 'echo "$0:$(X)" >&2; exec "$@"', "kubetrain"],
                 "args": ["$(X)", "$$(X)", "$(NOPE)"]}
    code, seen, err = run_container(container, {"X": "xval"})
    assert code == 0 and seen is not None
    assert seen["argv"] == ["xval", "$(X)", "$(NOPE)"]
    assert err.strip() == "kubetrain:xval"


@pytest.mark.parametrize("shell", SHELLS)
def test_run_container_passes_argv_and_env_untouched(shell: str) -> None:
    container = {"command": ["/bin/sh", "-c", 'exec "$@"', "kubetrain"], "args": ["a b", "'", "$X"]}
    code, seen, _ = run_container(container, {"X": "1"}, shell=shell)
    assert code == 0 and seen is not None
    assert seen["argv"] == ["a b", "'", "$X"]
    assert seen["env"]["X"] == "1"
