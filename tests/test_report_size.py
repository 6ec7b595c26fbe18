"""The report of a long line stays small: the timeline keeps a row for every commit measured or named
elsewhere on the page, and folds the commits between them into gap rows, so the page grows with
what was measured and what happened, not with the line's length; every link on it still lands."""

from __future__ import annotations

import hashlib
import html
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chromium import Browser
from cli_in import regtrack
from long_line import long_line

from tracker.core.records import CommitInfo, TransitionKind, TransitionRecord
from tracker.report.html import render_html
from tracker.report.model import Cell, ReportData

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PROBES = ("metadata", "attention")


def line_report(commits: int, measured_every: int, *, broken: tuple[int, int] = (300, 500)) -> ReportData:
    """``commits`` commits whose tree changes every ``measured_every`` commits, measured where it
    changes; both probes fail from commit ``broken[0]`` until ``broken[1]``, where transitions are."""
    infos = tuple(
        CommitInfo(
            hashlib.sha1(f"commit {i}".encode()).hexdigest(),
            (),
            f"Change {i} to the serving engine (#{9000 + i})",
            "Ada Lindqvist <ada@example.com>",
            START + timedelta(minutes=10 * i),
            9000 + i,
        )
        for i in range(commits)
    )
    measured = frozenset(c.sha for i, c in enumerate(infos) if i % measured_every == 0)
    cells = {}
    for i, c in enumerate(infos):
        tree = i - i % measured_every
        bad = broken[0] <= tree < broken[1]
        for p in PROBES:
            cells[(c.sha, p)] = Cell("fail", "rel_err 1.09 > 2e-02", 1) if bad else Cell("pass", None, 1)
    transitions = tuple(
        TransitionRecord(p, infos[at].sha, TransitionKind(kind), None, None, (infos[at].sha,), START, "scan")
        for p in PROBES
        for at, kind in ((broken[0], "regression"), (broken[1], "fix"))
    )
    return ReportData("long/line", START, PROBES, infos, cells, transitions, measured=measured)


def row_ids(page: str) -> list[str]:
    body = page[page.index("<tbody>", page.index('<table class="grid">')) :]
    return re.findall(r'<tr id="([^"]+)"', body[: body.index("</tbody>")])


def dangling_links(page: str) -> set[str]:
    """The in-page links whose target is not an id on the page."""
    ids = set(re.findall(r'\sid="([^"]+)"', page))
    return {href for href in re.findall(r'href="#([^"]*)"', page) if href not in ids}


def test_the_page_grows_with_measured_commits_not_with_the_line() -> None:
    short, long = render_html(line_report(2000, 20)), render_html(line_report(8000, 80, broken=(1200, 2000)))
    assert len(row_ids(short)) == len(row_ids(long)) < 2000 / 8
    assert abs(len(long) - len(short)) < 0.03 * len(short)
    twice_measured = render_html(line_report(2000, 10))
    assert len(row_ids(twice_measured)) > 1.8 * len(row_ids(short))
    assert len(twice_measured) > 1.5 * len(short)


def test_gaps_tell_their_commits_and_where_their_results_come_from() -> None:
    data = line_report(1000, 20)
    page = render_html(data)
    ids = row_ids(page)
    sha = [c.sha for c in data.commits]
    assert {f"c-{s}" for s in data.measured or ()} | {f"c-{sha[-1]}"} <= set(ids)
    gaps = [i for i in ids if i.startswith("g-")]
    assert len(gaps) + len(data.measured or ()) + 1 == len(ids)  # the newest commit is not measured
    # The 18 commits between commit 980 and the newest share 980's tree and its row's results.
    gap = page[page.index(f'<tr id="g-{sha[981]}"') :]
    gap = " ".join(html.unescape(re.sub(r"<[^>]+>", "", gap[: gap.index("</tr>")])).split())
    assert gap.startswith("⋯ 18") and f"18 commits {sha[981][:12]}..{sha[998][:12]}" in gap
    assert "not measured: their trees' results, as the row below" in gap
    assert dangling_links(page) == set()


