"""Server-rendered SVG charts: pure geometry from (time, value) points.

No chart library and no script: the template draws ``<path>`` elements whose ``d``
this module computes, and CSS classes colour them (the CSP forbids style attributes).
A series is cut where samples are missing for longer than ``gap`` so an outage shows
as a hole, not a straight line. Long series are downsampled to at most ``max_points``
buckets (mean for activity-like values, max for memory-like ones), so a 90-day chart
draws a few hundred points whatever the data holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 600
HEIGHT = 120
PALETTE = 6  # css classes s0..s5


@dataclass(frozen=True)
class Series:
    label: str
    css: str
    line: str  # SVG path data
    area: str
    last: float | None
    peak: float | None


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    y_max: float
    series: list[Series]
    start: datetime
    end: datetime
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def empty(self) -> bool:
        return not any(s.line for s in self.series)

    @property
    def gridlines(self) -> list[tuple[float, str]]:
        """(y pixel, label) at 0, half and full scale."""
        return [(self.height * (1 - f), _fmt(self.y_max * f, self.unit)) for f in (0.0, 0.5, 1.0)]


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:.0f} %"
    if unit == "GiB":
        return f"{value:.0f} GiB"
    return f"{value:g} {unit}".strip()


def downsample(
    points: Sequence[tuple[datetime, float]], start: datetime, end: datetime, max_points: int, how: Callable = None
) -> list[tuple[datetime, float]]:
    """Bucket points into at most ``max_points`` equal time slices (mean by default)."""
    if len(points) <= max_points or end <= start:
        return list(points)
    how = how or (lambda vs: sum(vs) / len(vs))
    span = (end - start) / max_points
    buckets: dict[int, list[float]] = {}
    for t, v in points:
        buckets.setdefault(min(int((t - start) / span), max_points - 1), []).append(v)
    return [(start + span * i + span / 2, how(vs)) for i, vs in sorted(buckets.items())]


def paths(
    points: Sequence[tuple[datetime, float]],
    start: datetime,
    end: datetime,
    y_max: float,
    gap: timedelta,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> tuple[str, str]:
    """(line path, area path) for points in [start, end], cut at gaps longer than ``gap``."""
    span = (end - start).total_seconds() or 1.0
    y_max = y_max or 1.0
    segments: list[list[tuple[float, float]]] = []
    previous = None
    for t, v in sorted(points):
        if t < start or t > end:
            continue
        x = (t - start).total_seconds() / span * width
        y = height - min(max(v / y_max, 0.0), 1.0) * height
        if previous is None or t - previous > gap:
            segments.append([])
        segments[-1].append((round(x, 1), round(y, 1)))
        previous = t
    line, area = [], []
    for seg in segments:
        if len(seg) == 1:  # a lone point: a short tick so it is visible
            x, y = seg[0]
            seg = [(max(x - 1, 0), y), (min(x + 1, width), y)]
        line.append("M" + " L".join(f"{x},{y}" for x, y in seg))
        area.append(f"M{seg[0][0]},{height} L" + " L".join(f"{x},{y}" for x, y in seg) + f" L{seg[-1][0]},{height} Z")
    return " ".join(line), " ".join(area)


def chart(
    title: str,
    unit: str,
    series: Iterable[tuple[str, Sequence[tuple[datetime, float]]]],
    start: datetime,
    end: datetime,
    *,
    y_max: float | None = None,
    step: timedelta = timedelta(minutes=1),
    max_points: int = 300,
    peak: bool = False,
) -> Chart:
    """A chart of several series over [start, end]; ``peak`` downsamples by max instead of mean."""
    prepared = []
    for label, pts in series:
        pts = sorted(pts)
        if len(pts) > max_points:
            pts = downsample(pts, start, end, max_points, max if peak else None)
            bucket_step = (end - start) / max_points
        else:
            bucket_step = step
        prepared.append((label, pts, bucket_step))
    top = y_max if y_max is not None else max((v for _, pts, _ in prepared for _, v in pts), default=1.0) or 1.0
    out = []
    for i, (label, pts, bucket_step) in enumerate(prepared):
        line, area = paths(pts, start, end, top, gap=bucket_step * 3)
        values = [v for _, v in pts]
        out.append(
            Series(label, f"s{i % PALETTE}", line, area, values[-1] if values else None, max(values, default=None))
        )
    return Chart(title, unit, top, out, start, end)
