"""Kubernetes naming rules, checked where the user writes a name (the spec) rather than where it is used."""

from __future__ import annotations

import re

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def is_dns_label(text: str, max_len: int = 63) -> bool:
    """RFC 1123 label: what Kubernetes requires of most object names."""
    return len(text) <= max_len and _DNS_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str, max_len: int = 253) -> bool:
    return len(text) <= max_len and _DNS_SUBDOMAIN.fullmatch(text) is not None


def is_label_key(key: str) -> bool:
    """`[prefix/]name`: prefix a DNS subdomain ≤ 253, name ≤ 63 alphanumerics with - _ . inside."""
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return False
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _LABEL_NAME.fullmatch(value) is not None)


def is_env_name(name: str) -> bool:
    """What Kubernetes accepts as an environment variable name (C identifiers and more)."""
    return _ENV_NAME.fullmatch(name) is not None
