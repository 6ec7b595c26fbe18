"""What runs read of their revisions: input sets, the runs that recorded one, and the copies of a
result standing at another tree whose read files are all the same (``tracker.targets.read_reuse``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from db.engine import Database, commit_id_of, in_chunks, now
from db.models import InputSet, Run
from tracker.core.records import InputRun


class InputStore(Database):
    def copy_attempt(self, repo_id: int, sha: str, tree_hash: str, run_ids: Sequence[int], session_id: int | None, trigger: str) -> None:
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
            rows = in_chunks(session, sorted(set(ids)), lambda some: select(InputSet.id, InputSet.entries).where(InputSet.id.in_(some)))
        return {key: tuple((kind_path, state) for kind_path, state in entries) for key, entries in rows.items()}

    def input_runs(self, probe_id: int, environment_id: int, settings_keys: Sequence[str]) -> list[InputRun]:
        """Every stored run of this probe version, environment and settings that recorded what it read."""
        query = select(Run.tree_hash, Run.case_id, Run.settings_key, Run.attempt, Run.input_set_id, Run.started_at).where(
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


def _copy_of(source: Run, commit_id: int, tree_hash: str, started: datetime, session_id: int | None, trigger: str) -> Run:
    """A run standing at ``tree_hash`` for ``source``: its outcome, metrics, signature and detail,
    no time of its own."""
    return Run(
        commit_id=commit_id, tree_hash=tree_hash, environment_id=source.environment_id, probe_id=source.probe_id,
        case_id=source.case_id, settings_key=source.settings_key, dtype=source.dtype, outcome=source.outcome,
        metrics=source.metrics, signature=source.signature, detail=source.detail, duration_s=0.0, started_at=started,
        attempt=1, seed=source.seed, trigger=trigger, session_id=session_id, input_set_id=source.input_set_id,
        reused_from_id=source.id,
    )  # fmt: skip
