"""Inline SVG charts for the report: speedup per attempt, and where the best kernel stalls.

Each function returns one `<svg>` element as text, sized in CSS pixels, with
a <title> on every mark (the browser shows it on hover: no script needed).

    from agent.report.charts import Point, speedup_chart, stall_chart
    svg = speedup_chart([Point(1, "compile_error"), Point(2, "ok", 1.4, 2.1)], timed=True)
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profiler.records import Diagnosis

WIDTH = 760             # px
HEIGHT = 280            # px
MARGIN = dict(left=56, right=16, top=28, bottom=40)   # px
STATUS_COLOR = {
    "ok": "#2e7d32", "mismatch": "#ef6c00", "compile_error": "#c62828", "runtime_error": "#c62828",
    "rejected": "#6a1b9a", "timeout": "#8d6e63", "crashed": "#b71c1c", "no_code": "#7b1fa2", "not_run": "#757575",
    "not_checkable": "#757575",
}
BEST_COLOR = "#1565c0"
EAGER_COLOR = "#9e9e9e"


@dataclass(frozen=True)
class Point:
    """One attempt as the speedup chart draws it."""

    number: int
    status: str
    speedup: float | None = None        # against the faster of eager and torch.compile
    speedup_eager: float | None = None
    reason: str = ""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


def _status_color(status: str) -> str:
    return STATUS_COLOR.get(status, "#c62828")


def speedup_chart(points: list[Point], *, timed: bool, untimed_note: str = "") -> str:
    """Speedup of each attempt over the faster baseline (and over eager), the best so far, failures marked.

    When nothing was timed the chart says so and shows each attempt's verdict
    as a coloured square instead of a meaningless axis.
    """
    if not points:
        return _message_svg("No attempts were stored for this run.", "speedup-chart")
    if not timed or not any(p.speedup is not None for p in points):
        return _status_strip(points, untimed_note or "Nothing was timed: each square is one attempt's verdict.")

    left, right, top, bottom = MARGIN["left"], MARGIN["right"], MARGIN["top"], MARGIN["bottom"]
    plot_w, plot_h = WIDTH - left - right, HEIGHT - top - bottom
    values = [v for p in points for v in (p.speedup, p.speedup_eager) if v is not None]
    y_max = max(max(values), 1.0) * 1.15
    step = _nice_step(y_max)
    y_max = math.ceil(y_max / step) * step
    n = len(points)
    slot = plot_w / n

    def x(i: int) -> float:
        return left + (i + 0.5) * slot

    def y(v: float) -> float:
        return top + plot_h * (1 - v / y_max)

    out = [f'<svg class="chart speedup-chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="speedup per attempt">']
    # grid and y axis
    tick = 0.0
    while tick <= y_max + 1e-9:
        out.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{tick:g}x</text>')
        tick += step
    out.append(f'<text x="14" y="{top + plot_h / 2:.0f}" class="axis-label" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2:.0f})">speedup</text>')
    # the baseline
    out.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{y(1):.1f}" y2="{y(1):.1f}" class="baseline"/>')
    # x labels: every attempt, or every k-th when there are many
    every = max(1, math.ceil(n / 25))
    for i, p in enumerate(points):
        if i % every == 0 or i == n - 1:
            out.append(f'<text x="{x(i):.1f}" y="{HEIGHT - bottom + 16}" class="tick" text-anchor="middle">'
                       f'{p.number}</text>')
    out.append(f'<text x="{left + plot_w / 2:.0f}" y="{HEIGHT - 6}" class="axis-label" text-anchor="middle">'
               'attempt</text>')
    # the best so far, as a step line
    best, path = None, []
    for i, p in enumerate(points):
        if p.status == "ok" and p.speedup is not None and (best is None or p.speedup > best):
            best = p.speedup
        if best is not None:
            path.append(f"{x(i) - slot / 2:.1f},{y(best):.1f} {x(i) + slot / 2:.1f},{y(best):.1f}")
    if path:
        out.append(f'<polyline points="{" ".join(path)}" class="best-line" stroke="{BEST_COLOR}"/>')
    # the attempts
    for i, p in enumerate(points):
        tip = f"attempt {p.number}: {p.status}"
        if p.status == "ok" and p.speedup is not None:
            if p.speedup_eager is not None:
                out.append(f'<circle cx="{x(i):.1f}" cy="{y(p.speedup_eager):.1f}" r="3.5" fill="none" '
                           f'stroke="{EAGER_COLOR}" stroke-width="1.5"><title>{_e(tip)}, '
                           f'{p.speedup_eager:.2f}x over eager</title></circle>')
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(p.speedup):.1f}" r="5" fill="{_status_color("ok")}" '
                       f'class="attempt-mark"><title>{_e(tip)}, {p.speedup:.2f}x over the faster baseline'
                       f'</title></circle>')
        else:
            cx, cy, r = x(i), y(0) - 8, 4.5
            out.append(f'<g class="attempt-mark failed" stroke="{_status_color(p.status)}" stroke-width="2.2">'
                       f'<title>{_e(tip)}{": " + _e(p.reason) if p.reason else ""}</title>'
                       f'<line x1="{cx - r:.1f}" y1="{cy - r:.1f}" x2="{cx + r:.1f}" y2="{cy + r:.1f}"/>'
                       f'<line x1="{cx - r:.1f}" y1="{cy + r:.1f}" x2="{cx + r:.1f}" y2="{cy - r:.1f}"/></g>')
    # legend
    lx = left + 8
    out.append(f'<circle cx="{lx}" cy="12" r="5" fill="{_status_color("ok")}"/>'
               f'<text x="{lx + 9}" y="16" class="legend">vs faster of eager / torch.compile</text>')
    lx += 230
    out.append(f'<circle cx="{lx}" cy="12" r="3.5" fill="none" stroke="{EAGER_COLOR}" stroke-width="1.5"/>'
               f'<text x="{lx + 9}" y="16" class="legend">vs eager</text>')
    lx += 80
    out.append(f'<line x1="{lx - 6}" x2="{lx + 10}" y1="12" y2="12" stroke="{BEST_COLOR}" stroke-width="2"/>'
               f'<text x="{lx + 15}" y="16" class="legend">best so far</text>')
    lx += 100
    out.append(f'<g stroke="{_status_color("compile_error")}" stroke-width="2"><line x1="{lx - 4}" y1="8" x2="{lx + 4}" '
               f'y2="16"/><line x1="{lx - 4}" y1="16" x2="{lx + 4}" y2="8"/></g>'
               f'<text x="{lx + 9}" y="16" class="legend">failed</text>')
    lx += 62
    out.append(f'<line x1="{lx - 6}" x2="{lx + 12}" y1="12" y2="12" class="baseline"/>'
               f'<text x="{lx + 17}" y="16" class="legend">1x: as fast as the baseline</text>')
    out.append("</svg>")
    return "".join(out)


def _status_strip(points: list[Point], note: str) -> str:
    """Untimed runs: the note, then one square per attempt coloured by its verdict."""
    size, gap = 22, 6
    per_row = max(1, (WIDTH - 20) // (size + gap))
    rows = math.ceil(len(points) / per_row)
    height = 42 + rows * (size + gap) + 6
    out = [f'<svg class="chart speedup-chart untimed" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
           f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{_e(note)}">',
           f'<text x="10" y="22" class="chart-note">{_e(note)}</text>']
    for i, p in enumerate(points):
        cx = 10 + (i % per_row) * (size + gap)
        cy = 38 + (i // per_row) * (size + gap)
        out.append(f'<g class="attempt-mark"><title>attempt {p.number}: {_e(p.status)}'
                   f'{": " + _e(p.reason) if p.reason else ""}</title>'
                   f'<rect x="{cx}" y="{cy}" width="{size}" height="{size}" rx="4" fill="{_status_color(p.status)}"/>'
                   f'<text x="{cx + size / 2}" y="{cy + size / 2 + 4}" class="strip-num" text-anchor="middle">'
                   f'{p.number}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _message_svg(text: str, css: str) -> str:
    return (f'<svg class="chart {css}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="44" '
            f'viewBox="0 0 {WIDTH} 44" role="img" aria-label="{_e(text)}">'
            f'<text x="10" y="26" class="chart-note">{_e(text)}</text></svg>')


def stall_chart(profile: "Diagnosis") -> str:
    """Horizontal bars: each top stall reason's share of warp cycles, then memory and SM speed-of-light."""
    stalls = profile.top_stalls
    bars: list[tuple[str, float, str, str]] = []    # label, fraction 0..1, text, css class
    for s in stalls:
        bars.append((s.reason, s.share, f"{s.share:.0%}", "bar-stall"))
    for value, label in ((profile.mem_sol_pct, f"memory SOL ({profile.mem_unit or 'memory'})"),
                         (profile.sm_sol_pct, "SM SOL")):
        if value is not None:
            bars.append((label, float(value) / 100.0, f"{float(value):.0f}%", "bar-sol"))
    if not bars:
        return _message_svg("The profile holds no stall or speed-of-light figures.", "stall-chart")
    label_w, row_h, top = 210, 26, 8
    bar_w = WIDTH - label_w - 70
    height = top + len(bars) * row_h + 8
    out = [f'<svg class="chart stall-chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="stall breakdown of the best kernel">']
    for i, (label, fraction, text, css) in enumerate(bars):
        y = top + i * row_h
        w = max(1.0, min(1.0, fraction) * bar_w)
        if i == len(stalls) and stalls:
            out.append(f'<line x1="0" x2="{WIDTH}" y1="{y - 2}" y2="{y - 2}" class="grid"/>')
        out.append(f'<text x="{label_w - 8}" y="{y + 16}" class="bar-label" text-anchor="end">{_e(label)}</text>'
                   f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="{row_h - 8}" class="bar-track"/>'
                   f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" class="{css}">'
                   f'<title>{_e(label)}: {_e(text)}</title></rect>'
                   f'<text x="{label_w + bar_w + 8}" y="{y + 16}" class="bar-value">{_e(text)}</text>')
    out.append("</svg>")
    return "".join(out)
