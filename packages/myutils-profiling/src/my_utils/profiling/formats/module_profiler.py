"""ModuleProfilerMetricsProvider: per-module forward times from a live ModuleProfiler.

The profiler keeps cumulative statistics; each ``collect()`` turns what was added since
the previous call (runs and total time per module) into one event per module, so
repeated calls never count a run twice. Works with any object whose ``summary()``
returns a DataFrame with the seed's columns (module_name, mean_ms, median_ms, std_ms,
total_ms, run_count, percentage).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import require_live

_NEEDED = ("module_name", "total_ms", "run_count")


class ModuleProfilerMetricsProvider:
    """Module timings of a live ``ModuleProfiler`` (``my_utils.hooks``), as deltas per collect."""

    name = "module_profiler"

    def __init__(self, profiler: Any, *, rank: int | None = None) -> None:
        require_live(profiler, "summary", "ModuleProfilerMetricsProvider",
                     "pass a my_utils.hooks ModuleProfiler (or an object with summary() -> DataFrame)")
        self.profiler = profiler
        self.rank = rank
        self._seen: dict[str, tuple[float, int]] = {}

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        """One event per module that ran since the last call: mean ms of the new runs."""
        df = self.profiler.summary()
        if df is None or len(df) == 0:
            return []
        missing = [c for c in _NEEDED if c not in df.columns]
        if missing:
            raise InputError(f"{type(self.profiler).__name__}.summary()", "columns",
                             f"columns {list(_NEEDED)}; missing {missing}")
        out: list[MetricEvent] = []
        for rec in df.to_dict("records"):
            name = str(rec["module_name"])
            total, runs = float(rec["total_ms"]), int(rec["run_count"])
            prev_total, prev_runs = self._seen.get(name, (0.0, 0))
            new_runs = runs - prev_runs
            if new_runs <= 0:
                continue
            self._seen[name] = (total, runs)
            new_total = total - prev_total
            attrs: dict[str, Any] = {"runs": new_runs, "total_ms": new_total, "cumulative_runs": runs}
            for key in ("mean_ms", "median_ms", "std_ms", "percentage"):
                if key in rec and rec[key] is not None and not (isinstance(rec[key], float) and math.isnan(rec[key])):
                    attrs[f"cumulative_{key}"] = float(rec[key])
            out.append(MetricEvent(name=f"module:{name}", value=new_total / new_runs, kind="duration", unit="ms",
                                   source="module_profiler", rank=self.rank, step=step, attrs=attrs))
        return out
