"""Metric plots as SVG, drawn on the server: one line per rank, by step or by time.

No charting library: a polyline per series, two axes with their extremes, a legend; the y axis linear or
log10 (samples <= 0 are then left out, and counted in the plot). The browser shows it in an `<img>` (an SVG
image runs no script, whatever it contains), and every text in it is escaped.
A series longer than `MAX_POINTS` is thinned to evenly spaced samples (its last one kept), so a plot stays
a few kilobytes however long the training runs.

A NaN or infinite sample is never dropped silently: a diverged run must not look healthy. It is marked with
a × at the plot's top edge (NaN, +inf) or bottom edge (-inf) at its x, the plot counts them in a note, and
the legend's latest value says `nan`/`inf` when the latest sample is one (as `kubetrain metrics` does).

The legend lists the series in natural order (`worker-2` before `worker-10`), is as wide as its longest
entry (estimated from `CHAR_WIDTH`, so a value is never cut at the image's edge) and makes the image taller
to fit up to `LEGEND_ROWS` entries, then says how many more there are. Past the eight colours, strokes are
dashed, then dotted: sixteen replicas are sixteen lines told apart.
"""

from __future__ import annotations

import math
import re
import time as _time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

WIDTH, HEIGHT = 520, 240
"""The image's width, and its height unless the legend or the notes need more."""
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 110, 28, 34
"""MARGIN_RIGHT is the legend's least width; it grows to fit the legend's longest entry."""
MAX_POINTS = 600
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d")
DASHES = ("", "6 3", "1.5 2.5", "8 3 2 3")
"""The stroke of each round of `COLORS`: solid, dashed, dotted, dash-dot (then solid again)."""
CHAR_WIDTH = 6.8
"""A generous width of one character of the 11 px legend text (system-ui digits are ~6.2 px)."""
LEGEND_ROW, LEGEND_ROWS = 16, 24
"""Pixels per legend entry; the most rows the legend shows (the last then says "+K more")."""
LEGEND_MAX_WIDTH = 220
"""The legend's widest; past it a series' name is shortened with … (its value never is)."""
NOTE_ROW = 13


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


_DIGITS = re.compile(r"(\d+)")


def natural_key(label: str) -> tuple[Any, ...]:
    """`worker-2` before `worker-10`: runs of digits compare as numbers. `re.split` with a group alternates
    text and digits, so the same position holds the same type in every key and the tuples compare."""
    parts = _DIGITS.split(label)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def series(samples: Iterable[Any], name: str, x: str) -> dict[str, list[Point]]:
    """The samples of metric `name` as one series per rank, x being `step` or `time` (seconds since the first),
    each sorted by x. A y may be NaN or infinite (the plot marks those); a sample without a finite x has no
    place on the axis and is left out."""
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
        if math.isfinite(xf):
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
    if not math.isfinite(value):
        return str(value)  # nan, inf, -inf: as `kubetrain metrics` prints them
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


def _text_width(text: str) -> float:
    return len(text) * CHAR_WIDTH


def _legend_text(line: str, value: str, room: float) -> str:
    """`line value`, the series' name shortened with … if the pair does not fit in `room` pixels."""
    whole = f"{line} {value}"
    if _text_width(whole) <= room:
        return whole
    keep = max(1, int(room / CHAR_WIDTH) - len(value) - 2)
    return f"{line[:keep]}… {value}"


def _not_finite_kinds(values: Iterable[float]) -> str:
    found = {str(v) for v in values}
    return "/".join(k for k in ("nan", "inf", "-inf") if k in found)


