"""The questions a run store answers, written once as SQL text that SQLite and PostgreSQL both run.

:class:`StoreReads` holds every read (runs, one run's metrics, one metric's series, a gate's
baseline); a subclass runs the text: ``RunStore`` through SQLAlchemy (any database, writes too),
``SqliteReads`` through the standard library's ``sqlite3`` (a SQLite store already at the newest
revision, read only). Parameters are ``:name`` binds, which ``sqlite3`` takes as they are and
SQLAlchemy's ``text()`` turns into each driver's style, so the two paths run the same statements.

Why not SQLAlchemy's expression language here: importing SQLAlchemy costs more than a ``history
trend`` of 5,000 runs itself, and the read-only commands need nothing else from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from my_utils.core.errors import InputError
from my_utils.profiling.history.context import RunContext, SeriesKey, hardware_key
from my_utils.profiling.history.metrics import MetricValue
from my_utils.profiling.history.records import Series, StoredRun

_RUN_COLUMNS = ("id, fingerprint, workload, hardware, world_size, config_hash, git_commit, git_branch, host, "
                "gpu_model, gpu_count, tool_version, run_time, added_time, source")
#: LIKE's escape character for the hardware filter (the one SQLAlchemy's ``contains(autoescape=True)`` uses).
_ESCAPE = "/"


class StoreReads:
    """The read side of a run store; a subclass runs the SQL (:meth:`_fetch`) and names the store (``where``)."""

    @property
    def where(self) -> str:
        """The store's location as it may be printed."""
        raise NotImplementedError

    def _fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Every row of ``sql`` run with ``params`` (``:name`` binds)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the store's connections."""

    def __enter__(self) -> StoreReads:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def runs(self, workload: str | None = None, hardware: str | None = None, world_size: int | None = None,
             last: int | None = None, ids: Iterable[int] | None = None) -> list[StoredRun]:
        """Stored runs, oldest first (the newest ``last`` when given), filtered by series and by id."""
        where, params = _series_filter(workload, hardware, world_size, "")
        if ids is not None:
            wanted = [int(i) for i in ids]
            if not wanted:
                return []
            where.append(f"id IN ({', '.join(f':id{n}' for n in range(len(wanted)))})")
            params.update({f"id{n}": i for n, i in enumerate(wanted)})
        sql = f"SELECT {_RUN_COLUMNS} FROM runs{_where(where)} ORDER BY run_time DESC, id DESC"
        if last is not None:
            sql += " LIMIT :last"
            params["last"] = int(last)
        return [_stored(row) for row in reversed(self._fetch(sql, params))]

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
        rows = self._fetch("SELECT m.name, f.value, m.unit FROM facts f JOIN metrics m ON m.id = f.metric_id "
                           "WHERE f.run_id = :run ORDER BY m.name", {"run": int(run_id)})
        return [MetricValue(name, float(value), unit) for name, value, unit in rows]

    def metric_names(self) -> dict[str, str]:
        """Every metric any run stored, with its unit."""
        return {name: unit for name, unit in self._fetch("SELECT name, unit FROM metrics", {})}

    def series(self, metric: str, workload: str | None = None, hardware: str | None = None,
               world_size: int | None = None, last: int | None = None, before_run: int | None = None) -> list[Series]:
        """``metric`` over the runs of each comparable series matching the filters (the newest ``last`` runs each).

        ``before_run`` keeps the runs stored before that one in its series' order (time, then id).
        """
        found = self._fetch("SELECT id, unit FROM metrics WHERE name = :metric", {"metric": metric})
        if not found:
            return []
        metric_id, unit = found[0]
        where, params = _series_filter(workload, hardware, world_size, "r.")
        where.insert(0, "f.metric_id = :metric_id")
        params["metric_id"] = int(metric_id)
        self._before(before_run, where, params)
        rows = self._fetch("SELECT r.workload, r.hardware, r.world_size, r.id, r.run_time, r.git_commit, "
                           "r.git_branch, r.config_hash, f.value FROM facts f JOIN runs r ON r.id = f.run_id"
                           f"{_where(where)} ORDER BY r.workload, r.hardware, r.world_size, r.run_time, r.id", params)
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
        found = self._fetch("SELECT id FROM runs WHERE fingerprint = :fingerprint", {"fingerprint": fingerprint})
        return int(found[0][0]) if found else None

    def baseline(self, metric: str, key: SeriesKey, config_hash: str | None, last: int,
                 before_run: int | None = None) -> tuple[list[int], list[float]]:
        """The newest ``last`` values of ``metric`` in exactly this series (and config, when given), oldest first.

        ``before_run`` keeps the runs before that one (time, then id); None keeps every run.
        """
        where = ["m.name = :metric", "r.workload = :workload", "r.hardware = :hardware"]
        params: dict[str, Any] = {"metric": metric, "workload": key.workload, "hardware": key.hardware,
                                  "last": int(last)}
        if key.world_size is None:
            where.append("r.world_size IS NULL")
        else:
            where.append("r.world_size = :world_size")
            params["world_size"] = int(key.world_size)
        if config_hash is not None:
            where.append("r.config_hash = :config_hash")
            params["config_hash"] = config_hash
        self._before(before_run, where, params)
        rows = self._fetch("SELECT r.id, f.value FROM facts f JOIN runs r ON r.id = f.run_id "
                           f"JOIN metrics m ON m.id = f.metric_id{_where(where)} "
                           "ORDER BY r.run_time DESC, r.id DESC LIMIT :last", params)
        rows.reverse()
        return [int(i) for i, _ in rows], [float(v) for _, v in rows]

    def series_keys(self) -> list[tuple[SeriesKey, int]]:
        """Every series in the store and its number of runs."""
        rows = self._fetch("SELECT workload, hardware, world_size, COUNT(*) FROM runs "
                           "GROUP BY workload, hardware, world_size ORDER BY workload, hardware, world_size", {})
        return [(SeriesKey(w, h, ws), int(n)) for w, h, ws, n in rows]

    def _before(self, before_run: int | None, where: list[str], params: dict[str, Any]) -> None:
        """Keep only the runs before ``before_run`` in time-then-id order (nothing when it is not stored)."""
        if before_run is None:
            return
        pivot = self._fetch("SELECT run_time FROM runs WHERE id = :pivot_id", {"pivot_id": int(before_run)})
        if pivot:
            where.append("(r.run_time < :pivot_time OR (r.run_time = :pivot_time AND r.id < :pivot_id))")
            params.update(pivot_time=pivot[0][0], pivot_id=int(before_run))


