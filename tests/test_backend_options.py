"""A backend's options are one typed dataclass it declares: the backend's constructor takes every field, the
CLI offers each field as a flag on the verbs it names (help, choices and parser from the field), a command
line becomes the dataclass, and `open_backend` takes it. Adding an option is adding a field."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetrain import KubernetesOptions, LocalOptions, UsageError, open_backend
from kubetrain.backends import base
from kubetrain.backends.base import BACKENDS, option, option_of, options_class, options_classes
from kubetrain.cli.main import build_parser
from kubetrain.cli.options import backend_flags, backend_options
from kubetrain.cli.registry import COMMANDS

OWN_FLAGS = {("validate", "flavor")}
"""A verb's own flag of an option's name: `validate --flavor` checks only that flavor (its own help says so)."""


def _parse(argv: list[str]) -> Any:
    return build_parser(argv[0]).parse_args(argv)


def _flags(verb: str) -> set[str]:
    """The flags `kubetrain VERB` takes."""
    verbs = next(a for a in build_parser(verb)._actions if isinstance(a, argparse._SubParsersAction))
    return {s for action in verbs.choices[verb]._actions for s in action.option_strings}


def test_each_backend_declares_options_its_constructor_takes() -> None:
    for name, cls in options_classes().items():
        assert cls.backend == name and dataclasses.is_dataclass(cls)
        module_name, _, class_name = BACKENDS[name].partition(":")
        params = inspect.signature(getattr(importlib.import_module(module_name), class_name)).parameters
        for f in dataclasses.fields(cls):
            assert f.name in params, f"{name}: the option {f.name} is no keyword of the backend"
            assert params[f.name].default == f.default, f"{name}: {f.name}'s default differs from the backend's"


def test_the_cli_offers_each_option_on_the_verbs_it_names() -> None:
    opening = [verb for verb in COMMANDS if "--backend" in _flags(verb)]
    assert {"run", "list", "status", "logs", "cancel", "validate", "ui"} <= set(opening)
    for cls in options_classes().values():
        for f in dataclasses.fields(cls):
            spec = option_of(f)
            assert spec is not None and spec.help, f"{cls.__name__}.{f.name} has no help"
            for verb in opening:
                offered = bool(spec.flags) and set(spec.flags) <= _flags(verb)
                if (verb, f.name) in OWN_FLAGS:
                    continue
                assert offered == bool(spec.flags and (spec.verbs is None or verb in spec.verbs)), (verb, f.name)


def test_a_command_line_becomes_the_backends_options() -> None:
    args = _parse(["list", "--backend", "k8s", "-A", "-n", "ml", "--untouched-after", "5"])
    assert backend_options(args) == KubernetesOptions(namespace="ml", all_namespaces=True, untouched_after=5.0)
    args = _parse(["run", "--preload", "torch, numpy", "--flavor", "jobset", "job.yaml"])
    assert backend_options(args) == LocalOptions(preload=["torch", "numpy"])  # the flavor is not local's
    args = _parse(["run", "--backend", "kubernetes", "--flavor", "jobset", "--convert", "--context", "c", "job.yaml"])
    assert backend_options(args) == KubernetesOptions(context="c", flavor="jobset", convert=True)
    assert backend_flags(args) == " --backend kubernetes --context c"  # where the job is found again
    assert backend_flags(_parse(["run", "job.yaml"])) == ""


def test_a_bad_option_value_is_refused_with_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in ((["run", "--preload", "torch;rm", "x.yaml"], "--preload: 'torch;rm' is not a module name"),
                       (["status", "x", "--untouched-after", "-1"], "--untouched-after: -1 is not a number of"),
                       (["run", "--backend", "k8s", "--flavor", "argo", "x.yaml"], "--flavor: invalid choice")):
        with pytest.raises(SystemExit) as exit_:
            _parse(argv)
        assert exit_.value.code == 2 and said in capsys.readouterr().err


@dataclass(frozen=True)
class TracedLocalOptions(LocalOptions):
    """The local options with one field more, as a new option would be written."""

    trace: bool = option(False, "local: print each replica's start", flags=["--trace"], verbs=["run"])


def test_an_option_is_one_field(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(base.BACKEND_OPTIONS, "local", f"{__name__}:TracedLocalOptions")
    assert options_class("local") is TracedLocalOptions
    with pytest.raises(SystemExit):
        _parse(["run", "--help"])
    shown = capsys.readouterr().out
    assert "local backend:" in shown and "--trace" in shown and "print each replica's start" in shown
    assert "--trace" not in _flags("status")
    assert backend_options(_parse(["run", "--trace", "job.yaml"])) == TracedLocalOptions(trace=True)


def test_open_backend_takes_the_options_which_name_their_backend() -> None:
    with open_backend(LocalOptions(preload=[])) as backend:
        assert backend.name == "local" and backend.preload == ()  # type: ignore[attr-defined]
    with open_backend("local", LocalOptions(preload=["decimal"])) as backend:
        assert backend.preload == ("decimal",)  # type: ignore[attr-defined]
    with open_backend("local", preload=["decimal"]) as backend:  # the fields as keywords, as before
        assert backend.preload == ("decimal",)  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="LocalOptions are not the options of the kubernetes backend"):
        open_backend("k8s", LocalOptions())


def test_kubetrain_run_takes_the_options_as_its_backend(tmp_path: Path) -> None:
    """The Python API as the CLI: the options name the backend; a client dry run says how to read its plan."""
    import kubetrain

    (tmp_path / "train.py").write_text("print('hi')\n")
    job = kubetrain.from_dict({"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "opt"},
                               "spec": {"framework": "generic", "replicas": 2, "run": {"python": ["train.py"]}}})
    result = kubetrain.run(job, backend=LocalOptions(preload=[]), dry_run="client", base_dir=str(tmp_path))
    assert result.backend == "local" and result.plan is not None and len(result.plan["replicas"]) == 2
    assert result.plan["preload"] == []  # the option reached the backend
    assert result.plan_notes is not None and "sharedValues" in result.plan_notes  # the layout, for a person
