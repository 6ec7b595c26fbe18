"""The report's metric plots: the geometry and text built from hand-made series, the page in
headless Chromium (points read back from the DOM, reached by keyboard), and the plots of a scanned
demo range checked against the store."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from chromium import Browser
from click.testing import CliRunner
from demo_histories import DemoHistories
from test_report_html import PROBES, demo_report, large_report

from tracker.cli.app import main
from tracker.core.records import RunRow
from tracker.report.axes import value_axis
from tracker.report.html import render_html
from tracker.report.model import ReportData, Series, SeriesPoint
from tracker.report.page import ReportView
from tracker.report.plot_series import line_path
from tracker.report.plots import probe_plots
from tracker.workspace import Workspace

CPU = "cpu-fingerprint-0001"
H200 = "h200-fingerprint-0002"
TOLERANCE = {("rel_err", "float32"): 1e-5, ("rel_err", "bfloat16"): 2e-2, ("max_abs_err", "float32"): 1e-4}
TOLERANCE[("max_abs_err", "bfloat16")] = 6e-2
REUSED = {17, 33, 34, 35}
"""Commits whose tree is that of the commit before them: their values are reused."""


def metric_value(state: str, metric: str, dtype: str, i: int) -> float:
    """What a probe might have stored: small errors where it passed, large ones where it failed."""
    if metric == "duration_s":
        return round(0.8 + 0.05 * (i % 5), 3)
    if state == "fail":
        return 0.31 + i / 1000
    base = 1e-7 if dtype == "float32" else 3e-3
    return 0.0 if metric == "max_abs_err" and i == 8 else base * (1 + (i % 4) / 10)


def series_for(data: ReportData, probe: str, case: str, metric: str, environment: str, dtype: str) -> Series:
    """A series over the commits where ``probe`` has a pass or fail cell; the GPU measured every
    third commit only; commits in ``REUSED`` reuse the value of the commit before them."""
    points = []
    for i, commit in enumerate(data.commits):
        state = data.cell(commit.sha, probe).state
        if state not in ("pass", "fail") or (environment == H200 and i % 3):
            continue
        if i in REUSED and points:
            points.append(SeriesPoint(commit.sha, points[-1].value, False))
        else:
            points.append(SeriesPoint(commit.sha, metric_value(state, metric, dtype, i), True))
    device = "cpu" if environment == CPU else "NVIDIA H200"
    return Series(probe, case, metric, environment, device, dtype, TOLERANCE.get((metric, dtype)), tuple(points))


def with_series(data: ReportData) -> ReportData:
    series = [
        series_for(data, probe, case, metric, environment, dtype)
        for probe in PROBES
        for case in ("N4-T2-bs4-p16", "N3-T5-bs3-p64")
        for metric in ("rel_err", "max_abs_err", "duration_s")
        for environment, dtype in ((CPU, "float32"), (H200, "bfloat16"))
    ]
    return replace(data, series=tuple(series))


def points_of(data: ReportData) -> list[tuple[str, str]]:
    """(sha, repr of the value) of every measured point, in any order."""
    return [(p.sha, repr(p.value)) for s in data.series for p in s.points if p.measured]


class Elements(HTMLParser):
    """Every element's tag, attributes and the text of a ``<title>`` right inside it."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.titles: list[str] = []
        self._in_title = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))
        self._in_title = tag == "title"
        if self._in_title:
            self.titles.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles[-1] += data

    def having(self, tag: str, attribute: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.found if t == tag and attribute in attrs]


def section(page: str) -> str:
    start = page.index('<section id="metrics">')
    return page[start : page.index("</section>", start)]


# ---------------------------------------------------------------------------- the value axis


def test_values_spanning_decades_get_a_log_axis_with_decade_ticks() -> None:
    axis = value_axis([1e-7, 2e-7, 0.31], [1e-5], 30, 170)
    assert axis.log and [t.label for t in axis.ticks] == ["1e-7", "1e-6", "1e-5", "1e-4", "0.001", "0.01", "0.1", "1"]
    assert axis.y(1e-7) == 170 and axis.y(1.0) == 30
    assert axis.zero_lane is None and axis.odd_lane is None


