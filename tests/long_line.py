"""A long first-parent line with a store of results, shaped like SGLang's: thousands of commits,
a few hundred target trees, 4 probes measured at the first commit of most trees and every other
commit reusing its tree's results. For the report's size tests and ``scripts/bench_report_page.py``.

Every commit changes a file outside the target's path; every ``commits // trees``-th one changes
the target's backend file, so the line holds ``trees`` target trees. The story stored with it: a
regression and its fix, a revert of the fix (its tree is the one measured before the fix, so the
revert commit itself is not measured) and the fix re-landed, another regression and fix, a flaky
and an untestable stretch, and a few trees never measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracker.core.records import (
    CommitInfo,
    EnvironmentInfo,
    PairKind,
    RunRecord,
    TransitionKind,
    TransitionRecord,
)
from tracker.core.verdicts import Outcome
from tracker.demo.fast_import import FastImportStream, Signature, fast_import, git
from tracker.targets.revisions import paths_key
from tracker.workspace import Workspace

TARGET = "attention"
BACKEND = "python/sglang/srt/layers/attention/trtllm_mha_backend.py"
PROBES = ("target_verify_metadata", "target_verify_attention", "decode_graph_replay", "swa_page_table")
CASES = ("n4_t2", "n3_t5")
UNMEASURED_EVERY = 23
"""One tree in this many is never measured: its commits are untested."""
START = 1_735_689_600
PEOPLE = ("Ada Lindqvist", "Baptiste Moreau", "Chen Wei", "Divya Raman", "Emeka Obi", "Farah Haddad")
TOPICS = (
    "Speed up the radix cache lookup for long prefixes",
    "Tidy scheduler logging around preemption",
    "Document the page-size knob of the memory pool",
    "Add a chunked-prefill test for sliding-window models",
    "Rename ForwardMode helpers for clarity",
    "Bump flashinfer to the newest release",
)
OUTCOME = {"pass": Outcome.PASS, "fail": Outcome.FAIL, "skip": Outcome.ERROR}


@dataclass(frozen=True)
class LineStory:
    """The versions of the backend file (tree indices along the line) where the probes change state."""

    broken: int
    fixed: int
    reverted: int
    relanded: int
    swa_broken: int
    swa_fixed: int
    flaky: range
    untestable: range

    @classmethod
    def of(cls, trees: int) -> LineStory:
        at = [round(trees * f) for f in (0.2, 0.5, 0.52, 0.55, 0.7, 0.78)]
        flaky = round(trees * 0.33)
        return cls(*at, flaky=range(flaky, flaky + 4), untestable=range(at[5] + 6, at[5] + 12))

    def content(self, version: int) -> int:
        """What the backend file holds at ``version``: the revert restores the content from before the fix."""
        return self.fixed - 1 if version == self.reverted else version

    def state(self, probe: str, content: int) -> str:
        if content in self.untestable:
            return "skip"
        if probe in PROBES[:2]:
            bad = self.broken <= content < self.fixed or self.reverted <= content < self.relanded
            return "fail" if bad else "pass"
        if probe == "swa_page_table":
            return "fail" if self.swa_broken <= content < self.swa_fixed else "pass"
        return "flaky" if content in self.flaky else "pass"


@dataclass(frozen=True)
class LongLine:
    """The repository's line oldest first, the commits runs were measured at, and the stored transitions."""

    repo: Path
    line: list[str]
    measured: list[str]
    transitions: list[TransitionRecord]


def long_line(repo: Path, commits: int, trees: int) -> LongLine:
    """The repository at ``repo`` and its results in the store of ``REGTRACK_HOME``."""
    story = LineStory.of(trees)
    line, versions = _history(repo, commits, trees, story)
    measured, transitions = _store(repo, line, versions, story)
    return LongLine(repo, line, measured, transitions)


