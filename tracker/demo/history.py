"""Build the demo history: a git repository whose ``main`` replays the story of DESIGN.md §1.

The history is written as a ``git fast-import`` stream with fixed authors and dates, so every
build gives the same SHAs. It is imported in two parts, because the revert's message names the SHA
of the fix it reverts. Its last tree holds ``backend/`` exactly as the installed package has
it; earlier trees hold the same files with some of the edits of ``tracker.demo.bugs`` applied.
"""

from __future__ import annotations

import importlib.util
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tracker.demo.bugs import (
    BROKEN_IMPORT,
    DECODE_STALE_PAGE,
    SWA_PARTIAL_PAGE,
    TARGET_VERIFY_OVERWRITE,
    WHOLE_ROW_GATHER,
    Edit,
    apply_edits,
    read_tree,
)
from tracker.demo.content import (
    DOCS_BRANCH,
    FAQ_BRANCH,
    OTHER_FILES,
    SPEC_V2_EDITS,
    SPEC_V2_FILES,
    UNRELATED,
    SideBranch,
)
from tracker.demo.fast_import import FastImportStream, Signature, fast_import, git
from tracker.demo.manifest import BugSpan, DemoManifest, FlakyStretch, SlowdownSpan, Untestable
from tracker.demo.target import write_demo_config

DEFAULT_COMMITS = 150
MIN_COMMITS = 60
BRANCH = "main"


# ---------------------------------------------------------------------------- the story


@dataclass(frozen=True)
class StoryPlan:
    """First-parent positions (0 = the root) of the story's events in ``commits`` commits."""

    commits: int
    docs_merge: int
    import_broken: int
    import_mended: int
    swa_introduced: int
    target_verify_introduced: int
    swa_fixed: int
    faq_merge: int
    target_verify_fixed: int
    target_verify_reverted: int
    slowdown_introduced: int
    slowdown_fixed: int
    target_verify_relanded: int
    decode_introduced: int
    decode_fixed: int

    @classmethod
    def for_size(cls, commits: int) -> StoryPlan:
        if commits < MIN_COMMITS:
            raise ValueError(f"the demo history needs at least {MIN_COMMITS} commits, got {commits}")

        def at(fraction: float, after: int) -> int:
            """Near ``fraction`` of the way, and at least two commits after the event at ``after``."""
            return max(round(fraction * commits), after + 2)

        docs_merge = at(0.06, 0)
        import_broken = at(0.12, docs_merge)
        import_mended = import_broken + 4
        swa_introduced = at(0.20, import_mended)
        target_verify_introduced = at(0.28, swa_introduced)
        swa_fixed = at(0.45, target_verify_introduced)
        faq_merge = at(0.55, swa_fixed)
        target_verify_fixed = at(0.62, faq_merge)
        target_verify_reverted = target_verify_fixed + 2
        slowdown_introduced = at(0.68, target_verify_reverted)
        slowdown_fixed = at(0.74, slowdown_introduced)
        target_verify_relanded = at(0.80, slowdown_fixed)
        decode_introduced = at(0.85, target_verify_relanded)
        return cls(
            commits=commits,
            docs_merge=docs_merge,
            import_broken=import_broken,
            import_mended=import_mended,
            swa_introduced=swa_introduced,
            target_verify_introduced=target_verify_introduced,
            swa_fixed=swa_fixed,
            faq_merge=faq_merge,
            target_verify_fixed=target_verify_fixed,
            target_verify_reverted=target_verify_reverted,
            slowdown_introduced=slowdown_introduced,
            slowdown_fixed=slowdown_fixed,
            target_verify_relanded=target_verify_relanded,
            decode_introduced=decode_introduced,
            decode_fixed=at(0.93, decode_introduced),
        )


@dataclass(frozen=True)
class Change:
    """A first-parent commit that plants or removes edits in ``backend/`` and may change other files."""

    title: str
    plant: tuple[Edit, ...] = ()
    remove: tuple[Edit, ...] = ()
    edits: tuple[Edit, ...] = ()
    added: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Revert:
    """GitHub's revert of ``change``, a backend-only change at first-parent position ``of``."""

    of: int
    change: Change


@dataclass(frozen=True)
class Merge:
    side: SideBranch


Step = Change | Revert | Merge

# Edits are always applied in this order, so a set of planted edits gives one tree.
EDIT_ORDER = (
    BROKEN_IMPORT,
    SWA_PARTIAL_PAGE.edit,
    TARGET_VERIFY_OVERWRITE.edit,
    DECODE_STALE_PAGE.edit,
    WHOLE_ROW_GATHER.edit,
)


