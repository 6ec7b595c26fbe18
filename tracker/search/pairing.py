"""Pair transitions with the commits they revert or re-land: pure, over commit metadata.

A revert is recognised by GitHub's message (``Revert "<subject>"``, ``This reverts commit X.``)
or, without either, by the target paths returning to an earlier state (the tree after the commit
equals the tree before an earlier transition, and the tree before it the tree after that one).
A re-land repeats an earlier reverted change: the same patch to the target paths, or the same
subject once PR numbers are set aside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tracker.core.records import PR_SUFFIX, REVERT_SUBJECT, CommitInfo, PairKind


@dataclass(frozen=True)
class Pair:
    sha: str
    kind: PairKind


def is_revert(commit: CommitInfo) -> bool:
    """Whether the commit says it reverts another, by its message or its subject."""
    return commit.reverts_sha is not None or REVERT_SUBJECT.match(commit.subject) is not None


def bare_subject(subject: str) -> str:
    """The subject without trailing PR numbers: ``Fix x (#12)`` and ``Fix x (#15)`` are one change."""
    while PR_SUFFIX.search(subject):
        subject = PR_SUFFIX.sub("", subject)
    return subject


def reverted_by_message(commit: CommitInfo, earlier: Sequence[CommitInfo]) -> str | None:
    by_sha = {c.sha: c for c in earlier}
    if commit.reverts_sha in by_sha:
        return commit.reverts_sha
    match = REVERT_SUBJECT.match(commit.subject)
    if match:
        wanted = bare_subject(match.group("subject"))
        for candidate in reversed(earlier):
            if bare_subject(candidate.subject) == wanted:
                return candidate.sha
    return None


def pair_transitions(
    line: Sequence[CommitInfo],
    trees: Sequence[str],
    transition_indices: Sequence[int],
    patch_id: Callable[[str], str | None],
) -> dict[int, Pair]:
    """For each transition index (into ``line``) that reverts or re-lands an earlier commit, its pair.

    ``trees[i]`` is the target tree of ``line[i]``; index 0 has no parent in the line, so it is
    never paired by trees. A revert message wins; failing one, a re-land is looked for before the
    trees are compared, since a re-land also returns the trees to an earlier state (the one before
    the revert).
    """
    pairs: dict[int, Pair] = {}
    reverted: dict[str, str] = {}
    for position, index in enumerate(transition_indices):
        earlier = transition_indices[:position]
        target = reverted_by_message(line[index], line[:index])
        original = None if target else _relanded(index, line, earlier, reverted, patch_id)
        if original is not None:
            pairs[index] = Pair(original, "relands")
            continue
        target = target or _reverted_by_trees(index, trees, earlier, line)
        if target is not None:
            pairs[index] = Pair(target, "reverts")
            reverted[target] = line[index].sha
    return pairs


def _reverted_by_trees(
    index: int, trees: Sequence[str], earlier: Sequence[int], line: Sequence[CommitInfo]
) -> str | None:
    if index == 0:
        return None
    for other in reversed(earlier):
        if other > 0 and trees[index] == trees[other - 1] and trees[index - 1] == trees[other]:
            return line[other].sha
    return None


def _relanded(
    index: int,
    line: Sequence[CommitInfo],
    earlier: Sequence[int],
    reverted: dict[str, str],
    patch_id: Callable[[str], str | None],
) -> str | None:
    commit = line[index]
    for other in reversed(earlier):
        original = line[other]
        if original.sha not in reverted:
            continue
        if bare_subject(original.subject) == bare_subject(commit.subject):
            return original.sha
        mine = patch_id(commit.sha)
        if mine is not None and mine == patch_id(original.sha):
            return original.sha
    return None
