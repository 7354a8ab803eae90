"""What the run store gives back: a stored run, one metric's series, the result of an add.

Plain frozen dataclasses with no database code, so that the pages, the text and the gate can use them
without importing SQLAlchemy (the read-only SQLite path needs none: ``history.sqlite_reads``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.profiling.history.context import RunContext, SeriesKey

if TYPE_CHECKING:
    from my_utils.profiling.model.report import AnalysisReport


@dataclass(frozen=True)
class AddResult:
    """What ``RunStore.add`` did: the run's id, and whether it was new (False: the report was stored already)."""

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
