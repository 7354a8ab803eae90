"""The run store's tables at the newest revision (SQLAlchemy Core), and the revisions that lead to it.

``runs`` holds one row per stored report and its context; ``metrics`` names each metric once (with its
unit); ``facts`` holds the numbers, keyed by (metric, run) so that a trend of one metric reads one
contiguous index range. A report is identified by ``fingerprint`` (the sha256 of its canonical JSON):
adding it again finds the row instead of adding one.

The migrations in ``history/migrations/versions`` build these tables revision by revision; a test
compares what they build with :data:`metadata`, so the two cannot drift apart. Times are unix seconds
(float): the same in SQLite and PostgreSQL, and cheap to order by.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text

from my_utils.profiling.history.revisions import HEAD, REVISIONS

__all__ = ["HEAD", "REVISIONS", "facts", "metadata", "metrics", "runs"]

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fingerprint", String(64), nullable=False, unique=True),
    Column("workload", String(255), nullable=False),
    Column("hardware", String(300), nullable=False),
    Column("world_size", Integer, nullable=True),
    Column("config_hash", String(255), nullable=True),
    Column("git_commit", String(255), nullable=True),
    Column("git_branch", String(255), nullable=True),
    Column("host", String(255), nullable=True),
    Column("gpu_model", String(255), nullable=True),
    Column("gpu_count", Integer, nullable=True),
    Column("tool_version", String(64), nullable=True),
    Column("run_time", Float, nullable=False),
    Column("added_time", Float, nullable=False),
    Column("source", Text, nullable=True),
    Index("ix_runs_series", "workload", "hardware", "world_size", "run_time"),
)

metrics = Table(
    "metrics", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(300), nullable=False, unique=True),
    Column("unit", String(32), nullable=False),
)

facts = Table(
    "facts", metadata,
    Column("metric_id", Integer, ForeignKey("metrics.id"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("value", Float, nullable=False),
    Index("ix_facts_run", "run_id"),
)
