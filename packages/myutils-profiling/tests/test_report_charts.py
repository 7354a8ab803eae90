"""Chart specifications: one mark per bar or line, labels escaped, series downsampled with spikes kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.analysis import AnalysisReport
from my_utils.profiling.reports.charts import build_charts, plot_text
from my_utils.profiling.reports.downsample import minmax_downsample
from my_utils.profiling.reports.render import json_for_script


def _report(ranks: int = 3, steps: int = 10) -> AnalysisReport:
    tables = {
        "steps": [{"step": s, "rank": r, "source": "mytimer", "step_time": 10.0 + r + s % 3} for r in range(ranks)
                  for s in range(steps)],
        "ranks": [{"rank": r, "steps": steps, "mean_step_time": 11.0 + r} for r in range(ranks)],
        "memory": [{"name": "memory.allocated", "step": s, "rank": r, "value": 2.0 ** 20 * s, "unit": "bytes"}
                   for r in range(ranks) for s in range(steps)],
        "operations": [{"name": "step_time", "source": "mytimer", "unit": "ms", "total": 500.0, "mean": 50.0},
                       {"name": "<img src=x onerror=alert(1)>", "source": "mytimer", "unit": "ms", "total": 40.0,
                        "mean": 4.0, "steps": 10},
                       {"name": "forward", "source": "mytimer", "unit": "ms", "total": 90.0, "mean": 9.0, "steps": 10},
                       {"name": "gpu.kernel_time", "source": "torch_profiler", "unit": "ms", "total": 70.0,
                        "mean": 35.0},
                       {"name": "kernel:gemm", "source": "torch_profiler", "unit": "ms", "total": 60.0,
                        "mean": 30.0}],
    }
    return AnalysisReport("1.1", "pretrain", {"overall": 80.0, "stability": 70.0}, [], {"time_unit": "ms"},
                          tables=tables)


def test_each_chart_counts_its_marks_from_the_tables() -> None:
    charts = {c.id: c for c in build_charts(_report())}
    assert list(charts) == ["chart-step-time", "chart-kernels", "chart-sections", "chart-ranks", "chart-memory"]
    assert (charts["chart-step-time"].mark, charts["chart-step-time"].marks) == ("line", 3)  # one per rank
    assert charts["chart-ranks"].marks == 3 and charts["chart-memory"].marks == 3
    # sections: timed regions only (not the step itself, provider totals or kernels); kernels apart
    assert charts["chart-sections"].marks == 2 and charts["chart-kernels"].marks == 1
    for c in charts.values():
        data = c.figure["data"]
        assert c.marks == (len(data) if c.mark == "line" else sum(len(t["y"]) for t in data))
    assert charts["chart-memory"].figure["data"][0]["y"][-1] == 9.0  # bytes shown in MiB


def test_labels_from_the_run_are_entities_for_plotly() -> None:
    sections = next(c for c in build_charts(_report()) if c.id == "chart-sections")
    labels = sections.figure["data"][0]["y"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in labels
    assert "<img" not in sections.figure_json()
    assert plot_text("a & <b>") == "a &amp; &lt;b&gt;"


def test_no_tables_no_charts() -> None:
    assert build_charts(AnalysisReport("1.1", "inference", {"overall": 100.0}, [], {})) == []


@given(st.text())
def test_json_for_script_cannot_end_the_script(text: str) -> None:
    encoded = json_for_script(json.dumps({"name": text}, ensure_ascii=False))
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded
    assert json.loads(encoded) == {"name": text}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=0, max_size=500),
       st.integers(min_value=2, max_value=120))
def test_minmax_downsample_bounds_and_keeps_extremes(ys: list[float], budget: int) -> None:
    xs = [float(i) for i in range(len(ys))]
    sx, sy = minmax_downsample(xs, ys, budget)
    assert len(sx) == len(sy) <= budget or (sx, sy) == (xs, ys)
    assert sx == sorted(sx) and len(set(sx)) == len(sx)  # a subsequence, in order
    assert all(ys[int(x)] == y for x, y in zip(sx, sy, strict=True))
    if ys:
        assert min(ys) in sy and max(ys) in sy


def test_minmax_downsample_keeps_each_buckets_min_and_max() -> None:
    ys = [0.0, 5.0, 1.0, 2.0, -3.0, 4.0, 9.0, 1.0]
    sx, sy = minmax_downsample(list(range(8)), ys, 4)  # 2 buckets of 4 points
    # buckets [0..3] and [4..7]: min 0.0 and max 5.0, then min -3.0 and max 9.0, in their order
    assert (sx, sy) == ([0, 1, 4, 6], [0.0, 5.0, -3.0, 9.0])
    with pytest.raises(ValueError, match="equal length"):
        minmax_downsample([1, 2], [1], 4)


def test_kineto_tables_become_stacked_bars_per_rank_and_top_kernels_per_rank() -> None:
    report = _report()
    report.tables.update({
        "kineto_temporal": [{"rank": r, "compute_pct": 60.0, "non_compute_pct": 25.0, "idle_pct": 15.0}
                            for r in (0, 5, None)],
        "kineto_kernel_kinds": [{"rank": r, "kind": k, "total_us": 1000.0 * (r + 1)} for r in (0, 5)
                                for k in ("computation", "communication", "memory")],
        "kineto_idle": [{"rank": 0, "device": 0, "stream": s, "category": c, "idle_us": 500.0 * s} for s in (7, 20)
                        for c in ("host_wait", "kernel_wait", "other")],
        "kineto_top_kernels": [{"rank": r, "kind": "computation", "name": n, "total_us": t, "count": 3}
                               for r in (0, 5) for n, t in (("gemm", 4000.0 * (r + 1)), ("<b>relu</b>", 1000.0))],
    })
    charts = {c.id: c for c in build_charts(report)}
    temporal = charts["chart-temporal"]
    # shares: the all-ranks bar stands beside the ranks; times: only the ranks (a sum would dwarf them)
    assert temporal.marks == 9 and [t["x"] for t in temporal.figure["data"]] == [["rank 0", "rank 5", "all ranks"]] * 3
    kinds = charts["chart-kernel-kinds"].figure["data"]
    assert [t["y"] for t in kinds] == [[1.0, 6.0]] * 3  # ms per rank, one trace per kind
    # idle per stream, never summed over streams: one bar per (rank, GPU, stream), stacked by cause
    idle = charts["chart-idle"]
    assert idle.labels == ("rank 0 · GPU 0 · stream 7", "rank 0 · GPU 0 · stream 20")
    assert {t["name"]: t["y"] for t in idle.figure["data"]} == {"host wait": [3.5, 10.0], "kernel wait": [3.5, 10.0],
                                                                "other idle": [3.5, 10.0]}
    # top kernels: one facet per rank, each with its own rank's numbers, never a sum over ranks
    kernels = charts["chart-kernels"]
    by_axis = {t["xaxis"]: dict(zip(t["y"], t["x"], strict=True)) for t in kernels.figure["data"]}
    # the label is the short name (markup shown as text); the hover keeps the full name
    assert by_axis == {"x": {"gemm": 4.0, "&lt;b&gt;relu&lt;…&gt;": 1.0}, "x2": {"gemm": 24.0, "&lt;b&gt;relu&lt;…&gt;": 1.0}}
    assert any("&lt;b&gt;relu&lt;/b&gt;<br>rank 5: 1 ms in 3 launches" in h
               for t in kernels.figure["data"] for h in t["hovertext"])
    titles = [a["text"] for a in kernels.figure["layout"]["annotations"]]
    assert titles == ["rank 0", "rank 5"] and kernels.marks == 4
    assert "kineto_top_kernels" in kernels.note


_JSON = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.lists(
    st.integers(), max_size=2) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
_KEYS = st.sampled_from(["name", "rank", "step", "source", "unit", "value", "total", "step_time", "mean_step_time",
                         "kind", "category", "total_us", "idle_us", "compute_pct", "idle_pct", "count", "share"])
_TABLES = st.sampled_from(["steps", "ranks", "memory", "operations", "totals", "kineto_temporal",
                           "kineto_kernel_kinds", "kineto_idle", "kineto_top_kernels", "ncu_rules", "kineto_health"])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_TABLES, st.lists(st.dictionaries(_KEYS, _JSON, max_size=6), max_size=4), max_size=4))
def test_any_table_rows_from_a_file_render_without_error(tables: dict[str, list[dict[str, object]]]) -> None:
    """Tables come from analysis_report.json files (untrusted): odd types are skipped, never a crash."""
    from my_utils.profiling.reports.render import render_text

    report = AnalysisReport.from_dict({"schema_version": "1.1", "workload": "pretrain", "scores": {"overall": 1},
                                       "findings": [], "summary": {"step_time": {"x": {"mean": "?"}}},
                                       "tables": tables})
    for chart in build_charts(report):
        json.loads(chart.figure_json())
        assert chart.marks >= 0
    assert "## Findings (0)" in render_text(report, "markdown")


def test_sections_one_facet_per_source_titled_with_its_steps_and_nesting_shown(tmp_path: Path) -> None:
    """30 MyTimer steps (iter with its children) beside 2 torch.profiler steps: never on one axis unnamed."""
    from my_utils.core.events import MetricEvent, write_events
    from my_utils.profiling.analysis import MetricsAnalyzer

    events = []
    for step in range(30):
        parts = {"data": 0.3, "forward": 17.0 + step % 3, "backward": 16.0, "optimizer": 3.4}
        for name, ms in parts.items():
            events.append(MetricEvent(name, ms, "duration", "ms", "mytimer", 0, step,
                                      attrs={"depth": 1, "path": f"iter/{name}"}))
        events.append(MetricEvent("iter", sum(parts.values()) + 0.05, "duration", "ms", "mytimer", 0, step,
                                  attrs={"depth": 0, "path": "iter"}))
        events.append(MetricEvent("step_time", sum(parts.values()) + 0.05, "duration", "ms", "mytimer", 0, step))
    for step in (10, 11):
        events += [MetricEvent("cpu_op:aten::mm", 30.0, "duration", "ms", "torch_profiler", 0, step),
                   MetricEvent("annotation:Optimizer.step#SGD.step", 0.7, "duration", "ms", "torch_profiler", 0, step),
                   MetricEvent("step_time", 72.0, "duration", "ms", "torch_profiler", 0, step)]
    write_events(tmp_path / "metrics_events.jsonl", events)
    report = MetricsAnalyzer(tmp_path / "metrics_events.jsonl", "pretrain").analyze()
    chart = next(c for c in build_charts(report) if c.id == "chart-sections")
    layout = chart.figure["layout"]
    assert [a["text"] for a in layout["annotations"]] == ["MyTimer · rank 0 · 30 steps · ms per step (mean)",
                                                          "torch.profiler · rank 0 · 2 steps · ms per step (mean)"]
    axes = {t["name"]: (t["xaxis"], t["yaxis"]) for t in chart.figure["data"]}
    assert axes["mytimer"] != axes["torch_profiler"]  # each source on its own axes
    mytimer = next(t for t in chart.figure["data"] if t["name"] == "mytimer")
    # the step's own region first, its children nested under it (not drawn beside it as peers)
    assert mytimer["y"][0] == "iter" and all(y.endswith(("forward", "backward", "optimizer", "data"))
                                             and "└ " in y for y in mytimer["y"][1:])
    assert mytimer["x"][0] == pytest.approx(0.3 + 18.0 + 16.0 + 3.4 + 0.05)  # mean per step, not a 30-step total
    assert "nesting level" in chart.note


def test_each_step_time_series_has_its_own_colour_dash_and_legend_entry() -> None:
    """Two ranks, each timed by MyTimer and torch.profiler: four lines, four colours, MyTimer solid and
    torch.profiler dashed, each named in the legend; with one source, a colour per rank as before."""
    report = _report(ranks=2)
    report.tables["steps"] += [{"step": s, "rank": r, "source": "torch_profiler", "step_time": 9.0 + r}
                               for r in range(2) for s in range(3)]
    chart = next(c for c in build_charts(report) if c.id == "chart-step-time")
    data = chart.figure["data"]
    assert [t["name"] for t in data] == ["rank 0 · MyTimer", "rank 0 · torch.profiler", "rank 1 · MyTimer",
                                         "rank 1 · torch.profiler"]
    assert len({t["line"]["color"] for t in data}) == 4
    assert [t["line"]["dash"] for t in data] == ["solid", "dash", "solid", "dash"]
    assert chart.figure["layout"]["showlegend"] is True
    single = next(c for c in build_charts(_report(ranks=2)) if c.id == "chart-step-time").figure["data"]
    assert [t["line"]["dash"] for t in single] == ["solid", "solid"] and single[0]["line"]["color"] != \
        single[1]["line"]["color"]
