"""A report's tables and findings as pandas DataFrames (the notebook API's tables).

Each report table becomes one DataFrame with the rows and columns the JSON report holds (the
page shows the first rows of the same tables), so a notebook filters, joins and plots exactly
the numbers the report states. An empty table keeps its documented columns where the Kineto
analyses document them (``kineto.frames.columns``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from my_utils.profiling.model.report import AnalysisReport, Finding

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FINDING_COLUMNS", "diff_frame", "findings_frame", "table_frame", "table_frames"]

#: Columns of :func:`findings_frame`, in order.
FINDING_COLUMNS = ("id", "category", "severity", "title", "ms_per_step", "share_of_step", "steps", "basis",
                   "detail", "suggestion", "facts")


def table_frame(name: str, rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One report table as a DataFrame (documented columns kept when it is empty)."""
    import pandas as pd

    if rows:
        return pd.DataFrame([dict(r) for r in rows])
    from my_utils.profiling.kineto.frames import columns

    cols = list(columns(name.removeprefix("kineto_"))) if name.startswith("kineto_") else []
    return pd.DataFrame(columns=cols or None)


def table_frames(report: AnalysisReport) -> dict[str, pd.DataFrame]:
    """Every table of ``report`` (JSON rows) as a DataFrame, keyed by the report's table names."""
    return {name: table_frame(name, rows) for name, rows in report.tables.items() if isinstance(rows, list)}


def _finding_row(f: Finding) -> dict[str, Any]:
    return {"id": f.id, "category": f.category, "severity": f.severity, "title": f.title,
            "ms_per_step": f.impact.ms_per_step, "share_of_step": f.impact.share_of_step, "steps": f.impact.steps,
            "basis": f.impact.basis, "detail": f.detail, "suggestion": f.suggestion, "facts": list(f.facts)}


def findings_frame(report: AnalysisReport) -> pd.DataFrame:
    """The findings, ranked as the report ranks them (largest time a fix could save first), one row each."""
    import pandas as pd

    return pd.DataFrame([_finding_row(f) for f in report.findings], columns=list(FINDING_COLUMNS))


def diff_frame(result: Any) -> pd.DataFrame:
    """A diff as a DataFrame: one row per name (the step time first) for a run diff (``analysis.diff.DiffResult``;
    each side's figures in ``base_*``/``target_*`` columns), one row per kernel and metric for an ncu diff
    (``analysis.diff_ncu.NcuDiff``)."""
    import pandas as pd

    data = result.to_dict()
    if "rows" in data:  # ncu
        return pd.DataFrame(data["rows"])
    rows = [_flat(c) for c in data["changes"]]
    if data.get("step_time"):
        rows.insert(0, _flat(data["step_time"]))
    return pd.DataFrame(rows)


def _flat(change: Mapping[str, Any]) -> dict[str, Any]:
    """A change row with each side's figures as ``base_mean``, ``target_count``... (None where a side is absent)."""
    out = {k: v for k, v in change.items() if k not in ("base", "target")}
    for side in ("base", "target"):
        stats = change.get(side) or {}
        for key in ("count", "steps", "mean", "std", "unit"):
            out[f"{side}_{key}"] = stats.get(key)
    return out
