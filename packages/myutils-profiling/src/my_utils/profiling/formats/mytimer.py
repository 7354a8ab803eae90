"""MyTimerMetricsProvider: MyTimer regions, live (a listener) or from profile CSV files.

Live: the provider registers a listener on the timer (``MyTimer.add_listener``); every
``step()`` hands it that step's closed regions, which wait in a queue until the next
``collect()``. Nothing depends on how many regions a step has, so no step is lost or
returned twice however often ``collect()`` runs.

Files: ``profile_rank_<rank>.csv`` (or a folder of them), read with core's
``iter_profile_rows``; each END row is one region.

Emitted names: ``<region>`` (CPU ms; ``attrs``: depth, node_id, parent_id, path),
``cuda:<region>`` (CUDA ms, when timed) and ``step_time`` (sum of depth-0 regions).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import FileProviderBase, rank_from_name, require_live

_log = logging.getLogger("my_utils.profiling.formats.mytimer")
_MACHINE_RANK = re.compile(r"_rank(\d+)$")


def _region_events(rows: Iterable[tuple[str, int, float, float | None, float | None, dict[str, Any]]],
                   rank: int | None, run_ids: Sequence[str] = ()) -> list[MetricEvent]:
    """Events for (name, step, cpu_ms, cuda_ms, start_unix, attrs) tuples, plus step_time per step.

    ``run_ids`` (one per row, or none) names the run each row belongs to when a file holds several.
    """
    out: list[MetricEvent] = []
    step_total: dict[tuple[str, int], list[float]] = {}
    ids = iter(run_ids) if run_ids else None
    for name, step, cpu_ms, cuda_ms, ts, attrs in rows:
        run_id = next(ids) if ids is not None else ""
        out.append(MetricEvent(name=name, value=cpu_ms, kind="duration", unit="ms", source="mytimer",
                               rank=rank, step=step, ts=ts, run_id=run_id, attrs=attrs))
        if cuda_ms is not None:
            out.append(MetricEvent(name=f"cuda:{name}", value=cuda_ms, kind="duration", unit="ms",
                                   source="mytimer", rank=rank, step=step, ts=ts, run_id=run_id,
                                   attrs={**attrs, "clock": "cuda"}))
        if attrs.get("depth") == 0:
            acc = step_total.setdefault((run_id, step), [0.0, ts if ts is not None else float("nan")])
            acc[0] += cpu_ms
    for (run_id, step), (total, ts) in step_total.items():
        out.append(MetricEvent(name="step_time", value=total, kind="duration", unit="ms", source="mytimer",
                               rank=rank, step=step, ts=None if ts != ts else ts, run_id=run_id,
                               attrs={"from": "sum of depth-0 regions"}))
    return out


def read_profile_csv_events(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Metric events of one profile CSV (END rows; START rows give nothing new)."""
    from my_utils.core.profile_csv import iter_profile_rows

    file_rank = rank if rank is not None else rank_from_name(path)
    by_rank: dict[int | None, list[tuple[str, int, float, float | None, float | None, dict[str, Any]]]] = {}
    # a CSV is appended to, never replaced: a rank's step numbers going back (a second run into the same
    # folder, a job resumed from an earlier step) start another run of the file, kept apart from the first
    runs_of: dict[int | None, list[int]] = {}  # per rank: the run of each of its rows
    last_step: dict[int | None, int] = {}
    run_now: dict[int | None, int] = {}
    paths: dict[tuple[int, int], str] = {}
    clock_syncs: list[MetricEvent] = []
    for row in iter_profile_rows(path):
        if row.event_type == "CLOCK_SYNC":
            clock_syncs.append(_clock_sync_event(row, path, rank, file_rank))
            continue
        if row.event_type not in ("START", "END"):
            continue
        meta = row.metadata_dict()
        if row.event_type == "START":
            # parents START before their children END: remember each node's path
            node, parent_id = meta.get("node_id", ""), meta.get("parent_id", "-1")
            if node.isdigit():
                parent = paths.get((row.step, int(parent_id))) if parent_id.isdigit() else None
                paths[(row.step, int(node))] = f"{parent}/{row.event_name}" if parent else row.event_name
            continue
        attrs: dict[str, Any] = {"file": path.name, "line": row.line}
        for key in ("node_id", "parent_id", "depth"):
            if key in meta and meta[key].lstrip("-").isdigit():
                attrs[key] = int(meta[key])
        if "tag" in meta:
            attrs["tag"] = meta["tag"]
        if "node_id" in attrs and (row.step, attrs["node_id"]) in paths:
            attrs["path"] = paths[(row.step, attrs["node_id"])]
        cuda = meta.get("cuda_ms")
        try:
            cuda_ms = float(cuda) if cuda else None
        except ValueError:
            cuda_ms = None
        m = _MACHINE_RANK.search(row.machine_id)
        r = int(m.group(1)) if m and rank is None else file_rank
        attrs["host"] = row.machine_id[: m.start()] if m else row.machine_id  # the merged trace names its rank's host
        start = row.timestamp_unix - row.duration_ms / 1e3
        by_rank.setdefault(r, []).append((row.event_name, row.step, row.duration_ms, cuda_ms, start, attrs))
        if row.step < last_step.get(r, row.step):
            run_now[r] = run_now.get(r, 0) + 1
        last_step[r] = row.step
        runs_of.setdefault(r, []).append(run_now.get(r, 0))
    out: list[MetricEvent] = []
    for r, rows in by_rank.items():
        runs = runs_of[r]
        several = runs[-1] > 0  # one run: no run id, as before
        out.extend(_region_events(rows, r, [f"{path.name}#run{n + 1}" for n in runs] if several else ()))
    out.extend(clock_syncs)
    return out


