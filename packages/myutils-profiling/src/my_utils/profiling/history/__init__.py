"""The run history: every analysed run kept (SQLite or PostgreSQL), trends, change points and a CI gate.

A facade: names resolve lazily from their modules, so ``import my_utils.profiling.history`` costs
nothing until one is used, and the store's SQLAlchemy (the ``[history]`` extra) is imported only
by the names that need it. ``docs/guide/history.md`` is the user guide.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "RunStore": "store", "StoredRun": "records", "Series": "records", "AddResult": "records",
    "StoreReads": "reads", "open_reads": "sqlite_reads",
    "RunContext": "context", "SeriesKey": "context", "context_of": "context",
    "MetricValue": "metrics", "report_metrics": "metrics", "higher_is_better": "metrics",
    "ChangePoint": "changepoints", "change_points": "changepoints",
    "Trend": "trend_model", "Change": "trend_model", "trends": "trend_model", "overview": "trend_model",
    "DetectSettings": "trend_model",
    "GateSettings": "gate", "GateResult": "gate", "MetricVerdict": "gate",
    "judge_run": "judge", "trend_figures": "api", "overview_figures": "api", "write_trend_page": "api",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