def test_an_untested_gap_a_lone_commit_and_a_band_that_starts_in_a_gap() -> None:
    data = line_report(100, 20, broken=(20, 40))
    sha = [c.sha for c in data.commits]
    cells = {key: cell for key, cell in data.cells.items() if key[0] not in sha[41:60]}
    measured = (data.measured or frozenset()) | {sha[62]}
    page = render_html(ReportData(data.repository, START, PROBES, data.commits, cells, measured=measured))
    untested = page[page.index(f'<tr id="g-{sha[41]}"') :]
    untested = untested[: untested.index("</tr>")]
    assert "19 commits" in untested and "untested" in untested
    assert f'<tr id="c-{sha[61]}"' in page  # one commit between two rows keeps its own
    overview = page[page.index('<section id="overview"') : page.index('<section id="timeline"')]
    assert f'href="#g-{sha[41]}"' in overview  # the untested band starts at commit 41
    assert dangling_links(page) == set()


def test_without_the_measured_commits_every_commit_keeps_its_row() -> None:
    data = line_report(600, 20)
    page = render_html(ReportData(data.repository, START, PROBES, data.commits, data.cells, data.transitions))
    assert row_ids(page) == [f"c-{c.sha}" for c in reversed(data.commits)]


def test_a_bad_tree_count_is_one_line_and_exit_code_2() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_report_page.py"), "--commits", "100", "--trees", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "bench_report_page: --trees 5 must be from 20 to --commits (100); pass e.g. --trees 300\n"


# ---------------------------------------------------------------------------- a real store


@dataclass(frozen=True)
class ReportedLine:
    measured: list[str]
    named: set[str]
    line: list[str]
    page: Path


@pytest.fixture(scope="module")
def long_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[int, ReportedLine]:
    """Lines of 2,000 and 6,000 commits over the same 40 target trees, each with its page."""
    found = {}
    for commits in (2000, 6000):
        root = tmp_path_factory.mktemp(f"line-{commits}")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("REGTRACK_HOME", str(root / "home"))
            patch.delenv("REGTRACK_DB_URL", raising=False)
            built = long_line(root / "repo", commits, 40)
            page = root / "report.html"
            written = regtrack("report", "--html", str(page), cwd=built.repo)
            assert written.exit_code == 0, written.output
        named = {t.sha for t in built.transitions} | {t.pairs_with for t in built.transitions if t.pairs_with}
        found[commits] = ReportedLine(built.measured, named, built.line, page)
    return found


@pytest.mark.slow
def test_a_long_lines_page_keeps_every_measured_and_event_commit(long_lines: dict[int, ReportedLine]) -> None:
    for reported in long_lines.values():
        page = reported.page.read_text(encoding="utf-8")
        ids = set(row_ids(page))
        wanted = {*reported.measured, *reported.named, reported.line[0], reported.line[-1]}
        assert {f"c-{sha}" for sha in wanted} <= ids
        assert len(ids) < len(reported.line) / 10
        assert dangling_links(page) == set()
    short, long = (len(long_lines[n].page.read_bytes()) for n in (2000, 6000))
    assert long < 1.1 * short, "three times the commits over the same trees: about the same page"


@pytest.mark.slow
def test_a_long_lines_page_opens_in_chromium_and_a_gap_is_a_target(
    long_lines: dict[int, ReportedLine], browser: Browser
) -> None:
    reported = long_lines[6000]
    page = browser.load(reported.page)
    try:
        found = page.evaluate(
            """(() => {
              const links = [...document.querySelectorAll('a[href^="#"]')];
              const gap = document.querySelector('tr.gap');
              location.hash = '#' + gap.id;
              return {
                rows: document.querySelectorAll('table.grid tbody tr').length,
                dangling: links.filter(a => !document.getElementById(a.getAttribute('href').slice(1))).length,
                target: document.querySelector(':target').id === gap.id,
              };
            })()"""
        )
        assert page.problems() == []
        assert found == {"rows": len(row_ids(reported.page.read_text(encoding="utf-8"))), "dangling": 0, "target": True}
    finally:
        page.close()
