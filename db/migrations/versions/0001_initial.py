"""Initial schema: repositories, commits, target trees, environments, probes, runs, bisect sessions.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repositories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_repositories"),
        sa.UniqueConstraint("path", name="uq_repositories_path"),
    )
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(16), nullable=False),
        sa.Column("device", sa.String(64), nullable=False),
        sa.Column("gpu_name", sa.String(255), nullable=True),
        sa.Column("compute_capability", sa.String(16), nullable=True),
        sa.Column("driver", sa.String(64), nullable=True),
        sa.Column("cuda", sa.String(64), nullable=True),
        sa.Column("torch", sa.String(64), nullable=True),
        sa.Column("flashinfer", sa.String(64), nullable=True),
        sa.Column("python", sa.String(64), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_environments"),
        sa.UniqueConstraint("fingerprint", name="uq_environments_fingerprint"),
    )
    op.create_table(
        "probe_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_probe_versions"),
        sa.UniqueConstraint("name", "version", "code_hash", name="uq_probe_versions_name_version_code_hash"),
    )
    op.create_table(
        "commits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("parents", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("authored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("reverts_sha", sa.String(64), nullable=True),
        sa.ForeignKeyConstraint(["repository_id"], ["repositories.id"], name="fk_commits_repository_id_repositories"),
        sa.PrimaryKeyConstraint("id", name="pk_commits"),
        sa.UniqueConstraint("repository_id", "sha", name="uq_commits_repository_id_sha"),
    )
    op.create_table(
        "target_trees",
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.Column("paths_key", sa.Text(), nullable=False),
        sa.Column("tree_hash", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(["commit_id"], ["commits.id"], name="fk_target_trees_commit_id_commits"),
        sa.PrimaryKeyConstraint("commit_id", "paths_key", name="pk_target_trees"),
    )
    op.create_index("ix_target_trees_tree_hash", "target_trees", ["tree_hash"])
    op.create_table(
        "bisect_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("probe_id", sa.Integer(), nullable=False),
        sa.Column("good_sha", sa.String(64), nullable=False),
        sa.Column("bad_sha", sa.String(64), nullable=False),
        sa.Column("strategy", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["repository_id"], ["repositories.id"], name="fk_bisect_sessions_repository_id_repositories"
        ),
        sa.ForeignKeyConstraint(["probe_id"], ["probe_versions.id"], name="fk_bisect_sessions_probe_id_probe_versions"),
        sa.PrimaryKeyConstraint("id", name="pk_bisect_sessions"),
    )
    op.create_index(
        "ix_bisect_sessions_repository_id_target_probe_id_status",
        "bisect_sessions",
        ["repository_id", "target", "probe_id", "status"],
    )
    op.create_table(
        "bisect_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("reused", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["bisect_sessions.id"], name="fk_bisect_steps_session_id_bisect_sessions"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_bisect_steps"),
        sa.UniqueConstraint("session_id", "position", name="uq_bisect_steps_session_id_position"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.Column("tree_hash", sa.String(64), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("probe_id", sa.Integer(), nullable=False),
        sa.Column("case_id", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["commit_id"], ["commits.id"], name="fk_runs_commit_id_commits"),
        sa.ForeignKeyConstraint(["environment_id"], ["environments.id"], name="fk_runs_environment_id_environments"),
        sa.ForeignKeyConstraint(["probe_id"], ["probe_versions.id"], name="fk_runs_probe_id_probe_versions"),
        sa.ForeignKeyConstraint(["session_id"], ["bisect_sessions.id"], name="fk_runs_session_id_bisect_sessions"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_tree_hash_probe_id_environment_id", "runs", ["tree_hash", "probe_id", "environment_id"])
    op.create_index("ix_runs_commit_id", "runs", ["commit_id"])


def downgrade() -> None:
    for table in (
        "runs",
        "bisect_steps",
        "bisect_sessions",
        "target_trees",
        "commits",
        "probe_versions",
        "environments",
        "repositories",
    ):
        op.drop_table(table)
