"""Reading metrics back: whole lines only, followed as they are written, and summarised the same way for the
CLI, the progress line and the web view."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

from kubetrain.metrics.reader import MetricFile, follow_files, read_files
from kubetrain.metrics.sample import MetricSample, parse_file_line, parse_log_line
from kubetrain.metrics.summary import BARS, NAME_WIDTH, NOT_FINITE, display_name, format_value, series, sparkline
from kubetrain.metrics.wire import MARKER, format_record


def record(step: int, t: float, rank: int | None = None, **values: float) -> str:
    return format_record(values, step, t, "worker", rank, rank) + "\n"


def test_a_line_being_written_is_read_only_once_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    line = record(1, 10.0, loss=0.5)
    path.write_text(line[:20])
    reader = MetricFile(path)
    assert reader.read_new() == []
    with open(path, "a") as f:
        f.write(line[20:] + record(2, 11.0, loss=0.25)[:5])
    assert [(s.step, s.value) for s in reader.read_new()] == [(1, 0.5)]
    with open(path, "a") as f:
        f.write(record(2, 11.0, loss=0.25)[5:])
    assert [(s.step, s.value) for s in reader.read_new()] == [(2, 0.25)]
    assert reader.read_new() == []


def test_missing_files_and_foreign_lines_are_no_samples(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('not json\n[1, 2]\n{"values": {"x": 1}}\n' + record(1, 5.0, loss=1.0))
    assert [s.name for s in read_files([tmp_path / "a.jsonl", tmp_path / "never-started.jsonl"])] == ["loss"]
    assert parse_file_line(b"") == []
    assert parse_log_line("@kubetrain:metricsX") is None
    assert parse_log_line(MARKER + "garbage") == []


def test_log_lines_without_a_replica_take_the_readers_key() -> None:
    line = MARKER + format_record({"loss": 1.0}, 3, 1.0, None, None, None)
    [s] = parse_log_line(line, "worker-12") or []
    assert (s.role, s.index, s.replica) == ("worker", 12, "worker-12")


def test_files_are_merged_in_time_order(tmp_path: Path) -> None:
    (tmp_path / "w0.jsonl").write_text(record(1, 1.0, 0, loss=1.0) + record(2, 3.0, 0, loss=0.8))
    (tmp_path / "w1.jsonl").write_text(record(1, 2.0, 1, loss=1.1) + record(2, 4.0, 1, loss=0.9))
    got = read_files({"w0": tmp_path / "w0.jsonl", "w1": tmp_path / "w1.jsonl"})
    assert [s.time for s in got] == [1.0, 2.0, 3.0, 4.0]


def test_following_yields_new_lines_and_ends_with_the_job(tmp_path: Path) -> None:
    path = tmp_path / "w0.jsonl"
    path.write_text(record(0, 1.0, loss=1.0))
    ended = threading.Event()
    got: list[MetricSample] = []
    seen_first = threading.Event()

    def follow() -> None:
        for s in follow_files([path, tmp_path / "later.jsonl"], ended.is_set, poll_interval=0.01):
            got.append(s)
            seen_first.set()

    reader = threading.Thread(target=follow)
    reader.start()
    assert seen_first.wait(10)
    with open(path, "a") as f:
        f.write(record(1, 2.0, loss=0.5))
    (tmp_path / "later.jsonl").write_text(record(1, 2.5, loss=0.6))  # a replica that started late
    ended.set()  # written before the end: still read
    reader.join(10)
    assert not reader.is_alive()
    assert [s.value for s in got] == [1.0, 0.5, 0.6]


def sample(name: str, value: float, step: int, rank: int | None) -> MetricSample:
    return MetricSample(name, value, step, float(step), "worker", rank, rank)


def test_series_by_metric_follow_the_first_rank_and_per_rank_on_request() -> None:
    samples = [sample("loss", 2.0 - r - s * 0.1, s, r) for s in range(5) for r in (1, 0)]
    samples += [sample("samples_per_s", 100.0 + s, s, 1) for s in range(3)]  # only rank 1 reports it
    by_metric = series(samples)
    assert [(one.name, one.source, one.latest.value) for one in by_metric] == [
        ("loss", "rank 0", 1.6),
        ("samples_per_s", "rank 1", 102.0),
    ]
    assert by_metric[0].values == [2.0, 1.9, 1.8, 1.7, 1.6]
    per_rank = series(samples, per_source=True)
    assert [(one.name, one.source) for one in per_rank] == [
        ("loss", "rank 0"),
        ("loss", "rank 1"),
        ("samples_per_s", "rank 1"),
    ]


def test_sparklines_show_the_shape_and_a_diverging_value() -> None:
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == BARS
    assert sparkline([3.0, 3.0]) == BARS[4] * 2
    assert sparkline([1.0, math.nan, 2.0]) == BARS[0] + NOT_FINITE + BARS[-1]
    long = sparkline([float(i) for i in range(1000)], width=10)
    assert len(long) == 10 and long[0] == BARS[0] and long[-1] == BARS[-1]
    assert list(long) == sorted(long)
    assert sparkline([]) == ""
    assert [format_value(v) for v in (0.123456, 812.04, 1.5e7, math.inf)] == ["0.1235", "812", "1.500e+07", "inf"]


def test_a_metrics_file_written_by_os_level_appends_is_readable_while_written(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    reader = MetricFile(path)
    for i in range(50):
        os.write(fd, record(i, float(i), loss=float(i)).encode())
        assert [s.step for s in reader.read_new()] == [i]
    os.close(fd)


def test_json_data_of_a_sample_is_strict_json_with_non_finite_values_named() -> None:
    values = [0.5, math.nan, math.inf, -math.inf]
    data = [MetricSample("loss", v, i, float(i)).to_dict() for i, v in enumerate(values)]
    text = json.dumps(data, allow_nan=False)  # raises on NaN/Infinity: strict JSON, as any parser reads it
    back = json.loads(text)
    assert [(d["value"], d["special"]) for d in back] == [(0.5, None), (None, "nan"), (None, "inf"), (None, "-inf")]


def test_names_are_shown_on_one_line_and_cut_to_fit() -> None:
    assert display_name("train/loss") == "train/loss"
    assert display_name("a b\n<i>\x1b[31mred\r") == "a b\\x0a<i>\\x1b[31mred\\x0d"
    long = display_name("x" * 200)
    assert len(long) == NAME_WIDTH and long == "x" * (NAME_WIDTH - 1) + "…"
    assert display_name("ü" * NAME_WIDTH) == "ü" * NAME_WIDTH  # fits: left whole