def _history(repo: Path, commits: int, trees: int, story: LineStory) -> tuple[list[str], list[int]]:
    """The SHAs oldest first, and the backend's version at each, written by one ``git fast-import``."""
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "-b", "main")
    config = f'[targets.{TARGET}]\nrepo = "."\npaths = ["python/sglang/srt/layers/attention"]\n'
    stride = max(1, commits // trees)
    stream = FastImportStream()
    version, versions, mark = 0, [], 0
    for i in range(commits):
        files = {f"python/sglang/srt/managers/part_{i % 40}.py": f"# change {i}\n".encode()}
        if i == 0:
            files |= {"regtrack.toml": config.encode(), BACKEND: b"version 0\n"}
        elif i % stride == 0 and version + 1 < trees:
            version += 1
            files[BACKEND] = f"version {story.content(version)}\n".encode()
        versions.append(version)
        who = Signature(PEOPLE[i % len(PEOPLE)], "dev@example.com", START + 600 * i)
        message = f"{_subject(i, version, stride, story)} (#{10000 + i})\n"
        mark = stream.commit("refs/heads/main", who, message, [mark] if mark else [], files)
    fast_import(repo, stream.take(), repo.parent / f"{repo.name}.marks")
    git(repo, "checkout", "--quiet", "--force", "main")
    return git(repo, "rev-list", "--reverse", "main").split(), versions


def _subject(i: int, version: int, stride: int, story: LineStory) -> str:
    if i % stride or i == 0:
        return TOPICS[i % len(TOPICS)]
    if version == story.broken:
        return "[Spec v2] Draft-extend CUDA graphs for EAGLE"
    if version in (story.fixed, story.relanded):
        return "Fix TRTLLM target verify query metadata"
    if version == story.reverted:
        return 'Revert "Fix TRTLLM target verify query metadata"'
    return f"Refactor the TRTLLM MHA backend, step {version}"


def _store(
    repo: Path, line: list[str], versions: list[int], story: LineStory
) -> tuple[list[str], list[TransitionRecord]]:
    """Runs at the first commit of each measured tree, and the story's transitions."""
    with Workspace.open(repo, TARGET) as ws:
        store = ws.store
        repo_id = store.repository(ws.repo.path)
        trees = ws.repo.tree_hashes(line, ws.target.paths)
        first_of: dict[str, str] = {}
        for sha in line:
            first_of.setdefault(trees[sha], sha)
        measured = [sha for k, sha in enumerate(first_of.values()) if k % UNMEASURED_EVERY != UNMEASURED_EVERY // 2]
        store.record_commits(repo_id, ws.repo.commit_infos(measured))
        store.record_trees(repo_id, paths_key(ws.target.paths), {sha: trees[sha] for sha in measured})
        env = store.environment(EnvironmentInfo("cuda", "NVIDIA H200", "9.0", "570.124.06", "12.8", "2.11.0", "0.7.2"))
        version_at = dict(zip(line, versions, strict=True))
        for probe in PROBES:
            probe_id = store.probe_version(probe, 1, f"code-{probe}")
            for sha in measured:
                content = story.content(version_at[sha])
                for record in _runs(repo_id, env, probe_id, sha, trees[sha], story.state(probe, content), content):
                    store.add_run(record)
        transitions = _transitions(line, versions, story, ws.repo.commit_infos)
        store.record_transitions(repo_id, TARGET, transitions)
    return measured, transitions


def _runs(repo_id: int, env: int, probe_id: int, sha: str, tree: str, state: str, seed: int) -> list[RunRecord]:
    """One attempt of each case (a flaky state: a failed attempt, then a passing one)."""
    attempts = (Outcome.FAIL, Outcome.PASS) if state == "flaky" else (OUTCOME[state],)
    runs = []
    for attempt, outcome in enumerate(attempts, start=1):
        for n, case in enumerate(CASES):
            rel_err = 1.09 if outcome is Outcome.FAIL else 2.1e-3 * (1 + seed % 7 / 10 + n / 20)
            metrics = {} if outcome is Outcome.ERROR else {"rel_err": rel_err, "max_abs_err": rel_err * 3.2}
            signature = None if outcome is Outcome.PASS else f"{case}: rel_err {rel_err:.2e} > 2e-02"
            runs.append(
                RunRecord(
                    repo_id=repo_id,
                    sha=sha,
                    tree_hash=tree,
                    environment_id=env,
                    probe_id=probe_id,
                    case_id=case,
                    settings_key=f"s{attempt}-{case}",
                    dtype="bfloat16",
                    outcome=outcome,
                    metrics=metrics,
                    signature=signature,
                    detail="",
                    duration_s=1.5 + n,
                    started_at=datetime.now(UTC) - timedelta(minutes=seed),
                    attempt=attempt,
                    seed=seed,
                    trigger="scan",
                )
            )
    return runs


def _transitions(
    line: list[str], versions: list[int], story: LineStory, infos: Callable[[Sequence[str]], list[CommitInfo]]
) -> list[TransitionRecord]:
    first: dict[int, str] = {}
    for sha, version in zip(line, versions, strict=True):
        first.setdefault(version, sha)
    when = {c.sha: c.authored_at for c in infos(list(first.values()))}

    def at(probe: str, version: int, kind: str, pair: tuple[int, PairKind] | None = None) -> TransitionRecord:
        sha = first[version]
        pairs_with, pair_kind = (first[pair[0]], pair[1]) if pair else (None, None)
        return TransitionRecord(probe, sha, TransitionKind(kind), pairs_with, pair_kind, (sha,), when[sha], "scan")

    found = []
    for probe in PROBES[:2]:
        found += [
            at(probe, story.broken, "regression"),
            at(probe, story.fixed, "fix"),
            at(probe, story.reverted, "regression", (story.fixed, "reverts")),
            at(probe, story.relanded, "fix", (story.fixed, "relands")),
        ]
    return [*found, at(PROBES[3], story.swa_broken, "regression"), at(PROBES[3], story.swa_fixed, "fix")]
