"""What the demo history's story says each probe should see at each commit.

Derived from the manifest alone, so tests and the demo compare real probe verdicts with the
story's intent rather than with a hand-written table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tracker.demo.bugs import BUGS_BY_NAME
from tracker.demo.history import BugSpan, DemoManifest


class Intent(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    FLAKY = "flaky"
    UNTESTABLE = "untestable"


@dataclass(frozen=True)
class KeyCommit:
    label: str
    sha: str


def bad_stretches(span: BugSpan) -> list[tuple[str, str]]:
    """(first bad commit, first commit after it that is good again) for each stretch of the bug."""
    stretches = [(span.introduced, span.fixed)]
    if span.reverted and span.relanded:
        stretches.append((span.reverted, span.relanded))
    return stretches


def intents(manifest: DemoManifest, first_parent: list[str]) -> dict[str, dict[str, Intent]]:
    """For every first-parent commit (oldest first), each story probe's expected verdict."""
    index = {sha: i for i, sha in enumerate(first_parent)}
    probes = sorted({probe for name in manifest.bugs for probe in BUGS_BY_NAME[name].probes})
    table = {sha: {probe: Intent.GOOD for probe in probes} for sha in first_parent}
    for name, span in manifest.bugs.items():
        for start, end in bad_stretches(span):
            for sha in first_parent[index[start] : index[end]]:
                for probe in BUGS_BY_NAME[name].probes:
                    table[sha][probe] = Intent.FLAKY if span.flaky else Intent.BAD
    broken = manifest.untestable
    for sha in first_parent[index[broken.first] : index[broken.mended]]:
        table[sha] = {probe: Intent.UNTESTABLE for probe in probes}
    return table


def key_commits(manifest: DemoManifest, root: str) -> list[KeyCommit]:
    """The commits where the story turns, in history order."""
    overwrite = manifest.bugs["target_verify_overwrite"]
    swa = manifest.bugs["swa_partial_page"]
    return [
        KeyCommit("initial import", root),
        KeyCommit("import breaks", manifest.untestable.first),
        KeyCommit("import mended", manifest.untestable.mended),
        KeyCommit("SWA bug introduced", swa.introduced),
        KeyCommit("overwrite slipped into a large change", overwrite.introduced),
        KeyCommit("SWA bug fixed", swa.fixed),
        KeyCommit("overwrite fixed", overwrite.fixed),
        KeyCommit("fix reverted", overwrite.reverted or ""),
        KeyCommit("fix re-landed", overwrite.relanded or ""),
        KeyCommit("flaky bug introduced", manifest.flaky.first),
        KeyCommit("flaky bug fixed", manifest.flaky.fixed),
        KeyCommit("head", manifest.head),
    ]
