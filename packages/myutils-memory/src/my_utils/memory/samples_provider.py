"""``MonitorSamplesMetricsProvider``: the monitor's samples files as metric events (plugin ``memory_monitor``).

Every metric of every sample becomes an event (``energy_j`` a ``counter``, percentages a
``ratio``, the rest ``gauge``) with the sample's unix time, the file's rank and unit; ``attrs``
carry the prefix, the seconds since the start, how NVML and energy were measured and, for the
metrics other tools record too, ``metric``: the canonical name (``my_utils.core.metric_names``).
Where the file marks step ends (``GPU_Performance_Tracker.mark_step``/``follow``), each step
whose end the samples cover gets ``monitor/step_energy_j`` and ``monitor/step_power_w`` at its
step (``step_energy``), and the file one ``monitor/energy_method`` (1: NVML's total-energy
counter, 2: power integrated over time). ``collect()`` returns only lines added
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
from my_utils.memory.samples_file import UNITS, Sample, SamplesRead, StepMark, read_samples_file
from my_utils.memory.step_energy import METHOD_CODES, step_energies

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
        # per file: the energy samples and step ends seen so far, and the steps already emitted
        self._steps: dict[Path, tuple[list[Sample], list[StepMark], set[int]]] = {}

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
            first = path not in self._read
            read = read_samples_file(path, self._read.get(path, 0))
            header, samples, done = read.header, read.samples, read.done
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
            events += self._step_events(path, read, rank, base, first)
        return events

    def _step_events(self, path: Path, read: SamplesRead, rank: int | None, base: dict[str, Any],
                     first: bool) -> list[MetricEvent]:
        """``monitor/step_energy_j`` and ``monitor/step_power_w`` per step whose end the samples now cover."""
        energy, marks, done = self._steps.setdefault(path, ([], [], set()))
        energy += [s for s in read.samples if "energy_j" in s.metrics]
        marks += read.steps
        out: list[MetricEvent] = []
        method = METHOD_CODES.get(base["energy_method"])
        if first and method is not None and read.steps:  # how energy was measured, once (a value is a number)
            out.append(MetricEvent(name="monitor/energy_method", value=method, kind="info", unit="code",
                                   source=self.name, rank=rank, attrs=dict(base)))
        for se in step_energies(energy, marks):
            if se.step in done:
                continue
            done.add(se.step)
            attrs = {**base, "start_ts": se.start_ts, "seconds": se.seconds}
            out.append(MetricEvent(name="monitor/step_energy_j", value=se.joules, kind="gauge", unit="J",
                                   source=self.name, rank=rank, step=se.step, ts=se.end_ts, attrs=attrs))
            out.append(MetricEvent(name="monitor/step_power_w", value=se.watts, kind="ratio", unit="W",
                                   source=self.name, rank=rank, step=se.step, ts=se.end_ts, attrs=attrs))
        return out
