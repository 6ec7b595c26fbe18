"""The report's metric plots: each probe case's stored metrics along the first-parent line, as the
geometry and text that ``templates/plots.html.j2`` turns into inline SVG.

The plots are SVG drawn by this module rather than by a charting library: the page's
Content-Security-Policy forbids every script, and inline SVG needs none, so the page stays one
offline file. A case is one SVG of stacked panels, one per metric and the duration, on one x axis
(the first-parent line, as the overview strips place it), a line per environment and dtype.

Hover and keyboard focus come from SVG's own ``<a>`` and ``<title>``: the values one run measured
at a commit are one link to the commit's row in the timeline, one stop for the keyboard, named by
a title with the commit, its subject and the values; each point carries the exact stored value in
``data-value``. Results reused from another commit with the same tree are drawn as a pale band,
not as points.

The page stays small over a long range: a commit's subject is written once per case rather than
once per metric, a metric that holds one value throughout is said in a sentence rather than
plotted, and a probe's transitions and reverts are drawn once and reused by each panel (``<use>``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tracker.core.measurements import DURATION
from tracker.report.axes import LANE_INSET, Axis, coordinate, value_axis, value_text
from tracker.report.model import Series
from tracker.report.page import ReportView, plural, short
from tracker.report.plot_series import FRAME, Mark, PanelLine, panel_line, subject_of

PALETTE = 6
"""Series colours ``k0`` .. ``k5`` in the style sheet; an environment and dtype keeps its colour on every plot."""
X_TICKS = 5
TICK_SHA = 8

SeriesKey = tuple[str, str | None]


@dataclass(frozen=True)
class Label:
    at: str
    text: str


@dataclass(frozen=True)
class Lane:
    """Where values off the axis are drawn: ``at`` is their height, ``edge`` the line between the
    lane and the axis."""

    at: str
    text: str
    edge: str


@dataclass(frozen=True)
class Limit:
    """A tolerance, drawn dashed in the colour of its series, or neutral where several share it."""

    y: str
    css: str
    tip: str


@dataclass(frozen=True)
class Marker:
    """A transition or a revert / re-land at ``x``; ``band`` spans the commits that may hide it."""

    x: str
    css: str
    glyph: str
    tip: str
    band: tuple[str, str] | None = None


@dataclass(frozen=True)
class Panel:
    """One metric of a case, ``offset`` below the plot's top; its own coordinates start at 0."""

    metric: str
    log: bool
    offset: str
    grid: str
    y_ticks: tuple[Label, ...]
    lanes: tuple[Lane, ...]
    limits: tuple[Limit, ...]
    lines: tuple[PanelLine, ...]


@dataclass(frozen=True)
class Dot:
    y: str
    value: str
    """The stored float's repr."""


@dataclass(frozen=True)
class CommitLink:
    """What one environment and dtype measured at one commit, a point on each panel."""

    sha: str
    x: str
    css: str
    tip: str
    dots: tuple[Dot, ...]


@dataclass(frozen=True)
class Unchanged:
    """A metric that holds one value over the whole range; ``value`` is its repr."""

    metric: str
    value: str
    text: str
    where: str


@dataclass(frozen=True)
class CasePlot:
    case: str
    label: str
    height: int
    panels: tuple[Panel, ...]
    links: tuple[CommitLink, ...]
    x_ticks: tuple[Label, ...]
    legend: tuple[tuple[str, str], ...]
    """(colour, name) of each series."""
    reused: bool
    limits: bool
    unchanged: tuple[Unchanged, ...]


@dataclass(frozen=True)
class ProbePlots:
    """A probe's plots by case; ``open`` where the probe has a transition, so it shows unfolded.
    Its ``markers`` are drawn once, as ``marker_id``, and every panel of the probe uses them."""

    probe: str
    open: bool
    summary: str
    cases: tuple[CasePlot, ...]
    marker_id: str
    markers: tuple[Marker, ...]


@dataclass(frozen=True)
class Legend:
    """What each environment and dtype is called, "cpu float32", "NVIDIA H200 bfloat16", and its
    colour, the same on every plot."""

    names: dict[SeriesKey, str]
    colours: dict[SeriesKey, str]

    @classmethod
    def of(cls, series: Sequence[Series]) -> Legend:
        """A device shared by several environments gets a short fingerprint to tell them apart."""
        fingerprints: dict[str, set[str]] = defaultdict(set)
        for s in series:
            fingerprints[s.device].add(s.environment)
        names = {}
        for s in series:
            device = s.device if len(fingerprints[s.device]) == 1 else f"{s.device} ({s.environment[:8]})"
            names[(s.environment, s.dtype)] = f"{device} {s.dtype}" if s.dtype else device
        ordered = sorted(names, key=lambda key: names[key])
        return cls(names, {key: f"k{i % PALETTE}" for i, key in enumerate(ordered)})

    def key(self, series: Series) -> SeriesKey:
        return (series.environment, series.dtype)


