"""The schema: every probe execution is a row in ``runs``, never updated."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

SCHEMA_REVISION = "0008"
"""The migration (``db/migrations/versions``) whose schema these models declare: a database that
records it is opened without loading Alembic. A new migration moves it, with the models."""

ATTEMPT_KEY = ("tree_hash", "probe_id", "environment_id", "settings_key", "case_id", "attempt")
"""What names one attempt of one case: stored once in ``runs``, claimed once in ``claims``."""


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out, also on SQLite, which stores no offset."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value.isoformat()}; pass a timezone-aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime, dict[str, Any]: JSON}


class Repository(Base):
    __tablename__ = "repositories"

    id: Mapped[int] = mapped_column(primary_key=True)
    path: Mapped[str] = mapped_column(Text, unique=True)
    name: Mapped[str] = mapped_column(String(255))


class Commit(Base):
    __tablename__ = "commits"
    __table_args__ = (UniqueConstraint("repository_id", "sha"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    sha: Mapped[str] = mapped_column(String(64))
    parents: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(Text)
    authored_at: Mapped[datetime]
    pr_number: Mapped[int | None]
    reverts_sha: Mapped[str | None] = mapped_column(String(64))


class TargetTree(Base):
    """The tree hash of a target's paths at a commit; ``paths_key`` names the set of paths."""

    __tablename__ = "target_trees"

    commit_id: Mapped[int] = mapped_column(ForeignKey("commits.id"), primary_key=True)
    paths_key: Mapped[str] = mapped_column(Text, primary_key=True)
    tree_hash: Mapped[str] = mapped_column(String(64), index=True)


class Environment(Base):
    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(16), unique=True)
    device: Mapped[str] = mapped_column(String(64))
    gpu_name: Mapped[str | None] = mapped_column(String(255))
    compute_capability: Mapped[str | None] = mapped_column(String(16))
    driver: Mapped[str | None] = mapped_column(String(64))
    cuda: Mapped[str | None] = mapped_column(String(64))
    torch: Mapped[str | None] = mapped_column(String(64))
    flashinfer: Mapped[str | None] = mapped_column(String(64))
    python: Mapped[str | None] = mapped_column(String(64))
    host: Mapped[str | None] = mapped_column(String(255))
    facts: Mapped[dict[str, Any]] = mapped_column(default=dict)