def test_values_within_two_decades_get_a_linear_axis_on_whole_steps() -> None:
    axis = value_axis([0.8, 0.95, 1.0], [], 30, 170)
    assert not axis.log
    assert [t.label for t in axis.ticks] == ["0.8", "0.85", "0.9", "0.95", "1"]


def test_a_zero_on_a_log_axis_is_drawn_in_a_lane_below_it_not_on_it() -> None:
    axis = value_axis([0.0, 1e-7, 0.3], [], 30, 170)
    assert axis.log and axis.zero_lane is not None
    assert axis.zero_lane > axis.bottom >= axis.y(1e-7)
    assert axis.y(0.0) == axis.zero_lane and not axis.on_axis(0.0)


def test_negative_values_keep_the_axis_linear() -> None:
    axis = value_axis([-1e-7, 1e-7, 0.3], [], 30, 170)
    assert not axis.log and axis.zero_lane is None and axis.on_axis(-1e-7)


def test_nan_and_infinity_sit_in_a_lane_above_the_axis() -> None:
    axis = value_axis([1.0, math.nan, math.inf, 2.0], [], 30, 170)
    assert axis.odd_lane is not None and axis.odd_lane < axis.top <= axis.y(2.0)
    assert axis.y(math.nan) == axis.y(math.inf) == axis.odd_lane


def test_a_constant_series_gets_an_axis_around_its_value() -> None:
    axis = value_axis([3.0, 3.0], [], 30, 170)
    assert axis.top < axis.y(3.0) < axis.bottom


def test_a_flat_stretch_costs_two_points_and_a_lane_value_lifts_the_pen() -> None:
    path = line_path([(1, 5), (2, 5), (3, 5), (4, 7.25), None, (6, 1), (7, 1)])
    assert path == "M1 5H3L4 7.2M6 1H7"


def test_many_decades_are_ticked_every_few_from_the_top_decade() -> None:
    axis = value_axis([1e-12, 10.0], [], 30, 170)
    assert [t.label for t in axis.ticks] == ["1e-13", "1e-11", "1e-9", "1e-7", "1e-5", "0.001", "0.1", "10"]


# ---------------------------------------------------------------------------- the page's markup


def figures(page: str) -> dict[tuple[str, str], list[tuple[str, dict[str, str | None], str]]]:
    """Per (probe, case), the elements of its figure: (tag, attributes, text of the title inside)."""
    found: dict[tuple[str, str], list[tuple[str, dict[str, str | None], str]]] = {}
    parsed = Elements(section(page))
    current: list[tuple[str, dict[str, str | None], str]] = []
    title_at = 0
    for tag, attrs in parsed.found:
        if tag == "figure":
            current = found.setdefault((attrs["data-probe"] or "", attrs["data-case"] or ""), [])
        if tag == "title":
            current[-1] = (current[-1][0], current[-1][1], parsed.titles[title_at])
            title_at += 1
        else:
            current.append((tag, attrs, ""))
    return found


def links_of(elements: list[tuple[str, dict[str, str | None], str]]) -> dict[tuple[str, str], list[str]]:
    """(colour, sha) of each point link with the values of its dots, and its title under key "tip"."""
    links: dict[tuple[str, str], list[str]] = {}
    current: list[str] = []
    for tag, attrs, _ in elements:
        if tag == "a" and "data-sha" in attrs:
            current = links.setdefault((attrs["class"] or "", attrs["data-sha"] or ""), [])
        elif tag == "circle":
            current.append(attrs["data-value"] or "")
    return links


