"""Kubernetes-safe names: valid, bounded, deterministic, and distinct for distinct inputs."""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kubetrain.contract.naming import (
    EMPTY_PREFIX,
    HASH_LEN,
    MAX_JOB_NAME_FOR_HOSTNAMES,
    child_name,
    dns1035_label,
    dns_label,
    dns_subdomain,
    index_suffix_len,
    is_dns1035_label,
    is_dns_label,
    is_dns_subdomain,
    is_label_key,
    is_label_value,
    job_name_for_indexed,
    label_value,
)

# Characters that exercise every rule: case, separators the rules treat differently, digits at the
# ends, non-ASCII (including characters whose lowercase is ASCII, like the Kelvin sign).
TRICKY = string.ascii_letters + string.digits + "-_.-/ :@\u212a\u0130éß日本\U0001f600"
tricky_text = st.text(alphabet=TRICKY, max_size=300)
any_text = st.one_of(st.text(max_size=300), tricky_text)


def tricky_names(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 90))))
    return sorted(names)


# --------------------------------------------------------------------------------------------------
# Predicates


@pytest.mark.parametrize("s", ["a", "0", "demo", "demo-worker-0", "a" * 63, "1-a", "a--b"])
def test_is_dns_label_accepts(s: str) -> None:
    assert is_dns_label(s)


@pytest.mark.parametrize("s", ["", "A", "-a", "a-", "a_b", "a.b", "a" * 64, "é", "a\n", "\u212a"])
def test_is_dns_label_rejects(s: str) -> None:
    assert not is_dns_label(s)


def test_is_dns_label_max_len() -> None:
    assert is_dns_label("abcd", max_len=4)
    assert not is_dns_label("abcde", max_len=4)


def test_is_dns1035_label() -> None:
    assert is_dns1035_label("svc-1")
    assert not is_dns1035_label("1-svc")
    assert not is_dns1035_label("")


@pytest.mark.parametrize("s", ["a", "a.b", "kubetrain.io", "x-1.y-2.z", "a" * 253])
def test_is_dns_subdomain_accepts(s: str) -> None:
    assert is_dns_subdomain(s)


@pytest.mark.parametrize("s", ["", ".a", "a.", "a..b", "a.-b", "A.b", "a_b", "a" * 254])
def test_is_dns_subdomain_rejects(s: str) -> None:
    assert not is_dns_subdomain(s)


@pytest.mark.parametrize(
    "s", ["app", "App_Name.v1", "kubetrain.io/job", "kueue.x-k8s.io/queue-name", "a/" + "b" * 63]
)
def test_is_label_key_accepts(s: str) -> None:
    assert is_label_key(s)


@pytest.mark.parametrize(
    "s", ["", "/a", "a/", "Kubetrain.io/job", "a/b/c", "-a", "a" * 64, "a" * 254 + "/b", "x/_a"]
)
def test_is_label_key_rejects(s: str) -> None:
    assert not is_label_key(s)


@pytest.mark.parametrize("s", ["", "a", "A_b.c-D", "0", "x" * 63])
def test_is_label_value_accepts(s: str) -> None:
    assert is_label_value(s)


@pytest.mark.parametrize("s", ["-a", "a-", "_", "a/b", "a b", "x" * 64, "é"])
def test_is_label_value_rejects(s: str) -> None:
    assert not is_label_value(s)


# --------------------------------------------------------------------------------------------------
# dns_label


@pytest.mark.parametrize("name", ["demo", "my-job", "0", "a" * 63, "x1-y2"])
def test_valid_names_pass_through(name: str) -> None:
    assert dns_label(name) == name
    assert dns_subdomain(name) == name
    assert label_value(name) == name


def test_changed_names_get_a_hash_and_stay_distinct() -> None:
    assert dns_label("My_Job") != dns_label("my-job") == "my-job"
    assert dns_label("My_Job") != dns_label("my.job") != dns_label("MY JOB")
    assert dns_label("My_Job").startswith("my-job-")
    assert len(dns_label("My_Job")) == len("my-job-") + HASH_LEN


