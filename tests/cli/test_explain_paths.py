"""`kubetrain explain PATH` walks the spec as a job file is written: a role's fields under its name, any
name (`spec.roles.worker.podTemplate`), as kubectl explain walks maps; a typo still gets a did-you-mean."""

from __future__ import annotations

import pytest

from kubetrain.cli.main import main
from kubetrain.jobspec.schema import explain


def explained(path: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["explain", path]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


@pytest.mark.parametrize("role", ["worker", "chief", "my-role"])
@pytest.mark.parametrize("field", ["podTemplate", "image", "restartPolicy"])
def test_a_roles_field_is_explained_under_any_role_name(
    role: str, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = explained(f"spec.roles.{role}.{field}", capsys)
    assert out.splitlines()[0].startswith(f"FIELD:    spec.roles.{role}.{field} <")
    assert " ".join(explain(f"spec.roles.{field}").description.split()) in " ".join(out.split())


def test_a_role_name_alone_is_the_role(capsys: pytest.CaptureFixture[str]) -> None:
    out = explained("spec.roles.worker", capsys)
    assert out.splitlines()[0] == "FIELD:    spec.roles.worker <RoleSpec>"
    fields = out.split("FIELDS:")[1]
    assert "podTemplate" in fields and "replicas" in fields


def test_deeper_fields_under_a_role_are_walked(capsys: pytest.CaptureFixture[str]) -> None:
    out = explained("spec.roles.ps.podTemplate.spec.containers.name", capsys)
    assert out.splitlines()[0] == "FIELD:    spec.roles.ps.podTemplate.spec.containers.name <string>"
    assert explained("spec.roles.worker.resources.gpu", capsys).startswith("FIELD:    spec.roles.worker.resources.gpu")


def test_a_role_named_as_a_field_reaches_the_roles_fields() -> None:
    """`spec.roles.env` is the field every role has (as before); followed by a role's field, `env` is a
    role's name."""
    assert explain("spec.roles.env").type == explain("spec.env").type
    as_role = explain("spec.roles.env.image")
    assert (as_role.path, as_role.description) == ("spec.roles.env.image", explain("spec.image").description)


@pytest.mark.parametrize(
    ("path", "where", "hint"),
    [
        ("spec.roles.worker.imgae", "spec.roles.worker.imgae", "did you mean 'image'?"),
        (
            "spec.roles.worker.podTemplate.spec.contaners",
            "spec.roles.worker.podTemplate.spec.contaners",
            "did you mean 'containers'?",
        ),
        # A key of a map of text names no field: it is not walked as a role's name is.
        ("spec.env.image", "spec.env.image", "fields of spec.env"),
        ("spec.labels.team", "spec.labels.team", "fields of spec.labels: none"),
    ],
)
def test_what_is_no_field_is_still_said(path: str, where: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", path]) == 2
    err = capsys.readouterr().err
    assert f"error: {where}: no such field" in err
    assert hint in err
