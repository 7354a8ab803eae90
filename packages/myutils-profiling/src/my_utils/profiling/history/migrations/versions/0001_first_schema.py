"""The first schema: runs with their context, and facts keyed by (run, metric name) with the unit on each.

Revision ID: 0001
Revises:
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
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
        sa.Column("workload", sa.String(255), nullable=False),
        sa.Column("hardware", sa.String(300), nullable=False),
        sa.Column("world_size", sa.Integer, nullable=True),
        sa.Column("config_hash", sa.String(255), nullable=True),
        sa.Column("git_commit", sa.String(255), nullable=True),
        sa.Column("git_branch", sa.String(255), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("gpu_model", sa.String(255), nullable=True),
        sa.Column("gpu_count", sa.Integer, nullable=True),
        sa.Column("tool_version", sa.String(64), nullable=True),
        sa.Column("run_time", sa.Float, nullable=False),
        sa.Column("added_time", sa.Float, nullable=False),
        sa.Column("source", sa.Text, nullable=True),
    )
    op.create_index("ix_runs_series", "runs", ["workload", "hardware", "world_size", "run_time"])
    op.create_table(
        "facts",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("metric", sa.String(300), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
    )
    op.create_index("ix_facts_metric", "facts", ["metric"])


def downgrade() -> None:
    op.drop_table("facts")
    op.drop_table("runs")
