"""The HTML report: pure checks of the rendered text, and the page loaded in headless Chromium.

The Chromium tests (``tests/chromium.py``) need no package beyond the standard library; they skip
only where no ``chromium`` binary exists (``.ci/run`` installs one).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from chromium import Browser, Page
from markupsafe import escape

from tracker.core.records import (
    CommitInfo,
    EnvironmentInfo,
    PairKind,
    StepRow,
    StepVerdict,
    StretchRecord,
    TransitionKind,
    TransitionRecord,
)
from tracker.core.verdicts import State
from tracker.report.html import CSP, render_html
from tracker.report.model import Cell, ReportBisect, ReportData
from tracker.search.transitions import find_transitions

SCRIPT_SUBJECT = "<script>document.title='pwned'</script>"
IMG_SUBJECT = '"><img src=x onerror="document.title=\'pwned\'">'
TV = ("target_verify_metadata", "target_verify_attention")
PROBES = (*TV, "decode_graph_replay", "swa_page_table")
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _sha(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def commit(sha: str, subject: str, pr_number: int | None, author: str, authored_at: datetime) -> CommitInfo:
    return CommitInfo(sha, (), subject, author, authored_at, pr_number)


def transition(
    probe: str,
    sha: str,
    kind: str,
    pairs_with: str | None = None,
    pair_kind: PairKind | None = None,
    candidates: tuple[str, ...] = (),
) -> TransitionRecord:
    """A stored transition; exact (its only candidate is ``sha``) unless ``candidates`` says otherwise."""
    return TransitionRecord(
        probe, sha, TransitionKind(kind), pairs_with, pair_kind, candidates or (sha,), START, "scan"
    )


def step(position: int, sha: str, verdict: StepVerdict, reused: bool) -> StepRow:
    return StepRow(position, sha, verdict, reused, START)


# ---------------------------------------------------------------------------- the demo story


def demo_report() -> ReportData:
    """The demo history's story as a report: an untestable stretch, the SWA bug, the target-verify
    bug introduced, fixed, reverted and re-landed, a flaky stretch; two subjects try to inject."""
    subjects = {
        0: "Initial import of the serving engine and its attention backend",
        4: "Move kernel selection into kernels.registry",
        7: "Fix backend import after the kernel registry move",
        10: "Translate only whole pages of the SWA page table",
        12: SCRIPT_SUBJECT,
        13: "[Spec v2] Draft-extend CUDA graphs for EAGLE",
        16: "Fix SWA page table for a partly filled last page",
        17: "Merge branch 'docs/attention-backends'",
        18: "Fix TRTLLM target verify query metadata",
        20: 'Revert "Fix TRTLLM target verify query metadata (#1240)"',
        22: IMG_SUBJECT,
        24: "Fix TRTLLM target verify query metadata",
        27: "Skip the in-flight token's page in the decode page-table copy",
        31: "Copy the decode page table for the newest token too",
    }
    filler = (
        "Tidy scheduler logging",
        "Bump ruff to 0.9",
        "Document the page-size knob",
        "Speed up the radix cache lookup",
        "Add a chunked-prefill test",
        "Rename ForwardMode helpers",
        "Trim a warning in the tokenizer manager",
    )
    people = ("Ada Lindqvist", "Baptiste Moreau", "Chen Wei", "Divya Raman", "Emeka Obi")
    commits = []
    pr = 1200
    for i in range(36):
        pr += 1 + i * 7 % 11
        subject = subjects.get(i, filler[i % len(filler)])
        commits.append(
            commit(
                _sha(i),
                f"{subject} (#{pr})" if i not in (12, 22) else subject,
                None if i in (12, 17, 22) else pr,
                people[i % 5],
                START + timedelta(minutes=45 * i),
            )
        )
    sha = [c.sha for c in commits]
    cells: dict[tuple[str, str], Cell] = {}
    signatures = {
        "target_verify_metadata": "max_seq_len_q 4 != 2 after replay (n4_t2)",
        "target_verify_attention": "max abs err 3.1e-01 > 2e-02; 7/8 rows mismatched",
        "swa_page_table": "window pages [3, 4] != [3, 4, 5] <partial page>",
        "decode_graph_replay": "replay 3: page id 17 != 18 (stale page)",
    }
    for i in range(36):
        for probe in PROBES:
            if i in (2, 9, 26) and probe != "target_verify_metadata":
                continue  # not measured: docs-only commits
            if 4 <= i <= 6:
                cells[(sha[i], probe)] = Cell("skip", "ImportError: cannot import name 'make_kernel'", 1)
                continue
            bad = (probe in TV and (13 <= i < 18 or 20 <= i < 24)) or (probe == "swa_page_table" and 10 <= i < 16)
            if probe == "decode_graph_replay" and 27 <= i <= 30:
                cells[(sha[i], probe)] = Cell("flaky", signatures[probe], 3)
            elif bad:
                cells[(sha[i], probe)] = Cell("fail", signatures[probe], 3)
            else:
                cells[(sha[i], probe)] = Cell("pass", None, 1)
    transitions = [
        transition("swa_page_table", sha[10], "regression"),
        transition("swa_page_table", sha[16], "fix"),
    ]
    for probe in TV:
        transitions += [
            transition(probe, sha[13], "regression"),
            transition(probe, sha[18], "fix"),
            transition(probe, sha[20], "regression", sha[18], "reverts"),
            transition(probe, sha[24], "fix", sha[18], "relands"),
        ]
    stretches = [StretchRecord(p, "untestable", sha[4], sha[6]) for p in PROBES]
    stretches.append(StretchRecord("decode_graph_replay", "flaky", sha[27], sha[30]))
    bisects = [
        ReportBisect(
            3,
            "target_verify_metadata",
            sha[0],
            sha[35],
            "done",
            sha[20],
            (sha[20],),
            (
                step(1, sha[18], "good", True),
                step(2, sha[27], "good", True),
                step(3, sha[22], "bad", False),
                step(4, sha[20], "bad", False),
                step(5, sha[19], "good", True),
            ),
        ),
        ReportBisect(
            2,
            "swa_page_table",
            sha[7],
            sha[14],
            "done",
            sha[10],
            (sha[10],),
            (
                step(1, sha[11], "bad", False),
                step(2, sha[9], "good", False),
                step(3, sha[10], "bad", False),
                step(4, sha[9], "good", False),
            ),
            strategy="auto",
            confidence=0.9624,
        ),
        ReportBisect(
            1,
            "target_verify_attention",
            sha[3],
            sha[15],
            "ambiguous",
            None,
            (sha[4], sha[5], sha[6], sha[7]),
            (step(1, sha[5], "skip", False), step(2, sha[8], "good", False)),
        ),
    ]
    environments = [
        EnvironmentInfo("cpu", None, None, None, None, "2.13.0+cpu", None, "3.11.7", "ci-runner-4"),
        EnvironmentInfo(
            "cuda", "NVIDIA H200", "9.0", "570.124.06", "12.8", "2.13.0+cu128", "0.7.2", "3.11.7", "gpu-node-17"
        ),
    ]
    return ReportData(
        "sglang (demo history)",
        START + timedelta(days=3),
        PROBES,
        tuple(commits),
        cells,
        tuple(transitions),
        tuple(stretches),
        tuple(bisects),
        tuple(environments),
    )


def large_report(n: int = 1000) -> ReportData:
    """``n`` commits; each probe breaks and mends periodically, some commits are untested, and a
    regression hides behind an untestable stretch. Transitions come from ``find_transitions``."""
    commits = tuple(
        commit(
            _sha(i),
            f"Change number {i} to the attention backend (#{5000 + i})",
            5000 + i,
            f"Author {i % 13}",
            START + timedelta(minutes=20 * i),
        )
        for i in range(n)
    )
    to_state = {"pass": State.GOOD, "fail": State.BAD, "skip": State.SKIP, "flaky": State.FLAKY}
    cells: dict[tuple[str, str], Cell] = {}
    transitions = []
    for p, probe in enumerate(PROBES):
        period = 97 + 31 * p
        line: list[tuple[int, str]] = []
        for i in range(n):
            if p > 0 and i % 7 == 3:
                continue  # untested
            state = "fail" if (i + 13 * p) % period >= period - 9 else "pass"
            if p == 0 and 600 <= i <= 611:
                state = "skip"
            elif p == 0 and 612 <= i <= 640:
                state = "fail"
            elif p == 1 and 300 <= i <= 305:
                state = "flaky"
            line.append((i, state))
            cells[(commits[i].sha, probe)] = Cell(state, "signature" if state in ("fail", "flaky") else None, 1)
        found, _ = find_transitions([to_state[state] for _, state in line])
        for t in found:
            transitions.append(
                transition(
                    probe,
                    commits[line[t.index][0]].sha,
                    t.kind.value,
                    candidates=tuple(commits[line[c][0]].sha for c in t.candidates),
                )
            )
    return ReportData(
        "big/repo",
        START,
        PROBES,
        commits,
        cells,
        tuple(transitions),
        (StretchRecord(PROBES[0], "untestable", commits[600].sha, commits[611].sha),),
    )


# ---------------------------------------------------------------------------- parsing the output


class Parsed(HTMLParser):
    """Every start tag with its attributes, and all text, as a browser's tokenizer would see them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all_text(self) -> str:
        return "".join(self.text)

    def attribute_values(self) -> list[str]:
        return [v for _, attrs in self.tags for v in attrs.values() if v is not None]


