"""One series on one panel of a metric plot, as it is drawn: its path, its measured values, and the
commits that reuse a result; the box every panel shares and its x scale.

Coordinates are written with one decimal, a flat stretch of the path costs two points, and the
commits that reuse the value measured just before them are one path for the whole series, so a
long range adds little markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.report.axes import Axis, coordinate, value_text
from tracker.report.model import Series, SeriesPoint
from tracker.report.page import ReportView, isolated_plain, plural, short

SUBJECT_CHARS = 60


@dataclass(frozen=True)
class Frame:
    """A panel's box in SVG units: the axes span ``left``..``right`` and ``top``..``bottom``; the
    metric's name sits above the markers' two rows of glyphs."""

    width: int = 640
    height: int = 200
    left: float = 58.0
    right: float = 630.0
    top: float = 44.0
    bottom: float = 178.0

    def x(self, index: int, commits: int) -> float:
        """The middle of commit ``index`` of ``commits``, as the overview strips place it."""
        return self.left + (index + 0.5) * (self.right - self.left) / commits


FRAME = Frame()


@dataclass(frozen=True)
class Mark:
    """A measured value at commit ``index``; ``y`` counts from the top of the whole plot, and
    ``reused_after`` counts the commits right after it that reuse it."""

    sha: str
    index: int
    y: str
    value: float
    reused_after: int


@dataclass(frozen=True)
class Reused:
    """Reused commits that no measured point right before them tells of: one bar, with its value
    and a title of its own."""

    x: str
    width: str
    y: str
    value: str
    tip: str


@dataclass(frozen=True)
class PanelLine:
    """A series on a panel: its path, the commits that reuse the value measured right before them
    (``tails``, one path), and the other reused stretches."""

    css: str
    path: str
    tails: str
    reused: tuple[Reused, ...]


def subject_of(view: ReportView, sha: str) -> str:
    subject = view.by_sha[sha].subject
    if len(subject) > SUBJECT_CHARS:
        subject = subject[: SUBJECT_CHARS - 1] + "\u2026"
    return isolated_plain(subject)


def line_path(coords: Sequence[tuple[float, float] | None]) -> str:
    """An SVG path through ``coords``, lifting the pen at each None (a value drawn in a lane); a
    point between two at its height is left out, so a flat stretch costs two points."""
    parts: list[str] = []
    runs: list[list[tuple[str, str]]] = [[]]
    for at in coords:
        if at is None:
            runs.append([])
        else:
            runs[-1].append((coordinate(at[0]), coordinate(at[1])))
    for run in runs:
        kept = [p for i, p in enumerate(run) if i in (0, len(run) - 1) or not run[i - 1][1] == p[1] == run[i + 1][1]]
        for i, (x, y) in enumerate(kept):
            if i == 0:
                parts.append(f"M{x} {y}")
            else:
                parts.append(f"H{x}" if y == kept[i - 1][1] else f"L{x} {y}")
    return "".join(parts)


def stretches(placed: Sequence[tuple[int, SeriesPoint]]) -> list[list[tuple[int, SeriesPoint]]]:
    """Points grouped into stretches: a measured point and the reused points with its value on the
    commits right after it, or reused points alone, one value on consecutive commits."""
    found: list[list[tuple[int, SeriesPoint]]] = []
    for index, point in placed:
        last = found[-1][-1] if found else None
        if point.measured or not last or last[0] != index - 1 or repr(last[1].value) != repr(point.value):
            found.append([(index, point)])
        else:
            found[-1].append((index, point))
    return found


def reused_bar(view: ReportView, stretch: list[tuple[int, SeriesPoint]], y: float, name: str) -> Reused:
    n = len(view.data.commits)
    (first, point), (last, last_point) = stretch[0], stretch[-1]
    x1, x2 = FRAME.x(first, n), FRAME.x(last, n)
    where = short(point.sha) if first == last else f"{short(point.sha)}..{short(last_point.sha)}"
    tip = (
        f"{name}: {value_text(point.value)}, reused at {plural(len(stretch), 'commit')} {where}"
        "\n(the same tree was measured at another commit)"
    )
    return Reused(coordinate(x1 - 3), coordinate(x2 - x1 + 6), coordinate(y - 3), repr(point.value), tip)


def panel_line(
    view: ReportView, series: Series, axis: Axis, offset: float, css: str, name: str
) -> tuple[PanelLine, list[Mark]]:
    """One series on the panel that starts ``offset`` below the plot's top: what the panel draws,
    and its measured values, which the plot's links hold. A stretch of one value adds only its ends
    to the path."""
    n = len(view.data.commits)
    placed = sorted(((view.index[p.sha], p) for p in series.points if p.sha in view.index), key=lambda ip: ip[0])
    marks, reused, tails, coords = [], [], [], []
    for stretch in stretches(placed):
        (index, point), (last, _) = stretch[0], stretch[-1]
        y = axis.y(point.value)
        ends = (index, last) if last != index else (index,)
        coords += [(FRAME.x(i, n), y) if axis.on_axis(point.value) else None for i in ends]
        if not point.measured:
            reused.append(reused_bar(view, stretch, y, f"{name} {series.metric}"))
            continue
        marks.append(Mark(point.sha, index, coordinate(offset + y), point.value, len(stretch) - 1))
        if len(stretch) > 1:
            tails.append(f"M{coordinate(FRAME.x(index + 1, n))} {coordinate(y)}H{coordinate(FRAME.x(last, n))}")
    return PanelLine(css, line_path(coords), "".join(tails), tuple(reused)), marks
