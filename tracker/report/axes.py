"""The value axis of a metric plot: linear or log, its ticks, and where values the axis cannot
show (zero on a log axis, NaN and infinities) are drawn instead.

A log axis is chosen where the positive values span more than two decades and none is negative.
Zero has no place on a log axis, so zeros are drawn in a lane of their own under it, labelled
"0"; NaN and infinities are drawn in a lane above the axis, labelled "NaN/inf". Neither is ever
clamped onto the axis, where it would read as a measured small or large value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

LOG_SPAN = 100.0
"""Positive values whose largest is more than this many times the smallest are drawn on a log axis."""
LANE = 20.0
"""The height of an off-axis lane, in the plot's units; its value sits ``LANE_INSET`` from its outer edge."""
LANE_INSET = 6.0
MOST_TICKS = 6
MOST_DECADE_TICKS = 8


def coordinate(value: float) -> str:
    """A coordinate with at most one decimal, as short as it can be written."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def value_text(value: float) -> str:
    """A value as a reader wants it in a tooltip or a tick: four significant digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


@dataclass(frozen=True)
class AxisTick:
    at: float
    label: str


@dataclass(frozen=True)
class Axis:
    """Maps values onto the plot's height: ``top`` and ``bottom`` bound the axis itself, lanes lie
    outside it; ``lo`` and ``hi`` are the values (on a log axis, the exponents) at its ends."""

    log: bool
    lo: float
    hi: float
    top: float
    bottom: float
    ticks: tuple[AxisTick, ...]
    zero_lane: float | None = None
    odd_lane: float | None = None

    def y(self, value: float) -> float:
        if not math.isfinite(value):
            assert self.odd_lane is not None
            return self.odd_lane
        if self.log:
            if value <= 0:
                assert self.zero_lane is not None
                return self.zero_lane
            value = math.log10(value)
        share = (value - self.lo) / (self.hi - self.lo)
        return self.bottom - share * (self.bottom - self.top)

    def on_axis(self, value: float) -> bool:
        """Whether ``value`` lies on the axis itself rather than in a lane."""
        return math.isfinite(value) and (value > 0 or not self.log)


def nice_step(span: float) -> float:
    """A step of 1, 2 or 5 times a power of ten that cuts ``span`` into at most ``MOST_TICKS`` parts."""
    raw = span / (MOST_TICKS - 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def linear_range(finite: list[float]) -> tuple[float, float, float]:
    """The ends of a linear axis on whole steps, and the step."""
    lo, hi = min(finite, default=0.0), max(finite, default=1.0)
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def linear_ticks(lo: float, hi: float, step: float, y: Axis) -> tuple[AxisTick, ...]:
    """A tick on each whole step; its label is the step's multiple, free of the sum's rounding."""
    steps = range(round(lo / step), round(hi / step) + 1)
    return tuple(AxisTick(y.y(k * step), value_text(k * step)) for k in steps)


def decade_label(exponent: int) -> str:
    return f"{10.0**exponent:g}" if -3 <= exponent <= 3 else f"1e{exponent}"


def decade_step(lo: int, hi: int) -> int:
    return math.ceil((hi - lo) / (MOST_DECADE_TICKS - 1))


def log_ticks(lo: int, hi: int, y: Axis) -> tuple[AxisTick, ...]:
    every = decade_step(lo, hi)
    return tuple(AxisTick(y.y(10.0**e), decade_label(e)) for e in range(lo, hi + 1, every))


def value_axis(values: Iterable[float], limits: Iterable[float], top: float, bottom: float) -> Axis:
    """The axis that shows ``values`` and the tolerance ``limits`` between ``top`` and ``bottom``,
    with the lanes it needs cut from that height."""
    values, limits = list(values), list(limits)
    finite = [v for v in values + limits if math.isfinite(v)]
    positive = [v for v in finite if v > 0]
    log = bool(positive) and min(finite) >= 0 and max(positive) / min(positive) > LOG_SPAN
    odd_lane = top + LANE_INSET if any(not math.isfinite(v) for v in values) else None
    top += LANE if odd_lane is not None else 0.0
    zero_lane = bottom - LANE_INSET if log and any(v <= 0 for v in finite) else None
    bottom -= LANE if zero_lane is not None else 0.0
    if log:
        lo_exp = math.floor(math.log10(min(positive)))
        hi_exp = max(math.ceil(math.log10(max(positive))), lo_exp + 1)
        every = decade_step(lo_exp, hi_exp)
        lo_exp = hi_exp - every * math.ceil((hi_exp - lo_exp) / every)
        axis = Axis(True, lo_exp, hi_exp, top, bottom, (), zero_lane, odd_lane)
        return replace(axis, ticks=log_ticks(lo_exp, hi_exp, axis))
    lo, hi, step = linear_range(finite)
    axis = Axis(False, lo, hi, top, bottom, (), None, odd_lane)
    return replace(axis, ticks=linear_ticks(lo, hi, step, axis))
