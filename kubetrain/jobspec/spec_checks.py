"""The checks of a job spec that read several fields at once, run when the spec is validated (`JobSpec`):
roles against the framework's record, elastic, trials, restarts, the controller's roles, scheduling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..contract.frameworks import Framework, frameworks_where, record_of
from ..contract.naming import is_dns_label
from .errors import FieldError
from .pod_template import has_args_only, template_program

if TYPE_CHECKING:
    from .controller import Controller
    from .model import JobSpec, RoleSpec
    from .policies import Elastic

DEFAULT_ROLE = "worker"
"""The role of a job that names none (`spec.replicas`)."""


def spec_problems(spec: JobSpec) -> list[FieldError]:
    """What no single field shows: the fields of a job spec checked together (roles against the framework,
    elastic, trials, restarts, the controller's roles, scheduling)."""
    problems: list[FieldError] = []
    if spec.replicas is not None and spec.roles is not None:
        problems.append(FieldError(("replicas",), "give either replicas (one worker role) or roles, not both"))
    record = record_of(spec.framework)
    valid = record.roles
    for name, role in (spec.roles or {}).items():
        if valid is not None and name not in valid:
            problems.append(
                FieldError(
                    ("roles", name),
                    f"is not a {spec.framework.value} role",
                    hint=f"valid roles: {', '.join(valid)}",
                )
            )
        elif not is_dns_label(name, max_len=40):
            problems.append(FieldError(("roles", name), "role names must be lowercase DNS labels (≤ 40 chars)"))
        if name in record.single_roles and role.replicas != 1:
            problems.append(
                FieldError(("roles", name, "replicas"), f"a {name} runs as exactly 1 replica", role.replicas, True)
            )
        template = role.pod_template if "pod_template" in role.model_fields_set else spec.pod_template
        if spec.run is None and role.run is None and template_program(template) is None:
            problems.append(_nothing_to_run(("roles", name, "run"), template,
                                            "nothing to run: set spec.run or this role's run"))
    if spec.roles is None and spec.run is None and template_program(spec.pod_template) is None:
        problems.append(_nothing_to_run(("run",), spec.pod_template, "nothing to run"))
    if spec.roles is not None:
        problems += _framework_role_rules(spec.framework, spec.roles)
    if spec.elastic is not None:
        problems += _elastic_problems(spec, spec.elastic)
    if spec.trials is not None:
        problems += _trials_problems(spec)
    problems += _restart_problems(spec)
    if spec.mpi is not None and not record.takes_mpi:
        names = ", ".join(frameworks_where(lambda r: r.takes_mpi))
        problems.append(FieldError(("mpi",), f"applies to framework {names}, not {spec.framework.value}",
                                   hint=f"set framework: {names}, or remove mpi"))
    if spec.controller is not None:
        problems += _controller_problems(spec, spec.controller)
    for i, name in enumerate(spec.run_policy.success_roles or []):
        if name not in spec.role_replicas():
            problems.append(FieldError(("runPolicy", "successRoles", i), "is not a role of the job", name, True,
                                       hint=f"roles: {', '.join(spec.role_replicas())}"))
    if spec.run_policy.suspend and spec.run_mode == "Debug":
        problems.append(FieldError(("runPolicy", "suspend"), "conflicts with runMode: Debug"))
    total = sum(spec.role_replicas().values())
    if spec.scheduling.min_available is not None and spec.scheduling.min_available > total:
        problems.append(
            FieldError(
                ("scheduling", "minAvailable"),
                f"exceeds the job's {total} replicas",
                spec.scheduling.min_available,
                True,
            )
        )
    return problems


def _controller_problems(spec: JobSpec, controller: Controller) -> list[FieldError]:
    roles = spec.role_replicas()
    return [
        FieldError(("controller", "roles", name), "is not a role of the job", hint=f"roles: {', '.join(roles)}")
        for name in controller.roles
        if name not in roles
    ]


def _elastic_problems(spec: JobSpec, elastic: Elastic) -> list[FieldError]:
    if not record_of(spec.framework).elastic:
        names = ", ".join(frameworks_where(lambda r: r.elastic))
        return [
            FieldError(
                ("elastic",), f"{spec.framework.value} jobs cannot be elastic", hint=f"elastic works with {names}"
            )
        ]
    worker = spec.roles.get(DEFAULT_ROLE) if spec.roles is not None else None
    if spec.roles is not None and worker is None:
        return [FieldError(("elastic",), "needs a worker role to scale")]
    where = ("replicas",) if worker is None else ("roles", DEFAULT_ROLE, "replicas")
    given = spec.replicas is not None if worker is None else "replicas" in worker.model_fields_set
    expected = elastic.expected_replicas
    if expected is not None and not given:
        # expectedReplicas is the start size: given alone, it is the worker role's replicas.
        if worker is None:
            spec.replicas = expected
        else:
            worker.replicas = expected
    workers = spec.role_replicas()[DEFAULT_ROLE]
    if expected is not None and expected != workers:
        return [
            FieldError(
                ("elastic", "expectedReplicas"),
                f"differs from the worker role's {workers} replicas: the job starts with one number of workers",
                expected,
                True,
                hint="set them equal, or give only one of them",
            )
        ]
    assert elastic.min_replicas is not None and elastic.max_replicas is not None  # Elastic checked them
    if not elastic.min_replicas <= workers <= elastic.max_replicas:
        return [
            FieldError(
                where, f"must lie in elastic [{elastic.min_replicas}, {elastic.max_replicas}]", workers, True
            )
        ]
    return []


def _trials_problems(spec: JobSpec) -> list[FieldError]:
    """Trials are one program run many times: no other way of counting replicas beside them."""
    why = "trials run one replica per run: their count is trials.completions"
    problems = [FieldError((name,), f"conflicts with trials ({why})") for name, given in
                (("replicas", spec.replicas is not None), ("roles", spec.roles is not None),
                 ("elastic", spec.elastic is not None)) if given]
    if not record_of(spec.framework).trials:
        problems.append(FieldError(("framework",), "must be generic with trials: independent runs form no "
                                   f"{spec.framework.value} job together", spec.framework.value, True,
                                   hint="drop framework (generic is the default), or drop trials"))
    return problems


def _restart_problems(spec: JobSpec) -> list[FieldError]:
    problems: list[FieldError] = []
    roles = spec.roles or {}
    if spec.exit_codes is not None and "ExitCode" not in (
        spec.restart_policy,
        *(role.restart_policy for role in roles.values()),
    ):
        problems.append(
            FieldError(("exitCodes",), "only applies with restartPolicy: ExitCode (the job's or a role's)")
        )
    limit = spec.run_policy.backoff_limit
    restarting_roles = [name for name, role in roles.items() if role.restart_policy not in (None, "Never")]
    if spec.restart_policy == "Never" and limit and not restarting_roles:
        problems.append(
            FieldError(
                ("restartPolicy",),
                f"Never restarts nothing, yet runPolicy.backoffLimit allows {limit} restarts",
                "Never",
                True,
                hint="drop restartPolicy (a backoffLimit alone means OnFailure), set OnFailure or ExitCode, "
                "or set backoffLimit: 0",
            )
        )
    return problems


def _nothing_to_run(path: tuple[str, ...], template: Any, message: str) -> FieldError:
    if has_args_only(template):
        return FieldError(path, message + " (the podTemplate's main container has args but no command: they "
                          "would go to the image's entrypoint, which kubetrain does not know)",
                          hint="give the main container a command, or set run")
    return FieldError(path, message, hint="run: {python: [train.py]}, or a command in podTemplate's main container")


def _framework_role_rules(framework: Framework, roles: dict[str, RoleSpec]) -> list[FieldError]:
    problems = []
    for rule in record_of(framework).role_rules:
        if (rule.when is None or rule.when in roles) and not any(role in roles for role in rule.needs_one_of):
            where = ("roles", rule.when) if rule.when else ("roles",)
            problems.append(FieldError(where, rule.message, hint=rule.hint))
    return problems


__all__ = ["DEFAULT_ROLE", "spec_problems"]