def _story(plan: StoryPlan) -> dict[int, Step]:
    tv_fix = Change("Fix TRTLLM target verify query metadata", remove=(TARGET_VERIFY_OVERWRITE.edit,))
    return {
        plan.docs_merge: Merge(DOCS_BRANCH),
        plan.import_broken: Change("Move kernel selection into kernels.registry", plant=(BROKEN_IMPORT,)),
        plan.import_mended: Change("Fix backend import after the kernel registry move", remove=(BROKEN_IMPORT,)),
        plan.swa_introduced: Change("Translate only whole pages of the SWA page table", plant=(SWA_PARTIAL_PAGE.edit,)),
        plan.target_verify_introduced: Change(
            "[Spec v2] Draft-extend CUDA graphs for EAGLE",
            plant=(TARGET_VERIFY_OVERWRITE.edit,),
            edits=SPEC_V2_EDITS,
            added=SPEC_V2_FILES,
        ),
        plan.swa_fixed: Change("Fix SWA page table for a partly filled last page", remove=(SWA_PARTIAL_PAGE.edit,)),
        plan.faq_merge: Merge(FAQ_BRANCH),
        plan.target_verify_fixed: tv_fix,
        plan.target_verify_reverted: Revert(plan.target_verify_fixed, tv_fix),
        plan.target_verify_relanded: tv_fix,
        plan.decode_introduced: Change(
            "Skip the in-flight token's page in the decode page-table copy", plant=(DECODE_STALE_PAGE.edit,)
        ),
        plan.decode_fixed: Change(
            "Copy the decode page table for the newest token too", remove=(DECODE_STALE_PAGE.edit,)
        ),
        plan.slowdown_introduced: Change(
            "Index each request's whole page-table row in the torch kernel", plant=(WHOLE_ROW_GATHER.edit,)
        ),
        plan.slowdown_fixed: Change(
            "Gather only the pages a request's tokens fill in the torch kernel", remove=(WHOLE_ROW_GATHER.edit,)
        ),
    }


# ---------------------------------------------------------------------------- writing the history


PEOPLE = (
    ("Ada Lindqvist", "ada.lindqvist@example.com"),
    ("Baptiste Moreau", "baptiste.moreau@example.com"),
    ("Chen Wei", "chen.wei@example.com"),
    ("Divya Raman", "divya.raman@example.com"),
    ("Emeka Obi", "emeka.obi@example.com"),
)
START = 1767603600  # 2026-01-05T09:00:00Z
STEP_SECONDS = 45 * 60
FIRST_PR = 1200
INITIAL_TITLE = "Initial import of the serving engine and its attention backend"


class _HistoryWriter:
    """Writes ``main`` commit by commit into a stream and imports it into ``repo`` on demand."""

    def __init__(self, repo: Path, marks: Path, backend: dict[str, bytes]) -> None:
        self._repo = repo
        self._marks = marks
        self._stream = FastImportStream()
        self._backend = backend
        self._backend_trees: dict[frozenset[Edit], dict[str, bytes]] = {}
        self._planted: frozenset[Edit] = frozenset()
        self._others = {path: text.encode() for path, text in OTHER_FILES.items()}
        self._tree: dict[str, bytes] = {}
        self._sequence = 0
        self._pr = FIRST_PR
        self.shas: dict[int, str] = {}
        self.first_parent: list[int] = []
        self.titles: list[str] = []

    def _signature(self) -> Signature:
        name, email = PEOPLE[self._sequence % len(PEOPLE)]
        self._sequence += 1
        return Signature(name, email, START + self._sequence * STEP_SECONDS)

    def _next_pr(self) -> int:
        """Numbers rise by irregular gaps, as pull requests of other branches take the ones between."""
        self._pr += 1 + self._sequence * 7 % 11
        return self._pr

    def _current_tree(self) -> dict[str, bytes]:
        if self._planted not in self._backend_trees:
            edits = [edit for edit in EDIT_ORDER if edit in self._planted]
            self._backend_trees[self._planted] = apply_edits(self._backend, edits)
        return {**self._others, **self._backend_trees[self._planted]}

    def _commit(self, title: str, body: str = "", merge: int | None = None) -> None:
        tree = self._current_tree()
        changed = {path: data for path, data in tree.items() if self._tree.get(path) != data}
        parents = [*self.first_parent[-1:], *([merge] if merge is not None else [])]
        message = f"{title}\n\n{body}\n" if body else f"{title}\n"
        mark = self._stream.commit(f"refs/heads/{BRANCH}", self._signature(), message, parents, changed)
        self.first_parent.append(mark)
        self.titles.append(title)
        self._tree = tree

    def initial(self) -> None:
        self._commit(INITIAL_TITLE)

    def unrelated(self, index: int) -> None:
        """A commit that sets one setting outside ``backend/`` to a value no commit before it used."""
        change = UNRELATED[index * 5 % len(UNRELATED)]
        prefix = change.line.split("{n}")[0]
        text, count = re.subn(
            rf"^{re.escape(prefix)}.*$",
            lambda _: change.line.format(n=change.base + index),
            self._others[change.path].decode(),
            flags=re.MULTILINE,
        )
        if count != 1:
            raise ValueError(f"setting line {prefix!r} occurs {count} times in {change.path}, expected once")
        self._others[change.path] = text.encode()
        self._commit(f"{change.subject} (#{self._next_pr()})")

    def change(self, step: Change) -> None:
        self._planted = self._planted.difference(step.remove).union(step.plant)
        self._others = apply_edits(self._others, list(step.edits))
        self._others.update((path, text.encode()) for path, text in step.added.items())
        self._commit(f"{step.title} (#{self._next_pr()})")

    def revert(self, step: Revert) -> None:
        """GitHub's revert; its message names the reverted commit's SHA, so the stream so far is imported first."""
        self.flush()
        sha = self.shas[self.first_parent[step.of]]
        self._planted = self._planted.difference(step.change.plant).union(step.change.remove)
        self._commit(f'Revert "{self.titles[step.of]}" (#{self._next_pr()})', f"This reverts commit {sha}.")

    def merge(self, side: SideBranch) -> None:
        ref = f"refs/heads/{side.name}"
        tip = self.first_parent[-2]
        for subject, files in side.commits:
            blobs = {path: text.encode() for path, text in files.items()}
            tip = self._stream.commit(ref, self._signature(), f"{subject}\n", [tip], blobs)
            self._others.update(blobs)
        self._commit(f"Merge pull request #{self._next_pr()} from {side.name}", side.title, merge=tip)
        self._stream.reset(ref)

    def flush(self) -> None:
        self.shas = fast_import(self._repo, self._stream.take(), self._marks)


