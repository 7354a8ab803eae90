"""The new Kineto tables in the JSON, Markdown and HTML reports, with the charts HTA draws for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
from my_utils.profiling.kineto.read.provider import parse_trace_file
from my_utils.profiling.kineto.registry import ANALYSES
from my_utils.profiling.model.report import AnalysisReport
from my_utils.profiling.reports import render_report
from my_utils.profiling.reports.charts import build_charts

NCCL = "hta/nccl_parser_config__nccl_data.json.gz"


@pytest.fixture(scope="module")
def report(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> AnalysisReport:
    src = real_fixtures / "kineto" / NCCL
    out = tmp_path_factory.mktemp("report")
    with open(out / "metrics_events.jsonl", "w", encoding="utf-8") as fh:
        for e in parse_trace_file(src):
            fh.write(json.dumps(e.to_dict()) + "\n")
    return MetricsAnalyzer(out / "metrics_events.jsonl", traces=[src]).analyze()


def test_tables_reach_every_format(report: AnalysisReport, tmp_path: Path) -> None:
    expected = {"kineto_critical_path", "kineto_critical_path_breakdown", "kineto_queue_length",
                "kineto_queue_length_series", "kineto_kernel_sequences", "kineto_aten_launch", "kineto_op_stacks",
                "kineto_collectives", "kineto_mfu", "kineto_idle_host_ops", "kineto_memory_kinds",
                "kineto_gpu_annotations"}
    assert expected <= set(report.tables)
    assert set(report.tables) - {f"kineto_{t}" for a in ANALYSES for t in a.tables} >= {"kineto_temporal"}
    again = AnalysisReport.load(report.write(tmp_path / "analysis_report.json"))
    assert again.tables["kineto_critical_path"] == report.tables["kineto_critical_path"]
    md = render_report(report, "markdown", tmp_path / "r.md").read_text(encoding="utf-8")
    html = render_report(report, "html", tmp_path / "r.html").read_text(encoding="utf-8")
    for title in ("critical path", "queue length", "kernel sequences", "collectives", "idle host ops"):
        assert f"Kineto: {title}" in md and f"Kineto: {title}" in html, title


def test_charts_where_hta_plots(report: AnalysisReport, tmp_path: Path) -> None:
    """Queue length over time, the critical path's breakdown and the bus bandwidth per collective are drawn."""
    charts = {c.id: c for c in build_charts(report)}
    assert {"chart-critical-path", "chart-queue-length", "chart-collectives"} <= set(charts)
    queue = charts["chart-queue-length"]
    assert queue.mark == "line" and queue.marks == len({(r["rank"], r["device"], r["stream"])
                                                        for r in report.tables["kineto_queue_length_series"]})
    path = charts["chart-critical-path"]
    assert set(path.labels) == {"rank 0"}
    html = render_report(report, "html", tmp_path / "r.html").read_text(encoding="utf-8")
    for chart_id in ("chart-critical-path", "chart-queue-length", "chart-collectives"):
        assert f'id="{chart_id}"' in html


def test_headline_verdict_carries_the_new_evidence(report: AnalysisReport) -> None:
    verdict = report.headline["verdict"]
    assert verdict["bound"] == "host" and "idle.host_op" in verdict["facts"]
    assert report.fact("critical_path.cpu") is not None and report.fact("mfu") is not None
