"""The history from a notebook: the same trends and figures as ``history trend`` and ``history overview``.

``trend_figures("step_time.median", workload="pretrain")`` returns one ``plotly.graph_objects.Figure``
per comparable series, built from the very JSON the trend page embeds (``history.figures``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from my_utils.profiling.history.figures import to_figures
from my_utils.profiling.history.location import resolve, shown
from my_utils.profiling.history.reads import StoreReads
from my_utils.profiling.history.sqlite_reads import open_reads
from my_utils.profiling.history.trend_model import DetectSettings, Trend, overview, trends


def _trends(metric: str, store: str | StoreReads | None, workload: str | None, hardware: str | None,
            world_size: int | None, last: int | None, settings: DetectSettings | None) -> list[Trend]:
    if isinstance(store, StoreReads):
        return trends(store, metric, workload, hardware, world_size, last, settings)
    with open_reads(store) as opened:
        return trends(opened, metric, workload, hardware, world_size, last, settings)


def trend_figures(metric: str, store: str | StoreReads | None = None, workload: str | None = None,
                  hardware: str | None = None, world_size: int | None = None, last: int | None = None,
                  settings: DetectSettings | None = None) -> list[Any]:
    """One figure per comparable series of ``metric`` (the trend page's charts)."""
    return to_figures(_trends(metric, store, workload, hardware, world_size, last, settings))


def overview_figures(store: str | StoreReads | None = None, last: int | None = 500) -> list[Any]:
    """The team overview's figures: every series' key metrics, regressions still in force first."""
    if isinstance(store, StoreReads):
        return to_figures(overview(store, last=last))
    with open_reads(store) as opened:
        return to_figures(overview(opened, last=last))


def write_trend_page(metric: str, output: str | Path, store: str | StoreReads | None = None,
                     workload: str | None = None, hardware: str | None = None, last: int | None = None) -> Path:
    """Write ``metric``'s trend page (as ``history trend``) and return its path."""
    from my_utils.profiling.history.pages import render_page, write_page

    found = _trends(metric, store, workload, hardware, None, last, None)
    where = store.where if isinstance(store, StoreReads) else shown(resolve(store))
    return write_page(render_page(f"{metric}: trend", f"store {where}", found), output)
