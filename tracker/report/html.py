"""The HTML report: one self-contained page rendered from a ``ReportData`` by the Jinja2 templates
in ``templates/``.

The page holds inline CSS and inline SVG only: no script, no font, no image by URL, nothing that
is fetched when it is viewed; its Content-Security-Policy forbids every network load, so even a
string that escaped escaping could not reach out. Autoescape is on for every template, so every
string from a repository or the database (subjects, authors, signatures, probe names, SHAs, hosts)
renders as text; subjects and authors shown as text are also isolated in ``<bdi>``, so bidi
control characters stay inside them. Python builds the rows and decides the classes; the
templates hold the markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from tracker.report.model import ReportData
from tracker.report.page import (
    CSP,
    HEAD_LABEL,
    STATE_GLYPH,
    STATE_LABEL,
    STATES,
    VERDICT_STATE,
    ReportView,
    Story,
    kind_style,
    pair_style,
    plural,
    short,
    when,
)
from tracker.report.plots import FRAME, probe_plots
from tracker.report.timeline import grid_rows, header_stats, overview, probe_rows

ENVIRONMENT_FIELDS = (
    "device",
    "gpu_name",
    "compute_capability",
    "driver",
    "cuda",
    "torch",
    "flashinfer",
    "python",
    "host",
)


@dataclass(frozen=True)
class PairRow:
    sha: str
    kind: str
    other: str
    css: str
    arrow: str
    probes: str


@dataclass(frozen=True)
class TransitionGroup:
    """Probes whose transitions are the same, shown once; the optional columns appear only when a
    row needs them."""

    probes: tuple[str, ...]
    story: Story
    transitions: tuple[Any, ...]
    with_pairs: bool
    with_hidden: bool


@dataclass(frozen=True)
class StretchRow:
    who: str
    probes: str
    kind: str
    state: str
    first: str
    last: str
    length: str


@dataclass(frozen=True)
class BisectView:
    """A bisect session with what its summary says: the word for its answer, the probability when
    the search did not trust every run, and how many steps ran rather than reused a result."""

    bisect: Any
    found: str
    probability: str
    ran: int


@dataclass(frozen=True)
class EnvironmentRow:
    fingerprint: str
    values: tuple[str | None, ...]
    facts: str


def pair_rows(view: ReportView) -> list[PairRow]:
    """The commit-level pairs, newest first."""
    rows = []
    newest_first = sorted(view.pairs.items(), key=lambda kv: view.index.get(kv[0][0], -1), reverse=True)
    for (sha, kind, other), probes in newest_first:
        css, arrow = pair_style(kind)
        rows.append(PairRow(sha, kind, other, css, arrow, ", ".join(sorted(probes, key=view.probe_order))))
    return rows


def transition_groups(view: ReportView) -> list[TransitionGroup]:
    """One group per set of probes that share every transition, newest transition first."""
    same: dict[tuple[object, ...], list[str]] = {}
    for probe in view.probes:
        found = view.by_probe.get(probe)
        if found:
            key = tuple((t.sha, t.kind, t.pairs_with, t.pair_kind, t.candidates) for t in found)
            same.setdefault(key, []).append(probe)
    groups = []
    for probes in same.values():
        found = view.by_probe[probes[0]]
        with_pairs = any(t.pair_kind and t.pairs_with for t in found)
        with_hidden = any(len(t.candidates) > 1 for t in found)
        story = view.story(probes[0])
        groups.append(TransitionGroup(tuple(probes), story, tuple(reversed(found)), with_pairs, with_hidden))
    return groups


def stretch_rows(view: ReportView) -> list[StretchRow]:
    """Stretches merged over the probes that share them, oldest first."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    for s in sorted(view.data.stretches, key=lambda s: (view.index.get(s.first, -1), s.kind, s.last)):
        merged.setdefault((s.kind, s.first, s.last), []).append(s.probe)
    rows = []
    for (kind, first, last), probes in merged.items():
        a, b = view.index.get(first), view.index.get(last)
        length = plural(b - a + 1, "commit") if a is not None and b is not None else ""
        order = [p for p in view.probes if p in probes] + [p for p in probes if p not in view.probes]
        who = f"all {len(order)} probes" if len(order) > 1 and set(order) == set(view.probes) else ", ".join(order)
        state = "skip" if kind == "untestable" else "flaky"
        rows.append(StretchRow(who, ", ".join(order), kind, state, first, last, length))
    return rows


def bisect_views(view: ReportView) -> list[BisectView]:
    """The bisect sessions, newest first."""
    views = []
    for b in sorted(view.data.bisects, key=lambda b: b.session_id, reverse=True):
        found = "first fixed commit" if b.find_fix else "culprit"
        probability = f"{b.confidence:.3f}" if b.confidence is not None and b.confidence < 1.0 else ""
        views.append(BisectView(b, found, probability, sum(1 for s in b.steps if not s.reused)))
    return views


def environment_rows(view: ReportView) -> list[EnvironmentRow]:
    rows = []
    for env in view.data.environments:
        values = tuple(None if (v := getattr(env, f)) is None else str(v) for f in ENVIRONMENT_FIELDS)
        facts = ", ".join(f"{k}={v}" for k, v in sorted(env.facts.items()))
        rows.append(EnvironmentRow(env.fingerprint, values, facts))
    return rows


@cache
def templates() -> Environment:
    """The template environment: autoescape on, undefined names an error, and the helpers the
    templates share as filters and globals."""
    env = Environment(
        loader=PackageLoader("tracker.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, short=short, plural=plural)
    env.globals.update(
        CSP=CSP,
        STATES=STATES,
        STATE_LABEL=STATE_LABEL,
        STATE_GLYPH=STATE_GLYPH,
        HEAD_LABEL=HEAD_LABEL,
        VERDICT_STATE=VERDICT_STATE,
        ENVIRONMENT_FIELDS=ENVIRONMENT_FIELDS,
        FRAME=FRAME,
        kind_style=kind_style,
        pair_style=pair_style,
    )
    return env


def render_html(data: ReportData) -> str:
    view = ReportView(data)
    return (
        templates()
        .get_template("report.html.j2")
        .render(
            data=data,
            view=view,
            stats=header_stats(view),
            probe_rows=probe_rows(view),
            overview=overview(view) if data.commits else None,
            plots=probe_plots(view),
            grid_rows=grid_rows(view),
            pair_rows=pair_rows(view),
            transition_groups=transition_groups(view),
            stretch_rows=stretch_rows(view),
            bisects=bisect_views(view),
            environment_rows=environment_rows(view),
        )
    )


__all__ = ["CSP", "render_html"]
