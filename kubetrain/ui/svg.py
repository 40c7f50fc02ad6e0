"""Metric plots as SVG, drawn on the server: one line per rank, by step or by time.

No charting library: a polyline per series, two axes with their extremes, a legend; the y axis linear or
log10 (samples <= 0 are then left out, and counted in the plot). The browser shows it in an `<img>` (an SVG
image runs no script, whatever it contains), and every text in it is escaped.
A series longer than `MAX_POINTS` is thinned to evenly spaced samples (its last one kept), so a plot stays
a few kilobytes however long the training runs.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

WIDTH, HEIGHT = 520, 240
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 110, 28, 34
MAX_POINTS = 600
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d")


@dataclass(frozen=True)
class Point:
    x: float
    y: float


def series_label(sample: Any) -> str:
    """`rank 0` when the sample says its rank, else its replica (`worker-1`)."""
    rank = getattr(sample, "rank", None)
    if rank is not None:
        return f"rank {rank}"
    role, index = getattr(sample, "role", None), getattr(sample, "index", None)
    return f"{role}-{index}" if role is not None else "job"


def series(samples: Iterable[Any], name: str, x: str) -> dict[str, list[Point]]:
    """The samples of metric `name` as one series per rank, x being `step` or `time` (seconds since the first)."""
    out: dict[str, list[Point]] = {}
    for s in samples:
        if getattr(s, "name", None) != name:
            continue
        xv = getattr(s, "step" if x == "step" else "time", None)
        yv = getattr(s, "value", None)
        if xv is None or yv is None:
            continue
        try:
            xf, yf = float(xv), float(yv)
        except (TypeError, ValueError):
            continue
        if math.isfinite(xf) and math.isfinite(yf):
            out.setdefault(series_label(s), []).append(Point(xf, yf))
    for points in out.values():
        points.sort(key=lambda p: p.x)
    return out


def thin(points: Sequence[Point], limit: int = MAX_POINTS) -> list[Point]:
    if len(points) <= limit:
        return list(points)
    step = len(points) / (limit - 1)
    kept = [points[int(i * step)] for i in range(limit - 1)]
    kept.append(points[-1])
    return kept


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.3g}"
    return f"{value:.4g}"


def _fmt_x(value: float, x: str, origin: float) -> str:
    if x == "step":
        return str(int(value)) if value == int(value) else _fmt(value)
    return _time.strftime("%H:%M:%S", _time.localtime(origin + value))


SCALES = ("linear", "log")


def _samples(n: int, every: str = "") -> str:
    return "1 sample" if n == 1 else f"{every}{n} samples"


def plot(samples: Iterable[Any], name: str, x: str = "step", scale: str = "linear") -> str:
    """An SVG document plotting metric `name` per rank against `x` (`step` or `time`), its y axis `linear`
    or `log` (base 10). A log axis cannot show a value <= 0: such samples are left out, and the plot says how
    many; when none is left it says that instead of drawing."""
    if scale not in SCALES:
        raise ValueError(f"scale {scale!r}: one of {', '.join(SCALES)}")
    log = scale == "log"
    data = series(samples, name, x)
    origin = 0.0
    if x == "time" and data:
        origin = min(p.x for pts in data.values() for p in pts)
        data = {k: [Point(p.x - origin, p.y) for p in pts] for k, pts in data.items()}
    hidden = 0
    if log:
        kept = {k: [p for p in pts if p.y > 0] for k, pts in data.items()}
        hidden = sum(len(pts) for pts in data.values()) - sum(len(pts) for pts in kept.values())
        data = {k: pts for k, pts in kept.items() if pts}
    title = f"{name} by {x}" + (", log scale" if log else "")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        f'<text x="{MARGIN_LEFT}" y="17" font-size="13" font-weight="600" fill="#111">{escape(title)}</text>',
    ]
    if not data:
        empty = f"{_samples(hidden, 'all ')} <= 0: none can be shown on a log scale" if hidden else "no samples yet"
        parts.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" fill="#666">'
            f"{escape(empty)}</text>"
        )
        parts.append("</svg>")
        return "".join(parts)

    # Positions are computed on the axis' own scale (log10 of the value on a log axis); labels are the values.
    def ty(v: float) -> float:
        return math.log10(v) if log else v

    def label(t: float) -> str:
        return _fmt(10**t if log else t)

    xs = [p.x for pts in data.values() for p in pts]
    ys = [ty(p.y) for pts in data.values() for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pw = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    ph = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def sx(v: float) -> float:
        return MARGIN_LEFT + (v - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return MARGIN_TOP + (1 - (ty(v) - y0) / (y1 - y0)) * ph

    bottom, right = MARGIN_TOP + ph, MARGIN_LEFT + pw
    parts += [
        f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>',
        f'<text x="{MARGIN_LEFT - 6}" y="{MARGIN_TOP + 4}" text-anchor="end" fill="#444">{escape(label(y1))}</text>',
        f'<text x="{MARGIN_LEFT - 6}" y="{bottom}" text-anchor="end" fill="#444">{escape(label(y0))}</text>',
        f'<text x="{MARGIN_LEFT}" y="{bottom + 15}" fill="#444">{escape(_fmt_x(x0, x, origin))}</text>',
        f'<text x="{right}" y="{bottom + 15}" text-anchor="end" fill="#444">{escape(_fmt_x(x1, x, origin))}</text>',
        f'<text x="{MARGIN_LEFT + pw / 2}" y="{bottom + 28}" text-anchor="middle" fill="#666">{escape(x)}</text>',
    ]
    if hidden:
        # Bottom left, under the y axis' labels: clear of the x axis' label and of the legend.
        parts.append(
            f'<text class="hidden-samples" x="4" y="{bottom + 28}" font-size="10" fill="#b45309">'
            f"{escape(_samples(hidden))} &lt;= 0 not shown</text>"
        )
    for i, (line, points) in enumerate(sorted(data.items())):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in thin(points))
        parts.append(
            f'<polyline class="series" data-points="{len(points)}" fill="none" stroke="{color}" '
            f'stroke-width="1.6" points="{coords}"/>'
        )
        if len(points) == 1:
            p = points[0]
            parts.append(f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="2.5" fill="{color}"/>')
        ly = MARGIN_TOP + 12 + i * 16
        last = points[-1].y
        parts.append(f'<rect x="{right + 10}" y="{ly - 8}" width="10" height="3" fill="{color}"/>')
        parts.append(f'<text x="{right + 24}" y="{ly - 3}" fill="#222">{escape(line)} {escape(_fmt(last))}</text>')
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["MAX_POINTS", "SCALES", "Point", "plot", "series", "series_label", "thin"]
