"""Write SGLang-shaped histories into git: fixed authors and dates, so the SHAs never change."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from .tree import SLOTS, Filler, sglang_tree
from .variant import BACKEND_PATH, IMPORT_ROOT, Variant

BRANCH = "main"
START = 1779267600  # 2026-05-20T09:00:00Z
STEP_SECONDS = 37 * 60
PEOPLE = (
    ("Ines Albrecht", "ines.albrecht@example.com"),
    ("Kofi Mensah", "kofi.mensah@example.com"),
    ("Lena Varga", "lena.varga@example.com"),
    ("Ravi Iyer", "ravi.iyer@example.com"),
    ("Sora Kimura", "sora.kimura@example.com"),
)
MAINTAINER = ("Mei Tanaka", "mei.tanaka@example.com")
"""Who fixes, reverts and re-lands (one person did all three in the real story)."""

UNRELATED_SUBJECTS = {
    "docs": "[docs] Update the attention backend matrix",
    "triton": "[triton] Tune split-KV decode for long contexts",
    "version": "chore: bump version",
    "mla": "[trtllm_mla] Align the MLA block size with the kernel constraint",
    "spec_docs": "[docs] Speculative decoding tuning notes",
    "tests": "[CI] Cover more batch sizes in the TRTLLM MHA GPU test",
}

Expectation = str
"""What a correct target-verify probe with T != N says of a commit: ``good``, ``bad``,
``unsupported`` (A1: T != N does not exist there) or ``untestable`` (it reaches a stub)."""


def expectation(v: Variant) -> Expectation:
    if v.stub_call:
        return "untestable"
    if not v.generic_t:
        return "unsupported"
    return "bad" if v.overwrite else "good"


@dataclass(frozen=True)
class Commit:
    """One first-parent commit to write: its subject, its content, and the role it plays."""

    subject: str
    variant: Variant
    filler: Filler
    role: str | None = None
    reverts: str | None = None
    """The role of the commit this one reverts; its SHA goes into the message body."""
    maintainer: bool = False


@dataclass(frozen=True)
class ShapedManifest:
    """What a built history holds, for tests to check a probe's verdicts against."""

    path: Path
    era: str
    """The era of every commit, or ``"A1-D2"`` for the history that crosses them all."""
    branch: str
    head: str
    commits: tuple[str, ...]
    """First-parent, oldest first."""
    subjects: Mapping[str, str]
    roles: Mapping[str, str]
    """Role -> SHA: root, docs_only, read_file_touched, stub_reached, stub_removed, introduced,
    fixed, between_fix_and_revert, reverted, relanded, head; the crossing history adds the first
    commit of each era (era_A2 ... era_D2), pools_on_backend and v1_draft_extend_removed."""
    eras: Mapping[str, str]
    """SHA -> era."""
    expected: Mapping[str, Expectation]
    """SHA -> what a correct T != N target-verify probe says there."""
    backend_path: str = BACKEND_PATH
    import_root: str = IMPORT_ROOT
    """The directory that holds the ``sglang`` package (the probes' import path)."""
    pr_numbers: Mapping[str, int] = field(default_factory=dict)

    def role(self, name: str) -> str:
        if name not in self.roles:
            raise KeyError(f"no commit plays {name!r} in this history; roles: {', '.join(self.roles)}")
        return self.roles[name]

    @property
    def introduced(self) -> str:
        return self.role("introduced")

    @property
    def fixed(self) -> str:
        return self.role("fixed")

    @property
    def reverted(self) -> str:
        return self.role("reverted")

    @property
    def relanded(self) -> str:
        return self.role("relanded")

    def with_expectation(self, wanted: Expectation) -> tuple[str, ...]:
        return tuple(sha for sha in self.commits if self.expected[sha] == wanted)

    def first_of_era(self, era: str) -> str:
        return next(sha for sha in self.commits if self.eras[sha] == era)


