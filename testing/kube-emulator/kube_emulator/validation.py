"""A subset of the API server's validation: what a job launcher gets wrong in practice.

Covered: object names per type (DNS-1123 subdomain/label, DNS-1035 label for Services, 63 characters
for Jobs), label keys and values, annotation keys, ownerReferences, the pod spec (containers, images,
ports, volumes and mounts, env names, restartPolicy, resource quantities, requests ≤ limits, extended
resources whole and equal to their limits, huge pages in whole pages, equal to their limits and beside
cpu or memory), tolerations (operator, value with Exists), Job rules (restartPolicy OnFailure/Never,
Indexed needs completions, podFailurePolicy needs Never, selector matches template), Service ports,
ConfigMap/Secret keys, and the fields an update may not change. Every message is worded like the
server's, so a test sees what a user would. Anything not listed here is accepted.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from .errors import Cause

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _q(value: Any) -> str:
    return json.dumps(value)


def _invalid(field: str, value: Any, msg: str) -> Cause:
    return Cause(field, f"Invalid value: {_q(value)}: {msg}")


def _required(field: str, msg: str = "") -> Cause:
    return Cause(field, "Required value" + (f": {msg}" if msg else ""), "FieldValueRequired")


def _unsupported(field: str, value: Any, supported: list[str]) -> Cause:
    listed = ", ".join(_q(s) for s in supported)
    return Cause(field, f"Unsupported value: {_q(value)}: supported values: {listed}", "FieldValueNotSupported")


def check_dns(field: str, value: str, kind: str = "subdomain") -> list[Cause]:
    if kind == "label":
        ok, msg, limit = DNS1123_LABEL.match(value), _LABEL_MSG, 63
    elif kind == "1035":
        ok, msg, limit = DNS1035_LABEL.match(value), _DNS1035_MSG, 63
    else:
        ok, msg, limit = DNS1123_SUBDOMAIN.match(value), _SUBDOMAIN_MSG, 253
    out = []
    if len(value) > limit:
        out.append(_invalid(field, value, f"must be no more than {limit} characters"))
    if not ok:
        out.append(_invalid(field, value, msg))
    return out


def _check_qualified_key(field: str, key: str) -> list[Cause]:
    prefix, _, name = key.rpartition("/")
    out = []
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        out.append(_invalid(field, key, "prefix part " + _SUBDOMAIN_MSG))
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        out.append(
            _invalid(
                field,
                key,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character, and be no more than 63 characters",
            )
        )
    return out


def check_labels(field: str, labels: Any) -> list[Cause]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [_invalid(field, labels, "must be a map of string keys to string values")]
    out = []
    for key, value in labels.items():
        out += _check_qualified_key(field, key)
        if not isinstance(value, str):
            out.append(_invalid(f"{field}", value, "label values must be strings"))
            continue
        if len(value) > 63:
            out.append(_invalid(field, value, "must be no more than 63 characters"))
        if not _LABEL_VALUE.match(value):
            out.append(_invalid(field, value, _LABEL_VALUE_MSG))
    return out


def check_metadata(meta: dict[str, Any], name_rule: str) -> list[Cause]:
    out: list[Cause] = []
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        out.append(_required("metadata.name", "name or generateName is required"))
    else:
        out += check_dns("metadata.name", name, name_rule)
    out += check_labels("metadata.labels", meta.get("labels"))
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        out.append(_invalid("metadata.annotations", annotations, "must be a map of string keys to string values"))
    else:
        for key in annotations:
            out += _check_qualified_key("metadata.annotations", key)
        size = sum(len(k) + len(v) for k, v in annotations.items())
        if size > 256 * 1024:
            out.append(
                Cause("metadata.annotations", f"Too long: must have at most {256 * 1024} bytes", "FieldValueTooLong")
            )
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not (isinstance(ref, dict) and ref.get(key)):
                out.append(_required(f"metadata.ownerReferences[{i}].{key}"))
    return out


_SUFFIXES: dict[str, Decimal | int] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")


def parse_quantity(value: Any) -> Decimal | None:
    """A resource quantity ("500m", "2Gi", "1e3", 4) as a Decimal, or None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip())
    if not m:
        return None
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:
        return None
    suffix = m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * Decimal(_SUFFIXES[suffix])


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    return not _native(name) and not name.startswith("requests.")


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _hugepages_divisible(name: str, q: Decimal) -> bool:
    size = parse_quantity(name[len("hugepages-"):])
    if size is None or size <= 0 or size != size.to_integral_value():
        return False
    return math.ceil(q) % int(size) == 0


