"""Per-step charts as inline SVG: stacked bars (one `<path>` per series, so a 1,000-step
session stays a handful of elements), an optional line on its own right-hand axis, and
vertical markers (compactions). Colours come from CSS classes in the page's stylesheet.

Nothing here comes from the session except numbers and the step labels, and every text is
escaped anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 960
HEIGHT = 150
TOP = 10
BOTTOM = 20
LEFT = 64
RIGHT_WITH_AXIS = 64
MAX_BAR = 36


@dataclass(frozen=True)
class Series:
    """One row of values, a value per step."""

    label: str
    values: Sequence[float]
    css_class: str
    """The stylesheet class that colours it (`fill` for bars, `stroke` for a line)."""


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= `value` (1 for 0)."""
    if value <= 0:
        return 1.0
    power: float = 10.0 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if value <= factor * power * (1 + 1e-9):
            return float(factor * power)
    return 10.0 * power


def step_chart(
    chart_id: str,
    title: str,
    step_numbers: Sequence[int],
    stacks: Sequence[Series],
    fmt: Callable[[float], str],
    *,
    line: Series | None = None,
    line_fmt: Callable[[float], str] | None = None,
    markers: Sequence[int] = (),
) -> str:
    """A bar chart of `stacks` (stacked, in order from the axis up) over the steps, with
    `line` drawn over it on a right-hand axis and a dashed marker before each step index in
    `markers`."""
    count = len(step_numbers)
    right = RIGHT_WITH_AXIS  # every chart the same width, so a step is at one x in all
    plot_width = WIDTH - LEFT - right
    plot_height = HEIGHT - TOP - BOTTOM
    base_y = TOP + plot_height
    slot = plot_width / max(count, 1)
    bar = min(MAX_BAR, slot * 0.8) if slot >= 4 else slot
    totals = [sum(s.values[i] for s in stacks) for i in range(count)]
    top_value = nice_ceiling(max(totals, default=0.0))
    parts = [
        f'<svg class="chart" id="{escape(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" '
        f'data-count="{count}" data-left="{LEFT}" data-plot-width="{plot_width:.2f}" '
        f'data-width="{WIDTH}">'
    ]
    parts.append(_grid(top_value, fmt, base_y, plot_height, plot_width))
    parts.append(_x_labels(step_numbers, slot, base_y))
    heights = [0.0] * count
    for series in stacks:
        path = []
        for i in range(count):
            value = series.values[i]
            if value <= 0:
                continue
            h = value / top_value * plot_height
            y0 = base_y - heights[i]
            heights[i] += h
            x = LEFT + i * slot + (slot - bar) / 2
            path.append(f"M{x:.2f} {y0:.2f}V{y0 - h:.2f}h{bar:.2f}V{y0:.2f}z")
        if path:
            parts.append(f'<path class="{escape(series.css_class)}" d="{"".join(path)}"/>')
    if line is not None and count:
        line_top = nice_ceiling(max(line.values, default=0.0))
        points = " ".join(
            f"{LEFT + (i + 0.5) * slot:.2f},{base_y - v / line_top * plot_height:.2f}"
            for i, v in enumerate(line.values)
        )
        parts.append(f'<polyline class="{escape(line.css_class)}" points="{points}"/>')
        show = line_fmt or fmt
        parts.append(
            f'<text class="axis right" x="{WIDTH - right + 6}" y="{TOP + 9}">'
            f"{escape(show(line_top))}</text>"
            f'<text class="axis right" x="{WIDTH - right + 6}" y="{base_y}">'
            f"{escape(show(0))}</text>"
        )
    if markers:
        marks = "".join(f"M{LEFT + i * slot:.2f} {TOP}V{base_y}" for i in markers if 0 <= i < count)
        tips = "".join(
            f'<path class="marker-tip" d="M{LEFT + i * slot - 4:.2f} {TOP}h8l-4 6z"/>'
            for i in markers
            if 0 <= i < count
        )
        parts.append(f'<path class="marker" d="{marks}"/>{tips}')
    parts.append(
        f'<line class="cursor" x1="0" x2="0" y1="{TOP}" y2="{base_y}" visibility="hidden"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def band_chart(chart_id: str, title: str, labels: Sequence[str | None], css_prefix: str) -> str:
    """A strip with one coloured run per stretch of steps that share a label (the phased
    workflow's phase), its label written inside when there is room."""
    count = len(labels)
    plot_width = WIDTH - LEFT - RIGHT_WITH_AXIS
    slot = plot_width / max(count, 1)
    height = 26
    parts = [
        f'<svg class="chart band" id="{escape(chart_id)}" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-label="{escape(title)}" '
        f'data-count="{count}" data-left="{LEFT}" data-plot-width="{plot_width:.2f}" '
        f'data-width="{WIDTH}">',
        f'<text class="axis" x="{LEFT - 6}" y="17" text-anchor="end">{escape(title)}</text>',
    ]
    start = 0
    for i in range(1, count + 1):
        if i < count and labels[i] == labels[start]:
            continue
        label = labels[start]
        if label:
            x = LEFT + start * slot
            width = (i - start) * slot
            css = f"{css_prefix}{label}"
            parts.append(
                f'<rect class="{escape(css)}" x="{x:.2f}" y="3" width="{width:.2f}" '
                f'height="{height - 6}"><title>{escape(label)}</title></rect>'
            )
            if width >= 8 * len(label):
                parts.append(
                    f'<text class="band-label" x="{x + width / 2:.2f}" y="17" '
                    f'text-anchor="middle">{escape(label)}</text>'
                )
        start = i
    parts.append(
        f'<line class="cursor" x1="0" x2="0" y1="0" y2="{height}" visibility="hidden"/></svg>'
    )
    return "".join(parts)


def _grid(
    top_value: float,
    fmt: Callable[[float], str],
    base_y: float,
    plot_height: float,
    plot_width: float,
) -> str:
    lines = []
    labels = []
    for fraction in (0.0, 0.5, 1.0):
        y = base_y - fraction * plot_height
        lines.append(f"M{LEFT} {y:.2f}h{plot_width:.2f}")
        labels.append(
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.2f}" text-anchor="end">'
            f"{escape(fmt(top_value * fraction))}</text>"
        )
    return f'<path class="grid" d="{"".join(lines)}"/>' + "".join(labels)


def _x_labels(step_numbers: Sequence[int], slot: float, base_y: float) -> str:
    count = len(step_numbers)
    if not count:
        return ""
    ticks = sorted({0, count - 1, *range(0, count, max(1, math.ceil(count / 8)))})
    if len(ticks) > 1 and ticks[-1] - ticks[-2] < count / 16:
        ticks.pop(-2)  # keep the last step's label clear of its neighbour
    return "".join(
        f'<text class="axis" x="{LEFT + (i + 0.5) * slot:.2f}" y="{base_y + 14:.2f}" '
        f'text-anchor="middle">{step_numbers[i]}</text>'
        for i in ticks
    )
