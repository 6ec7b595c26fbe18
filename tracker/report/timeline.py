"""The report's top half as rows for the templates: the header's counts, the probes, the overview
strips with their revert and re-land arcs, and the timeline of each probe along the first-parent line."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from tracker.report.page import (
    STATE_GLYPH,
    STATE_LABEL,
    ReportView,
    Span,
    Story,
    cell_state,
    isolated_plain,
    pair_style,
    plural,
    short,
)


@dataclass(frozen=True)
class ProbeRow:
    """A probe's state at head; ``at`` is the commit it was measured at when that is not the newest."""

    probe: str
    state: str
    at: str | None
    count: int
    story: Story


@dataclass(frozen=True)
class Band:
    """A run of commits in one state on a probe's overview strip."""

    sha: str
    x: int
    width: int
    y: str
    height: str
    state: str
    label: str


@dataclass(frozen=True)
class Strip:
    probe: str
    bands: tuple[Band, ...]
    ticks: tuple[float, ...]


@dataclass(frozen=True)
class Arc:
    """A revert or re-land pair on the overview; its label sits at ``left`` percent, on line ``line``."""

    x1: float
    x2: float
    css: str
    arrow: str
    sha: str
    name: str
    label: str
    left: float = 0.0
    line: int = 0


@dataclass(frozen=True)
class Overview:
    """The strips of every probe, the pairs' arcs, their labels left to right, and how many lines
    the labels take."""

    strips: tuple[Strip, ...]
    arcs: tuple[Arc, ...]
    labels: tuple[Arc, ...]
    lines: int


@dataclass(frozen=True)
class Event:
    """A badge of a timeline row; ``href`` is the other commit of a pair, None for a transition."""

    css: str
    text: str
    tip: str
    href: str | None = None


@dataclass(frozen=True)
class GridCell:
    """A probe's cell in a row; ``tip`` is empty where the cell's class says all there is."""

    css: str
    tip: str
    glyph: str


@dataclass(frozen=True)
class GridRow:
    """A commit's own row."""

    commit: Any
    css: str
    cells: tuple[GridCell, ...]
    events: tuple[Event, ...]
    gap: ClassVar[bool] = False


@dataclass(frozen=True)
class GapRow:
    """Commits ``oldest``..``newest`` that share one row: their cells, and ``says`` where their
    results come from."""

    anchor: str
    count: int
    oldest: Any
    newest: Any
    cells: tuple[GridCell, ...]
    says: str
    gap: ClassVar[bool] = True


def header_stats(view: ReportView) -> list[str]:
    d = view.data
    return [
        plural(len(d.commits), "commit"),
        plural(len(view.probes), "probe"),
        plural(len(d.transitions), "transition"),
        plural(len({(s, o) for s, _, o in view.pairs}), "revert/re-land pair"),
        plural(len(d.bisects), "bisect"),
    ]


def probe_rows(view: ReportView) -> list[ProbeRow]:
    rows = []
    for probe in view.probes:
        state, at = view.head_state(probe)
        where = at.sha if at is not None and at is not view.data.commits[-1] else None
        rows.append(ProbeRow(probe, state, where, len(view.by_probe.get(probe, [])), view.story(probe, limit=4)))
    return rows


def strip(view: ReportView, probe: str) -> Strip:
    """One probe along the line: a band per run of equal states, a tick at each transition."""
    commits = view.data.commits
    n = len(commits)
    states = [cell_state(view.data.cell(c.sha, probe)) for c in commits]
    bands = []
    start = 0
    for i in range(1, n + 1):
        if i == n or states[i] != states[start]:
            first, last = commits[start], commits[i - 1]
            span = f"{short(first.sha)}..{short(last.sha)} ({plural(i - start, 'commit')})"
            label = f"{probe}: {STATE_LABEL[states[start]]}, {span}"
            y, height = ("0.4", "0.2") if states[start] == "untested" else ("0", "1")
            bands.append(Band(first.sha, start, i - start, y, height, states[start], label))
            start = i
    ticks = tuple(view.index[t.sha] + 0.5 for t in view.by_probe.get(probe, []) if t.sha in view.index)
    return Strip(probe, tuple(bands), ticks)


def arcs(view: ReportView) -> list[Arc]:
    """The pairs whose both ends are on the line, in the order of ``view.pairs``."""
    n = len(view.data.commits)
    found = []
    for (sha, kind, other), probes in view.pairs.items():
        if sha not in view.index or other not in view.index:
            continue
        x1, x2 = view.index[other] + 0.5, view.index[sha] + 0.5
        css, arrow = pair_style(kind)
        commit = view.by_sha[sha]
        label = f"{short(sha)} {kind} {short(other)}: {isolated_plain(commit.subject)} ({', '.join(probes)})"
        name = f"#{commit.pr_number}" if commit.pr_number is not None else sha[:8]
        found.append(Arc(x1, x2, css, arrow, sha, name, label, left=100 * (x1 + x2) / 2 / n))
    return found