def test_every_measured_value_is_a_point_in_a_link_to_its_commit() -> None:
    data = with_series(demo_report())
    page = render_html(data)
    shown = figures(page)
    for probe in PROBES:
        for case in ("N4-T2-bs4-p16", "N3-T5-bs3-p64"):
            links = links_of(shown[(probe, case)])
            expected: dict[str, list[str]] = {}
            for s in data.series:
                if (s.probe, s.case) == (probe, case):
                    for p in s.points:
                        if p.measured:
                            expected.setdefault(p.sha, []).append(repr(p.value))
            got: dict[str, list[str]] = {}
            for (_, sha), values in links.items():
                got.setdefault(sha, []).extend(values)
            assert {sha: sorted(v) for sha, v in got.items()} == {sha: sorted(v) for sha, v in expected.items()}
    anchors = Elements(section(page)).having("a", "data-sha")
    assert anchors and all(a["href"] == f"#c-{a['data-sha']}" for a in anchors)


def test_a_points_title_names_commit_subject_series_and_values() -> None:
    data = with_series(demo_report())
    elements = figures(render_html(data))[("target_verify_attention", "N4-T2-bs4-p16")]
    commit = data.commits[15]
    tips = [tip for tag, attrs, tip in elements if tag == "a" and attrs.get("data-sha") == commit.sha]
    assert len(tips) == 2  # the CPU and the GPU measured it
    assert all(tip.startswith(f"{commit.sha[:8]} \u2068{commit.subject}\u2069\n") for tip in tips)
    assert {tip.split("\n")[1] for tip in tips} == {
        "cpu float32: max_abs_err = 0.325; rel_err = 0.325; duration_s = 0.8",
        "NVIDIA H200 bfloat16: max_abs_err = 0.325; rel_err = 0.325; duration_s = 0.8",
    }


def test_reused_commits_are_no_points_and_the_legend_says_reused() -> None:
    data = with_series(demo_report())
    page = render_html(data)
    elements = figures(page)[("swa_page_table", "N4-T2-bs4-p16")]
    shas = {attrs["data-sha"] for tag, attrs, _ in elements if tag == "a"}
    reused = {data.commits[i].sha for i in REUSED}
    assert shas and not shas & reused
    tips = [tip for tag, attrs, tip in elements if tag == "a" and attrs.get("data-sha") == data.commits[16].sha]
    assert all(tip.endswith("reused at the next commit") for tip in tips)
    assert any(tag == "path" and attrs.get("class") == "ru" for tag, attrs, _ in elements)
    assert "reused</span>" in section(page)


def test_a_stretch_of_reused_commits_without_its_measured_commit_says_what_it_holds() -> None:
    data = demo_report()
    sha = [c.sha for c in data.commits]
    points = (SeriesPoint(sha[3], 0.5, True), SeriesPoint(sha[7], 0.25, False), SeriesPoint(sha[8], 0.25, False))
    series = Series("swa_page_table", "p1-w32", "checks", CPU, "cpu", None, None, points)
    elements = figures(render_html(replace(data, series=(series,))))[("swa_page_table", "p1-w32")]
    bars = [(attrs, tip) for tag, attrs, tip in elements if tag == "rect" and attrs.get("class") == "ru"]
    assert len(bars) == 1 and bars[0][0]["data-value"] == "0.25"
    assert bars[0][1].startswith(f"cpu checks: 0.25, reused at 2 commits {sha[7][:12]}..{sha[8][:12]}")


def test_the_legend_names_each_environment_and_dtype_and_a_shared_device_by_fingerprint() -> None:
    data = with_series(demo_report())
    page = render_html(data)
    assert '<span class="name">cpu float32</span>' in page
    assert '<span class="name">NVIDIA H200 bfloat16</span>' in page
    other_cpu = replace(data.series[0], environment="cpu-fingerprint-0003", dtype="float32")
    page = render_html(replace(data, series=(*data.series, other_cpu)))
    assert '<span class="name">cpu (cpu-fing) float32</span>' in page


def test_tolerances_are_dashed_lines_named_by_their_series() -> None:
    page = render_html(with_series(demo_report()))
    elements = figures(page)[("target_verify_attention", "N4-T2-bs4-p16")]
    tips = {tip for tag, attrs, tip in elements if tag == "path" and "tol" in (attrs.get("class") or "")}
    assert tips == {
        "tolerance 1e-05 (cpu float32)",
        "tolerance 0.02 (NVIDIA H200 bfloat16)",
        "tolerance 0.0001 (cpu float32)",
        "tolerance 0.06 (NVIDIA H200 bfloat16)",
    }


