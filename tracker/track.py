"""``regtrack track``: the scheduled job.

It probes the commits that arrived on the branch since the last tracked one (the first run takes
the branch head as its baseline), finds and pins down every transition among them with the scan,
stores the transitions, and writes JUnit XML, a markdown summary and JSON. One job at a time per
repository and target: a lock file in the data directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import html
import json
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from db.paths import data_dir
from tracker.core.records import TransitionRecord

from tracker.core.errors import UsageError
from tracker.execution.executors import LocalExecutor
from tracker.measure import Measurement, Prober
from tracker.scan import ScanReport, ScanTransition, Scanner
from tracker.search.transitions import Kind
from tracker.workspace import Workspace


@dataclass(frozen=True)
class NewRegression:
    transition: ScanTransition
    measurement: Measurement
    parent: str


@dataclass
class TrackResult:
    target: str
    branch: str
    head: str
    since: str | None
    commits: int
    scan: ScanReport | None = None
    new_regressions: list[NewRegression] = field(default_factory=list)
    new_transitions: list[TransitionRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "branch": self.branch,
            "head": self.head,
            "since": self.since,
            "commits": self.commits,
            "executions": self.scan.executions if self.scan else 0,
            "transitions": self.scan.to_json()["transitions"] if self.scan else [],
            "new_regressions": [
                {
                    **r.transition.to_json(),
                    "signature": r.measurement.signature,
                    "metrics": r.measurement.metrics,
                    "parent": r.parent,
                }
                for r in self.new_regressions
            ],
        }


@contextmanager
def track_lock(repo_path: Path, target: str, wait: bool) -> Iterator[None]:
    key = hashlib.sha256(f"{repo_path.resolve()}\0{target}".encode()).hexdigest()[:16]
    path = data_dir() / "locks" / f"track-{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise UsageError(
                f"another `regtrack track` is running for {repo_path} (lock {path}); pass --wait to queue behind it"
            ) from None
        yield


def run_track(ws: Workspace, branch: str, executor: LocalExecutor, seed: int | None, probers: list[Prober]) -> TrackResult:
    repo_id = probers[0].repo_id
    head = ws.repo.head_of(branch)
    since = ws.store.last_tracked(repo_id, ws.target.name, branch)
    result = TrackResult(ws.target.name, branch, head, since, commits=0)
    if since == head:
        return result
    line = [head] if since is None else [since, *ws.repo.first_parent_range(since, head)]
    result.commits = len(line) - (0 if since is None else 1)
    result.scan = Scanner(ws.repo, probers).scan(line)
    records = [_record(t, "track") for t in result.scan.transitions]
    result.new_transitions = ws.store.record_transitions(repo_id, ws.target.name, records)
    new_shas = {(t.probe, t.sha) for t in result.new_transitions if t.kind == Kind.REGRESSION.value}
    by_probe = {p.probe.name: p for p in probers}
    trees = probers[0].record_commits(line)
    for t in result.scan.transitions:
        if (t.probe, t.commit.sha) in new_shas:
            measurement = by_probe[t.probe].measure(t.commit.sha, trees[t.commit.sha])
            result.new_regressions.append(NewRegression(t, measurement, t.commit.parents[0] if t.commit.parents else ""))
    ws.store.set_tracked(repo_id, ws.target.name, branch, head)
    return result


def _record(t: ScanTransition, trigger: str) -> TransitionRecord:
    return TransitionRecord(
        probe=t.probe,
        sha=t.commit.sha,
        kind=t.kind.value,  # type: ignore[arg-type]
        pairs_with=t.pair.sha if t.pair else None,
        pair_kind=t.pair.kind if t.pair else None,
        candidates=t.candidates,
        authored_at=t.commit.authored_at,
        trigger=trigger,
    )


def record_scan(ws: Workspace, repo_id: int, report: ScanReport) -> None:
    ws.store.record_transitions(repo_id, ws.target.name, [_record(t, "scan") for t in report.transitions])


def reproduce_command(repo: Path, regression: NewRegression) -> str:
    """A shell command line, each argument quoted: the repository path may hold spaces or ``$``."""
    t = regression.transition
    ends = ["--good", regression.parent[:12], "--bad", t.commit.sha[:12]]
    return shlex.join(["regtrack", "bisect", "--repo", str(repo), "--probe", t.probe, *ends])


def junit_xml(result: TrackResult, probes: list[str]) -> str:
    """One test case per probe; a probe with a new regression is a failure."""
    failing = {r.transition.probe: r for r in result.new_regressions}
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(
        root, "testsuite", name=f"regtrack.{result.target}", tests=str(len(probes)), failures=str(len(failing))
    )
    for probe in probes:
        case = ElementTree.SubElement(suite, "testcase", classname=f"regtrack.{result.target}", name=probe)
        if probe in failing:
            r = failing[probe]
            failure = ElementTree.SubElement(
                case, "failure", message=f"regression at {r.transition.commit.sha[:12]}: {r.measurement.signature or ''}"
            )
            failure.text = f"{r.transition.commit.subject}\n{json.dumps(r.measurement.metrics)}"
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)


def markdown_summary(result: TrackResult, repo: Path) -> str:
    """Fit for a CI job summary or an issue body."""
    window = f"{result.since[:12]}..{result.head[:12]}" if result.since else f"baseline {result.head[:12]}"
    lines = [f"## regtrack: {result.target} on {result.branch} ({window}, {result.commits} new commits)", ""]
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
            f"Reproduce: {_code(reproduce_command(repo, r))}",
            "",
        ]
    if result.scan and result.scan.transitions:
        lines += ["", "| probe | transition | commit | pairs with |", "|---|---|---|---|"]
        for t in result.scan.transitions:
            pair = f"{t.pair.kind} `{t.pair.sha[:12]}`" if t.pair else ""
            lines.append(f"| `{t.probe}` | {t.kind.value} | `{t.commit.sha[:12]}` {_cell(t.commit.subject)} | {pair} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text for a table cell: GitHub renders HTML in markdown, and ``|`` would end the cell."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """A code span that holds ``text`` whatever backticks it contains (CommonMark's rule)."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def write_reports(result: TrackResult, out_dir: Path, repo: Path, probes: list[str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "regtrack-junit.xml": junit_xml(result, probes),
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
