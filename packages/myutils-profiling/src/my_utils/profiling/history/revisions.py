"""The run store's schema revisions, kept apart from the tables so that a reader needs no SQLAlchemy.

``migrations/versions`` holds one Alembic script per revision; :data:`HEAD` is the revision this
code reads and writes. The read-only SQLite path (``history.sqlite_reads``) compares a store's
revision with it before it reads.
"""

from __future__ import annotations

#: Every revision the package ships, oldest first; the last is the one this code reads and writes.
REVISIONS = ("0001", "0002")
HEAD = REVISIONS[-1]
#: The table holding a store's revision: not ``alembic_version``, which a shared database may hold for an
#: application of its own.
VERSION_TABLE = "myutils_history_version"