def test_transitions_and_pairs_sit_at_the_x_of_their_commit() -> None:
    data = with_series(demo_report())
    plots = probe_plots(ReportView(data))
    attention = next(p for p in plots if p.probe == "target_verify_attention")
    x_of = {link.sha: link.x for case in attention.cases for link in case.links}
    sha = [c.sha for c in data.commits]
    at = {(m.css, m.glyph): m.x for m in attention.markers}
    assert at[("revert", "\u21a9")] == x_of[sha[20]]
    assert at[("reland", "\u21bb")] == x_of[sha[24]]
    assert sorted(m.x for m in attention.markers if m.css == "regression") == sorted([x_of[sha[13]], x_of[sha[20]]])
    page = render_html(data)
    assert page.count(f'<use href="#{attention.marker_id}"/>') == sum(len(c.panels) for c in attention.cases)


def test_probes_with_a_transition_are_unfolded_and_the_others_folded() -> None:
    page = section(render_html(with_series(demo_report())))
    folded = re.findall(r'<details class="probe-plots"( open)?>\n<summary><h3>([^<]+)</h3>', page)
    assert dict((probe, bool(is_open)) for is_open, probe in folded) == {
        "target_verify_metadata": True,
        "target_verify_attention": True,
        "decode_graph_replay": False,
        "swa_page_table": True,
    }


def test_a_metric_with_one_value_throughout_is_said_not_plotted() -> None:
    data = demo_report()
    points = tuple(SeriesPoint(c.sha, 4.0, i % 2 == 0) for i, c in enumerate(data.commits))
    series = Series("decode_graph_replay", "bs4-p16", "replays", CPU, "cpu", "float32", None, points)
    page = section(render_html(replace(data, series=(series,))))
    assert '<svg class="plot"' not in page
    measured = len(data.commits) // 2
    assert (
        f'<span data-metric="replays" data-value="4.0">replays = 4</span> '
        f'<span class="muted">at all {measured} measured commits (cpu float32)</span>'
    ) in page


def test_values_that_span_decades_get_a_log_panel_and_a_zero_its_own_lane() -> None:
    plots = probe_plots(ReportView(with_series(demo_report())))
    case = plots[1].cases[1]
    assert [(p.metric, p.log) for p in case.panels] == [("max_abs_err", True), ("rel_err", True), ("duration_s", False)]
    assert [lane.text for lane in case.panels[0].lanes] == ["0"]
    zero = next(link for link in case.links if link.sha == demo_report().commits[8].sha)
    assert zero.dots[0].value == "0.0" and zero.dots[0].y == case.panels[0].lanes[0].at


def test_names_from_the_database_are_escaped_in_the_plots() -> None:
    data = demo_report()
    hostile = "<img src=x onerror=alert(1)>"
    points = (SeriesPoint(data.commits[12].sha, 0.5, True), SeriesPoint(data.commits[13].sha, 0.7, True))
    series = Series(hostile, hostile, hostile, hostile, hostile, hostile, None, points)
    page = section(render_html(replace(data, series=(series,))))
    assert hostile not in page and "<script" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "\u2068<script>" not in page and "&lt;script&gt;document.title" in page  # the subject of commit 12


def test_a_report_without_metrics_says_so() -> None:
    assert "No metric stored for this range." in section(render_html(demo_report()))


