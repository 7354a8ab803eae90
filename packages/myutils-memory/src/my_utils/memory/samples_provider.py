"""``MonitorSamplesMetricsProvider``: the monitor's samples files as metric events (plugin ``memory_monitor``).

Every metric of every sample becomes an event (``energy_j`` a ``counter``, percentages a
``ratio``, the rest ``gauge``) with the sample's unix time, the file's rank and unit; ``attrs``
carry the prefix, the seconds since the start, how NVML and energy were measured and, for the
metrics other tools record too, ``metric``: the canonical name (``my_utils.core.metric_names``). ``collect()`` returns only lines added
since the previous call, so it can follow a file a running tracker is still writing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.core.metric_names import lookup
from my_utils.core.paths import as_paths
from my_utils.memory.samples_file import UNITS, read_samples

__all__ = ["MonitorSamplesMetricsProvider"]

PATTERN = "*_samples.jsonl"
#: the samples' metric -> its canonical name (``my_utils.core.metric_names``), for those other tools record too
_CANONICAL = {m: found[0].name for m in UNITS if (found := lookup("memory_monitor", m)) is not None}


def _kind(metric: str) -> str:
    """Energy is a counter; percentages are ratios (their mean is what a run's figure is, as DCGM's); the rest gauges."""
    return "counter" if metric == "energy_j" else "ratio" if metric.endswith("_pct") else "gauge"


class MonitorSamplesMetricsProvider:
    """Reads ``<prefix>_rank<rank>_samples.jsonl`` files (one file, or every one in a folder)."""

    name = "memory_monitor"

    def __init__(self, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 rank: int | None = None) -> None:
        self.paths = as_paths(paths)
        self.rank = rank
        self._read: dict[Path, int] = {}

    @classmethod
    def from_input(cls, path: Path, **options: Any) -> MonitorSamplesMetricsProvider:
        """A provider for a samples file or a folder holding some."""
        p = Path(path)
        paths = sorted(p.glob(PATTERN)) if p.is_dir() else [p]
        if not paths:
            raise InputError(p, None, f"no {PATTERN} files in this folder (GPU_Performance_Tracker writes them)")
        return cls(paths, rank=options.get("rank"))

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        """Events for the samples written since the last call."""
        events: list[MetricEvent] = []
        for path in self.paths:
            header, samples, _notes, done = read_samples(path, self._read.get(path, 0))
            self._read[path] = done
            rank = header.get("rank") if isinstance(header.get("rank"), int) else self.rank
            base = {"prefix": str(header.get("prefix", "")), "nvml": str(header.get("nvml", "")),
                    "energy_method": str(header.get("energy_method", "")), "file": path.name}
            for s in samples:
                for metric, value in s.metrics.items():
                    attrs = {**base, "t": s.t}
                    if metric in _CANONICAL:  # one name for the metric whichever tool recorded it
                        attrs["metric"] = _CANONICAL[metric]
                    events.append(MetricEvent(
                        name=f"monitor/{metric}", value=value, kind=_kind(metric),
                        unit=UNITS.get(metric, ""), source=self.name, rank=rank, step=step, ts=s.ts, attrs=attrs))
        return events