class HistoryWriter:
    """Commits whole trees on ``main`` of a new repository with a work tree."""

    def __init__(self, path: Path) -> None:
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ValueError(f"{path} exists and is not an empty directory")
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._tree: dict[str, str] = {}
        self._sequence = 0
        self._pr = 31000
        self.shas: list[str] = []
        self.subjects: dict[str, str] = {}
        self.roles: dict[str, str] = {}
        self.eras: dict[str, str] = {}
        self.expected: dict[str, Expectation] = {}
        self.pr_numbers: dict[str, int] = {}
        self._git("init", "--quiet", "-b", BRANCH)

    def next_pr(self) -> int:
        """Unrelated pull requests: rising numbers with irregular gaps, above the story's."""
        self._pr += 1 + self._sequence * 7 % 13
        return self._pr

    def write(self, commit: Commit, revert_body: bool = True) -> str:
        tree = sglang_tree(commit.variant, commit.filler)
        for path in set(self._tree) - set(tree):
            (self.path / path).unlink()
        for path, text in tree.items():
            if self._tree.get(path) != text:
                file = self.path / path
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_text(text)
        self._tree = tree
        subject = commit.subject if "(#" in commit.subject else f"{commit.subject} (#{self.next_pr()})"
        message = subject + "\n"
        if commit.reverts is not None and revert_body:
            message += f"\nThis reverts commit {self.roles[commit.reverts]}.\n"
        name, email = MAINTAINER if commit.maintainer else PEOPLE[self._sequence % len(PEOPLE)]
        self._sequence += 1
        when = START + self._sequence * STEP_SECONDS
        self._git("add", "--all")
        self._git(
            "commit", "--quiet", "--allow-empty", "--no-verify", "-F", "-", stdin=message, who=(name, email, when)
        )
        sha = self._git("rev-parse", "HEAD").strip()
        self.shas.append(sha)
        self.subjects[sha] = subject
        self.eras[sha] = commit.variant.era
        self.expected[sha] = expectation(commit.variant)
        self.pr_numbers[sha] = int(subject.rsplit("(#", 1)[1].rstrip(")"))
        if commit.role is not None:
            self.roles[commit.role] = sha
        return sha

    def manifest(self, era: str) -> ShapedManifest:
        roles = {**self.roles, "head": self.shas[-1]}
        return ShapedManifest(
            path=self.path,
            era=era,
            branch=BRANCH,
            head=self.shas[-1],
            commits=tuple(self.shas),
            subjects=dict(self.subjects),
            roles=roles,
            eras=dict(self.eras),
            expected=dict(self.expected),
            pr_numbers=dict(self.pr_numbers),
        )

    def _git(self, *args: str, stdin: str | None = None, who: tuple[str, str, int] | None = None) -> str:
        env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
        env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
        if who is not None:
            name, email, when = who
            stamp = f"{when} +0000"
            env.update(
                GIT_AUTHOR_NAME=name,
                GIT_AUTHOR_EMAIL=email,
                GIT_AUTHOR_DATE=stamp,
                GIT_COMMITTER_NAME=name,
                GIT_COMMITTER_EMAIL=email,
                GIT_COMMITTER_DATE=stamp,
            )
        result = subprocess.run(
            ["git", "-C", str(self.path), "-c", "commit.gpgsign=false", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.path}: {result.stderr.strip()}")
        return result.stdout


class Timeline:
    """Builds the list of commits: the current content, changed one commit at a time."""

    def __init__(self, variant: Variant) -> None:
        self.variant = variant
        self.filler = Filler()
        self.commits: list[Commit] = []
        self._slot = 0

    def commit(
        self,
        subject: str,
        role: str | None = None,
        maintainer: bool = False,
        reverts: str | None = None,
        **changes: object,
    ) -> None:
        if changes:
            self.variant = replace(self.variant, **changes)  # type: ignore[arg-type]
        self.commits.append(Commit(subject, self.variant, self.filler, role, reverts, maintainer))

    def unrelated(self, count: int = 1, role: str | None = None) -> None:
        """``count`` commits, each changing one file that no probe reads."""
        for _ in range(count):
            slot = SLOTS[self._slot % len(SLOTS)]
            self._slot += 1
            self.filler = self.filler.bump(slot)
            self.commits.append(Commit(UNRELATED_SUBJECTS[slot], self.variant, self.filler, role))
            role = None

    def docs_only(self) -> None:
        """Docs and another attention backend: files the probe never reads."""
        self.filler = self.filler.bump("docs").bump("triton")
        self.commits.append(
            Commit("[docs] Document the triton backend's split-KV setting", self.variant, self.filler, "docs_only")
        )

    def large_change(self, subject: str, **changes: object) -> None:
        """The change that plants the overwrite, inside a larger feature."""
        self.filler = replace(self.filler, spec_v2_files=True)
        self.commit(subject, role="introduced", overwrite=True, **changes)

    def read_file_touched(self) -> None:
        self.commit(
            "[misc] Clarify the ForwardBatch.positions comment",
            role="read_file_touched",
            fb_note=self.variant.fb_note + 1,
        )

    def stub_detour(self) -> None:
        """A commit whose eager target-verify path calls a GPU library, and the one undoing it."""
        self.commit("[perf] Use sgl_kernel to build cu_seqlens_k in trtllm_mha", role="stub_reached", stub_call=True)
        self.commit(
            "Build cu_seqlens_k with torch again in trtllm_mha (sgl_kernel lacks it on ROCm)",
            role="stub_removed",
            stub_call=False,
        )