def placed_labels(found: list[Arc]) -> list[Arc]:
    """The arcs' labels from left to right, each under its arc's middle, on as many lines as keep
    neighbours from overlapping."""
    placed = []
    ends: list[float] = []  # per line, where its last label sits
    for arc in sorted(found, key=lambda a: a.left):
        line = next((i for i, end in enumerate(ends) if arc.left - end >= 7), len(ends))
        ends[line : line + 1] = [arc.left]
        placed.append(replace(arc, line=line))
    return placed


def overview(view: ReportView) -> Overview:
    found = arcs(view)
    labels = placed_labels(found)
    lines = max((a.line + 1 for a in labels), default=0)
    return Overview(tuple(strip(view, p) for p in view.probes), tuple(found), tuple(labels), lines)


def events(view: ReportView, sha: str) -> tuple[Event, ...]:
    """The badges of one timeline row: transitions at it, and the pairs it is part of."""
    out = []
    here = [t for t in view.transitions if t.sha == sha]
    for kind, arrow, verb in (("regression", "\u25bc", "breaks"), ("fix", "\u25b2", "fixes")):
        probes = [t.probe for t in here if t.kind == kind]
        if probes:
            what = probes[0] if len(probes) == 1 else f"{len(probes)} probes"
            widest = max(len(t.candidates) for t in here if t.kind == kind)
            hidden = f" (one of {widest})" if widest > 1 else ""
            tip = f"{kind} of {', '.join(probes)}"
            if widest > 1:
                tip += f"; hidden: this or one of the {widest - 1} commits before it"
            out.append(Event(kind, f"{arrow} {verb} {what}{hidden}", tip))
    for mine, kind, other in view.pairs:
        if mine == sha:
            css, word = ("revert", "\u21a9 reverts") if kind == "reverts" else ("reland", "\u21bb re-lands")
            out.append(Event(css, word, f"{word} {other}", other))
        elif other == sha:
            css, word = ("revert", "reverted by") if kind == "reverts" else ("reland", "re-landed by")
            out.append(Event(f"{css} back", word, f"{word} {mine}", mine))
    return tuple(out)


def grid_cell(view: ReportView, sha: str, probe: str) -> GridCell:
    """One probe at one commit: its state, its transition mark, and a tooltip with what the class
    does not say (the runs behind it, the mark's meaning, the failure signature)."""
    cell = view.data.cell(sha, probe)
    state = cell_state(cell)
    mark = view.marks.get((sha, probe))
    notes = []
    if mark == "candidate":
        notes.append("may be the transition (hidden by untestable or flaky commits)")
    elif mark:
        notes.append(f"{mark}: first {'bad' if mark == 'regression' else 'good'} commit")
    if cell.signature:
        notes.append(cell.signature)
    runs = f" ({plural(cell.runs, 'run')})" if cell.runs > 1 else ""
    tip = "\n".join([STATE_LABEL[state] + runs, *notes]) if runs or notes else ""
    return GridCell(f"c s-{state}" + (f" t-{mark}" if mark else ""), tip, STATE_GLYPH[state])


def gap_row(view: ReportView, span: Span, below: Span | None, above: Span | None) -> GapRow:
    """Commits of a gap, with where their results come from: untested (no run of their trees), or
    their trees' results, the same as the row below or above them, or measured at other commits."""
    commits = view.data.commits
    oldest, newest = commits[span.first], commits[span.last]

    def cells(row: Span | None) -> tuple[Any, ...]:
        return () if row is None else tuple(view.data.cell(commits[row.first].sha, p) for p in view.probes)

    mine = cells(span)
    told = True  # the row says what the cells' tooltips would
    if all(cell_state(c) == "untested" for c in mine):
        says = "untested"
    elif mine == cells(below):
        says = "not measured: their trees' results, as the row below"
    elif mine == cells(above):
        says = "not measured: their trees' results, as the row above"
    else:
        says, told = "not measured: their trees' results, measured at other commits", False
    shown = tuple(grid_cell(view, oldest.sha, p) for p in view.probes)
    if told:
        shown = tuple(replace(c, tip="") for c in shown)
    return GapRow(view.anchor(oldest.sha), span.last - span.first + 1, oldest, newest, shown, says)


def grid_rows(view: ReportView) -> list[GridRow | GapRow]:
    """The timeline, newest first: a row per commit of its own, marked with the kinds of the
    transitions at it, and a row per gap."""
    kinds_at: dict[str, set[str]] = defaultdict(set)
    for t in view.transitions:
        kinds_at[t.sha].add(t.kind)
    rows: list[GridRow | GapRow] = []
    spans = view.rows
    for i in reversed(range(len(spans))):
        span = spans[i]
        if span.gap:
            above = spans[i + 1] if i + 1 < len(spans) else None
            rows.append(gap_row(view, span, spans[i - 1] if i else None, above))
            continue
        commit = view.data.commits[span.first]
        cells = tuple(grid_cell(view, commit.sha, probe) for probe in view.probes)
        css = " ".join(sorted(f"k-{k}" for k in kinds_at.get(commit.sha, set())))
        rows.append(GridRow(commit, css, cells, events(view, commit.sha)))
    return rows
