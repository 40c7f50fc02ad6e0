"""Field types shared by the job model: Kubernetes quantities, argv lists, env, and client-model fields."""

from __future__ import annotations

import functools
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainSerializer, Strict, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ..contract.naming import is_env_name
from .errors import SpecError
from .kube_models import kube_to_dict, to_kube_model


class SpecModel(BaseModel):
    """Base of every spec object: unknown fields are errors, YAML uses camelCase, Python snake_case."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=False,
    )


@functools.cache
def _quantity_parser() -> Any:
    # The client's parser: the same rules (and the same corner cases) as the API server's.
    from kubernetes.utils.quantity import parse_quantity

    return parse_quantity


def parse_quantity(value: str | int | float) -> Decimal:
    result: Decimal = _quantity_parser()(value)
    return result


def _quantity(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PydanticCustomError("quantity_type", "must be a Kubernetes quantity such as 500m, 2, 16Gi")
    text = source_text(value)
    try:
        amount = parse_quantity(text)
    except (ValueError, ArithmeticError):
        amount = None
    if amount is None or not amount.is_finite():
        raise PydanticCustomError(
            "quantity",
            "{text} is not a Kubernetes quantity; use forms such as 500m, 2, 1.5, 512Mi, 16Gi",
            {"text": text},
        )
    if amount < 0:
        raise PydanticCustomError("quantity", "must not be negative")
    return text


Quantity = Annotated[
    str,
    BeforeValidator(_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string"}, {"type": "number", "minimum": 0}],
            "description": "A Kubernetes quantity: 500m, 2, 1.5, 512Mi, 16Gi",
        }
    ),
]
"""A Kubernetes quantity ("500m", "16Gi", 2), kept as written and checked with the client's parser."""


def source_text(value: Any) -> str:
    """A scalar as the user wrote it: YAML numbers remember their text (`1.10`, `010`, `0x1F`)."""
    return str(getattr(value, "source", value))


def _arg(value: Any) -> str:
    # YAML turns `--steps 20` into an int; an argument is text, so numbers are taken as written.
    # Booleans are refused: `true` is more likely a mistake than an argument.
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        raise PydanticCustomError("arg", "must be a string or a number; quote it")
    if isinstance(value, int | float | str):
        return source_text(value)
    raise PydanticCustomError("arg", "must be a string")


Arg = Annotated[str, BeforeValidator(_arg)]


class KubeType:
    """Marks a field holding an official client model, so `kubetrain schema` can describe it."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        # Resolved to the client's own field list by `full_json_schema`; importing the client here would
        # make every import of kubetrain pay for it.
        return {"x-kube-type": self.type_name}


def _model_converter(type_name: str) -> Any:
    def convert(value: Any) -> Any:
        # SpecError is a ValueError: pydantic keeps it in the error's ctx, and `load` re-roots its paths.
        return to_kube_model(type_name, value)

    return convert


def kube_field(type_name: str, check: Any = None) -> Any:
    """`Annotated` type for a field holding `type_name` (e.g. "list[V1Toleration]") from models or dicts;
    `check`: a function run on the converted models (raising SpecError), for rules the client does not hold."""
    return Annotated[
        Any,
        BeforeValidator(_model_converter(type_name)),
        *([AfterValidator(check)] if check is not None else []),
        PlainSerializer(kube_to_dict, when_used="always"),
        KubeType(type_name),
    ]


EnvFromList = kube_field("list[V1EnvFromSource]")
Affinity = kube_field("V1Affinity")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _check_tolerations(value: Any) -> Any:
    """The API server's rules for tolerations, here with each field's path, rather than as its refusal at
    submit (or, locally, never): operator and effect from their sets, a value only with Equal, a key unless
    Exists, tolerationSeconds only with NoExecute."""
    from .errors import FieldError

    problems = []
    for i, item in enumerate(value or []):
        operator, effect = item.operator, item.effect
        if operator is not None and operator not in TOLERATION_OPERATORS:
            problems.append(FieldError((i, "operator"), f"must be {' or '.join(TOLERATION_OPERATORS)}", operator, True,
                                       hint="Equal (the default) tolerates the taint's value given in `value`; "
                                       "Exists, any value of the key"))
        elif operator == "Exists" and item.value:
            problems.append(FieldError((i, "value"), "must be empty with operator Exists (it matches any value)",
                                       item.value, True))
        elif not item.key and operator != "Exists":
            problems.append(FieldError((i, "operator"), "must be Exists when no key is given (it tolerates every "
                                       "taint)", operator or "Equal", True))
        if effect and effect not in TAINT_EFFECTS:
            problems.append(FieldError((i, "effect"), f"must be one of {', '.join(TAINT_EFFECTS)}", effect, True,
                                       hint="or leave it out: every effect"))
        if item.toleration_seconds is not None and effect != "NoExecute":
            problems.append(FieldError((i, "tolerationSeconds"), "applies only with effect NoExecute (how long a "
                                       "running pod stays once the taint appears)", item.toleration_seconds, True))
    if problems:
        raise SpecError(problems)
    return value


Tolerations = kube_field("list[V1Toleration]", _check_tolerations)


def _env_list(value: Any) -> Any:
    """`{NAME: value}` or a list of V1EnvVar / dicts → a list of V1EnvVar."""
    if isinstance(value, dict):
        items = []
        for name, val in value.items():
            if isinstance(val, dict):  # {NAME: {valueFrom: ...}}
                items.append({"name": name, **val})
            else:
                if isinstance(val, bool):
                    val = "true" if val else "false"
                elif isinstance(val, int | float):
                    val = source_text(val)
                items.append({"name": name, "value": val})
        value = items
    if isinstance(value, list) and any(item is None for item in value):
        i = next(i for i, item in enumerate(value) if item is None)
        raise SpecError.single((i,), "must be a V1EnvVar, not empty (null)", hint="remove the empty list item")
    result = to_kube_model("list[V1EnvVar]", value)
    for i, var in enumerate(result or []):
        if not is_env_name(var.name):
            raise SpecError.single(
                (i, "name"),
                "is not a valid environment variable name",
                value=var.name,
                has_value=True,
                hint="letters, digits, '_', '-', '.'; not starting with a digit",
            )
    return result


EnvList = Annotated[
    Any,
    BeforeValidator(_env_list),
    PlainSerializer(kube_to_dict, when_used="always"),
    KubeType("list[V1EnvVar]"),
]
"""Environment: a mapping `{NAME: value}` or a list of V1EnvVar (objects or dicts, valueFrom allowed)."""


WholeNumber = Annotated[int, Strict()]
"""An integer field: pydantic's strict int, which refuses booleans, floats (even 1.0) and text instead of
converting them (`convert` says "must be a whole number (got true)")."""

INT32_MAX = 2**31 - 1
"""The bound of Kubernetes' int32 fields (backoffLimit, ttlSecondsAfterFinished, runAsUser, ...)."""
MAX_REPLICAS = 1_000_000
"""The most replicas a role (or an elastic job) may ask for (engines refuse less: Indexed Jobs 100,000)."""
MAX_PROCS_PER_REPLICA = 1024
"""The most processes one replica may start (torchrun --nproc-per-node)."""
MAX_DEADLINE_SECONDS = 10 * 365 * 24 * 3600
"""activeDeadlineSeconds' bound: ten years."""
