"""Read a SQLite run store with the standard library alone: what ``trend``, ``gate``, ``list`` and ``show`` use.

:func:`open_reads` opens a store for reading. A SQLite file that exists and is already at the
newest revision (:data:`revisions.HEAD`) is read through ``sqlite3``, read only (``mode=ro``,
``query_only``), with the same SQL as every store (``history.reads``). Everything else goes through
``RunStore``, exactly as before: a store to create or upgrade, a store of an unknown (newer)
revision, PostgreSQL, a file ``sqlite3`` cannot open read only. So the fast path never decides
anything the full one would decide differently; it only skips importing SQLAlchemy, which costs
more than reading and judging thousands of runs.

Readers never wait for writers in WAL mode; a checkpoint or recovery in progress is waited for up
to :data:`BUSY_TIMEOUT_S`, as a writer waits for the write lock.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.profiling.history.location import resolve, shown, sqlite_path
from my_utils.profiling.history.reads import StoreReads
from my_utils.profiling.history.revisions import HEAD, VERSION_TABLE

#: How long a SQLite connection waits for a lock before giving up (seconds): readers and writers alike.
BUSY_TIMEOUT_S = 120.0


class SqliteReads(StoreReads):
    """A SQLite store at the newest revision, open read only through ``sqlite3`` (:func:`open_reads` makes one)."""

    def __init__(self, conn: sqlite3.Connection, where: str) -> None:
        self._conn = conn
        self._where = where

    @property
    def where(self) -> str:
        """The store's location as it may be printed."""
        return self._where

    def _fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, dict(params)).fetchall()
        except sqlite3.Error as exc:
            raise InputError(self.where, None, f"a readable history store ({' '.join(str(exc).split())[:300]})"
                             ) from None

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


def open_reads(location: str | os.PathLike[str] | None = None) -> StoreReads:
    """The store at ``location`` (or the environment's / the default) for reading (module docstring)."""
    url = resolve(location)
    path = sqlite_path(url)
    if path is not None and path.is_file():
        reads = _read_only(path, shown(url))
        if reads is not None:
            return reads
    from my_utils.profiling.history.store import RunStore

    return RunStore(location)


def _read_only(path: Path, where: str) -> SqliteReads | None:
    """``path`` open read only when it is a store at :data:`HEAD`; None for anything ``RunStore`` must handle."""
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
        if row is not None and row[0] == HEAD:
            conn.execute("PRAGMA query_only = ON")
            return SqliteReads(conn, where)
    except sqlite3.Error:  # not a store, an empty file, a lock held past the timeout: RunStore says which
        pass
    conn.close()
    return None
