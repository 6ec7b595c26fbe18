"""Reuse keys, claims and resumable sessions.

Runs gain ``settings_key`` (what besides tree, probe and environment the result depends on) and
``dtype``; rows stored before this revision recorded neither, so each gets a key of its own
(``legacy-<id>``) that no new run matches: they stay in the history but are never reused. An
attempt of a case is stored once (a unique key), and ``claims`` lets concurrent processes agree on
who runs what. Bisect sessions keep their options and their driver; steps their attempt and round.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

RUN_KEY = ["tree_hash", "probe_id", "environment_id", "settings_key", "case_id", "attempt"]


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("settings_key", sa.String(64), nullable=True))
        batch.add_column(sa.Column("dtype", sa.String(16), nullable=True))
    op.execute("UPDATE runs SET settings_key = 'legacy-' || CAST(id AS VARCHAR(20))")
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("settings_key", existing_type=sa.String(64), nullable=False)
        batch.create_unique_constraint("uq_runs_attempt_key", RUN_KEY)
    with op.batch_alter_table("bisect_sessions") as batch:
        batch.add_column(sa.Column("options", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("driver", sa.String(255), nullable=True))
    with op.batch_alter_table("bisect_steps") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("round", sa.Integer(), nullable=True))
    op.create_table(
        "claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tree_hash", sa.String(64), nullable=False),
        sa.Column("probe_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("settings_key", sa.String(64), nullable=False),
        sa.Column("case_id", sa.String(255), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["probe_id"], ["probe_versions.id"], name="fk_claims_probe_id_probe_versions"),
        sa.ForeignKeyConstraint(["environment_id"], ["environments.id"], name="fk_claims_environment_id_environments"),
        sa.ForeignKeyConstraint(["session_id"], ["bisect_sessions.id"], name="fk_claims_session_id_bisect_sessions"),
        sa.PrimaryKeyConstraint("id", name="pk_claims"),
        sa.UniqueConstraint(*RUN_KEY, name="uq_claims_attempt_key"),
    )


def downgrade() -> None:
    op.drop_table("claims")
    with op.batch_alter_table("bisect_steps") as batch:
        batch.drop_column("round")
        batch.drop_column("attempt")
    with op.batch_alter_table("bisect_sessions") as batch:
        batch.drop_column("driver")
        batch.drop_column("options")
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("uq_runs_attempt_key", type_="unique")
        batch.drop_column("dtype")
        batch.drop_column("settings_key")
