"""Tracking: the last commit the scheduled job looked at, and the transitions found.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "track_states",
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("last_sha", sa.String(64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository_id"], ["repositories.id"], name="fk_track_states_repository_id_repositories"
        ),
        sa.PrimaryKeyConstraint("repository_id", "target", "branch", name="pk_track_states"),
    )
    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("probe", sa.String(255), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("pairs_with", sa.String(64), nullable=True),
        sa.Column("pair_kind", sa.String(16), nullable=True),
        sa.Column("candidates", sa.JSON(), nullable=False),
        sa.Column("authored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("found_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository_id"], ["repositories.id"], name="fk_transitions_repository_id_repositories"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_transitions"),
        sa.UniqueConstraint(
            "repository_id", "target", "probe", "sha", "kind", name="uq_transitions_repository_id_target_probe_sha_kind"
        ),
    )


def downgrade() -> None:
    op.drop_table("transitions")
    op.drop_table("track_states")