def test_truncation_keeps_the_hash() -> None:
    long = "a" * 70
    out = dns_label(long)
    assert len(out) == 63
    assert out.startswith("a" * 54 + "-")
    assert dns_label("a" * 71) != out
    assert dns_label(long, max_len=20) == "a" * 11 + "-" + out[-HASH_LEN:]


def test_cut_does_not_leave_a_dash_before_the_hash() -> None:
    out = dns_label("a" * 53 + "_bc" + "d" * 20)
    assert "--" not in out
    assert is_dns_label(out)


@pytest.mark.parametrize("name", ["", "___", "日本", "-", ".", "\U0001f600"])
def test_all_invalid_input_becomes_prefix_and_hash(name: str) -> None:
    out = dns_label(name)
    assert out.startswith(EMPTY_PREFIX + "-")
    assert len(out) == len(EMPTY_PREFIX) + 1 + HASH_LEN


def test_max_len_bounds() -> None:
    with pytest.raises(ValueError):
        dns_label("x", max_len=64)
    with pytest.raises(ValueError):
        dns_label("x", max_len=HASH_LEN + 1)
    assert len(dns_label("Some Name", max_len=HASH_LEN + 2)) == HASH_LEN + 2
    assert dns_label("", max_len=HASH_LEN + 2).startswith(EMPTY_PREFIX[0] + "-")


@given(any_text, st.integers(min_value=HASH_LEN + 2, max_value=63))
@example("My_Job", 63)
@example("", 10)
@example("\u212a", 63)  # Kelvin sign: lowercases to ASCII "k", still must be hashed
@example("a" * 200, 10)
@example("\ud800", 63)  # a lone surrogate must hash, not raise
def test_dns_label_property(name: str, max_len: int) -> None:
    out = dns_label(name, max_len)
    assert is_dns_label(out, max_len)
    assert dns_label(name, max_len) == out
    if is_dns_label(name, max_len):
        assert out == name
    else:
        # The suffix is the hash of the original text, whatever the cut.
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LEN]
        assert out.endswith("-" + digest)


@given(any_text, any_text)
def test_distinct_inputs_give_distinct_labels(a: str, b: str) -> None:
    if a != b:
        assert dns_label(a) != dns_label(b)
        assert dns_subdomain(a) != dns_subdomain(b)
        assert label_value(a) != label_value(b)
        assert child_name(a, "worker") != child_name(b, "worker")


@pytest.mark.parametrize(
    "function",
    [dns_label, dns1035_label, dns_subdomain, label_value, lambda s: child_name(s, "worker")],
    ids=["dns_label", "dns1035_label", "dns_subdomain", "label_value", "child_name"],
)
def test_no_collisions_among_10000_names(function: Callable[[str], str]) -> None:
    names = tricky_names(10_000)
    outputs = {function(name) for name in names}
    assert len(outputs) == len(names)


def test_no_collisions_when_only_the_hash_differs() -> None:
    # All of these sanitize to "my-job": only the hash tells them apart.
    names = [f"My_Job{'_' * i}" for i in range(10_000)]
    outputs = {dns_label(name) for name in names}
    assert {out[: -HASH_LEN - 1] for out in outputs} == {"my-job"}
    assert len(outputs) == len(names)


# --------------------------------------------------------------------------------------------------
# dns1035_label, dns_subdomain, label_value


@given(any_text)
@example("2024-run")
@example("0")
def test_dns1035_label_property(name: str) -> None:
    out = dns1035_label(name)
    assert is_dns1035_label(out)
    assert dns1035_label(name) == out
    if is_dns1035_label(name):
        assert out == name


def test_dns1035_label_examples() -> None:
    assert dns1035_label("demo") == "demo"
    assert dns1035_label("2024-run").startswith("run-")
    assert dns1035_label("2024").startswith(EMPTY_PREFIX + "-")


@given(any_text, st.integers(min_value=HASH_LEN + 2, max_value=253))
@example("a..b", 253)
@example("." * 300, 253)
@example("a." * 200, 253)
@example("a." * 10 + "-b", 20)
def test_dns_subdomain_property(name: str, max_len: int) -> None:
    out = dns_subdomain(name, max_len)
    assert is_dns_subdomain(out, max_len)
    assert dns_subdomain(name, max_len) == out
    if is_dns_subdomain(name, max_len):
        assert out == name