def _check_resources(path: str, res: Any) -> list[Cause]:
    """ValidateResourceRequirements: extended resources are integers (MilliValue % 1000 == 0, in requests and
    limits alike), huge pages whole pages; neither may be overcommitted (request = limit, and a limit whenever
    there is a request); huge pages need cpu or memory beside them."""
    if not isinstance(res, dict):
        return []
    out: list[Cause] = []
    parsed: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for section in ("limits", "requests"):  # the server's order
        for name, value in (res.get(section) or {}).items():
            q = parse_quantity(value)
            field = f"{path}.resources.{section}[{name}]"
            if q is None:
                out.append(_invalid(field, value, "must be a valid resource quantity"))
                continue
            if q < 0:
                out.append(_invalid(field, value, "must be greater than or equal to 0"))
                continue
            parsed[section][name] = q
            if _extended(name) and math.ceil(q * 1000) % 1000 != 0:
                out.append(_invalid(field, str(value), "must be an integer"))
            if _hugepages(name) and not _hugepages_divisible(name, q):
                out.append(_invalid(field, str(value), f"{value} is not positive integer multiple of {name}"))
    requests, limits = parsed["requests"], parsed["limits"]
    overcommit = {name: _native(name) and not _hugepages(name) for name in requests}
    for name, req in requests.items():
        # The server names the whole map here, not the key.
        if name in limits:
            lim = res["limits"][name]
            if req != limits[name] and not overcommit[name]:
                out.append(_invalid(f"{path}.resources.requests", str(res["requests"][name]),
                                    f"must be equal to {name} limit of {lim}"))
            elif req > limits[name]:
                out.append(_invalid(f"{path}.resources.requests", str(res["requests"][name]),
                                    f"must be less than or equal to {name} limit of {lim}"))
        elif not overcommit[name]:
            out.append(_required(f"{path}.resources.limits", "Limit must be set for non overcommitable resources"))
    names = {*parsed["requests"], *parsed["limits"]}
    if any(_hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        out.append(Cause(f"{path}.resources", "Forbidden: HugePages require cpu or memory", "FieldValueForbidden"))
    return out


def _check_tolerations(path: str, tolerations: Any) -> list[Cause]:
    out: list[Cause] = []
    for i, t in enumerate(tolerations if isinstance(tolerations, list) else []):
        if not isinstance(t, dict):
            continue
        field = f"{path}.tolerations[{i}].operator"
        operator = t.get("operator") or ""
        if not t.get("key") and operator != "Exists":
            out.append(_invalid(field, operator, 'operator must be Exists when `key` is empty, which means '
                                '"match all values and all keys"'))
        if operator == "Exists" and t.get("value"):
            out.append(_invalid(field, t, "value must be empty when `operator` is 'Exists'"))
        elif operator not in ("", "Equal", "Exists", "Lt", "Gt"):  # Lt/Gt: newer servers, behind a feature gate
            out.append(_unsupported(field, operator, ["Equal", "Exists"]))
    return out


def check_pod_spec(spec: Any, path: str) -> list[Cause]:
    if not isinstance(spec, dict):
        return [_required(path)]
    out: list[Cause] = []
    volumes = spec.get("volumes") or []
    volume_names: set[str] = set()
    for i, vol in enumerate(volumes):
        vname = vol.get("name") if isinstance(vol, dict) else None
        if not vname:
            out.append(_required(f"{path}.volumes[{i}].name"))
            continue
        out += check_dns(f"{path}.volumes[{i}].name", vname, "label")
        if vname in volume_names:
            out.append(Cause(f"{path}.volumes[{i}].name", f"Duplicate value: {_q(vname)}", "FieldValueDuplicate"))
        volume_names.add(vname)
    if not spec.get("containers"):
        out.append(_required(f"{path}.containers"))
    seen: set[str] = set()
    for section in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(section) or []):
            cpath = f"{path}.{section}[{i}]"
            if not isinstance(c, dict):
                out.append(_invalid(cpath, c, "must be an object"))
                continue
            name = c.get("name")
            if not name:
                out.append(_required(f"{cpath}.name"))
            else:
                out += check_dns(f"{cpath}.name", name, "label")
                if name in seen:
                    out.append(Cause(f"{cpath}.name", f"Duplicate value: {_q(name)}", "FieldValueDuplicate"))
                seen.add(name)
            if not c.get("image"):
                out.append(_required(f"{cpath}.image"))
            for j, port in enumerate(c.get("ports") or []):
                p = port.get("containerPort") if isinstance(port, dict) else None
                if not isinstance(p, int) or not 1 <= p <= 65535:
                    out.append(
                        _invalid(f"{cpath}.ports[{j}].containerPort", p, "must be between 1 and 65535, inclusive")
                    )
            for j, env in enumerate(c.get("env") or []):
                if not (isinstance(env, dict) and env.get("name")):
                    out.append(_required(f"{cpath}.env[{j}].name"))
            for j, mount in enumerate(c.get("volumeMounts") or []):
                mname = mount.get("name") if isinstance(mount, dict) else None
                if mname not in volume_names:
                    out.append(
                        Cause(f"{cpath}.volumeMounts[{j}].name", f"Not found: {_q(mname)}", "FieldValueNotFound")
                    )
                if not (isinstance(mount, dict) and mount.get("mountPath")):
                    out.append(_required(f"{cpath}.volumeMounts[{j}].mountPath"))
            out += _check_resources(cpath, c.get("resources"))
    out += _check_tolerations(path, spec.get("tolerations"))
    policy = spec.get("restartPolicy", "Always")
    if policy not in ("Always", "OnFailure", "Never"):
        out.append(_unsupported(f"{path}.restartPolicy", policy, ["Always", "OnFailure", "Never"]))
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            out += check_dns(f"{path}.{key}", spec[key], "label")
    return out


