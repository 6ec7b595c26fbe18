"""Input sets: what a run read of its revision, so that another revision holding the same files
reuses it (``tracker.targets.inputs``).

An input set is stored once, named by the digest of its entries; a run points at the one it read.
Runs stored before this revision point at none: they are reused by tree only, as before. A run
that stands for one measured at another tree names it in ``reused_from_id``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "input_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("entries", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_input_sets"),
        sa.UniqueConstraint("digest", name="uq_input_sets_digest"),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("input_set_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_runs_input_set_id_input_sets", "input_sets", ["input_set_id"], ["id"])
        batch.create_index(
            "ix_runs_probe_id_environment_id_input_set_id", ["probe_id", "environment_id", "input_set_id"]
        )
        batch.add_column(sa.Column("reused_from_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_runs_reused_from_id_runs", "runs", ["reused_from_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("fk_runs_reused_from_id_runs", type_="foreignkey")
        batch.drop_column("reused_from_id")
        batch.drop_index("ix_runs_probe_id_environment_id_input_set_id")
        batch.drop_constraint("fk_runs_input_set_id_input_sets", type_="foreignkey")
        batch.drop_column("input_set_id")
    op.drop_table("input_sets")
