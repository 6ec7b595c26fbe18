"""What runs read of their revisions: input sets, the runs that recorded one, and the copies of a
result standing at another tree whose read files are all the same (``tracker.targets.read_reuse``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeAlias

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from db.chunks import chunked
from db.engine import Database, commit_id_of, in_chunks, now
from db.models import Commit, InputSet, Run
from tracker.core.records import InputRun

CopyLink: TypeAlias = "tuple[int | None, str]"
"""A run's ``reused_from_id`` (the run it copies; None: measured where it is stored) and the commit it is stored at."""


class InputStore(Database):
    def copy_attempt(
        self, repo_id: int, sha: str, tree_hash: str, run_ids: Sequence[int], session_id: int | None, trigger: str
    ) -> None:
        """Store, as attempt 1 of ``tree_hash`` at ``sha``, the runs ``run_ids`` of an attempt
        measured at another tree that holds here: every later question about this tree finds them,
        each naming the run it stands for. Nothing is stored where the tree already has runs of
        that attempt key (another process measured or copied it first)."""
        try:
            with self._writing() as session:
                commit_id = commit_id_of(session, repo_id, sha)
                started = now()
                for source in session.scalars(select(Run).where(Run.id.in_(sorted(set(run_ids))))):
                    session.add(_copy_of(source, commit_id, tree_hash, started, session_id, trigger))
        except IntegrityError:
            return

    def copied_from(self, run_ids: Sequence[int]) -> dict[int, str]:
        """For each of these runs that is a copy of a result measured at another tree (read reuse,
        ``copy_attempt``), the commit that result was measured at, through copies of copies."""
        query = select(Run.id, Run.reused_from_id, Commit.sha).join(Commit, Run.commit_id == Commit.id)

        def links(ids: Sequence[int]) -> dict[int, CopyLink]:
            with self._reading() as session:
                found = [row for chunk in chunked(ids) for row in session.execute(query.where(Run.id.in_(chunk)))]
            return {run_id: (source, sha) for run_id, source, sha in found}

        return first_measured(run_ids, links)

    def input_set(self, digest: str, entries: Sequence[tuple[str, str]]) -> int:
        """The id of the input set ``entries`` (digest ``digest``), stored once whoever races for it."""
        query = select(InputSet.id).where(InputSet.digest == digest)
        for _ in range(2):
            try:
                with self._writing() as session:
                    found = session.scalar(query)
                    if found is not None:
                        return found
                    row = InputSet(digest=digest, entries=[list(entry) for entry in entries])
                    session.add(row)
                    session.flush()
                    return row.id
            except IntegrityError:
                continue
        raise RuntimeError(f"input set {digest[:12]} could neither be stored nor found")

    def input_sets(self, ids: Sequence[int]) -> dict[int, tuple[tuple[str, str], ...]]:
        """The entries of each input set asked for."""
        with self._reading() as session:
            rows = in_chunks(
                session,
                sorted(set(ids)),
                lambda some: select(InputSet.id, InputSet.entries).where(InputSet.id.in_(some)),
            )
        return {key: tuple((kind_path, state) for kind_path, state in entries) for key, entries in rows.items()}

    def input_runs(self, probe_id: int, environment_id: int, settings_keys: Sequence[str]) -> list[InputRun]:
        """Every stored run of this probe version, environment and settings that recorded what it read."""
        query = select(
            Run.tree_hash, Run.case_id, Run.settings_key, Run.attempt, Run.input_set_id, Run.started_at
        ).where(
            Run.probe_id == probe_id,
            Run.environment_id == environment_id,
            Run.input_set_id.is_not(None),
            Run.settings_key.in_(sorted(set(settings_keys))),
        )
        with self._reading() as session:
            return [
                InputRun(tree, case_id, key, attempt, input_set, started)
                for tree, case_id, key, attempt, input_set, started in session.execute(query)
                if input_set is not None
            ]


def _copy_of(
    source: Run, commit_id: int, tree_hash: str, started: datetime, session_id: int | None, trigger: str
) -> Run:
    """A run standing at ``tree_hash`` for ``source``: its outcome, metrics, samples, signature and
    detail, no time of its own."""
    copied = (
        "environment_id",
        "probe_id",
        "case_id",
        "settings_key",
        "dtype",
        "outcome",
        "metrics",
        "samples",
        "conditions",
    )
    return Run(
        **{name: getattr(source, name) for name in (*copied, "signature", "detail", "seed", "input_set_id")},
        commit_id=commit_id,
        tree_hash=tree_hash,
        duration_s=0.0,
        started_at=started,
        attempt=1,
        trigger=trigger,
        session_id=session_id,
        reused_from_id=source.id,
    )


def first_measured(run_ids: Sequence[int], links: Callable[[Sequence[int]], Mapping[int, CopyLink]]) -> dict[int, str]:
    """For each of ``run_ids`` that copies another run, the commit the first run of its chain of
    copies was measured at. A copy names a run stored before it, so every chain ends."""
    found: dict[int, str] = {}
    looking_at = {run_id: run_id for run_id in run_ids}
    while looking_at:
        known = links(sorted(set(looking_at.values())))
        following = {}
        for asked, run_id in looking_at.items():
            if run_id not in known:
                continue
            source, sha = known[run_id]
            if source is not None:
                following[asked] = source
            elif run_id != asked:
                found[asked] = sha
        looking_at = following
    return found