def test_dns_subdomain_examples() -> None:
    assert dns_subdomain("Example.COM").startswith("example.com-")
    assert dns_subdomain("a..b").startswith("a.b-")
    assert len(dns_subdomain("x" * 300)) == 253


@given(any_text)
@example("")
@example("___")
@example("-A_b-")
def test_label_value_property(value: str) -> None:
    out = label_value(value)
    assert is_label_value(out)
    assert label_value(value) == out
    if is_label_value(value):
        assert out == value


def test_label_value_examples() -> None:
    assert label_value("") == ""
    assert label_value("Train_v1.2") == "Train_v1.2"  # case and _ . are fine in values
    assert label_value("user@example.com").startswith("user-example.com-")
    assert len(label_value("x" * 100)) == 63
    assert len(label_value("___")) == HASH_LEN  # nothing usable: the bare hash


# --------------------------------------------------------------------------------------------------
# child_name and Indexed Jobs


def test_child_name_joins_when_valid() -> None:
    assert child_name("demo", "worker") == "demo-worker"
    assert child_name("demo", "worker", "0") == "demo-worker-0"
    assert child_name("demo") == "demo"


def test_child_name_sanitizes_and_hashes() -> None:
    out = child_name("demo", "Param_Server")
    assert out.startswith("demo-param-server-")
    assert out != child_name("demo", "param-server")


def test_child_name_shortens_the_parent_first() -> None:
    parent = "p" * 80
    out = child_name(parent, "worker")
    assert len(out) == 63
    assert out.endswith("-worker-" + out[-HASH_LEN:])
    assert out.startswith("p")
    assert child_name(parent, "worker") != child_name(parent, "master")
    assert child_name(parent, "worker") != child_name(parent + "q", "worker")


def test_child_name_long_parts_keep_a_piece_of_the_parent() -> None:
    out = child_name("demo", "w" * 100)
    assert len(out) == 63
    assert out.startswith("demo-w")


def test_child_name_hash_sees_the_split() -> None:
    # Joined, both are "A-b-c" (invalid: uppercase); the hash covers the parts, not the joined text.
    assert child_name("A", "b-c") != child_name("A-b", "c")


@given(any_text, st.lists(any_text, max_size=3), st.integers(min_value=HASH_LEN + 2, max_value=63))
@example("p" * 100, ["w" * 100], 63)
@example("", [""], 10)
@example("-", ["-", "-"], 11)
def test_child_name_property(parent: str, parts: list[str], max_len: int) -> None:
    out = child_name(parent, *parts, max_len=max_len)
    assert is_dns_label(out, max_len)
    assert child_name(parent, *parts, max_len=max_len) == out
    joined = "-".join([parent, *parts])
    if is_dns_label(joined, max_len):
        assert out == joined


def test_index_suffix_len() -> None:
    assert index_suffix_len(1) == 2  # "-0"
    assert index_suffix_len(10) == 2  # "-9"
    assert index_suffix_len(11) == 3  # "-10"
    with pytest.raises(ValueError):
        index_suffix_len(0)


def test_max_job_name_for_hostnames_fits_five_digit_indexes() -> None:
    assert MAX_JOB_NAME_FOR_HOSTNAMES == 57
    assert is_dns_label("j" * MAX_JOB_NAME_FOR_HOSTNAMES + "-99999")


@given(any_text, tricky_text, st.integers(min_value=1, max_value=10**7))
@example("demo", "worker", 8)
@example("x" * 63, "worker", 1000)
def test_indexed_job_hostnames_fit(parent: str, role: str, replicas: int) -> None:
    name = job_name_for_indexed(parent, role, replicas)
    assert is_dns_label(name)
    assert is_dns_label(f"{name}-{replicas - 1}")


def test_job_name_for_indexed_examples() -> None:
    assert job_name_for_indexed("demo", "worker", 8) == "demo-worker"
    name = job_name_for_indexed("d" * 60, "worker", 1000)
    assert len(name) == 63 - len("-999")
    assert name.endswith("-worker-" + name[-HASH_LEN:])