def _non_negative(spec: dict[str, Any], key: str, path: str) -> list[Cause]:
    v = spec.get(key)
    if v is not None and (not isinstance(v, int) or v < 0):
        return [_invalid(f"{path}.{key}", v, "must be greater than or equal to 0")]
    return []


def check_job(job: dict[str, Any]) -> list[Cause]:
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    out: list[Cause] = []
    name = job.get("metadata", {}).get("name") or ""
    if len(name) > 63:
        out.append(_invalid("metadata.name", name, "must be no more than 63 characters"))
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        out += _non_negative(spec, key, "spec")
    template = spec.get("template") or {}
    tspec = template.get("spec")
    out += check_pod_spec(tspec, "spec.template.spec")
    out += check_labels("spec.template.metadata.labels", (template.get("metadata") or {}).get("labels"))
    policy = (tspec or {}).get("restartPolicy", "Always")
    if policy not in ("OnFailure", "Never"):
        out.append(_unsupported("spec.template.spec.restartPolicy", policy, ["OnFailure", "Never"]))
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        out.append(_unsupported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed" and spec.get("completions") is None:
        out.append(_required("spec.completions", "when completion mode is Indexed"))
    if spec.get("podFailurePolicy") is not None and policy != "Never":
        out.append(
            _invalid(
                "spec.template.spec.restartPolicy",
                policy,
                'only "Never" is supported when podFailurePolicy is specified',
            )
        )
    if spec.get("backoffLimitPerIndex") is not None and mode != "Indexed":
        out.append(
            _invalid("spec.backoffLimitPerIndex", spec["backoffLimitPerIndex"], "requires indexed completion mode")
        )
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        out.append(_invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    return out


def check_service(svc: dict[str, Any]) -> list[Cause]:
    spec = svc.get("spec") or {}
    out: list[Cause] = []
    headless = spec.get("clusterIP") == "None"
    ports = spec.get("ports") or []
    svc_type = spec.get("type", "ClusterIP")
    if svc_type not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        out.append(_unsupported("spec.type", svc_type, ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]))
    if not ports and not headless and svc_type != "ExternalName":
        out.append(_required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = port.get("port")
        if not isinstance(p, int) or not 1 <= p <= 65535:
            out.append(_invalid(f"spec.ports[{i}].port", p, "must be between 1 and 65535, inclusive"))
        pname = port.get("name")
        if len(ports) > 1 and not pname:
            out.append(_required(f"spec.ports[{i}].name"))
        if pname:
            out += check_dns(f"spec.ports[{i}].name", pname, "label")
            if pname in names:
                out.append(Cause(f"spec.ports[{i}].name", f"Duplicate value: {_q(pname)}", "FieldValueDuplicate"))
            names.add(pname)
        proto = port.get("protocol", "TCP")
        if proto not in ("TCP", "UDP", "SCTP"):
            out.append(_unsupported(f"spec.ports[{i}].protocol", proto, ["SCTP", "TCP", "UDP"]))
    out += check_labels("spec.selector", spec.get("selector"))
    return out


def check_config_data(obj: dict[str, Any]) -> list[Cause]:
    out: list[Cause] = []
    size = 0
    for section in ("data", "binaryData", "stringData"):
        for key, value in (obj.get(section) or {}).items():
            if not _CONFIG_KEY.match(key) or len(key) > 253:
                out.append(
                    _invalid(
                        f"{section}[{key}]",
                        key,
                        "a valid config key must consist of alphanumeric "
                        "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                        "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    )
                )
            size += len(key) + len(str(value))
    if size > 1024 * 1024:
        out.append(Cause("data", f"Too long: must have at most {1024 * 1024} bytes", "FieldValueTooLong"))
    return out


SECRET_REQUIRED_KEYS = {
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
"""The keys the API server requires of a Secret of these types (its ValidateSecret)."""


def check_secret_type(obj: dict[str, Any]) -> list[Cause]:
    """A typed Secret must carry its type's keys (in data, or in stringData, which the server merges in)."""
    keys = set(obj.get("data") or {}) | set(obj.get("stringData") or {})
    return [Cause(f"data[{key}]", "Required value", "FieldValueRequired")
            for key in SECRET_REQUIRED_KEYS.get(str(obj.get("type") or ""), ()) if key not in keys]


NAME_RULES = {("", "namespaces"): "label", ("", "services"): "1035"}


def validate(group: str, plural: str, obj: dict[str, Any]) -> list[Cause]:
    """Every validation error of a full object (after defaulting) of the given resource."""
    out = check_metadata(obj.get("metadata") or {}, NAME_RULES.get((group, plural), "subdomain"))
    if (group, plural) == ("", "pods"):
        out += check_pod_spec(obj.get("spec"), "spec")
    elif (group, plural) == ("batch", "jobs"):
        out += check_job(obj)
    elif (group, plural) == ("", "services"):
        out += check_service(obj)
    elif (group, plural) in (("", "configmaps"), ("", "secrets")):
        out += check_config_data(obj)
        if plural == "secrets":
            out += check_secret_type(obj)
    return out


_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")


def _without_images(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    for section in ("containers", "initContainers"):
        if section in out:
            out[section] = [{k: v for k, v in c.items() if k != "image"} for c in out[section]]
    return out


def check_update(group: str, plural: str, old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """Fields an update may not change (the subset a launcher could plausibly try to change)."""
    o, n = old.get("spec") or {}, new.get("spec") or {}
    if (group, plural) == ("", "pods"):
        if _without_images(o) != _without_images(n):
            return [
                Cause(
                    "spec",
                    "Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
                    "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if "
                    "it was previously negative)",
                    "FieldValueForbidden",
                )
            ]
    elif (group, plural) == ("batch", "jobs"):
        out = []
        for key in ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex"):
            if o.get(key) != n.get(key):
                out.append(_invalid(f"spec.{key}", n.get(key), "field is immutable"))
        # Kubernetes lets a suspended Job's template change (scheduling directives); allowed here wholesale.
        if o.get("template") != n.get("template") and not (o.get("suspend") and n.get("suspend")):
            out.append(_invalid("spec.template", "...", "field is immutable"))
        # Elastic Indexed Jobs (Kubernetes >= 1.27, validateCompletions): an Indexed Job's completions may
        # change to a value equal to the (new) parallelism; a NonIndexed Job's completions never change.
        if o.get("completions") != n.get("completions"):
            if n.get("completionMode") != "Indexed":
                out.append(_invalid("spec.completions", n.get("completions"), "field is immutable"))
            elif n.get("completions") is not None and n.get("completions") != n.get("parallelism"):
                out.append(_invalid("spec.completions", n.get("completions"),
                                    "can only be modified in tandem with spec.parallelism"))
        return out
    elif (group, plural) == ("", "services") and o.get("clusterIP") and o.get("clusterIP") != n.get("clusterIP"):
        return [_invalid("spec.clusterIP", n.get("clusterIP"), "field is immutable")]
    return []