def _series_filter(workload: str | None, hardware: str | None, world_size: int | None,
                   prefix: str) -> tuple[list[str], dict[str, Any]]:
    where: list[str] = []
    params: dict[str, Any] = {}
    if workload is not None:
        where.append(f"{prefix}workload = :workload")
        params["workload"] = workload
    if hardware is not None:  # "H100" finds "8x NVIDIA H100 80GB HBM3"; each hardware stays its own series
        where.append(f"lower({prefix}hardware) LIKE :hardware ESCAPE '{_ESCAPE}'")
        params["hardware"] = f"%{_like_escaped(hardware.lower())}%"
    if world_size is not None:
        where.append(f"{prefix}world_size = :world_size")
        params["world_size"] = int(world_size)
    return where, params


def _like_escaped(text: str) -> str:
    """``text`` matched literally by LIKE: its ``%``, ``_`` and escape characters escaped."""
    return text.replace(_ESCAPE, _ESCAPE * 2).replace("%", _ESCAPE + "%").replace("_", _ESCAPE + "_")


def _where(clauses: list[str]) -> str:
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


def _stored(row: tuple[Any, ...]) -> StoredRun:
    (run_id, fingerprint, workload, hardware, world_size, config_hash, git_commit, git_branch, host, gpu_model,
     gpu_count, tool_version, run_time, added_time, source) = row
    ctx = RunContext(workload=workload, run_time=float(run_time), config_hash=config_hash, git_commit=git_commit,
                     git_branch=git_branch, host=host, gpu_model=gpu_model, gpu_count=gpu_count,
                     world_size=world_size, tool_version=tool_version,
                     cpu_only=hardware == hardware_key(None, None, True))
    return StoredRun(int(run_id), fingerprint, ctx, hardware, float(added_time), source)
