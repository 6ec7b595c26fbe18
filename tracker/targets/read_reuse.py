"""Reusing a result at a revision whose target tree differs, because every file the result read is
the same there (``tracker.targets.inputs`` says what is recorded and why it is sound).

A Prober asks ``ReadReuse`` two things: the input set to store with a run just measured, and, for a
tree with no stored attempt, a stored attempt of another tree all of whose cases hold at this
revision. Reads are traced for probes that run in the worker, declared (``reads``) for commands; a
target with a setup step reuses by tree only, since a setup's output depends on the whole tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from tracker.core.records import InputRun
from tracker.targets.inputs import (
    Entries,
    Listing,
    Reads,
    declared,
    entries_digest,
    holds,
    traced,
)
from tracker.targets.revisions import Repo

if TYPE_CHECKING:
    from db.store import Store

LISTINGS_KEPT = 64


@dataclass(frozen=True)
class ReusedAttempt:
    """A complete stored attempt that holds at the revision asked about."""

    tree_hash: str
    attempt: int


class ReadReuse:
    def __init__(
        self,
        store: Store,
        repo: Repo,
        paths: Sequence[str],
        probe_id: int,
        environment_id: int,
        case_keys: Mapping[str, str],
        declared_reads: Sequence[str],
        traced_reads: bool,
    ) -> None:
        self.store, self.repo, self.paths = store, repo, tuple(paths)
        self.probe_id, self.environment_id, self.case_keys = probe_id, environment_id, dict(case_keys)
        self.declared_reads = tuple(declared_reads)
        self.traced_reads = traced_reads and not self.declared_reads
        self._listings: dict[str, Listing] = {}
        self._sets: dict[int, Entries] = {}

    @property
    def enabled(self) -> bool:
        return self.traced_reads or bool(self.declared_reads)

    def input_set_id(self, sha: str, reads: Reads | None) -> int | None:
        """The stored input set of a case measured at ``sha`` that read ``reads``; None when it
        cannot vouch for another revision."""
        entries = self._entries(sha, reads)
        if entries is None:
            return None
        return self.store.input_set(entries_digest(entries), entries)

    def reusable(self, sha: str) -> ReusedAttempt | None:
        """The newest complete stored attempt, at any tree, every case of which read only files
        and directories that are the same at ``sha``."""
        if not self.enabled:
            return None
        runs = self.store.input_runs(self.probe_id, self.environment_id, list(self.case_keys.values()))
        attempts: dict[tuple[str, int], dict[str, InputRun]] = {}
        for run in runs:
            if self.case_keys.get(run.case_id) == run.settings_key:
                attempts.setdefault((run.tree_hash, run.attempt), {})[run.case_id] = run
        complete = [cases for cases in attempts.values() if set(cases) == set(self.case_keys)]
        self._load_sets({run.input_set_id for cases in complete for run in cases.values()})
        listing = self._listing(sha)
        verdicts: dict[int, bool] = {}
        newest: tuple[datetime, ReusedAttempt] | None = None
        for cases in complete:
            if all(self._holds(run.input_set_id, listing, verdicts) for run in cases.values()):
                started = max(run.started_at for run in cases.values())
                run = next(iter(cases.values()))
                if newest is None or started > newest[0]:
                    newest = (started, ReusedAttempt(run.tree_hash, run.attempt))
        return newest[1] if newest is not None else None

    def _entries(self, sha: str, reads: Reads | None) -> Entries | None:
        if self.declared_reads:
            return declared(self.declared_reads, self._listing(sha))
        if self.traced_reads and reads is not None:
            return traced(reads, self._listing(sha))
        return None

    def _holds(self, input_set_id: int, listing: Listing, verdicts: dict[int, bool]) -> bool:
        if input_set_id not in verdicts:
            verdicts[input_set_id] = holds(self._sets[input_set_id], listing)
        return verdicts[input_set_id]

    def _load_sets(self, ids: set[int]) -> None:
        missing = [key for key in ids if key not in self._sets]
        if missing:
            self._sets.update(self.store.input_sets(missing))

    def _listing(self, sha: str) -> Listing:
        if sha not in self._listings:
            if len(self._listings) >= LISTINGS_KEPT:
                self._listings.pop(next(iter(self._listings)))
            self._listings[sha] = Listing.of(self.repo.listing(sha, self.paths))
        return self._listings[sha]
