"""Turning arbitrary user text into names Kubernetes accepts, without two inputs sharing a name.

Sanitizing alone (TorchX's ``cleanup_str``) is lossy: "My_Job", "my.job" and "my-job" all become
"my-job", so two jobs would fight over one Service. Here a name that is already valid and short
enough is kept as written; any name that has to change gets ``-<hash>`` appended, the first
``HASH_LEN`` hex digits of the SHA-256 of the *original* text. The hash survives truncation, so
distinct inputs give distinct outputs unless two of the (changed) inputs collide in 32 bits of
SHA-256, or an input is literally spelled like another input's sanitized-plus-hash output.

Input that sanitizes to nothing ("", "___", "日本") becomes ``EMPTY_PREFIX + "-" + hash`` for DNS
names (they may not be empty) and just the hash for label values.

Pure functions over the standard library: the job model checks names where the user writes them, the
render builds object names, and the in-replica resolver computes the job label, all with these rules.
"""

from __future__ import annotations

import json
import re

__all__ = [
    "DNS_LABEL_MAX",
    "DNS_SUBDOMAIN_MAX",
    "EMPTY_PREFIX",
    "HASH_LEN",
    "LABEL_VALUE_MAX",
    "MAX_JOB_NAME_FOR_HOSTNAMES",
    "child_name",
    "dns1035_label",
    "dns_label",
    "dns_subdomain",
    "index_suffix_len",
    "is_dns1035_label",
    "is_dns_label",
    "is_dns_subdomain",
    "is_env_name",
    "is_label_key",
    "is_label_value",
    "job_name_for_indexed",
    "label_value",
]

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63

# 8 hex digits = 32 bits: a collision needs ~65,000 *changed* names with the same sanitized
# prefix before it becomes likely, while leaving 54 of a label's 63 characters readable.
HASH_LEN = 8
EMPTY_PREFIX = "kt"
_MIN_MAX_LEN = 1 + 1 + HASH_LEN  # one readable character, '-', the hash

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")

_NOT_LABEL_CHARS = re.compile(r"[^a-z0-9]+")
_NOT_SUBDOMAIN_CHARS = re.compile(r"[^a-z0-9.]+")
_NOT_LABEL_VALUE_CHARS = re.compile(r"[^-A-Za-z0-9_.]+")


# --------------------------------------------------------------------------------------------------
# Predicates (Kubernetes' apimachinery validation rules)


def is_dns_label(s: str, max_len: int = DNS_LABEL_MAX) -> bool:
    """RFC 1123 label: lowercase alphanumerics and '-', alphanumeric at both ends, ≤ max_len (63)."""
    return 0 < len(s) <= max_len and _DNS_LABEL.fullmatch(s) is not None


def is_dns1035_label(s: str, max_len: int = DNS_LABEL_MAX) -> bool:
    """RFC 1035 label: an RFC 1123 label that starts with a letter (required of Service names)."""
    return 0 < len(s) <= max_len and _DNS1035_LABEL.fullmatch(s) is not None


def is_dns_subdomain(s: str, max_len: int = DNS_SUBDOMAIN_MAX) -> bool:
    """RFC 1123 subdomain: RFC 1123 labels joined by '.', ≤ max_len (253) in all."""
    return 0 < len(s) <= max_len and _DNS_SUBDOMAIN.fullmatch(s) is not None


def is_label_key(s: str) -> bool:
    """Label or annotation key: ``[prefix/]name``, prefix a DNS subdomain, name ≤ 63 of [-A-Za-z0-9_.]
    with alphanumerics at both ends."""
    prefix, slash, name = s.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return False
    return 0 < len(name) <= LABEL_VALUE_MAX and _QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(s: str) -> bool:
    """Label value: empty, or ≤ 63 of [-A-Za-z0-9_.] with alphanumerics at both ends."""
    return s == "" or (len(s) <= LABEL_VALUE_MAX and _QUALIFIED_NAME.fullmatch(s) is not None)


# --------------------------------------------------------------------------------------------------
# Builders


def _digest(text: str) -> str:
    # surrogatepass: text decoded from odd bytes (e.g. os.fsdecode) may hold lone surrogates;
    # they must hash, not raise. hashlib on use: loading OpenSSL's is ~3 ms of every verb, most names need no digest.
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LEN]


def _check_max_len(max_len: int, limit: int) -> None:
    if not _MIN_MAX_LEN <= max_len <= limit:
        raise ValueError(f"max_len must be between {_MIN_MAX_LEN} and {limit}, got {max_len}")


def _sanitize_label(text: str) -> str:
    """Lowercase, every run of other characters → one '-', no '-' at the ends."""
    return _NOT_LABEL_CHARS.sub("-", text.lower()).strip("-")


def _with_hash(base: str, digest: str, max_len: int, trim: str = "-") -> str:
    """``base-digest`` within max_len, cutting base (never the digest) and tidying the cut."""
    base = base[: max_len - len(digest) - 1].rstrip(trim)
    if not base:
        base = EMPTY_PREFIX[: max_len - len(digest) - 1]
    return f"{base}-{digest}"


