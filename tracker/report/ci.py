"""What a CI job reads: JUnit XML, a markdown summary and JSON (exit statuses are ``tracker.core.exits``).

JUnit. One test case per probe, judged at the tracked head: a probe that fails there (or flakes)
is a ``<failure>`` whose message says since when ("failing since <culprit>"), whether or not its
regression is new; an untestable one is ``<skipped>``, as git bisect skips it: untestable is not
bad, and exit status 3 flags a head that no probe could judge.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from tracker.core.json_schema import versioned
from tracker.core.records import CommitInfo, TransitionRecord
from tracker.core.results import HeadVerdict, ScanReport, TrackResult
from tracker.core.verdicts import State, Verdict
from tracker.report.issue_markdown import RegressionIssue, issue_markdown
from tracker.search.story import story


def transition_fields(t: TransitionRecord) -> dict[str, Any]:
    """A transition's own fields as JSON values."""
    data = asdict(t)
    data["authored_at"] = t.authored_at.isoformat()
    data["found_at"] = t.found_at.isoformat() if t.found_at else None
    return data


def transition_json(t: TransitionRecord, commit: CommitInfo | None) -> dict[str, Any]:
    """A transition as every ``--json`` and the job's JSON file print it, with its commit's subject and PR."""
    data = transition_fields(t)
    data["subject"] = commit.subject if commit else None
    data["pr_number"] = commit.pr_number if commit else None
    return data


def scan_json(report: ScanReport) -> dict[str, Any]:
    return {
        "first": report.line[0].sha,
        "last": report.line[-1].sha,
        "commits": len(report.line),
        "transitions": [transition_json(t, report.commits[t.sha]) for t in report.transitions],
        "stretches": [asdict(s) for scan in report.probes for s in scan.stretches],
        "stories": {scan.probe: story(scan, report.line) for scan in report.probes},
        "change_points": [asdict(change) for scan in report.probes for change in scan.changes],
        "noise": [asdict(series) for scan in report.probes for series in scan.noise],
        "executions": report.executions,
        "reused": report.reused,
        "verifications": [checked.to_json() for checked in report.verifications],
    }


def track_json(result: TrackResult) -> dict[str, Any]:
    """The job's JSON, printed by ``track --json`` and written beside the JUnit file."""
    return versioned(
        {
            "target": result.target,
            "branch": result.branch,
            "head": result.head,
            "since": result.since,
            "commits": result.commits,
            "executions": result.scan.executions if result.scan else 0,
            "transitions": scan_json(result.scan)["transitions"] if result.scan else [],
            "new_regressions": [
                {
                    **transition_json(r.transition, r.commit),
                    "signature": r.measurement.signature,
                    "metrics": r.measurement.metrics,
                    "parent": r.parent,
                    "verification": r.verification.to_json() if r.verification else None,
                }
                for r in result.new_regressions
            ],
            "at_head": [_head_json(h) for h in result.at_head],
            "exit_status": int(result.exit_status),
        }
    )


def _head_json(h: HeadVerdict) -> dict[str, Any]:
    return {
        "probe": h.probe,
        "state": h.state.value,
        "verdict": h.verdict.value,
        "signature": h.measurement.signature,
        "failing_since": h.culprit.sha if h.culprit and h.failing else None,
        "first": h.first,
    }


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
            failure = ElementTree.SubElement(
                case, "failure", type=kind, message=h.failing_since + (f": {signature}" if signature else "")
            )
            failure.text = _failure_text(result, h)
        elif h.verdict is Verdict.SKIP:
            ElementTree.SubElement(
                case, "skipped", message=f"untestable at {result.head[:12]}: {signature or 'no case applies'}"
            )
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
        t, c, m = r.transition, r.commit, r.measurement
        pr = f"#{c.pr_number}" if c.pr_number else "—"
        metrics = ", ".join(f"{k}={v:.3g}" for k, v in m.metrics.items()) or "—"
        lines += [
            f"### New regression in `{t.probe}`",
            "",
            "| culprit | PR | subject | failure | metrics |",
            "|---|---|---|---|---|",
            f"| `{c.sha[:12]}` | {pr} | {_cell(c.subject)} | {_cell(m.signature or '')} | {_cell(metrics)} |",
            "",
            f"Reproduce: {_code(reproduce_command(repo, t.probe, c))}",
            "",
        ]
        if r.verification is not None:
            lines += [f"Verification: **{r.verification.status.value}**: {_cell(r.verification.explanation)}", ""]
    if result.scan and result.scan.transitions:
        lines += ["", "| probe | transition | commit | pairs with |", "|---|---|---|---|"]
        for t in result.scan.transitions:
            pair = f"{t.pair_kind} `{t.pairs_with[:12]}`" if t.pairs_with else ""
            subject = _cell(result.scan.commits[t.sha].subject)
            lines.append(f"| `{t.probe}` | {t.kind.value} | `{t.sha[:12]}` {subject} | {pair} |")
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


def write_reports(result: TrackResult, out_dir: Path, repo: Path, issues: Sequence[RegressionIssue] = ()) -> list[Path]:
    """The job's JUnit XML, summary and JSON, and an issue for each of its new regressions (``issues``)."""
    files = {
        "regtrack-junit.xml": junit_xml(result),
        "regtrack-summary.md": markdown_summary(result, repo),
        "regtrack-track.json": json.dumps(track_json(result), indent=2, default=str) + "\n",
    }
    return _write_files(out_dir, files | {issue.file_name: issue_markdown(issue) for issue in issues})


def write_issues(issues: Sequence[RegressionIssue], out_dir: Path) -> list[Path]:
    """One markdown file per issue, named by its probe and culprit (``RegressionIssue.file_name``)."""
    return _write_files(out_dir, {issue.file_name: issue_markdown(issue) for issue in issues})


def _write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Each file through a temporary one and a rename: a reader sees the old text or the new."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out_dir / name
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(text)
        temporary.replace(path)
        written.append(path)
    return written