def backend_root() -> Path:
    """The directory holding the ``backend`` package, found without importing it (and torch)."""
    spec = importlib.util.find_spec("backend")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("the backend package is not importable")
    return Path(spec.origin).resolve().parent.parent


def _check_target(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ValueError(f"{path} exists and is not an empty directory")


def build_demo_history(path: Path, commits: int = DEFAULT_COMMITS) -> DemoManifest:
    """Create a new repository at ``path`` holding the demo history, checked out at ``main``, with
    its target's ``regtrack.toml`` (``tracker.demo.target``)."""
    plan = StoryPlan.for_size(commits)
    _check_target(path)
    backend = read_tree(backend_root())
    apply_edits(backend, list(EDIT_ORDER))  # every anchor must match before anything is written
    steps = _story(plan)
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", "-b", BRANCH)
    with tempfile.TemporaryDirectory() as scratch:
        writer = _HistoryWriter(path, Path(scratch) / "marks", backend)
        writer.initial()
        for index in range(1, commits):
            step = steps.get(index)
            if step is None:
                writer.unrelated(index)
            elif isinstance(step, Change):
                writer.change(step)
            elif isinstance(step, Revert):
                writer.revert(step)
            else:
                writer.merge(step.side)
        writer.flush()
    git(path, "reset", "--hard", "--quiet")
    write_demo_config(path)
    return _manifest(plan, [writer.shas[mark] for mark in writer.first_parent])


def _manifest(plan: StoryPlan, shas: list[str]) -> DemoManifest:
    return DemoManifest(
        commits=len(shas),
        head=shas[-1],
        branch=BRANCH,
        bugs={
            TARGET_VERIFY_OVERWRITE.name: BugSpan(
                probe=TARGET_VERIFY_OVERWRITE.probe,
                introduced=shas[plan.target_verify_introduced],
                fixed=shas[plan.target_verify_fixed],
                reverted=shas[plan.target_verify_reverted],
                relanded=shas[plan.target_verify_relanded],
            ),
            SWA_PARTIAL_PAGE.name: BugSpan(
                probe=SWA_PARTIAL_PAGE.probe,
                introduced=shas[plan.swa_introduced],
                fixed=shas[plan.swa_fixed],
            ),
            DECODE_STALE_PAGE.name: BugSpan(
                probe=DECODE_STALE_PAGE.probe,
                introduced=shas[plan.decode_introduced],
                fixed=shas[plan.decode_fixed],
                flaky=True,
            ),
        },
        untestable=Untestable(
            first=shas[plan.import_broken], last=shas[plan.import_mended - 1], mended=shas[plan.import_mended]
        ),
        flaky=FlakyStretch(
            bug=DECODE_STALE_PAGE.name,
            first=shas[plan.decode_introduced],
            last=shas[plan.decode_fixed - 1],
            fixed=shas[plan.decode_fixed],
        ),
        merges=(shas[plan.docs_merge], shas[plan.faq_merge]),
        slowdown=SlowdownSpan(
            commit=shas[plan.slowdown_introduced],
            fix=shas[plan.slowdown_fixed],
            probe=WHOLE_ROW_GATHER.probe,
            metric=WHOLE_ROW_GATHER.metric,
        ),
    )
