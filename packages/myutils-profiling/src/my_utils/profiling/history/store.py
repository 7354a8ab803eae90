"""The run store: add a report's facts and context, list runs, read one metric's series (SQLAlchemy Core).

Decisions:

- **One run per report.** A run is identified by its report's fingerprint (sha256 of the report's
  canonical JSON). ``INSERT ... ON CONFLICT DO NOTHING`` on that unique column makes a second add
  of the same report, from this process or any other at the same moment, find the first run.
- **Writers never lose a run.** Each add is one transaction. SQLite runs in WAL mode and a writing
  transaction starts with ``BEGIN IMMEDIATE`` (it takes the write lock at once and waits for it up to
  :data:`BUSY_TIMEOUT_S`, instead of failing when a read lock cannot be upgraded); readers never wait.
  PostgreSQL takes its row locks in one order (the run, then metric names sorted), so concurrent adds
  cannot deadlock; a serialization failure is retried.
- **Opening is cheap.** The schema revision is read with one query; Alembic is imported only when a
  store must be created or upgraded (``history.migrate``).

The reads are ``StoreReads``' SQL text, run here through SQLAlchemy (any database); a SQLite store
at the newest revision is read without SQLAlchemy by ``history.sqlite_reads``. Nothing here computes
change points or renders.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.history.context import RunContext
from my_utils.profiling.history.location import resolve, shown, sqlite_path
from my_utils.profiling.history.metrics import MetricValue, report_metrics
from my_utils.profiling.history.reads import StoreReads
from my_utils.profiling.history.records import AddResult, Series, StoredRun, report_fingerprint
from my_utils.profiling.history.sqlite_reads import BUSY_TIMEOUT_S

try:
    import sqlalchemy as sa
    from sqlalchemy import event
    from sqlalchemy.exc import DBAPIError, OperationalError
except ImportError:  # pragma: no cover - the extra is missing
    raise UsageError("the run history needs SQLAlchemy and Alembic: pip install 'myutils-profiling[history]'") from None

from my_utils.profiling.history import schema

if TYPE_CHECKING:
    from my_utils.profiling.model.report import AnalysisReport

#: Re-exported: callers and the tests of earlier versions import them from here.
__all__ = ["AddResult", "RunStore", "Series", "StoredRun", "report_fingerprint"]

_RETRIES = 5


def _sqlite_setup(engine: sa.engine.Engine) -> None:
    """WAL, a busy timeout, foreign keys; BEGIN IMMEDIATE for writers (module docstring)."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" event below emits BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA foreign_keys = ON")
        if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")  # durable at each checkpoint; safe in WAL mode
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("myutils_write") else "BEGIN")


