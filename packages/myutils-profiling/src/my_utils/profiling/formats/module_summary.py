"""ModuleProfiler's summary CSV (``module_summary_rank<r>.csv``, written by the hooks' callbacks) as metric events.

The live ``module_profiler`` provider emits one ``module:<name>`` event per module and collect
(the mean of the runs since the previous one); the summary file holds the whole run, so it
gives one such event per module: the mean over all its runs, with the run count and total in
``attrs`` as the live provider puts them. No step: the file keeps none.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.core.safe_io import open_regular

__all__ = ["NEEDED", "read_module_summary"]

NEEDED = ("module_name", "mean_ms", "total_ms", "run_count")


def read_module_summary(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """One ``module:<name>`` event per row of a ModuleProfiler summary CSV."""
    from my_utils.profiling.formats._files import rank_from_name
    from my_utils.profiling.formats._text import inert

    rank = rank if rank is not None else rank_from_name(path)
    try:
        fh = open_regular(path, "r", encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
    out: list[MetricEvent] = []
    with fh:
        reader = csv.DictReader(fh)
        missing = [c for c in NEEDED if c not in (reader.fieldnames or ())]
        if missing:
            raise InputError(path, "line 1", f"a ModuleProfiler summary header with {', '.join(NEEDED)}; "
                             f"missing {', '.join(missing)}")
        for row in reader:
            try:
                mean, total, runs = float(row["mean_ms"]), float(row["total_ms"]), int(row["run_count"])
            except (TypeError, ValueError):
                raise InputError(path, f"line {reader.line_num}", "numbers in mean_ms, total_ms and run_count") from None
            if not (math.isfinite(mean) and math.isfinite(total)) or runs < 0:
                raise InputError(path, f"line {reader.line_num}", "finite times and a run count of 0 or more")
            attrs: dict[str, Any] = {"runs": runs, "total_ms": total, "file": path.name, "line": reader.line_num}
            for key in ("median_ms", "std_ms", "percentage"):
                try:
                    value = float(row.get(key) or "nan")
                except ValueError:
                    continue
                if math.isfinite(value):
                    attrs[key] = value
            out.append(MetricEvent(name=f"module:{inert(row['module_name'] or '')}", value=mean, kind="duration",
                                   unit="ms", source="module_profiler", rank=rank, attrs=attrs))
    return out