def plot(samples: Iterable[Any], name: str, x: str = "step", scale: str = "linear") -> str:
    """An SVG document plotting metric `name` per rank against `x` (`step` or `time`), its y axis `linear`
    or `log` (base 10). A log axis cannot show a value <= 0: such samples are left out, and the plot says how
    many; when none is left it says that instead of drawing. NaN and infinite samples are marked on the
    plot's edge and counted."""
    if scale not in SCALES:
        raise ValueError(f"scale {scale!r}: one of {', '.join(SCALES)}")
    log = scale == "log"
    every = series(samples, name, x)
    origin = 0.0
    if x == "time" and every:
        origin = min(p.x for pts in every.values() for p in pts)
        every = {k: [Point(p.x - origin, p.y) for p in pts] for k, pts in every.items()}
    odd = {k: [p for p in pts if not math.isfinite(p.y)] for k, pts in every.items()}
    data = {k: [p for p in pts if math.isfinite(p.y)] for k, pts in every.items()}
    hidden = 0
    if log:
        kept = {k: [p for p in pts if p.y > 0] for k, pts in data.items()}
        hidden = sum(len(pts) for pts in data.values()) - sum(len(pts) for pts in kept.values())
        data = kept
    # A series is drawn (and in the legend) when it has a point to draw or a mark to make.
    shown = sorted((k for k in every if data[k] or odd[k]), key=natural_key)
    n_odd = sum(len(pts) for pts in odd.values())
    notes: list[tuple[str, str]] = []
    if hidden:
        notes.append(("hidden-samples", f"{_samples(hidden)} <= 0 not shown"))
    if n_odd:
        kinds = _not_finite_kinds(p.y for pts in odd.values() for p in pts)
        notes.append(("not-finite-samples", f"{_samples(n_odd)} {kinds}"))

    title = f"{name} by {x}" + (", log scale" if log else "")
    if not shown:
        empty = f"{_samples(hidden, 'all ')} <= 0: none can be shown on a log scale" if hidden else "no samples yet"
        return "".join(
            [
                _head(title, HEIGHT),
                f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" fill="#666">'
                f"{escape(empty)}</text>",
                "</svg>",
            ]
        )

    # The legend: its entries (each series' latest sample, whatever the scale leaves out), its width and rows.
    entries = [(k, _fmt(every[k][-1].y)) for k in shown]
    rows = len(entries) if len(entries) <= LEGEND_ROWS else LEGEND_ROWS
    listed = entries if rows == len(entries) else entries[: rows - 1]
    more = len(entries) - len(listed)
    swatch = 20  # a 16 px stroke sample and a gap, then the text
    widest = max([_text_width(f"{k} {v}") for k, v in listed] + [_text_width(f"+{more} more")])
    legend_width = min(LEGEND_MAX_WIDTH, max(MARGIN_RIGHT - 10, swatch + widest + 4))
    margin_right = legend_width + 10

    # The image grows to fit the legend's rows (the plot area with it) and a line per note past the first.
    legend_bottom = MARGIN_TOP + 12 + (rows - 1) * LEGEND_ROW + 6
    extra = max(0, len(notes) - 1) * NOTE_ROW
    height = max(HEIGHT, legend_bottom) + extra
    pw = WIDTH - MARGIN_LEFT - margin_right
    ph = height - extra - MARGIN_TOP - MARGIN_BOTTOM

    # Positions are computed on the axis' own scale (log10 of the value on a log axis); labels are the values.
    def ty(v: float) -> float:
        return math.log10(v) if log else v

    def label(t: float) -> str:
        return _fmt(10**t if log else t)

    xs = [p.x for k in shown for p in data[k] + odd[k]]
    ys = [ty(p.y) for k in shown for p in data[k]]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def sx(v: float) -> float:
        return MARGIN_LEFT + (v - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return MARGIN_TOP + (1 - (ty(v) - y0) / (y1 - y0)) * ph

    bottom, right = MARGIN_TOP + ph, MARGIN_LEFT + pw
    parts = [
        _head(title, height),
        f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>',
        f'<text x="{MARGIN_LEFT}" y="{bottom + 15}" fill="#444">{escape(_fmt_x(x0, x, origin))}</text>',
        f'<text x="{right}" y="{bottom + 15}" text-anchor="end" fill="#444">{escape(_fmt_x(x1, x, origin))}</text>',
        f'<text x="{MARGIN_LEFT + pw / 2}" y="{bottom + 28}" text-anchor="middle" fill="#666">{escape(x)}</text>',
    ]
    if ys:  # with only NaN/inf samples there is no value to put on the y axis
        for y, t in ((MARGIN_TOP + 4, y1), (bottom, y0)):
            parts.append(f'<text x="{MARGIN_LEFT - 6}" y="{y}" text-anchor="end" fill="#444">{escape(label(t))}</text>')
    for i, (cls, note) in enumerate(notes):
        # Bottom left, under the y axis' labels: clear of the x axis' label and of the legend.
        parts.append(
            f'<text class="{cls}" x="4" y="{bottom + 28 + i * NOTE_ROW}" font-size="10" fill="#b45309">'
            f"{escape(note)}</text>"
        )
    for i, line in enumerate(shown):
        color = COLORS[i % len(COLORS)]
        dash = DASHES[(i // len(COLORS)) % len(DASHES)]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        points = data[line]
        if points:
            coords = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in thin(points))
            parts.append(
                f'<polyline class="series" data-series="{escape(line)}" data-points="{len(points)}" fill="none" '
                f'stroke="{color}" stroke-width="1.6"{dashed} points="{coords}"/>'
            )
            if len(points) == 1:
                p = points[0]
                parts.append(f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="2.5" fill="{color}"/>')
        if odd[line]:
            parts.append(_marks(odd[line], line, color, sx, MARGIN_TOP + 4, bottom - 4))
    lx = right + 10
    for i, (line, value) in enumerate(listed):
        color = COLORS[i % len(COLORS)]
        dash = DASHES[(i // len(COLORS)) % len(DASHES)]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        ly = MARGIN_TOP + 12 + i * LEGEND_ROW
        parts.append(
            f'<line x1="{lx}" y1="{ly - 6.5}" x2="{lx + 16}" y2="{ly - 6.5}" stroke="{color}" stroke-width="2.5"'
            f"{dashed}/>"
        )
        text = _legend_text(line, value, legend_width - swatch)
        parts.append(f'<text class="legend" x="{lx + swatch}" y="{ly - 3}" fill="#222">{escape(text)}</text>')
    if more:
        ly = MARGIN_TOP + 12 + len(listed) * LEGEND_ROW
        parts.append(f'<text class="legend-more" x="{lx + swatch}" y="{ly - 3}" fill="#666">+{more} more</text>')
    parts.append("</svg>")
    return "".join(parts)


def _head(title: str, height: float) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="system-ui, sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>'
        f'<text x="{MARGIN_LEFT}" y="17" font-size="13" font-weight="600" fill="#111">{escape(title)}</text>'
    )


def _marks(points: Sequence[Point], line: str, color: str, sx: Any, top: float, bottom: float) -> str:
    """A × per NaN or +inf sample at the top edge, per -inf at the bottom, at its x: one path per series,
    one × per 3 pixels and edge (a thousand NaNs in a row are a row of marks, not a thousand)."""
    seen: set[tuple[int, bool]] = set()
    strokes = []
    for p in points:
        px = sx(p.x)
        low = p.y < 0  # -inf; NaN compares False and goes to the top with +inf
        key = (round(px / 3), low)
        if key in seen:
            continue
        seen.add(key)
        y = bottom if low else top
        strokes.append(f"M{px - 3:.1f} {y - 3:.1f}l6 6m0-6l-6 6")
    return (
        f'<path class="not-finite" data-series="{escape(line)}" data-samples="{len(points)}" fill="none" '
        f'stroke="{color}" stroke-width="1.4" d="{"".join(strokes)}"/>'
    )


__all__ = ["MAX_POINTS", "SCALES", "Point", "natural_key", "plot", "series", "series_label", "thin"]
