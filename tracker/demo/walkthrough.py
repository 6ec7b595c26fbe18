"""``regtrack demo``: build the demo history, show each probe's verdict on the story's key
commits next to what the story intends, and bisect its stories."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from db.paths import data_dir
from tracker.bisect_options import BisectReport
from tracker.bisect_session import Bisection, StepCallback
from tracker.core.errors import UsageError
from tracker.demo.history import build_demo_history
from tracker.demo.manifest import DemoManifest, manifest_path, write_manifest
from tracker.demo.story import Intent, intents, key_commits
from tracker.demo.target import write_demo_config
from tracker.execution.executors import Executor
from tracker.measure import Prober
from tracker.targets.revisions import Repo
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
    path: Path
    probes: list[str]
    rows: list[DemoRow] = field(default_factory=list)
    bisects: list[BisectReport] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "verdicts": [
                {"sha": r.sha, "event": r.label, "verdicts": r.verdicts, "expected": r.expected} for r in self.rows
            ],
            "bisects": [report.to_json() for report in self.bisects],
        }


def default_path() -> Path:
    return data_dir() / "demo-history"


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


def run_demo(
    ws: Workspace,
    manifest: DemoManifest,
    executor: Executor,
    seed: int | None,
    console: Console,
    on_step: StepCallback | None = None,
) -> DemoResult:
    line = first_parent_line(ws.repo, manifest)
    expected = intents(manifest, line)
    probes = ws.probes(())
    result = DemoResult(ws.repo.path, [p.name for p in probes])
    probers = {p.name: Prober.open(ws, p, executor, "demo", seed) for p in probes}
    keys = key_commits(manifest, line[0])
    trees = next(iter(probers.values())).record_commits([k.sha for k in keys])
    with console.status("measuring the key commits") as status:
        for key in keys:
            verdicts = {}
            for name, prober in probers.items():
                status.update(f"{name} at {key.sha[:12]} ({key.label})")
                verdicts[name] = prober.measure(key.sha, trees[key.sha]).verdict.value
            shown = {name: SHOWN_INTENT[expected[key.sha].get(name, Intent.GOOD)] for name in verdicts}
            result.rows.append(DemoRow(key.sha, key.label, verdicts, shown))
    overwrite, swa = manifest.bugs["target_verify_overwrite"], manifest.bugs["swa_partial_page"]
    before = {sha: line[i - 1] for i, sha in enumerate(line) if i}
    stories = [
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
    for title, probe_name, good, bad in stories:
        console.print(f"bisect {title}: {probe_name}, good {good[:12]}, bad {bad[:12]}")
        bisection = Bisection(ws.store, ws.repo, probers[probe_name], on_step=on_step)
        result.bisects.append(bisection.start(good, bad))
    return result
