"""Transitions along a line of revisions, by index: pure, no git, database or torch.

The line is a list of states, oldest first. A transition is where the judged state (good or bad)
changes; untestable and flaky revisions are never transitions themselves: they are stretches,
and a change of state across one is a transition whose exact commit is one of the stretch's
revisions or the first revision after it. The scan turns these indexes into commit-level
``TransitionRecord`` and ``StretchRecord`` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.core.records import TransitionKind
from tracker.core.verdicts import State


@dataclass(frozen=True)
class IndexTransition:
    """A transition in a line of states, by position, before it is tied to a commit. ``index`` is
    the first revision in the new state; ``candidates`` lists every index that may be the
    transition when untestable or flaky revisions hide it (just ``(index,)`` otherwise)."""

    index: int
    kind: TransitionKind
    candidates: tuple[int, ...]


@dataclass(frozen=True)
class IndexStretch:
    """Positions ``first`` .. ``last`` of a line in one untestable (``SKIP``) or flaky state."""

    kind: State
    first: int
    last: int


def find_transitions(states: Sequence[State]) -> tuple[list[IndexTransition], list[IndexStretch]]:
    transitions: list[IndexTransition] = []
    stretches: list[IndexStretch] = []
    judged: State | None = None
    hidden: list[int] = []
    for index, state in enumerate(states):
        if state in (State.SKIP, State.FLAKY):
            if stretches and stretches[-1].kind is state and stretches[-1].last == index - 1:
                stretches[-1] = IndexStretch(state, stretches[-1].first, index)
            else:
                stretches.append(IndexStretch(state, index, index))
            hidden.append(index)
            continue
        if judged is not None and state is not judged:
            kind = TransitionKind.REGRESSION if state is State.BAD else TransitionKind.FIX
            transitions.append(IndexTransition(index, kind, (*hidden, index)))
        judged, hidden = state, []
    return transitions, stretches


def group_runs(keys: Sequence[str]) -> list[range]:
    """Maximal runs of equal consecutive keys (e.g. target tree hashes) as index ranges."""
    runs: list[range] = []
    start = 0
    for index in range(1, len(keys) + 1):
        if index == len(keys) or keys[index] != keys[start]:
            runs.append(range(start, index))
            start = index
    return runs
