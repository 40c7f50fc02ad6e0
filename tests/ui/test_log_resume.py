"""The log stream's pieces that let the page keep its place and mark the grep's hits (`kubetrain.ui.app`):
a resumed stream sends each replica's lines after the page's last one, whatever the merge of replicas; hits
are counted as the page's script counts (UTF-16), found with the page's own grep."""

from __future__ import annotations

import pytest

from kubetrain.contract.logs import LogRecord
from kubetrain.ui.log_query import TimedGrep, after_cursor, hits, line_event, log_resume

MS = 1_000_000


def rec(key: str, ms: int, text: str) -> LogRecord:
    return LogRecord(time_ns=ms * MS + 123, stream="stdout", text=text, key=key)


def test_a_resumed_stream_sends_each_replicas_lines_after_the_last_one_received() -> None:
    records = [rec("w-0", 10, "a"), rec("w-1", 10, "b"), rec("w-0", 11, "c"), rec("w-0", 11, "d"),
               rec("w-1", 12, "e"), rec("w-0", 11, "f"), rec("w-2", 5, "g")]  # fmt: skip
    # The page has w-0 up to its first line at 11 ms, w-1 up to 10 ms, nothing of w-2.
    cursor = log_resume({"after": '{"w-0": [11, 1], "w-1": [10, 1]}'})
    assert cursor == {"w-0": (11, 1), "w-1": (10, 1)}
    assert [r.text for r in after_cursor(records, cursor)] == ["d", "e", "f", "g"]
    assert log_resume({}) is None
    for bad in ("[1, 2]", '{"w-0": 3}', '{"w-0": ["x", 1]}', "{"):
        with pytest.raises(ValueError, match="after: where the page's log stopped"):
            log_resume({"after": bad})


def test_hits_are_counted_as_the_page_counts_and_sent_only_with_a_grep() -> None:
    grep = TimedGrep(r"lo+ss")
    assert hits(grep, "loss and looss") == [[0, 4], [9, 14]]
    # 😀 is one code point to Python, two UTF-16 units to the page.
    assert hits(grep, "😀 loss") == [[3, 7]]
    assert hits(TimedGrep(r"x*"), "abc") == []  # empty matches mark nothing
    # Counted in the text as sent: sanitized (an escape sequence is taken out) before its hits are found.
    assert line_event(rec("w-0", 1, "a\x1b[31mloss"), grep) == ["w-0", "stdout", "aloss", 1, [[1, 5]]]
    assert line_event(rec("w-0", 1, "loss"), None) == ["w-0", "stdout", "loss", 1]