def limits(group: Sequence[Series], axis: Axis, legend: Legend) -> tuple[Limit, ...]:
    """The tolerances of a panel's series, one line per distinct value."""
    shared: dict[float, list[SeriesKey]] = defaultdict(list)
    for s in group:
        if s.tolerance is not None and math.isfinite(s.tolerance) and axis.on_axis(s.tolerance):
            shared[s.tolerance].append(legend.key(s))
    found = []
    for tolerance, keys in shared.items():
        css = legend.colours[keys[0]] if len(keys) == 1 else "shared"
        tip = f"tolerance {value_text(tolerance)} ({', '.join(legend.names[k] for k in keys)})"
        found.append(Limit(coordinate(axis.y(tolerance)), css, tip))
    return tuple(found)


def markers(view: ReportView, probe: str) -> tuple[Marker, ...]:
    """The probe's transitions, and the reverts and re-lands it takes part in, on the plot's x axis."""
    n = len(view.data.commits)
    found = []
    for t in view.by_probe.get(probe, []):
        if t.sha not in view.index:
            continue
        css, glyph = ("regression", "\u25bc") if t.kind == "regression" else ("fix", "\u25b2")
        tip = f"{t.kind} at {short(t.sha)} {subject_of(view, t.sha)}"
        band = None
        hidden = [view.index[c] for c in t.candidates if c in view.index]
        if len(hidden) > 1:
            x1, x2 = FRAME.x(min(hidden), n) - 0.5, FRAME.x(max(hidden), n) + 0.5
            band = (coordinate(x1), coordinate(x2 - x1))
            tip += f"\nhidden: this or one of the {len(hidden) - 1} commits before it"
        found.append(Marker(coordinate(FRAME.x(view.index[t.sha], n)), css, glyph, tip, band))
    for (sha, kind, other), probes in view.pairs.items():
        if probe in probes and sha in view.index:
            css, glyph = ("revert", "\u21a9") if kind == "reverts" else ("reland", "\u21bb")
            tip = f"{short(sha)} {kind} {short(other)}: {subject_of(view, sha)}"
            found.append(Marker(coordinate(FRAME.x(view.index[sha], n)), css, glyph, tip))
    return tuple(found)


def x_ticks(view: ReportView) -> tuple[Label, ...]:
    """A few commits along the line, named by their short SHA."""
    n = len(view.data.commits)
    indices = sorted({round(k * (n - 1) / (X_TICKS - 1)) for k in range(X_TICKS)})
    return tuple(Label(coordinate(FRAME.x(i, n)), view.data.commits[i].sha[:TICK_SHA]) for i in indices)


def panel(
    view: ReportView, group: Sequence[Series], legend: Legend, offset: float
) -> tuple[Panel, dict[SeriesKey, list[Mark]]]:
    """One metric of a case, a line per environment and dtype, and each series' measured values."""
    values = [p.value for s in group for p in s.points if p.sha in view.index]
    tolerances = [s.tolerance for s in group if s.tolerance is not None and math.isfinite(s.tolerance)]
    axis = value_axis(values, tolerances, FRAME.top, FRAME.bottom)
    lines, marks = [], {}
    for s in sorted(group, key=lambda s: legend.names[legend.key(s)]):
        key = legend.key(s)
        drawn, marks[key] = panel_line(view, s, axis, offset, legend.colours[key], legend.names[key])
        lines.append(drawn)
    y_ticks = tuple(Label(coordinate(t.at), t.label) for t in axis.ticks)
    lanes = []
    if axis.zero_lane is not None:
        lanes.append(Lane(coordinate(axis.zero_lane), "0", coordinate(axis.bottom + LANE_INSET)))
    if axis.odd_lane is not None:
        lanes.append(Lane(coordinate(axis.odd_lane), "NaN/inf", coordinate(axis.top - LANE_INSET)))
    grid = "".join(f"M{FRAME.left:g} {t.at}H{FRAME.right:g}" for t in y_ticks)
    found = Panel(
        group[0].metric,
        axis.log,
        coordinate(offset),
        grid,
        y_ticks,
        tuple(lanes),
        limits(group, axis, legend),
        tuple(lines),
    )
    return found, marks


