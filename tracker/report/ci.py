"""What a CI job reads: exit statuses, JUnit XML, a markdown summary and JSON.

Exit statuses. 0: every commit asked about was judged and none is bad; 1: one is bad (a probe
failed); 2: bad usage or input (the CLI's); 3: nothing is bad, but a commit asked about could not
be judged by any of its probes (every verdict untestable): a green gate would be a lie, a red one
would blame the code. A bad verdict wins over an unjudged commit.

JUnit. One test case per probe, judged at the tracked head: a probe that fails there (or flakes)
is a ``<failure>`` whose message says since when ("failing since <culprit>"), whether or not its
regression is new; an untestable one is ``<skipped>``, as git bisect skips it: untestable is not
bad, and exit status 3 flags a head that no probe could judge.
"""

from __future__ import annotations

import enum
import html
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from xml.etree import ElementTree

from tracker.core.records import CommitInfo
from tracker.core.verdicts import Verdict
from tracker.search.transitions import State

if TYPE_CHECKING:
    from tracker.scan import ScanReport
    from tracker.track import HeadVerdict, TrackResult


class ExitStatus(enum.IntEnum):
    OK = 0
    BAD = 1
    USAGE = 2
    UNJUDGED = 3


def exit_status(verdicts_by_commit: Mapping[str, Iterable[Verdict]]) -> ExitStatus:
    """BAD if any verdict is bad; else UNJUDGED if some commit has no judged verdict; else OK."""
    by_commit = {sha: set(verdicts) for sha, verdicts in verdicts_by_commit.items()}
    if any(Verdict.BAD in verdicts for verdicts in by_commit.values()):
        return ExitStatus.BAD
    if any(not verdicts - {Verdict.SKIP} for verdicts in by_commit.values()):
        return ExitStatus.UNJUDGED
    return ExitStatus.OK


def scan_exit_status(report: ScanReport) -> ExitStatus:
    """BAD if a probe fails at the range's last commit; else UNJUDGED if no probe could judge any
    commit of the range; else OK."""
    if any(scan.states and scan.states[-1] is State.BAD for scan in report.probes):
        return ExitStatus.BAD
    if not any(state not in (None, State.SKIP) for scan in report.probes for state in scan.states):
        return ExitStatus.UNJUDGED
    return ExitStatus.OK


def reproduce_command(repo: Path, probe: str, culprit: CommitInfo) -> str:
    """A shell command line, each argument quoted: the repository path may hold spaces or ``$``."""
    parent = culprit.parents[0] if culprit.parents else ""
    ends = ["--good", parent[:12], "--bad", culprit.sha[:12]]
    return shlex.join(["regtrack", "bisect", "--repo", str(repo), "--probe", probe, *ends])


def junit_xml(result: TrackResult) -> str:
    failing = [h for h in result.at_head if h.failing]
    skipped = [h for h in result.at_head if h.verdict is Verdict.SKIP]
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        name=f"regtrack.{result.target}",
        tests=str(len(result.at_head)),
        failures=str(len(failing)),
        errors="0",
        skipped=str(len(skipped)),
    )
    for h in result.at_head:
        case = ElementTree.SubElement(suite, "testcase", classname=f"regtrack.{result.target}", name=h.probe)
        signature = h.measurement.signature
        if h.failing:
            kind = "flaky" if h.state is State.FLAKY else "regression"
            failure = ElementTree.SubElement(case, "failure", type=kind, message=h.failing_since + (f": {signature}" if signature else ""))
            failure.text = _failure_text(result, h)
        elif h.verdict is Verdict.SKIP:
            ElementTree.SubElement(case, "skipped", message=f"untestable at {result.head[:12]}: {signature or 'no case applies'}")
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)


def _failure_text(result: TrackResult, h: HeadVerdict) -> str:
    lines = [f"{h.probe} is {h.state.value} at {result.head[:12]}"]
    if h.culprit is not None:
        lines.append(f"since {h.culprit.sha[:12]} {h.culprit.subject}")
    if any(r.transition.probe == h.probe for r in result.new_regressions):
        lines.append("a new regression of this job")
    lines.append(json.dumps(h.measurement.metrics))
    return "\n".join(lines)


def markdown_summary(result: TrackResult, repo: Path) -> str:
    """Fit for a CI job summary or an issue body."""
    window = f"{result.since[:12]}..{result.head[:12]}" if result.since else f"baseline {result.head[:12]}"
    lines = [f"## regtrack: {result.target} on {result.branch} ({window}, {result.commits} new commits)", ""]
    lines += _head_table(result, repo)
    if not result.new_regressions:
        lines.append("No new regression.")
    for r in result.new_regressions:
        t, m = r.transition, r.measurement
        pr = f"#{t.commit.pr_number}" if t.commit.pr_number else "—"
        metrics = ", ".join(f"{k}={v:.3g}" for k, v in m.metrics.items()) or "—"
        lines += [
            f"### New regression in `{t.probe}`",
            "",
            "| culprit | PR | subject | failure | metrics |",
            "|---|---|---|---|---|",
            f"| `{t.commit.sha[:12]}` | {pr} | {_cell(t.commit.subject)} | {_cell(m.signature or '')} | {_cell(metrics)} |",
            "",
            f"Reproduce: {_code(reproduce_command(repo, t.probe, t.commit))}",
            "",
        ]
    if result.scan and result.scan.transitions:
        lines += ["", "| probe | transition | commit | pairs with |", "|---|---|---|---|"]
        for t in result.scan.transitions:
            pair = f"{t.pair.kind} `{t.pair.sha[:12]}`" if t.pair else ""
            lines.append(f"| `{t.probe}` | {t.kind.value} | `{t.commit.sha[:12]}` {_cell(t.commit.subject)} | {pair} |")
    return "\n".join(lines) + "\n"


def _head_table(result: TrackResult, repo: Path) -> list[str]:
    """Each probe that fails or cannot be judged at the head; one line when all pass."""
    failing = sum(h.failing for h in result.at_head)
    untestable = sum(h.verdict is Verdict.SKIP for h in result.at_head)
    passing = len(result.at_head) - failing - untestable
    lines = [f"Head `{result.head[:12]}`: {failing} failing, {untestable} untestable, {passing} passing.", ""]
    shown = [h for h in result.at_head if h.verdict is not Verdict.GOOD]
    if not shown:
        return lines
    lines += ["| probe | at head | since | failure |", "|---|---|---|---|"]
    for h in shown:
        since = h.failing_since if h.failing else ""
        if h.culprit is not None:
            since = f"`{h.culprit.sha[:12]}` {_cell(h.culprit.subject)}"
        state = "untestable" if h.verdict is Verdict.SKIP else h.state.value
        lines.append(f"| `{h.probe}` | {state} | {since} | {_cell(h.measurement.signature or '')} |")
    return [*lines, ""]


def _cell(text: str) -> str:
    """Text for a table cell: GitHub renders HTML in markdown, and ``|`` would end the cell."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """A code span that holds ``text`` whatever backticks it contains (CommonMark's rule)."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def write_reports(result: TrackResult, out_dir: Path, repo: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "regtrack-junit.xml": junit_xml(result),
        "regtrack-summary.md": markdown_summary(result, repo),
        "regtrack-track.json": json.dumps(result.to_json(), indent=2, default=str) + "\n",
    }
    written = []
    for name, text in files.items():
        path = out_dir / name
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(text)
        temporary.replace(path)
        written.append(path)
    return written