class RunStore(StoreReads):
    """The runs of a team or a user: SQLite by default, PostgreSQL by URL (``history.location``).

    ``RunStore()`` opens (creating or upgrading) the store of ``$MYUTILS_HISTORY_STORE`` or the
    user's data folder; ``RunStore("runs.sqlite")`` or ``RunStore("postgresql://...")`` another.
    Use it as a context manager, or call :meth:`close`. ``upgrade=False`` opens the database as it
    is (for migration tests and tools: ``history.migrate.upgrade``).
    """

    def __init__(self, location: str | Any = None, upgrade: bool = True) -> None:
        self.url = resolve(location)
        path = sqlite_path(self.url)
        if path is not None:
            if path.is_dir():
                raise UsageError(f"history store {path}: is a folder; give a file path or the folder's "
                                 f"history.sqlite")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(str(path.parent), None, f"a folder that can hold the history store ({exc})") from None
        try:
            self.engine = sa.create_engine(self.url, connect_args={"timeout": BUSY_TIMEOUT_S} if path else {})
        except (ImportError, sa.exc.ArgumentError) as exc:
            raise UsageError(f"history store {self.where}: cannot use this database ({exc}); for PostgreSQL, "
                             "pip install 'myutils-profiling[postgresql]'") from None
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        if self.is_sqlite:
            _sqlite_setup(self.engine)
        self._metric_ids: dict[str, int] = {}
        if upgrade:
            from my_utils.profiling.history.migrate import ensure_schema

            try:
                ensure_schema(self)
            except BaseException:
                self.engine.dispose()  # no connection of a store that failed to open outlives it
                raise

    @property
    def where(self) -> str:
        """The store's URL with any password hidden."""
        return shown(self.url)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Release the store's connections."""
        self.engine.dispose()

    def connect(self, write: bool = False) -> sa.Connection:
        """A connection (``write``: its transactions take SQLite's write lock at once)."""
        try:
            conn = self.engine.connect()
        except DBAPIError as exc:
            raise InputError(self.where, None, f"a reachable history store ({_reason(exc)})") from None
        return conn.execution_options(myutils_write=True) if write else conn

    # -- writing --------------------------------------------------------------------------

    def add(self, report: AnalysisReport, context: RunContext, source: str | None = None) -> AddResult:
        """Store ``report``'s metrics with ``context``; the same report again finds its first run (``added`` False)."""
        return self.add_many([(report, context, source)])[0]

    def add_many(self, items: Sequence[tuple[AnalysisReport, RunContext, str | None]]) -> list[AddResult]:
        """Store several reports in one transaction (all or none); each as :meth:`add` would."""
        prepared = [(report_fingerprint(r), report_metrics(r), c, s) for r, c, s in items]
        for attempt in range(_RETRIES):
            try:
                fresh: dict[str, int] = {}  # metric ids known only once this transaction commits
                with self.connect(write=True) as conn, conn.begin():
                    results = [self._add(conn, fresh, *p) for p in prepared]
                self._metric_ids.update(fresh)
                return results
            except OperationalError as exc:  # a PostgreSQL deadlock or serialization failure: run it again
                if attempt == _RETRIES - 1 or not _retryable(exc):
                    raise InputError(self.where, None, f"a history store that accepts the run ({_reason(exc)})"
                                     ) from None
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _add(self, conn: sa.Connection, fresh: dict[str, int], fingerprint: str, values: Sequence[MetricValue], context: RunContext,
             source: str | None) -> AddResult:
        row = {"fingerprint": fingerprint, "workload": context.workload, "hardware": context.hardware,
               "world_size": context.world_size, "config_hash": context.config_hash,
               "git_commit": context.git_commit, "git_branch": context.git_branch, "host": context.host,
               "gpu_model": context.gpu_model, "gpu_count": context.gpu_count,
               "tool_version": context.tool_version, "run_time": float(context.run_time),
               "added_time": time.time(), "source": source}
        insert = self._insert(schema.runs).values(**row).on_conflict_do_nothing(index_elements=["fingerprint"])
        run_id = conn.execute(insert.returning(schema.runs.c.id)).scalar()
        if run_id is None:
            existing = conn.execute(sa.select(schema.runs.c.id).where(
                schema.runs.c.fingerprint == fingerprint)).scalar_one()
            return AddResult(int(existing), False, 0)
        ids = self._ensure_metrics(conn, {v.name: v.unit for v in values}, fresh)
        if values:
            conn.execute(schema.facts.insert(), [{"metric_id": ids[v.name], "run_id": run_id, "value": v.value}
                                                 for v in values])
        return AddResult(int(run_id), True, len(values))

    def _insert(self, table: sa.Table) -> Any:
        if self.is_sqlite:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table)
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)

    def _ensure_metrics(self, conn: sa.Connection, units: dict[str, str], fresh: dict[str, int]) -> dict[str, int]:
        """Every id of these metric names (``fresh`` gets the ones looked up now), adding new names.

        Names are inserted sorted: every writer takes the name locks in one order.
        """
        missing = sorted(n for n in units if n not in self._metric_ids and n not in fresh)
        if missing:
            stmt = self._insert(schema.metrics).on_conflict_do_nothing(index_elements=["name"])
            conn.execute(stmt, [{"name": n, "unit": units[n][:32]} for n in missing])
            m = schema.metrics.c
            for chunk in _chunks(missing, 500):
                for name, metric_id in conn.execute(sa.select(m.name, m.id).where(m.name.in_(chunk))):
                    fresh[name] = int(metric_id)
        return {**self._metric_ids, **fresh}

    # -- reading (``StoreReads``) -------------------------------------------------------------

    def _fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        with self.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql), dict(params))]


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _retryable(exc: DBAPIError) -> bool:
    code = getattr(exc.orig, "sqlstate", None) or getattr(getattr(exc.orig, "diag", None), "sqlstate", None)
    return code in ("40001", "40P01") or "locked" in str(exc.orig).lower()


def _reason(exc: DBAPIError) -> str:
    return " ".join(str(exc.orig).split())[:300]