def _clock_sync_event(row: Any, path: Path, rank: int | None, file_rank: int | None) -> MetricEvent:
    """A ``CLOCK_SYNC`` mark row (myutils-distributed's measured offset) as a ``clock_sync`` event.

    ``value`` is the offset in seconds; ``attrs`` keep every metadata field (``offset_s``,
    ``uncertainty_s``, ``reference_rank``, ``applied``...) plus the file, line and host, which is
    what the merged trace reads to put every rank on the reference clock.
    """
    from my_utils.core.errors import InputError

    attrs: dict[str, Any] = dict(row.metadata_dict())
    m = _MACHINE_RANK.search(row.machine_id)
    attrs.update(file=path.name, line=row.line, host=row.machine_id[: m.start()] if m else row.machine_id)
    try:
        offset = float(attrs.get("offset_s", ""))
    except ValueError:
        offset = float("nan")
    if offset != offset or offset in (float("inf"), float("-inf")):
        raise InputError(path, f"line {row.line}",
                         f"a finite offset_s=<seconds> in the metadata of a CLOCK_SYNC row, got {row.metadata!r}")
    r = int(m.group(1)) if m and rank is None else file_rank
    return MetricEvent(name="clock_sync", value=offset, kind="info", unit="s", source="mytimer",
                       rank=r, step=row.step, ts=row.timestamp_unix, attrs=attrs)


class MyTimerMetricsProvider(FileProviderBase):
    """Metrics from a live ``MyTimer`` (listener) or from ``profile_rank_<rank>.csv`` files."""

    name = "mytimer"
    patterns = ("profile_rank_*.csv",)
    what = "profile CSV"

    def __init__(self, source: Any, *, rank: int | None = None, **options: Any) -> None:
        self._lock = threading.Lock()
        self._pending: list[MetricEvent] = []
        self._timer: Any = None
        if isinstance(source, (str, os.PathLike)):
            super().__init__(Path(source), rank=rank, **options)
            return
        require_live(source, "add_listener", "MyTimerMetricsProvider",
                     "pass a my_utils MyTimer, or the path of a profile_rank_<rank>.csv file")
        self.path = Path()
        self.options = options
        self.rank = rank if rank is not None else env_rank(None)
        self._timer = source
        source.add_listener(self._on_step)

    def validate(self) -> None:
        """Profile CSVs are validated when read (header first, rows as they stream)."""
        if self.path.is_dir():
            super().validate()

    def _on_step(self, step: int, regions: Sequence[Any]) -> None:
        # runs inside MyTimer.step(): keep it cheap, never raise
        names: dict[int, str] = {}
        rows = []
        for r in regions:
            parent = names.get(r.parent_id) if r.parent_id is not None else None
            path = names[r.node_id] = f"{parent}/{r.name}" if parent else r.name
            attrs = {"depth": r.depth, "node_id": r.node_id, "parent_id": -1 if r.parent_id is None else r.parent_id,
                     "path": path}
            rows.append((r.name, step, r.cpu_ms, r.cuda_ms, r.start_unix, attrs))
        events = _region_events(rows, self.rank)
        with self._lock:
            self._pending.extend(events)

    def close(self) -> None:
        """Detach from the live timer (steps after this are not collected)."""
        if self._timer is not None:
            self._timer.remove_listener(self._on_step)
            self._timer = None

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        """Regions of the steps finished since the last call (live), or of profile CSVs not read before."""
        if self.path != Path():
            return super().collect(step)
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            out.extend(read_profile_csv_events(f, self.rank))
        return out