@pytest.mark.slow
def test_a_long_range_costs_per_measured_value_not_per_commit() -> None:
    """15,000 commits, 300 measured; the commits between reuse the values measured before them."""
    data = large_report(15000)
    measured = range(0, 15000, 50)

    def series(reused: bool) -> tuple[Series, ...]:
        found = []
        for probe in PROBES:
            for metric in ("failed_replays", "stub_modules", "duration_s"):
                points = []
                for i, c in enumerate(data.commits):
                    if i in measured:
                        points.append(SeriesPoint(c.sha, float(i % 7 + (metric == "duration_s") * 0.25), True))
                    elif reused:
                        points.append(SeriesPoint(c.sha, points[-1].value, False))
                found.append(Series(probe, "case", metric, CPU, "cpu", "float32", None, tuple(points)))
        return tuple(found)

    sparse = len(section(render_html(replace(data, series=series(False)))))
    dense = len(section(render_html(replace(data, series=series(True)))))
    values = len(PROBES) * 3 * len(measured)
    reused = len(PROBES) * 3 * (len(data.commits) - len(measured))
    assert dense - sparse < reused  # under a byte for each reused commit of each series
    assert dense < 250 * values


# ---------------------------------------------------------------------------- in Chromium

READ_POINTS = """(() => [...document.querySelectorAll('#metrics svg.plot a[data-sha]')].map(a => [
  a.closest('figure').dataset.probe, a.closest('figure').dataset.case, a.dataset.sha,
  [...a.querySelectorAll('circle')].map(c => c.dataset.value),
  a.getAttribute('href'), !!document.getElementById('c-' + a.dataset.sha),
  a.querySelector('circle').getBoundingClientRect().width > 0])
)()"""


def shown_points(page: Any) -> dict[tuple[str, str, str], list[str]]:
    """(probe, case, sha) -> the values the page's point links hold, read from the DOM."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for probe, case, sha, values, href, row, drawn in page.evaluate(READ_POINTS):
        assert href == f"#c-{sha}" and row and drawn
        found.setdefault((probe, case, sha), []).extend(values)
    return {key: sorted(values) for key, values in found.items()}


def press(page: Any, key: str, code: int) -> None:
    """A key pressed and released, as the keyboard sends it to the page."""
    for kind in ("rawKeyDown", "keyUp"):
        event = {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code}
        page.browser.call("Input.dispatchKeyEvent", event, session=page.session)
    if key == "Enter":
        page.browser.call("Input.dispatchKeyEvent", {"type": "char", "text": "\r"}, session=page.session)


def accessible_name(page: Any, selector: str) -> tuple[str, str]:
    """The role and name Chromium's accessibility tree gives the element ``selector`` picks."""
    call = page.browser.call
    root = call("DOM.getDocument", session=page.session)["root"]["nodeId"]
    node = call("DOM.querySelector", {"nodeId": root, "selector": selector}, session=page.session)["nodeId"]
    ax = call("Accessibility.getPartialAXTree", {"nodeId": node, "fetchRelatives": False}, session=page.session)
    mine = ax["nodes"][0]
    return mine["role"]["value"], mine["name"]["value"]


def test_the_points_read_back_from_chromium_equal_the_series(browser: Browser, tmp_path: Path) -> None:
    data = with_series(demo_report())
    path = tmp_path / "report.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = browser.load(path)
    try:
        expected: dict[tuple[str, str, str], list[str]] = {}
        for s in data.series:
            for p in s.points:
                if p.measured:
                    expected.setdefault((s.probe, s.case, p.sha), []).append(repr(p.value))
        assert shown_points(page) == {key: sorted(values) for key, values in expected.items()}
        assert page.problems() == []
    finally:
        page.close()


