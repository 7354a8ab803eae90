"""The report's charts as plotly Figures: the figure the HTML page draws, returned in Python.

The page embeds each chart's plotly JSON (``reports.charts.build_charts``); a notebook gets the
same JSON wrapped in ``plotly.graph_objects.Figure``, so what is seen in Jupyter is what the page
shows, and there is one builder per chart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.profiling.model.report import AnalysisReport

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["report_figures"]


def report_figures(report: AnalysisReport) -> dict[str, go.Figure]:
    """Every chart of ``report``'s page, keyed by its id (``chart-step-time``...), as a plotly Figure."""
    import plotly.graph_objects as go

    from my_utils.profiling.reports.charts import build_charts

    return {chart.id: go.Figure(chart.figure) for chart in build_charts(report)}