ALLOWED_TAGS = {
    "html",
    "head",
    "meta",
    "link",
    "title",
    "style",
    "body",
    "header",
    "nav",
    "section",
    "footer",
    "h1",
    "h2",
    "h3",
    "p",
    "a",
    "span",
    "b",
    "code",
    "div",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "details",
    "summary",
    "svg",
    "rect",
    "line",
    "path",
    "bdi",
}


def hostile_report() -> ReportData:
    """Every string field holds markup naming the field, so a field left unescaped shows as a tag."""

    def h(name: str) -> str:
        return f"<i>{name}</i>\"'&amp;<b onmouseover=x>"

    probe = h("probe")
    commits = tuple(
        commit(h(f"sha{i}")[:12] + str(i), h(f"subject{i}"), 7, h(f"author{i}"), START + timedelta(hours=i))
        for i in range(3)
    )
    sha = [c.sha for c in commits]
    cells = {
        (sha[0], probe): Cell("pass"),
        (sha[1], probe): Cell("fail", h("signature"), 2),
        (sha[2], probe): Cell("pass"),
    }
    return ReportData(
        h("repository"),
        START,
        (probe,),
        commits,
        cells,
        (
            transition(probe, sha[1], "regression", candidates=(sha[0], sha[1])),
            transition(probe, sha[2], "fix", sha[1], "reverts"),
        ),
        (StretchRecord(probe, "flaky", sha[0], sha[0]),),
        (
            ReportBisect(
                1, probe, sha[0], sha[2], h("status"), sha[1], (sha[1],), (step(1, sha[1], "bad", True),), h("strategy")
            ),
            ReportBisect(2, probe, sha[0], sha[2], "ambiguous", None, (h("candidate"),), ()),
        ),
        (
            EnvironmentInfo(
                *(h(f) for f in ("device", "gpu", "cc", "driver", "cuda", "torch", "flashinfer", "python", "host")),
                facts={h("fact"): h("value")},
            ),
        ),
    )


