"""Claims on the cases of a measurement: each case is claimed in the store before it runs, so
concurrent processes measuring the same tree run it once while the others wait for the stored run.
A claim outlives its process only until it is found stale, so a killed command's cases are run
again by the next one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from tracker.core.measurements import CaseOutcome
from tracker.core.records import CaseKey, ClaimState
from tracker.execution import owners
from tracker.targets.reuse import Attempt

if TYPE_CHECKING:
    from db.store import Store

CLAIM_GRACE_S = 60.0
NEW_ATTEMPT_TRIES = 20


@dataclass(frozen=True)
class Request:
    """A revision to measure, by its target tree; ``rerun`` asks for a new attempt."""

    sha: str
    tree_hash: str
    rerun: bool = False


@dataclass
class Plan:
    """What measuring one request takes: the attempt it reports, the cases known, the ones missing."""

    request: Request
    attempt: int | None = None
    """None until a new attempt's number is claimed."""
    cases: dict[str, CaseOutcome] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    seed: int | None = None
    executed: bool = False
    retries: int = 0
    """Cases run again because an earlier case edited the snapshot."""


class Claims:
    """This process's claims on the cases of one probe in one environment; ``attempts`` reads a
    tree's stored attempts, ``timeout_s`` bounds one case."""

    def __init__(
        self,
        store: Store,
        probe_id: int,
        environment_id: int,
        case_keys: dict[str, str],
        timeout_s: float,
        attempts: Callable[[str], list[Attempt]],
    ) -> None:
        self.store, self.probe_id, self.environment_id = store, probe_id, environment_id
        self.case_keys, self.timeout_s, self.attempts = case_keys, timeout_s, attempts

    def claim(self, plan: Plan, session_id: int | None, seed_of: Callable[[int], int]) -> tuple[list[str], list[str]]:
        """Claim the plan's missing cases; the ones claimed and the ones another process holds."""
        if plan.attempt is None:
            self._claim_new_attempt(plan, session_id, seed_of)
            return list(plan.missing), []
        claimed, held = [], []
        for case_id in plan.missing:
            state = self._claim_one(self.key(plan, case_id), plan.attempt, session_id)
            if state is ClaimState.CLAIMED:
                claimed.append(case_id)
            elif state is ClaimState.HELD:
                held.append(case_id)
        self.collect(plan)
        return claimed, held

    def _claim_new_attempt(self, plan: Plan, session_id: int | None, seed_of: Callable[[int], int]) -> None:
        """The smallest number no live process has used for this tree (``Store.new_attempt``), with
        every case claimed under it."""
        keys = [self.key(plan, case_id) for case_id in self.case_keys]
        for _ in range(NEW_ATTEMPT_TRIES):
            number = self.store.new_attempt(keys, owners.is_stale)
            states = [self._claim_one(key, number, session_id) for key in keys]
            if all(state is ClaimState.CLAIMED for state in states):
                plan.attempt = number
                plan.seed = seed_of(number)
                return
            self.store.release_claims(owners.this_process(), keys, number)
        tree = plan.request.tree_hash[:12]
        raise RuntimeError(f"could not claim a new attempt of {tree} in {NEW_ATTEMPT_TRIES} tries")

    def _claim_one(self, key: CaseKey, attempt: int, session_id: int | None) -> ClaimState:
        expiry = datetime.now(UTC) + timedelta(seconds=2 * self.timeout_s + CLAIM_GRACE_S)
        return self.store.claim(key, attempt, owners.this_process(), expiry, owners.is_stale, session_id)

    def release(self, plan: Plan, case_id: str) -> None:
        """Give up the claim of one case, so that it can be run again."""
        self.store.release_claims(owners.this_process(), [self.key(plan, case_id)], plan.attempt)

    def collect(self, plan: Plan) -> None:
        """Take the runs other processes stored for the plan's attempt."""
        if plan.attempt is None:
            return
        for attempt in self.attempts(plan.request.tree_hash):
            if attempt.number == plan.attempt:
                for case_id in [c for c in plan.missing if c in attempt.runs]:
                    plan.cases[case_id] = CaseOutcome.of(attempt.runs[case_id])
                    plan.missing.remove(case_id)

    def key(self, plan: Plan, case_id: str) -> CaseKey:
        return CaseKey(plan.request.tree_hash, self.probe_id, self.environment_id, self.case_keys[case_id], case_id)