def dns_label(name: str, max_len: int = DNS_LABEL_MAX) -> str:
    """A valid RFC 1123 label for ``name``: unchanged if already valid and ≤ max_len, otherwise
    sanitized, cut, and suffixed with a hash of the original."""
    _check_max_len(max_len, DNS_LABEL_MAX)
    if is_dns_label(name, max_len):
        return name
    return _with_hash(_sanitize_label(name), _digest(name), max_len)


def dns1035_label(name: str, max_len: int = DNS_LABEL_MAX) -> str:
    """Like :func:`dns_label` but starting with a letter, as Service names must (a job called
    "2024-run" is a fine Job name and an invalid Service name)."""
    _check_max_len(max_len, DNS_LABEL_MAX)
    if is_dns1035_label(name, max_len):
        return name
    base = _sanitize_label(name).lstrip("0123456789-")
    return _with_hash(base, _digest(name), max_len)


def dns_subdomain(name: str, max_len: int = DNS_SUBDOMAIN_MAX) -> str:
    """A valid RFC 1123 subdomain for ``name`` (dots kept as label separators), same rules as
    :func:`dns_label`."""
    _check_max_len(max_len, DNS_SUBDOMAIN_MAX)
    if is_dns_subdomain(name, max_len):
        return name
    text = _NOT_SUBDOMAIN_CHARS.sub("-", name.lower())
    # Each dot-separated piece must be a label: trim its dashes, and drop pieces left empty
    # ("a..b", ".a", "-.").
    pieces = [piece.strip("-") for piece in text.split(".")]
    base = ".".join(piece for piece in pieces if piece)
    return _with_hash(base, _digest(name), max_len, trim="-.")


def label_value(value: str) -> str:
    """A valid label value for ``value``: unchanged if already valid (including ""), otherwise
    sanitized (case kept), cut, and suffixed with a hash; all-invalid input gives the bare hash."""
    if is_label_value(value):
        return value
    digest = _digest(value)
    base = _NOT_LABEL_VALUE_CHARS.sub("-", value)
    base = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", base)
    base = base[: LABEL_VALUE_MAX - HASH_LEN - 1]
    base = re.sub(r"[^A-Za-z0-9]+$", "", base)
    return f"{base}-{digest}" if base else digest


def child_name(parent: str, *parts: str, max_len: int = DNS_LABEL_MAX) -> str:
    """``parent-part-...`` as a DNS label: ``child_name("demo", "worker") == "demo-worker"``.

    If the joined name is invalid or too long, the parts are sanitized, the parent is shortened
    first (the role suffix is what tells siblings apart when reading ``kubectl get``), and a hash of
    the unjoined inputs is appended, so ("a-b", "c") and ("a", "b-c") stay distinct when hashed.
    """
    _check_max_len(max_len, DNS_LABEL_MAX)
    joined = "-".join((parent, *parts))
    if is_dns_label(joined, max_len):
        return joined
    digest = _digest(json.dumps([parent, *parts]))
    head = _sanitize_label(parent)
    tail = "-".join(p for p in (_sanitize_label(part) for part in parts) if p)
    room = max_len - HASH_LEN - 1
    if head and tail and len(head) + 1 + len(tail) > room:
        # The tail keeps at least half the room; the parent gets the rest (at least one character).
        tail = tail[: max(room - 1 - len(head), room // 2)].rstrip("-")
        head = head[: room - 1 - len(tail)].rstrip("-")
    base = "-".join(p for p in (head, tail) if p)
    return _with_hash(base, digest, max_len)


# --------------------------------------------------------------------------------------------------
# Indexed Jobs
#
# The Job controller names each pod "<job>-<index>-<random5>" and sets its hostname to
# "<job>-<index>", which is what the headless Service publishes as "<job>-<index>.<service>". The
# hostname must be a DNS label (≤ 63), so the Job name gets 63 - len("-<largest index>").


def index_suffix_len(count: int) -> int:
    """Length of ``-<index>`` for the largest index among ``count`` replicas (0-based)."""
    if count < 1:
        raise ValueError(f"count must be ≥ 1, got {count}")
    return 1 + len(str(count - 1))


# Indexes up to 99,999 (Kubernetes' soft limit on Indexed Job completions is 100,000): a Job name of
# at most 57 characters leaves room for any "-<index>" below that.
MAX_JOB_NAME_FOR_HOSTNAMES = DNS_LABEL_MAX - index_suffix_len(100_000)


def job_name_for_indexed(parent: str, role: str, max_replicas: int) -> str:
    """Name of the Indexed Job for ``role`` of job ``parent``, short enough that every pod hostname
    ``<name>-<index>`` for index < max_replicas is a valid DNS label."""
    return child_name(parent, role, max_len=DNS_LABEL_MAX - index_suffix_len(max_replicas))


_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def is_env_name(name: str) -> bool:
    """What Kubernetes accepts as an environment variable name (C identifiers and more)."""
    return _ENV_NAME.fullmatch(name) is not None