class ProbeVersion(Base):
    __tablename__ = "probe_versions"
    __table_args__ = (UniqueConstraint("name", "version", "code_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    version: Mapped[int]
    code_hash: Mapped[str] = mapped_column(String(64))


class BisectSession(Base):
    __tablename__ = "bisect_sessions"
    __table_args__ = (Index(None, "repository_id", "target", "probe_id", "status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    target: Mapped[str] = mapped_column(String(255))
    probe_id: Mapped[int] = mapped_column(ForeignKey("probe_versions.id"))
    good_sha: Mapped[str] = mapped_column(String(64))
    bad_sha: Mapped[str] = mapped_column(String(64))
    strategy: Mapped[str] = mapped_column(String(64))
    options: Mapped[dict[str, Any] | None]
    """Everything that steers the search (strategy options, execution settings, the flake prior
    read at the start), so that a resumed session continues the same search; None before 0003."""
    status: Mapped[str] = mapped_column(String(16))
    driver: Mapped[str | None] = mapped_column(String(255))
    """The process driving the session (``host:pid:start``), cleared when it finishes."""
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    result: Mapped[dict[str, Any] | None]


class BisectStep(Base):
    __tablename__ = "bisect_steps"
    __table_args__ = (UniqueConstraint("session_id", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("bisect_sessions.id"))
    position: Mapped[int]
    sha: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(16))
    reused: Mapped[bool]
    attempt: Mapped[int | None]
    """The stored attempt at the step's tree that this verdict came from."""
    round: Mapped[int | None]
    created_at: Mapped[datetime]


class InputSet(Base):
    """What a run read of its revision: ``(KIND:PATH, STATE)`` entries (``tracker.targets.inputs``),
    stored once per digest."""

    __tablename__ = "input_sets"

    id: Mapped[int] = mapped_column(primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    entries: Mapped[list[list[str]]] = mapped_column(JSON)


class Run(Base):
    """One probe case executed once. ``settings_key`` digests every option that can change the
    result besides the tree, the probe version and the environment (dtype, seed policy, the case's
    parameters): only a run with the same key is reused. An attempt of a case is stored once."""

    __tablename__ = "runs"
    __table_args__ = (
        Index(None, "tree_hash", "probe_id", "environment_id"),
        Index(None, "probe_id", "environment_id", "input_set_id"),
        UniqueConstraint(*ATTEMPT_KEY, name="uq_runs_attempt_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    commit_id: Mapped[int] = mapped_column(ForeignKey("commits.id"), index=True)
    tree_hash: Mapped[str] = mapped_column(String(64))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    probe_id: Mapped[int] = mapped_column(ForeignKey("probe_versions.id"))
    case_id: Mapped[str] = mapped_column(String(255))
    settings_key: Mapped[str] = mapped_column(String(64))
    dtype: Mapped[str | None] = mapped_column(String(16))
    outcome: Mapped[str] = mapped_column(String(16))
    metrics: Mapped[dict[str, Any]]
    samples: Mapped[dict[str, list[float]] | None] = mapped_column(JSON)
    """A metric probe's samples by metric, every one; None for other probes' runs."""
    conditions: Mapped[dict[str, str] | None] = mapped_column(JSON)
    """What moved a metric probe's timings as it ran (``tracker.execution.conditions``); None for
    other probes' runs."""
    signature: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[str] = mapped_column(Text)
    duration_s: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime]
    attempt: Mapped[int]
    seed: Mapped[int]
    trigger: Mapped[str] = mapped_column(String(16))
    session_id: Mapped[int | None] = mapped_column(ForeignKey("bisect_sessions.id"))
    input_set_id: Mapped[int | None] = mapped_column(ForeignKey("input_sets.id"))
    """What the run read of its revision; None: reused by tree only."""
    reused_from_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    """The run measured at another tree that this one stands for, every file it read being the
    same here (``Store.copy_attempt``); None: measured at this tree."""


class Claim(Base):
    """A case execution some process has promised to store: concurrent processes wait for it
    instead of running it again. Deleted in the transaction that stores the run."""

    __tablename__ = "claims"
    __table_args__ = (UniqueConstraint(*ATTEMPT_KEY, name="uq_claims_attempt_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    tree_hash: Mapped[str] = mapped_column(String(64))
    probe_id: Mapped[int] = mapped_column(ForeignKey("probe_versions.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    settings_key: Mapped[str] = mapped_column(String(64))
    case_id: Mapped[str] = mapped_column(String(255))
    attempt: Mapped[int]
    session_id: Mapped[int | None] = mapped_column(ForeignKey("bisect_sessions.id"))
    owner: Mapped[str] = mapped_column(String(255))
    claimed_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class TrackState(Base):
    """The last commit ``regtrack track`` has looked at, per repository, target and branch."""

    __tablename__ = "track_states"

    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"), primary_key=True)
    target: Mapped[str] = mapped_column(String(255), primary_key=True)
    branch: Mapped[str] = mapped_column(String(255), primary_key=True)
    last_sha: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime]


class TransitionRow(Base):
    """A pass/fail transition found by a scan or by the scheduled job."""

    __tablename__ = "transitions"
    __table_args__ = (UniqueConstraint("repository_id", "target", "probe", "sha", "kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    target: Mapped[str] = mapped_column(String(255))
    probe: Mapped[str] = mapped_column(String(255))
    sha: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    pairs_with: Mapped[str | None] = mapped_column(String(64))
    pair_kind: Mapped[str | None] = mapped_column(String(16))
    candidates: Mapped[list[str]] = mapped_column(JSON)
    authored_at: Mapped[datetime]
    found_at: Mapped[datetime]
    trigger: Mapped[str] = mapped_column(String(16))


class VerificationRow(Base):
    """The check of a culprit for a probe: the bad end measured with the culprit's change undone
    (``tracker.core.verification``). One per repository, target, probe, culprit and bad end; a
    later check replaces it."""

    __tablename__ = "verifications"
    __table_args__ = (UniqueConstraint("repository_id", "target", "probe", "culprit", "bad"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"))
    target: Mapped[str] = mapped_column(String(255))
    probe: Mapped[str] = mapped_column(String(255))
    culprit: Mapped[str] = mapped_column(String(64))
    bad: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    record: Mapped[dict[str, Any]]
    """The whole answer, as ``Verification.to_json`` writes it."""
    verified_at: Mapped[datetime]
