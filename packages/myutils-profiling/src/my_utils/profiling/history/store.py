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

Reading a series returns plain tuples per comparable series (:class:`Series`); nothing here computes
change points or renders.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.history.context import RunContext, SeriesKey, hardware_key
from my_utils.profiling.history.location import resolve, shown, sqlite_path
from my_utils.profiling.history.metrics import MetricValue, report_metrics

try:
    import sqlalchemy as sa
    from sqlalchemy import event
    from sqlalchemy.exc import DBAPIError, OperationalError
except ImportError:  # pragma: no cover - the extra is missing
    raise UsageError("the run history needs SQLAlchemy and Alembic: pip install 'myutils-profiling[history]'") from None

from my_utils.profiling.history import schema

if TYPE_CHECKING:
    from my_utils.profiling.model.report import AnalysisReport

#: How long a SQLite writer waits for the write lock before giving up (seconds).
BUSY_TIMEOUT_S = 120.0
_RETRIES = 5


@dataclass(frozen=True)
class AddResult:
    """What :meth:`RunStore.add` did: the run's id, and whether it was new (False: the report was stored already)."""

    run_id: int
    added: bool
    metrics: int


@dataclass(frozen=True)
class StoredRun:
    """One stored run: its id, context, when it was added and from where."""

    id: int
    fingerprint: str
    context: RunContext
    hardware: str
    added_time: float
    source: str | None

    @property
    def series(self) -> SeriesKey:
        """The series of runs this one is compared with."""
        return SeriesKey(self.context.workload, self.hardware, self.context.world_size)


@dataclass(frozen=True)
class Series:
    """One metric over the runs of one comparable series, oldest run first (parallel tuples)."""

    key: SeriesKey
    metric: str
    unit: str
    run_ids: tuple[int, ...]
    times: tuple[float, ...]
    commits: tuple[str | None, ...]
    branches: tuple[str | None, ...]
    config_hashes: tuple[str | None, ...]
    values: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.values)