def test_a_keyboard_user_reaches_a_point_hears_its_name_and_jumps_to_its_commit(
    browser: Browser, tmp_path: Path
) -> None:
    """Tab from the first probe's heading lands on its first point, a link whose accessible name
    holds the commit, subject and values; Enter follows it to the commit's row."""
    data = with_series(demo_report())
    path = tmp_path / "report.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = browser.load(path)
    try:
        page.evaluate("document.querySelector('#metrics details summary').focus()")
        press(page, "Tab", 9)
        focused = page.evaluate(
            "(() => { const a = document.activeElement; return [a.tagName, a.dataset.sha, a.closest('figure') "
            "&& a.closest('figure').dataset.case]; })()"
        )
        wanted = ("target_verify_metadata", "N3-T5-bs3-p64", H200)
        gpu = next(s for s in data.series if (s.probe, s.case, s.environment) == wanted)
        first = next(p for p in gpu.points if p.measured)  # the legend's first series: "NVIDIA H200 bfloat16"
        assert focused == ["a", first.sha, "N3-T5-bs3-p64"]
        role, name = accessible_name(page, f'#metrics a[data-sha="{first.sha}"]')
        assert role == "link"
        subject = data.commits[[c.sha for c in data.commits].index(first.sha)].subject
        assert name.startswith(f"{first.sha[:8]} \u2068{subject[:50]}")  # long subjects end in an ellipsis
        assert "NVIDIA H200 bfloat16: max_abs_err = " in name and "duration_s = " in name
        press(page, "Enter", 13)
        assert page.evaluate("location.hash") == f"#c-{first.sha}"
    finally:
        page.close()


# ---------------------------------------------------------------------------- a scanned demo range

DEMO_PROBE = "target_verify_attention"


@dataclass(frozen=True)
class Scanned:
    repo: Path
    page: Path
    line: list[str]
    runs: list[RunRow]
    copies: set[int]


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory, demo_histories: DemoHistories) -> Scanned:
    """The demo history of 60 commits scanned with the attention probe, and its report written."""
    home = tmp_path_factory.mktemp("plots")
    repo = home / "demo"
    demo_histories.copy(60, repo)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_HOME", str(home))
        patch.delenv("REGTRACK_DB_URL", raising=False)
        cli = CliRunner()
        options = ("--repo", str(repo), "--probe", DEMO_PROBE)
        scan = cli.invoke(main, ["scan", "HEAD", *options, "--seed", "0", "--workers", "2"], catch_exceptions=False)
        assert scan.exit_code in (0, 1), scan.output
        page = home / "report.html"
        written = cli.invoke(main, ["report", "--html", str(page), *options], catch_exceptions=False)
        assert written.exit_code == 0, written.output
        ws = Workspace.open(repo)
        try:
            repo_id = ws.store.repository(ws.repo.path)
            runs = ws.store.runs(repo_id=repo_id, probe=DEMO_PROBE)
            copies = set(ws.store.copied_from([r.id for r in runs]))
            line = ws.repo.line(ws.target.branch)
        finally:
            ws.close()
    return Scanned(repo, page, line, runs, copies)


@pytest.mark.slow
def test_the_plotted_points_of_a_scanned_demo_range_are_the_stored_metrics(scanned: Scanned, browser: Browser) -> None:
    """Every point link read from the page's DOM in Chromium holds values the store has for its
    commit and case, and every commit a run executed at has its link."""
    page = browser.load(scanned.page)
    try:
        shown = shown_points(page)
        flat = page.evaluate(
            "[...document.querySelectorAll('#metrics .unchanged [data-metric]')].map(s => "
            "[s.closest('figure').dataset.case, s.dataset.metric, s.dataset.value])"
        )
        assert page.problems() == []
    finally:
        page.close()
    on_line = set(scanned.line)
    stored: dict[tuple[str, str], set[str]] = {}
    executed = set()
    for run in scanned.runs:
        values = [v for k, v in run.metrics.items() if isinstance(v, float) and not k.endswith("_tol")]
        stored.setdefault((run.case_id, run.sha), set()).update(repr(v) for v in [*values, run.duration_s])
        if run.sha in on_line and run.id not in scanned.copies and run.outcome.value != "skip":
            executed.add((DEMO_PROBE, run.case_id, run.sha))
    assert shown and all(probe == DEMO_PROBE for probe, _, _ in shown)
    for (_, case, sha), values in shown.items():
        assert set(values) <= stored[(case, sha)], (case, sha)
    assert set(shown) == executed
    for case, metric, value in flat:
        assert all(
            repr(run.metrics[metric]) == value for run in scanned.runs if run.case_id == case and metric in run.metrics
        )
