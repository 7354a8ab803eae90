"""The report's Run section in words: rows a reader can take as written, not a serialised empty value.

Before, an Nsight-only report said "steps 0 (–––)", "ranks []" and "run ids []" while its findings
named ranks 0-5.
"""

from __future__ import annotations

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.reports.context import build_context


def _rows(events: list[MetricEvent]) -> dict[str, str]:
    context = build_context(MetricsAnalyzer(events, traces=[]).analyze())
    return {str(k): str(v) for k, v in context["facts"]}


def test_rows_without_steps_ranks_or_run_ids_say_so() -> None:
    rows = _rows([MetricEvent("gpu.util", 50.0, "gauge", "%", "dcgm")])
    assert rows["steps"] == "not measured: no input numbers its steps"
    assert rows["run ids"].startswith("none: ") and "ranks" not in rows
    assert "[]" not in rows.values() and not any("–––" in v for v in rows.values())


def test_rows_with_steps_ranks_and_run_ids_list_them() -> None:
    events = [MetricEvent("step_time", 10.0, "duration", "ms", "mytimer", r, s, 1.0e9 + s, f"run-{r}")
              for r in (0, 1) for s in range(3, 8)]
    rows = _rows(events)
    assert rows["steps"].startswith("5 (") and rows["ranks"] == "0, 1" and rows["run ids"] == "run-0, run-1"