def report_fingerprint(report: AnalysisReport) -> str:
    """The sha256 of ``report``'s canonical JSON (sorted keys): the same report gives the same run."""
    text = json.dumps(report.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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


class RunStore:
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

    # -- reading --------------------------------------------------------------------------

    def runs(self, workload: str | None = None, hardware: str | None = None, world_size: int | None = None,
             last: int | None = None, ids: Iterable[int] | None = None) -> list[StoredRun]:
        """Stored runs, oldest first (the newest ``last`` when given), filtered by series and by id."""
        r = schema.runs.c
        query = sa.select(schema.runs)
        query = _series_filter(query, workload, hardware, world_size)
        if ids is not None:
            query = query.where(r.id.in_(list(ids)))
        query = query.order_by(r.run_time.desc(), r.id.desc())
        if last is not None:
            query = query.limit(last)
        with self.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_stored(row) for row in reversed(rows)]

    def run(self, run_id: int) -> StoredRun:
        """The run ``run_id``; InputError naming the store when there is none."""
        found = self.runs(ids=[run_id])
        if not found:
            raise InputError(self.where, f"run {run_id}", "an id that `myutils-profile history list` shows")
        return found[0]

    def latest(self, workload: str | None = None, hardware: str | None = None,
               world_size: int | None = None) -> StoredRun | None:
        """The newest run of those filters (None when there is none)."""
        found = self.runs(workload, hardware, world_size, last=1)
        return found[0] if found else None

    def facts_of(self, run_id: int) -> list[MetricValue]:
        """Every metric stored for one run, by name."""
        f, m = schema.facts.c, schema.metrics.c
        query = (sa.select(m.name, f.value, m.unit).select_from(schema.facts.join(schema.metrics))
                 .where(f.run_id == run_id).order_by(m.name))
        with self.connect() as conn:
            return [MetricValue(name, float(value), unit) for name, value, unit in conn.execute(query)]

    def metric_names(self) -> dict[str, str]:
        """Every metric any run stored, with its unit."""
        with self.connect() as conn:
            return {name: unit for name, unit in conn.execute(sa.select(schema.metrics.c.name, schema.metrics.c.unit))}

    def series(self, metric: str, workload: str | None = None, hardware: str | None = None,
               world_size: int | None = None, last: int | None = None, before_run: int | None = None) -> list[Series]:
        """``metric`` over the runs of each comparable series matching the filters (the newest ``last`` runs each).

        ``before_run`` keeps the runs stored before that one in its series' order (time, then id).
        """
        r, f, m = schema.runs.c, schema.facts.c, schema.metrics.c
        with self.connect() as conn:
            found = conn.execute(sa.select(m.id, m.unit).where(m.name == metric)).first()
            if found is None:
                return []
            metric_id, unit = found
            query = (sa.select(r.workload, r.hardware, r.world_size, r.id, r.run_time, r.git_commit, r.git_branch,
                               r.config_hash, f.value)
                     .select_from(schema.facts.join(schema.runs, schema.runs.c.id == f.run_id))
                     .where(f.metric_id == metric_id))
            query = _series_filter(query, workload, hardware, world_size)
            if before_run is not None:
                pivot = conn.execute(sa.select(r.run_time).where(r.id == before_run)).scalar()
                if pivot is not None:
                    query = query.where(sa.or_(r.run_time < pivot, sa.and_(r.run_time == pivot, r.id < before_run)))
            rows = conn.execute(query.order_by(r.workload, r.hardware, r.world_size, r.run_time, r.id)).all()
        groups: dict[tuple[Any, ...], list[Any]] = {}
        for row in rows:
            groups.setdefault((row[0], row[1], row[2]), []).append(row)
        out = []
        for (w, h, ws), members in groups.items():
            if last is not None:
                members = members[-last:]
            cols = list(zip(*members, strict=True))
            out.append(Series(SeriesKey(w, h, ws), metric, unit, tuple(cols[3]), tuple(cols[4]), tuple(cols[5]),
                              tuple(cols[6]), tuple(cols[7]), tuple(float(v) for v in cols[8])))
        return out

    def find(self, fingerprint: str) -> int | None:
        """The id of the run stored from the report of this fingerprint, None when there is none."""
        r = schema.runs.c
        with self.connect() as conn:
            found = conn.execute(sa.select(r.id).where(r.fingerprint == fingerprint)).scalar()
        return None if found is None else int(found)

    def baseline(self, metric: str, key: SeriesKey, config_hash: str | None, last: int,
                 before_run: int | None = None) -> tuple[list[int], list[float]]:
        """The newest ``last`` values of ``metric`` in exactly this series (and config, when given), oldest first.

        ``before_run`` keeps the runs before that one (time, then id); None keeps every run.
        """
        r, f, m = schema.runs.c, schema.facts.c, schema.metrics.c
        query = (sa.select(r.id, f.value).select_from(schema.facts.join(schema.runs, r.id == f.run_id)
                                                       .join(schema.metrics, m.id == f.metric_id))
                 .where(m.name == metric, r.workload == key.workload, r.hardware == key.hardware,
                        r.world_size.is_(None) if key.world_size is None else r.world_size == key.world_size))
        if config_hash is not None:
            query = query.where(r.config_hash == config_hash)
        with self.connect() as conn:
            if before_run is not None:
                pivot = conn.execute(sa.select(r.run_time).where(r.id == before_run)).scalar()
                if pivot is not None:
                    query = query.where(sa.or_(r.run_time < pivot, sa.and_(r.run_time == pivot, r.id < before_run)))
            rows = list(conn.execute(query.order_by(r.run_time.desc(), r.id.desc()).limit(last)).all())
        rows.reverse()
        return [int(i) for i, _ in rows], [float(v) for _, v in rows]

    def series_keys(self) -> list[tuple[SeriesKey, int]]:
        """Every series in the store and its number of runs."""
        r = schema.runs.c
        query = (sa.select(r.workload, r.hardware, r.world_size, sa.func.count())
                 .group_by(r.workload, r.hardware, r.world_size).order_by(r.workload, r.hardware, r.world_size))
        with self.connect() as conn:
            return [(SeriesKey(w, h, ws), int(n)) for w, h, ws, n in conn.execute(query)]


def _series_filter(query: Any, workload: str | None, hardware: str | None, world_size: int | None) -> Any:
    r = schema.runs.c
    if workload is not None:
        query = query.where(r.workload == workload)
    if hardware is not None:  # "H100" finds "8x NVIDIA H100 80GB HBM3"; each hardware stays its own series
        query = query.where(sa.func.lower(r.hardware).contains(hardware.lower(), autoescape=True))
    if world_size is not None:
        query = query.where(r.world_size == world_size)
    return query


def _stored(row: Any) -> StoredRun:
    ctx = RunContext(workload=row["workload"], run_time=float(row["run_time"]), config_hash=row["config_hash"],
                     git_commit=row["git_commit"], git_branch=row["git_branch"], host=row["host"],
                     gpu_model=row["gpu_model"], gpu_count=row["gpu_count"], world_size=row["world_size"],
                     tool_version=row["tool_version"], cpu_only=row["hardware"] == hardware_key(None, None, True))
    return StoredRun(int(row["id"]), row["fingerprint"], ctx, row["hardware"], float(row["added_time"]), row["source"])


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _retryable(exc: DBAPIError) -> bool:
    code = getattr(exc.orig, "sqlstate", None) or getattr(getattr(exc.orig, "diag", None), "sqlstate", None)
    return code in ("40001", "40P01") or "locked" in str(exc.orig).lower()


def _reason(exc: DBAPIError) -> str:
    return " ".join(str(exc.orig).split())[:300]
