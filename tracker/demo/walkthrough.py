"""``regtrack demo``: build the demo history and tell its whole story as a user would find it: scan
the first-parent line for every transition, show each probe's verdict on the story's key commits
next to what the story intends, bisect the stories and check each culprit by reverting it, and
write the HTML report with its plots. Every step is told to a ``Watch`` as it goes."""

from __future__ import annotations

import shlex
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from db.paths import data_dir
from tracker.bisect_options import BisectReport
from tracker.bisect_session import Bisection
from tracker.bisecting import bisect_steps, check_and_store
from tracker.core.errors import UsageError
from tracker.core.results import ScanReport
from tracker.demo.history import build_demo_history
from tracker.demo.manifest import DemoManifest, manifest_path, write_manifest
from tracker.demo.story import Intent, intents, key_commits
from tracker.demo.target import write_demo_config
from tracker.execution.executors import Executor
from tracker.measure import Prober
from tracker.probing import Watch, measure_each, scan_steps
from tracker.report.ci import scan_json
from tracker.report.html import render_html
from tracker.reporting import build_report
from tracker.scan import Scanner
from tracker.targets.revisions import Repo
from tracker.track import record_scan
from tracker.workspace import Workspace

SHOWN_INTENT = {Intent.GOOD: "good", Intent.BAD: "bad", Intent.FLAKY: "flaky", Intent.UNTESTABLE: "skip"}


@dataclass(frozen=True)
class DemoRow:
    sha: str
    label: str
    verdicts: dict[str, str]
    expected: dict[str, str]


@dataclass
class DemoResult:
    """What the demo found: the scan of the whole line, the key commits' verdicts, the stories'
    bisects (each culprit checked), the report it wrote, and what a user would run next."""

    path: Path
    probes: list[str]
    rows: list[DemoRow] = field(default_factory=list)
    bisects: list[BisectReport] = field(default_factory=list)
    scan: ScanReport | None = None
    report: Path | None = None
    next_commands: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "scan": scan_json(self.scan) if self.scan is not None else None,
            "verdicts": [
                {"sha": r.sha, "event": r.label, "verdicts": r.verdicts, "expected": r.expected} for r in self.rows
            ],
            "bisects": [report.to_json() for report in self.bisects],
            "report": str(self.report) if self.report is not None else None,
            "next": self.next_commands,
        }


def default_path() -> Path:
    return data_dir() / "demo-history"


def report_path(history: Path) -> Path:
    """Where the demo writes its page: beside the history, so two demos never share one."""
    return history.parent / f"{history.name}-report.html"


def ensure_history(path: Path, commits: int, console: Console) -> DemoManifest:
    """The demo history at ``path``: reused when its manifest matches, else built there."""
    manifest_file = manifest_path(path)
    if manifest_file.is_file() and (path / ".git").exists():
        manifest = DemoManifest.from_json(manifest_file.read_text())
        if manifest.commits == commits and Repo(path).resolve(manifest.branch) == manifest.head:
            console.print(f"using the demo history at {path}")
            write_demo_config(path)
            return manifest
    try:
        with console.status(f"building the demo history ({commits} commits) at {path}"):
            manifest = build_demo_history(path, commits)
    except ValueError as error:
        raise UsageError(f"{error}; pass another PATH to `regtrack demo`") from None
    write_manifest(manifest, manifest_file)
    console.print(f"built the demo history at {path} ({manifest.commits} commits); manifest {manifest_file}")
    return manifest


def first_parent_line(repo: Repo, manifest: DemoManifest) -> list[str]:
    root = repo.resolve(f"{manifest.head}~{manifest.commits - 1}")
    return [root, *repo.first_parent_range(root, manifest.head)]


