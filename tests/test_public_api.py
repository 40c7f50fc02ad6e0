"""What `import kubetrain` offers is a promise: the exported names are pinned, each resolves, every error a
caller may meet is one `KubetrainError`, and the name tuples the CLI offers match the registries behind them."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import kubetrain
from kubetrain.backends.base import BACKENDS, Backend, open_backend
from kubetrain.cli.registry import COMMANDS
from kubetrain.contract import choices
from kubetrain.contract.errors import KubetrainError
from kubetrain.frameworks import WIRING

PUBLIC = [
    "Backend",
    "Conversion",
    "DistributedConfig",
    "JobPhase",
    "JobNotFound",
    "JobSpec",
    "JobStatus",
    "KubernetesError",
    "KubernetesOptions",
    "KubetrainError",
    "LocalError",
    "LocalOptions",
    "LogRecord",
    "LogSink",
    "Metadata",
    "Plan",
    "Resources",
    "RoleSpec",
    "Run",
    "RunPolicy",
    "RunEvent",
    "RunResult",
    "SpecError",
    "StoreError",
    "TrainJob",
    "UsageError",
    "convert",
    "from_dict",
    "from_torchx",
    "load",
    "load_file",
    "load_text",
    "open_backend",
    "plan",
    "render",
    "run",
]


def test_the_public_api_is_pinned() -> None:
    """Adding or removing a public name is a decision: change PUBLIC with it."""
    assert sorted(kubetrain.__all__) == sorted(PUBLIC)
    assert len(set(kubetrain.__all__)) == len(kubetrain.__all__)


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in kubetrain.__all__:
        member = getattr(kubetrain, name)
        assert member is not None, name
        assert (getattr(member, "__doc__", None) or "").strip(), f"kubetrain.{name} has no docstring"


def test_every_exported_error_is_a_kubetrain_error() -> None:
    members = [getattr(kubetrain, n) for n in kubetrain.__all__]
    errors = [m for m in members if isinstance(m, type) and issubclass(m, BaseException)]
    assert len(errors) == 7
    for error in errors:
        assert issubclass(error, KubetrainError), error
        assert error.exit_code in (1, 2), error


def test_importing_kubetrain_loads_no_backend_and_no_pydantic() -> None:
    code = ("import sys, kubetrain; heavy = [m for m in ('pydantic', 'kubernetes', 'yaml', 'kubetrain.backends.local',"
            " 'kubetrain.backends.kubernetes.backend') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_choice_tuples_match_their_registries() -> None:
    """The CLI offers `contract.choices` without importing the registries; they must agree."""
    assert tuple(BACKENDS) == choices.BACKENDS
    assert tuple(f.value for f in WIRING) == choices.FRAMEWORKS
    assert all(alias_of in BACKENDS for alias_of in choices.BACKEND_ALIASES.values())


def test_every_backend_implements_the_interface() -> None:
    for name in BACKENDS:
        module_name, _, class_name = BACKENDS[name].partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        assert cls.name == name
        for method in ("run", "status", "describe", "list", "logs", "cancel", "suspend", "resume", "delete",
                       "close", "__enter__", "__exit__"):
            assert callable(getattr(cls, method, None)), f"{name} backend lacks {method}"


def test_open_backend_opens_by_name_and_alias_and_refuses_others() -> None:
    import pytest

    with open_backend("local") as backend:
        assert isinstance(backend, Backend) and backend.name == "local"
    with pytest.raises(kubetrain.UsageError, match=r"unknown backend 'nope' \(known: local, kubernetes, k8s\)"):
        open_backend("nope")


def test_every_cli_verb_is_a_module_with_its_arguments_and_handler() -> None:
    for verb, command in COMMANDS.items():
        module = importlib.import_module(f"kubetrain.cli.commands.{command.module}")
        assert callable(module.add_arguments) and callable(module.run), verb
        assert command.summary.endswith("."), verb


def test_a_job_not_found_is_one_error_on_every_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kubetrain.JobNotFound`, a `LookupError`, whichever backend was asked (the Kubernetes one raises the same
    class: tests/kubernetes)."""
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path))
    with kubetrain.open_backend("local") as backend, pytest.raises(kubetrain.JobNotFound) as caught:
        backend.status("no-such-job")
    assert isinstance(caught.value, LookupError) and "no-such-job" in str(caught.value)
