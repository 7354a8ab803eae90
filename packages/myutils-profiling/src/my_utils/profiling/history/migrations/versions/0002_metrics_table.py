"""Metric names and units in a table of their own; facts keyed by (metric id, run).

The first schema repeated each metric's name and unit in every fact and searched a trend through a
secondary index on the name. Here a name is stored once, and ``facts``' primary key starts with the
metric, so one metric's values are one range of the table. Existing facts are copied over (a metric
recorded with two units keeps the later-sorting one: the reports give one unit per fact id).

Revision ID: 0002
Revises: 0001
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
        "metrics",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(300), nullable=False, unique=True),
        sa.Column("unit", sa.String(32), nullable=False),
    )
    op.execute("INSERT INTO metrics (name, unit) SELECT metric, MAX(unit) FROM facts GROUP BY metric ORDER BY metric")
    op.create_table(
        "facts_by_metric",
        sa.Column("metric_id", sa.Integer, sa.ForeignKey("metrics.id"), primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
    )
    op.execute("INSERT INTO facts_by_metric (metric_id, run_id, value) "
               "SELECT m.id, f.run_id, f.value FROM facts f JOIN metrics m ON m.name = f.metric")
    op.drop_index("ix_facts_metric", table_name="facts")
    op.drop_table("facts")
    op.rename_table("facts_by_metric", "facts")
    op.create_index("ix_facts_run", "facts", ["run_id"])


def downgrade() -> None:
    op.create_table(
        "facts_by_name",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("metric", sa.String(300), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
    )
    op.execute("INSERT INTO facts_by_name (run_id, metric, value, unit) "
               "SELECT f.run_id, m.name, f.value, m.unit FROM facts f JOIN metrics m ON m.id = f.metric_id")
    op.drop_index("ix_facts_run", table_name="facts")
    op.drop_table("facts")
    op.drop_table("metrics")
    op.rename_table("facts_by_name", "facts")
    op.create_index("ix_facts_metric", "facts", ["metric"])
