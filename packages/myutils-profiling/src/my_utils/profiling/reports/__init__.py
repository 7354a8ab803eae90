"""Reports: an ``AnalysisReport`` → JSON, Markdown or HTML (jinja2 templates, plotly charts, offline).

``render_report(report, fmt, output_path, template_dir=None)`` writes one file atomically.
Light to import: jinja2 and plotly are loaded when a report is rendered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "render_report": "my_utils.profiling.reports.render",
    "render_text": "my_utils.profiling.reports.render",
    "default_report_path": "my_utils.profiling.reports.render",
    "FORMATS": "my_utils.profiling.reports.render",
    "Chart": "my_utils.profiling.reports.charts",
    "build_charts": "my_utils.profiling.reports.charts",
    "BUILTIN_TEMPLATES": "my_utils.profiling.reports.environment",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.reports.charts import Chart as Chart
    from my_utils.profiling.reports.charts import build_charts as build_charts
    from my_utils.profiling.reports.environment import BUILTIN_TEMPLATES as BUILTIN_TEMPLATES
    from my_utils.profiling.reports.render import FORMATS as FORMATS
    from my_utils.profiling.reports.render import default_report_path as default_report_path
    from my_utils.profiling.reports.render import render_report as render_report
    from my_utils.profiling.reports.render import render_text as render_text
