"""Create or upgrade a run store with the Alembic migrations shipped in ``history/migrations``.

Opening a store reads its revision with one query and imports Alembic only when it is not the
newest (:data:`revisions.HEAD`). Concurrent openers of a new or old store upgrade it once: the upgrade
runs in one transaction that first takes a lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a
transaction-level advisory lock), then reads the revision again. A store written by a newer
myutils-profiling (a revision this code does not know) is refused, never downgraded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.history.revisions import HEAD, REVISIONS, VERSION_TABLE

if TYPE_CHECKING:
    import sqlalchemy as sa

    from my_utils.profiling.history.store import RunStore

SCRIPT_LOCATION = "my_utils.profiling.history:migrations"
_LOCK_KEY = 0x6D79_7574  # PostgreSQL advisory lock of the history's migrations ("myut")


def revision(conn: sa.Connection) -> str | None:
    """The store's revision, None for an empty database."""
    try:
        with conn.begin_nested() if conn.in_transaction() else conn.begin():
            return conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()
    except DBAPIError:
        return None


def ensure_schema(store: RunStore) -> None:
    """Bring ``store`` to :data:`HEAD` (creating its tables when new); UsageError for a newer store."""
    with store.connect() as conn:
        current = revision(conn)
    if current == HEAD:
        return
    _check_known(store, current)
    upgrade(store, HEAD)


def _check_known(store: RunStore, current: str | None) -> None:
    if current is not None and current not in REVISIONS:
        raise UsageError(f"history store {store.where} has schema revision {current!r}, newer than this "
                         f"myutils-profiling knows ({HEAD!r}); upgrade myutils-profiling to read it")


def upgrade(store: RunStore, target: str = HEAD) -> None:
    """Migrate ``store`` to revision ``target`` in one locked transaction (module docstring)."""
    from alembic import command

    try:
        with store.connect(write=True) as conn, conn.begin():
            if not store.is_sqlite:
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})")
            current = revision(conn)
            _check_known(store, current)
            if current == target:
                return
            config = alembic_config()
            config.attributes["connection"] = conn
            command.upgrade(config, target)
    except DBAPIError as exc:
        raise InputError(store.where, None, "a history store this user may create and change "
                                            f"({' '.join(str(exc.orig).split())[:300]})") from None


def alembic_config() -> Any:
    """Alembic's configuration for the shipped migrations (no ini file: the scripts are package data)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    return config