def commit_links(
    view: ReportView, panels: Sequence[Panel], marks: Sequence[dict[SeriesKey, list[Mark]]], legend: Legend
) -> tuple[CommitLink, ...]:
    """One link per environment and dtype and measured commit, holding its point on each panel."""
    by_commit: dict[tuple[SeriesKey, str], list[tuple[str, Mark]]] = defaultdict(list)
    for drawn, found in zip(panels, marks):
        for key, series_marks in found.items():
            for mark in series_marks:
                by_commit[(key, mark.sha)].append((drawn.metric, mark))
    several = len({key for key, _ in by_commit}) > 1
    links = []
    in_order = sorted(by_commit.items(), key=lambda kv: (legend.names[kv[0][0]], kv[1][0][1].index))
    for (key, sha), measured in in_order:
        index = measured[0][1].index
        values = "; ".join(f"{metric} = {value_text(mark.value)}" for metric, mark in measured)
        tip = f"{sha[:TICK_SHA]} {subject_of(view, sha)}\n{legend.names[key] + ': ' if several else ''}{values}"
        after = max(mark.reused_after for _, mark in measured)
        if after:
            tip += "\nreused at the next commit" if after == 1 else f"\nreused at the next {after} commits"
        x = coordinate(FRAME.x(index, len(view.data.commits)))
        dots = tuple(Dot(mark.y, repr(mark.value)) for _, mark in measured)
        links.append(CommitLink(sha, x, legend.colours[key], tip, dots))
    return tuple(links)


def unchanged(view: ReportView, group: Sequence[Series], legend: Legend) -> Unchanged | None:
    """The metric in a sentence where every series holds one value at every commit: a flat line
    would say nothing more, and a plot of it would cost a point per commit."""
    values = {repr(p.value): p.value for s in group for p in s.points if p.sha in view.index}
    if len(values) != 1:
        return None
    ((text, value),) = values.items()
    measured = {p.sha for s in group for p in s.points if p.measured and p.sha in view.index}
    names = ", ".join(sorted(legend.names[legend.key(s)] for s in group))
    count = f"all {len(measured)} measured commits" if len(measured) > 1 else "the one measured commit"
    return Unchanged(group[0].metric, text, value_text(value), f"at {count} ({names})")


def metric_order(metric: str) -> tuple[bool, str]:
    """Metrics by name, the duration last."""
    return (metric == DURATION, metric)


def case_plot(view: ReportView, probe: str, case: str, metrics: dict[str, list[Series]], legend: Legend) -> CasePlot:
    """A case's panels stacked over one x axis, and the metrics it leaves unplotted."""
    panels, marks, flat = [], [], []
    for metric in sorted(metrics, key=metric_order):
        same = unchanged(view, metrics[metric], legend)
        if same is not None:
            flat.append(same)
            continue
        drawn, found = panel(view, metrics[metric], legend, len(panels) * FRAME.height)
        panels.append(drawn)
        marks.append(found)
    keys = sorted({legend.key(s) for group in metrics.values() for s in group}, key=legend.names.__getitem__)
    label = (
        f"{probe} {case}: {', '.join(p.metric for p in panels)} over "
        f"{plural(len(view.data.commits), 'commit')}, {len(keys)} series"
    )
    return CasePlot(
        case,
        label,
        len(panels) * FRAME.height,
        tuple(panels),
        commit_links(view, panels, marks, legend),
        x_ticks(view),
        tuple((legend.colours[k], legend.names[k]) for k in keys),
        any(line.tails or line.reused for p in panels for line in p.lines),
        any(p.limits for p in panels),
        tuple(flat),
    )


def probe_plots(view: ReportView) -> list[ProbePlots]:
    """Every probe's plots, in the report's probe order, each case's metrics by name."""
    series = [s for s in view.data.series if any(p.sha in view.index for p in s.points)]
    if not view.data.commits or not series:
        return []
    legend = Legend.of(series)
    grouped: dict[str, dict[str, dict[str, list[Series]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for s in series:
        grouped[s.probe][s.case][s.metric].append(s)
    order = [p for p in view.probes if p in grouped] + sorted(set(grouped) - set(view.probes))
    found = []
    for number, probe in enumerate(order):
        cases = tuple(case_plot(view, probe, case, m, legend) for case, m in sorted(grouped[probe].items()))
        count = sum(len(c.panels) for c in cases)
        summary = f"{plural(count, 'plot')} over {plural(len(cases), 'case')}"
        has_transition = bool(view.by_probe.get(probe))
        found.append(ProbePlots(probe, has_transition, summary, cases, f"mk{number}", markers(view, probe)))
    return found
