"""The operation model's tables as pandas DataFrames, from one call on a trace, a folder of ranks or a report.

``op_frames(source)`` gives ``{table: DataFrame}`` for :data:`~.tables.TABLES` (``op_categories``,
``op_operators``, ``op_shapes``, ``op_coverage``, ``op_memory``, ``memory_peaks``): ``source`` is a
trace file or folder (each rank read once by ``kineto_frames`` with the ``ops`` analysis), or an
``AnalysisReport`` / its tables (``kineto_op_*``). An empty table keeps its documented columns.
The roofline figure of the same rows is ``reports.roofline_chart.roofline_figure(frames["op_shapes"])``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from my_utils.profiling.kineto.filters import TraceFilter


def op_frames(source: Any, *, trace_filter: TraceFilter | None = None, executor: Any = "process",
              ranks: Sequence[int] | None = None) -> dict[str, pd.DataFrame]:
    """``{table: DataFrame}`` of the operation model (module docstring)."""
    import pandas as pd

    from my_utils.profiling.kineto.frames import columns
    from my_utils.profiling.kineto.ops.tables import TABLES

    tables = getattr(source, "tables", source) if not isinstance(source, (str, Path, list, tuple)) else None
    if isinstance(tables, Mapping):
        rows = {t: list(tables.get(f"kineto_{t}") or []) for t in TABLES}
        return {t: pd.DataFrame(r) if r else pd.DataFrame(columns=list(columns(t))) for t, r in rows.items()}
    from my_utils.profiling.kineto.frames import kineto_frames

    paths: str | Path | Iterable[str | Path] = source
    frames = kineto_frames(paths, trace_filter=trace_filter, analyses=["ops"], executor=executor, ranks=ranks)
    return {t: frames[t] if t in frames else pd.DataFrame(columns=list(columns(t))) for t in TABLES}
