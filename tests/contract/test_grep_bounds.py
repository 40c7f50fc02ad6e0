"""The grep's bounds, counted on the expression as written: nesting outside character classes and escapes,
and the pieces its repeats expand to (a repeat's minimum copies its body; nested repeats multiply)."""

from __future__ import annotations

import re

import pytest

from kubetrain.contract.grep_bounds import EMPTY_GROUP, GrepRefused, check_size, expanded_size, nesting


@pytest.mark.parametrize(
    ("text", "deep"),
    [("a", 0), ("((a))", 2), ("(a)(b)", 1), (r"\(\(", 0), ("[(]", 0), ("[]()]", 0), ("[^](]", 0), (r"[\](]", 0)],
)
def test_nesting_counts_groups_not_parentheses_in_classes_or_escapes(text: str, deep: int) -> None:
    re.compile(text)  # each is an expression
    assert nesting(text) == deep


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("abc", 3),
        ("a{5}", 6),
        ("a{0,4294967294}", 2),  # a maximum is not copied
        ("(?:ab){3}", 1 + 3 * 2),  # the repeat, then its two letters three times (`re` drops the group)
        ("(ab){3}", 1 + 3 * 3),  # a capture group is a piece of its own
        ("(?:a{10}){10}", 1 + 10 * (1 + 10)),
        ("[abc]", 4),
        ("()", EMPTY_GROUP),
        ("(?i:)", 1),  # an empty group that captures nothing is cheap
    ],
)
def test_expanded_size(text: str, pieces: int) -> None:
    assert expanded_size(text) == pieces


def test_the_budget_refuses_what_would_expand_and_keeps_what_would_not() -> None:
    for text in ("a{4294967294}", "(?:a{1000}){1000}", "()" * 1001, "(" * 51 + ")" * 51):
        with pytest.raises(GrepRefused):
            check_size(text)
    for text in ("a{99999}", "loss=(\\d+\\.\\d+)", "(" * 50 + ")" * 50, "a{1,4294967294}"):
        check_size(text)
    with pytest.raises(re.error):
        check_size("(")