def run_demo(ws: Workspace, manifest: DemoManifest, executor: Executor, seed: int | None, watch: Watch) -> DemoResult:
    """The whole story: scan, key commits, bisects with their checks, and the report."""
    line = first_parent_line(ws.repo, manifest)
    probes = ws.probes(())
    result = DemoResult(ws.repo.path, [p.name for p in probes])
    probers = {p.name: Prober.open(ws, p, executor, "demo", seed) for p in probes}
    repo_id = next(iter(probers.values())).repo_id
    watch.notice(f"scanning the {len(line)} commits of the demo line with {len(probers)} probes")
    watch.started("demo: scan")
    result.scan = Scanner(ws.repo, list(probers.values()), progress=scan_steps(ws, repo_id, watch)).scan(line)
    record_scan(ws, repo_id, result.scan)
    watch.notice(f"the scan found {len(result.scan.transitions)} transitions; now the story's key commits")
    result.rows = _key_verdicts(ws, manifest, line, probers, watch)
    for title, probe, good, bad in _stories(manifest, line):
        watch.notice(f"bisect {title}: {probe}, good {good[:12]}, bad {bad[:12]}")
        watch.started(f"demo: bisect {probe}")
        prober = probers[probe]
        report = Bisection(ws.store, ws.repo, prober, on_step=bisect_steps(ws, repo_id, watch)).start(good, bad)
        check_and_store(ws, report, prober, True, watch)
        result.bisects.append(report)
    result.report = _write_report(ws, watch)
    result.next_commands = _next_commands(ws.repo.path, result.bisects)
    return result


def _key_verdicts(
    ws: Workspace, manifest: DemoManifest, line: list[str], probers: dict[str, Prober], watch: Watch
) -> list[DemoRow]:
    """Each probe at each key commit, next to what the story intends there (mostly stored by the scan)."""
    expected = intents(manifest, line)
    keys = key_commits(manifest, line[0])
    watch.started("demo: key commits")
    verdicts: dict[str, dict[str, str]] = defaultdict(dict)
    for row, _ in measure_each(ws, list(probers.values()), [key.sha for key in keys], watch):
        verdicts[row.sha][row.probe] = row.verdict.value
    return [
        DemoRow(
            key.sha,
            key.label,
            verdicts[key.sha],
            {name: SHOWN_INTENT[expected[key.sha].get(name, Intent.GOOD)] for name in verdicts[key.sha]},
        )
        for key in keys
    ]


def _stories(manifest: DemoManifest, line: list[str]) -> list[tuple[str, str, str, str]]:
    """(title, probe, good, bad) of each story the demo bisects."""
    overwrite, swa = manifest.bugs["target_verify_overwrite"], manifest.bugs["swa_partial_page"]
    before = {sha: line[i - 1] for i, sha in enumerate(line) if i}
    return [
        (
            "the overwrite, from the first commit to inside its first bad stretch",
            overwrite.probe,
            line[0],
            before[overwrite.fixed],
        ),
        (
            "the overwrite again, from the fix to inside the revert's stretch",
            overwrite.probe,
            overwrite.fixed,
            before[overwrite.relanded or ""],
        ),
        ("the SWA bug, from the first commit across the untestable stretch", swa.probe, line[0], before[swa.fixed]),
    ]


def _write_report(ws: Workspace, watch: Watch) -> Path:
    """The HTML report of the whole line, with its plots, beside the history."""
    watch.started("demo: report")
    watch.notice("writing the report")
    path = report_path(ws.repo.path)
    path.write_text(render_html(build_report(ws, None, (), None)), encoding="utf-8")
    return path


def _next_commands(repo: Path, bisects: list[BisectReport]) -> list[str]:
    """What a user runs next: what the re-introduced bug's culprit changed, and the issue bodies of the
    regressions (every one of the demo is fixed at its head, so none is open)."""
    where = shlex.quote(str(repo))
    culprits = [b.culprit.sha[:12] for b in bisects if b.culprit is not None]
    first = [f"regtrack compare {culprits[1]}^ {culprits[1]} --repo {where}"] if len(culprits) > 1 else []
    return [*first, f"regtrack regressions --markdown --repo {where}"]
