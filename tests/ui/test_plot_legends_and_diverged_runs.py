"""Metric plots as a user reads them: a diverged run (NaN or infinite values) is marked and counted, not
silently cut short; many replicas get a legend in natural order that fits the image, and lines told apart
past the eight colours; a legend's value is never cut at the image's edge; and the samples kept for the
plots are bounded per (metric, series) however long a job logs."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

from kubetrain.metrics import MetricSample
from kubetrain.ui import svg
from kubetrain.ui.metrics_tracker import KEEP, MetricsTracker, Samples

NS = {"svg": "http://www.w3.org/2000/svg"}
CHAR = 6.6
"""A generous width of one character of the plots' 11 px text (0.6 em): our own estimate, not svg's."""


def sample(step: int, value: float, *, rank: int | None = 0, index: int = 0, name: str = "loss") -> MetricSample:
    return MetricSample(name=name, value=value, step=step, time=1000.0 + step, role="worker", index=index, rank=rank)


def parse(body: str) -> ET.Element:
    return ET.fromstring(body)


def texts(root: ET.Element, cls: str | None = None) -> list[str]:
    return ["".join(t.itertext()) for t in root.iterfind(".//svg:text", NS) if cls is None or t.get("class") == cls]


def legend(root: ET.Element) -> list[ET.Element]:
    return list(root.iterfind(".//svg:text[@class='legend']", NS))


def marks(root: ET.Element) -> list[ET.Element]:
    return list(root.iterfind(".//svg:path[@class='not-finite']", NS))


def mark_ys(path: ET.Element) -> set[float]:
    """The y of each × of a marks path (each drawn from its top-left corner, 3 px above its centre)."""
    return {float(y) + 3 for y in re.findall(r"M[-\d.]+ ([-\d.]+)", path.get("d", ""))}


def fits(root: ET.Element, node: ET.Element) -> bool:
    """The text ends inside the image, by a character-width estimate (it starts at x, anchored at its start)."""
    width = float(root.get("width", "0"))
    return float(node.get("x", "0")) + len("".join(node.itertext())) * CHAR <= width


# -- 1. NaN and infinity -----------------------------------------------------------------------------------


def test_a_diverged_run_is_marked_and_counted_and_its_legend_says_nan() -> None:
    """Steps from 30 on logged NaN: the plot goes on to step 49 with a × per step at the top edge, says
    "20 samples nan", and the legend's latest value is nan, as `kubetrain metrics` prints it."""
    samples = [sample(s, 1.0 / (s + 1) if s < 30 else math.nan) for s in range(50)]
    root = parse(svg.plot(samples, "loss"))
    (path,) = marks(root)
    assert path.get("data-samples") == "20"
    assert mark_ys(path) == {svg.MARGIN_TOP + 4}  # every × on the top edge
    assert texts(root, "not-finite-samples") == ["20 samples nan"]
    assert [t.strip() for t in texts(root, "legend")] == ["rank 0 nan"]
    assert "49" in texts(root)  # the x axis reaches the last (NaN) step: the plot does not stop at 29
    line = root.find(".//svg:polyline[@class='series']", NS)
    assert line is not None and line.get("data-points") == "30"


def test_infinities_mark_their_edge_and_every_kind_is_named() -> None:
    samples = [sample(0, 1.0), sample(1, math.inf), sample(2, 2.0), sample(3, -math.inf), sample(4, math.nan)]
    root = parse(svg.plot(samples, "loss"))
    (path,) = marks(root)
    bottom = float(root.get("height", "0")) - svg.MARGIN_BOTTOM
    assert mark_ys(path) == {svg.MARGIN_TOP + 4, bottom - 4}  # +inf and NaN at the top, -inf at the bottom
    assert texts(root, "not-finite-samples") == ["3 samples nan/inf/-inf"]
    assert texts(root, "legend") == ["rank 0 nan"]
    last_inf = parse(svg.plot([sample(0, 1.0), sample(1, -math.inf)], "loss"))
    assert texts(last_inf, "legend") == ["rank 0 -inf"]


def test_only_nan_still_plots_its_marks_on_either_scale() -> None:
    """A run that was NaN from its first step is not "no samples yet": its marks and note are drawn."""
    for scale in svg.SCALES:
        root = parse(svg.plot([sample(s, math.nan) for s in range(3)], "loss", scale=scale))
        assert "no samples yet" not in texts(root), scale
        assert [p.get("data-samples") for p in marks(root)] == ["3"], scale
        assert texts(root, "not-finite-samples") == ["3 samples nan"], scale


def test_on_a_log_scale_nan_is_not_counted_as_at_or_below_zero() -> None:
    samples = [sample(0, 1.0), sample(1, 0.0), sample(2, math.nan), sample(3, 10.0)]
    root = parse(svg.plot(samples, "loss", scale="log"))
    assert texts(root, "hidden-samples") == ["1 sample <= 0 not shown"]
    assert texts(root, "not-finite-samples") == ["1 sample nan"]
    for node in root.iterfind(".//svg:text", NS):  # the two notes on lines of their own, inside the image
        assert float(node.get("y", "0")) <= float(root.get("height", "0"))
    assert len({n.get("y") for n in root.iterfind(".//svg:text[@font-size='10']", NS)}) == 2