# ---------------------------------------------------------------------------- pure tests


def test_head_declares_charset_and_a_policy_that_forbids_network_loads() -> None:
    page = render_html(demo_report())
    head = page[: page.index("</head>")]
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in head
    policies = [
        attrs
        for tag, attrs in Parsed(head).tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert len(policies) == 1
    directives = {d.split()[0]: d.split()[1:] for d in policies[0]["content"].split(";") if d.strip()}
    assert directives["default-src"] == ["'none'"]
    assert directives["style-src"] == ["'unsafe-inline'"]
    assert directives["img-src"] == ["data:"]
    assert "script-src" not in directives  # no script at all: default-src 'none' forbids it
    assert head.index("Content-Security-Policy") < head.index("<style>")
    assert policies[0]["content"] == CSP


@pytest.mark.parametrize("report", [demo_report, large_report, hostile_report])
def test_no_external_url_and_nothing_to_fetch(report: Any) -> None:
    page = render_html(report())
    assert not re.search(r"https?:|//|url\(", page, re.IGNORECASE)
    parsed = Parsed(page)
    assert not [
        tag
        for tag, _ in parsed.tags
        if tag in {"script", "img", "iframe", "object", "embed", "image", "use", "base", "form"}
    ]
    for tag, attrs in parsed.tags:
        assert "src" not in attrs and "srcset" not in attrs and "xlink:href" not in attrs
        if "href" in attrs:
            assert attrs["href"].startswith("#") or (tag, attrs["href"]) == ("link", "data:,"), (tag, attrs)


def test_a_script_in_a_commit_subject_is_escaped_wherever_it_is_shown() -> None:
    data = demo_report()
    page = render_html(data)
    assert SCRIPT_SUBJECT not in page and IMG_SUBJECT not in page and "<script" not in page
    shown = escape(SCRIPT_SUBJECT)
    assert f"<bdi>{shown}</bdi>" in page and f'title="{shown}"' in page
    assert f'title="{data.commits[22].sha}: {escape(IMG_SUBJECT)}"' in page  # a bisect step's link to the commit


def test_every_data_field_is_escaped() -> None:
    data = hostile_report()
    page = render_html(data)
    parsed = Parsed(page)
    assert {tag for tag, _ in parsed.tags} <= ALLOWED_TAGS
    assert not [name for _, attrs in parsed.tags for name in attrs if name.startswith("on")]
    assert "<i>" not in page and "<b " not in page
    shown = parsed.all_text() + "\n".join(parsed.attribute_values())
    fields = [
        "repository",
        "probe",
        "signature",
        "status",
        "strategy",
        "candidate",
        "device",
        "gpu",
        "cc",
        "driver",
        "cuda",
        "torch",
        "flashinfer",
        "python",
        "host",
        "fact",
        "value",
    ]
    fields += [f"subject{i}" for i in range(3)] + [f"author{i}" for i in range(3)]
    for name in fields:
        assert f"<i>{name}</i>\"'&amp;<b onmouseover=x>" in shown, name
    for commit in data.commits:
        assert commit.sha in shown and commit.sha[:12] in parsed.all_text()


class OutsideBdi(HTMLParser):
    """The text that is not inside a ``<bdi>``."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.depth += tag == "bdi"

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag == "bdi"

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.text.append(data)


def test_subjects_and_authors_are_isolated_from_right_to_left_overrides() -> None:
    data = demo_report()
    subject, author = 'Revert "Fix \u202etarget verify" (#1240)', "\u202eAda Lindqvist"
    commits = tuple(replace(c, subject=subject, author=author) if i == 20 else c for i, c in enumerate(data.commits))
    page = render_html(replace(data, commits=commits))
    shown, name = escape(subject), escape(author)
    assert page.count(f">{shown}<") == page.count(f"<bdi>{shown}</bdi>") >= 3
    assert page.count(f">{name}<") == page.count(f"<bdi>{name}</bdi>") == 2
    subject_cell = rf'<td class="subj" title="{re.escape(shown)}"><bdi>{re.escape(shown)}</bdi></td>'
    assert re.search(subject_cell + r'\s*<td class="events">', page)
    assert re.search(rf'<td class="author"><bdi>{re.escape(name)}</bdi></td>\s*<td class="date">', page)
    # Text outside a <bdi> holds the subject only in tooltips, isolated between FSI and PDI.
    outside = "".join(OutsideBdi(page).text)
    assert "\u2068" + subject + "\u2069" in outside
    assert "\u202e" not in outside.replace("\u2068" + subject + "\u2069", "")


def grid_rows(page: str) -> list[str]:
    grid = page[page.index('<table class="grid">') : page.index("</table>", page.index('<table class="grid">'))]
    body = grid[grid.index("<tbody>") :]
    return [attrs.get("id", "") for tag, attrs in Parsed(body).tags if tag == "tr"]


def test_the_grid_has_one_row_per_commit_newest_first() -> None:
    data = demo_report()
    assert grid_rows(render_html(data)) == [f"c-{c.sha}" for c in reversed(data.commits)]


def grid_cells(page: str) -> dict[str, list[dict[str, str | None]]]:
    """Each timeline row's id with its cells' attributes, in probe order."""
    rows: dict[str, list[dict[str, str | None]]] = {}
    for tag, attrs in Parsed(page).tags:
        if tag == "tr" and attrs.get("id"):
            row = rows.setdefault(attrs["id"] or "", [])
        elif tag == "td" and "c" in (attrs.get("class") or "").split():
            row.append(attrs)
    return rows


def test_cells_carry_state_signature_and_transition_marks() -> None:
    data = demo_report()
    rows = grid_cells(render_html(data))
    assert sum(map(len, rows.values())) == len(data.commits) * len(data.probes)
    sha = [c.sha for c in data.commits]

    def cell(i: int, probe: str) -> dict[str, str | None]:
        return rows[f"c-{sha[i]}"][PROBES.index(probe)]

    first_bad = cell(13, "target_verify_metadata")
    assert "t-regression" in (first_bad["class"] or "")
    assert first_bad["title"] == (
        "fail (3 runs)\nregression: first bad commit\nmax_seq_len_q 4 != 2 after replay (n4_t2)"
    )
    assert "t-fix" in (cell(24, "target_verify_attention")["class"] or "")
    assert "s-untested" in (cell(2, "swa_page_table")["class"] or "")
    untestable = cell(5, "swa_page_table")
    assert "s-skip" in (untestable["class"] or "") and "ImportError" in (untestable["title"] or "")
    assert "s-flaky" in (cell(28, "decode_graph_replay")["class"] or "")
    assert "<partial page>" in (cell(12, "swa_page_table")["title"] or "")
    # A tooltip that would only restate the class is left out.
    assert "title" not in cell(0, "swa_page_table") and "s-pass" in (cell(0, "swa_page_table")["class"] or "")
    legend = Parsed(render_html(data)).all_text()
    for word in ("pass", "fail", "untestable", "flaky", "untested"):
        assert word in legend


def test_transitions_tell_the_story_with_revert_and_reland_pairs() -> None:
    data = demo_report()
    text = " ".join(Parsed(render_html(data)).all_text().split())
    s = [c.sha[:12] for c in data.commits]
    pr = {i: c.pr_number for i, c in enumerate(data.commits)}
    assert (
        f"good since {s[24]} (relands {s[18]}, #{pr[24]}); broken before by {s[20]} (reverts {s[18]}, #{pr[20]}); "
        f"fixed before by {s[18]} (#{pr[18]}); first broken by {s[13]} (#{pr[13]})"
    ) in text
    assert f"good since {s[16]} (#{pr[16]}); first broken by {s[10]}" in text
    assert "no transition: good throughout" in text  # decode_graph_replay: only a flaky stretch
    assert "Revert and re-land pairs" in text


def test_a_bisect_shows_its_strategy_and_a_probability_below_one() -> None:
    summaries = [" ".join(s.split()) for s in re.findall(r"<summary>(.*?)</summary>", render_html(demo_report()))]
    [flaky] = [s for s in summaries if "swa_page_table" in s]
    assert "done &middot; auto &middot; culprit" in flaky and "(probability 0.962)" in flaky
    trusting = [s for s in summaries if "target_verify" in s]
    assert len(trusting) == 2 and not any("probability" in s or "auto" in s for s in trusting)


def test_a_fix_search_runs_from_its_bad_end_to_the_first_fixed_commit() -> None:
    data = demo_report()
    sha = [c.sha for c in data.commits]
    fix = ReportBisect(4, "swa_page_table", sha[16], sha[10], "done", sha[16], (sha[16],), (), find_fix=True)
    summaries = [
        " ".join(s.split()) for s in re.findall(r"<summary>(.*?)</summary>", render_html(replace(data, bisects=(fix,))))
    ]
    [shown] = [Parsed(s).all_text() for s in summaries]
    assert f"bad {sha[10][:12]} → good {sha[16][:12]}" in shown and f"first fixed commit {sha[16][:12]}" in shown
    assert "culprit" not in shown


def test_hidden_transition_lists_its_candidates() -> None:
    data = hostile_report()
    page = render_html(data)
    assert "one of 2 commits up to" in page
    assert "t-candidate" in page


def test_empty_report_renders() -> None:
    page = render_html(ReportData("empty", START, (), ()))
    assert "No commits." in page and "No transitions." in page and grid_rows(page) == []


def test_a_thousand_commits_render_compact() -> None:
    """How long it takes is measured by ``scripts/bench_report.py``, not asserted here."""
    page = render_html(large_report(1000))
    assert len(grid_rows(page)) == 1000
    assert len(page.encode()) < 4_000_000


# ---------------------------------------------------------------------------- headless Chromium


DOM_CHECK = """(() => {
  const rows = [...document.querySelectorAll('table.grid tbody tr')];
  const subject = sha => document.getElementById('c-' + sha).querySelector('td.subj').textContent;
  return {
    title: document.title,
    scripts: document.querySelectorAll('script').length,
    images: document.querySelectorAll('img, image, iframe, object, embed').length,
    handlers: [...document.querySelectorAll('*')].filter(e => \
[...e.attributes].some(a => a.name.startsWith('on'))).length,
    rows: rows.map(r => r.id),
    cells: document.querySelectorAll('table.grid td.c').length,
    failing: document.querySelectorAll('table.grid td.c.s-fail').length,
    marked: document.querySelectorAll('table.grid td.t-regression, table.grid td.t-fix').length,
    sections: [...document.querySelectorAll('section')].map(s => s.id),
    strips: document.querySelectorAll('#overview svg.strip').length,
    arcs: document.querySelectorAll('#overview path.arc').length,
    bisects: document.querySelectorAll('details.bisect').length,
    environments: document.querySelectorAll('#environments tbody tr').length,
    script_subject: subject(%(script)s),
    img_subject: subject(%(img)s),
    fetched: performance.getEntriesByType('resource').length,
    width: document.querySelector('.grid-wrap').scrollWidth,
  };
})()"""


def dom(page: Page, data: ReportData) -> dict[str, Any]:
    return page.evaluate(
        DOM_CHECK % {"script": json.dumps(data.commits[12].sha), "img": json.dumps(data.commits[22].sha)}
    )


def test_report_loads_in_chromium_without_errors_and_data_does_not_run(browser: Browser, tmp_path: Path) -> None:
    data = demo_report()
    path = tmp_path / "report.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = browser.load(path)
    try:
        found = dom(page, data)
        assert page.problems() == []
        assert found["title"] == "regtrack report: sglang (demo history)"
        assert found["scripts"] == 0 and found["images"] == 0 and found["handlers"] == 0
        assert found["script_subject"] == SCRIPT_SUBJECT
        assert found["img_subject"] == IMG_SUBJECT
        assert found["rows"] == [f"c-{c.sha}" for c in reversed(data.commits)]
        assert found["cells"] == len(data.commits) * len(data.probes)
        assert found["failing"] == sum(1 for c in data.cells.values() if c.state == "fail")
        assert found["marked"] == len(data.transitions)
        assert found["sections"] == [
            "probes",
            "overview",
            "metrics",
            "timeline",
            "transitions",
            "stretches",
            "bisects",
            "environments",
        ]
        assert found["strips"] == len(data.probes) and found["arcs"] == 2
        assert found["bisects"] == 3 and found["environments"] == 2
        assert found["fetched"] == 0
    finally:
        page.close()


def test_escaping_alone_keeps_data_from_running(browser: Browser, tmp_path: Path) -> None:
    """With the Content-Security-Policy removed, the injected subjects still render as text."""
    data = demo_report()
    page_text = render_html(data)
    policy = f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">'
    assert policy in page_text
    path = tmp_path / "no-csp.html"
    path.write_text(page_text.replace(policy, ""), encoding="utf-8")
    page = browser.load(path)
    try:
        found = dom(page, data)
        assert found["title"] == "regtrack report: sglang (demo history)"
        assert found["scripts"] == 0 and found["images"] == 0 and found["handlers"] == 0
        assert found["script_subject"] == SCRIPT_SUBJECT and found["img_subject"] == IMG_SUBJECT
        assert page.problems() == []
    finally:
        page.close()


def test_the_harness_sees_a_script_run_and_a_console_error(browser: Browser, tmp_path: Path) -> None:
    """Control: the checks above would catch an injection that ran or a page that logged an error."""
    path = tmp_path / "control.html"
    path.write_text(
        "<!DOCTYPE html><title>clean</title><script>document.title='pwned';console.error('boom')</script>",
        encoding="utf-8",
    )
    page = browser.load(path)
    try:
        assert page.evaluate("document.title") == "pwned"
        assert any("boom" in p for p in page.problems())
    finally:
        page.close()


def test_a_thousand_commit_report_loads_in_chromium(browser: Browser, tmp_path: Path) -> None:
    data = large_report(1000)
    path = tmp_path / "large.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = browser.load(path)
    try:
        assert page.evaluate("document.querySelectorAll('table.grid tbody tr').length") == 1000
        assert page.problems() == []
    finally:
        page.close()