# -- 2. many replicas ------------------------------------------------------------------------------------


def replicas(n: int) -> list[MetricSample]:
    return [sample(s, 1.0 / (s + 1) + i, rank=None, index=i) for i in range(n) for s in range(5)]


def test_sixteen_replicas_in_natural_order_fitting_and_told_apart() -> None:
    root = parse(svg.plot(replicas(16), "loss"))
    names = [t.split(" ")[0] for t in texts(root, "legend")]
    assert names == [f"worker-{i}" for i in range(16)]  # worker-2 before worker-10
    lines = list(root.iterfind(".//svg:polyline[@class='series']", NS))
    assert [p.get("data-series") for p in lines] == names
    styles = {(p.get("stroke"), p.get("stroke-dasharray")) for p in lines}
    assert len(styles) == 16  # worker-0 and worker-8 share a colour, not a look
    height = float(root.get("height", "0"))
    for node in legend(root):
        assert float(node.get("y", "0")) + 3 <= height, "a legend entry below the image"
        assert fits(root, node), "".join(node.itertext())
    swatches = list(root.iterfind(".//svg:line", NS))
    assert [(s.get("stroke"), s.get("stroke-dasharray")) for s in swatches] == [
        (p.get("stroke"), p.get("stroke-dasharray")) for p in lines
    ]


def test_a_legend_of_many_replicas_says_how_many_more() -> None:
    root = parse(svg.plot(replicas(40), "loss"))
    shown = texts(root, "legend")
    (more,) = root.iterfind(".//svg:text[@class='legend-more']", NS)
    assert "".join(more.itertext()) == f"+{40 - len(shown)} more"
    assert shown[-1].startswith(f"worker-{len(shown) - 1} ")
    assert float(more.get("y", "0")) + 3 <= float(root.get("height", "0"))
    assert len(list(root.iterfind(".//svg:polyline[@class='series']", NS))) == 40  # every line still drawn


# -- 3. legend values --------------------------------------------------------------------------------------


def test_a_legend_value_is_shown_whole_inside_the_image() -> None:
    for label, value in [("rank 0", 0.004167), ("rank 12", -0.0001234), ("rank 3", 123456.0)]:
        rank = int(label.split()[1])
        root = parse(svg.plot([sample(0, 1.0, rank=rank), sample(1, value, rank=rank)], "loss"))
        (node,) = legend(root)
        shown = "".join(node.itertext())
        assert shown == f"{label} {svg._fmt(value)}" and fits(root, node), shown


def test_a_long_series_name_is_shortened_but_its_value_kept() -> None:
    role = "a-very-long-role-name-for-the-parameter-servers"
    one = MetricSample(name="loss", value=0.004167, step=0, time=1.0, role=role, index=3)
    root = parse(svg.plot([one], "loss"))
    (node,) = legend(root)
    shown = "".join(node.itertext())
    assert shown.endswith("… 0.004167") and shown.startswith("a-very") and fits(root, node), shown


# -- 4. memory -------------------------------------------------------------------------------------------


class Feed:
    """A source whose metrics are the samples given (what `MetricsTracker.load` reads)."""

    def __init__(self, samples: list[Any]) -> None:
        self.samples = samples

    def metrics(self, job_id: str, *, follow: bool = False) -> Iterator[Any]:
        return iter(self.samples)


def test_the_samples_kept_per_series_are_bounded_evenly_spaced_with_the_first_and_latest() -> None:
    n = 5 * KEEP + 7
    spike = 3 * KEEP + 5  # a lone NaN: thinning must not lose the moment a run diverged
    logged = [
        sample(s, math.nan if s == spike else 1.0 / (s + 1), rank=r, name=m)
        for s in range(n)
        for r in (0, 1)
        for m in ("loss", "lr")
    ]
    tracker = MetricsTracker()
    tracker.load(Feed(logged), "job")  # type: ignore[arg-type]
    kept = tracker.snapshot()
    assert len(tracker.samples) == len(kept) <= 4 * (KEEP + 1)
    for m in ("loss", "lr"):
        for r in (0, 1):
            steps = [s.step for s in kept if s.name == m and s.rank == r]
            assert KEEP // 2 <= len(steps) <= KEEP + 1
            assert steps[0] == 0 and steps[-1] == n - 1  # the first and the latest
            # Evenly spaced: one sample per window of `stride` steps, each window's first, or its NaN.
            stride = steps[1] - steps[0]
            assert [step // stride for step in steps[:-1]] == list(range(len(steps) - 1)), stride
            assert any(s.step == spike and math.isnan(s.value) for s in kept if s.name == m and s.rank == r)
    assert tracker.names() == ["loss", "lr"]
    root = parse(svg.plot(kept, "loss"))
    assert texts(root, "not-finite-samples") == ["2 samples nan"]  # one per rank
    assert texts(root, "legend") == [f"rank {r} {svg._fmt(1.0 / n)}" for r in (0, 1)]


def test_a_short_run_is_kept_whole() -> None:
    logged = [sample(s, float(s)) for s in range(100)]
    kept = Samples(logged)
    assert len(kept) == 100 and [s.step for s in kept] == list(range(100))
