"""``diff`` of two reports shows the Kineto analyses' figures that changed (critical path, MFU, queues...)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
from my_utils.profiling.analysis.diff import diff_reports
from my_utils.profiling.cli.diff import render_markdown
from my_utils.profiling.kineto.compare import compare_kineto
from my_utils.profiling.kineto.read.provider import parse_trace_file
from my_utils.profiling.model.report import AnalysisReport
from my_utils.profiling.reports.diff_markdown import md_text


def _report(src: Path, out: Path) -> AnalysisReport:
    out.mkdir()
    with open(out / "metrics_events.jsonl", "w", encoding="utf-8") as fh:
        for e in parse_trace_file(src, 0):
            fh.write(json.dumps(e.to_dict()) + "\n")
    return MetricsAnalyzer(out / "metrics_events.jsonl", traces=[src]).analyze()


@pytest.fixture(scope="module")
def pair(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[AnalysisReport, AnalysisReport]:
    root = tmp_path_factory.mktemp("pair")
    return (_report(real_fixtures / "kineto" / "hta/critical_path__alexnet_trace.json.gz", root / "a"),
            _report(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz", root / "b"))


def test_changed_figures_with_their_deltas(pair: tuple[AnalysisReport, AnalysisReport]) -> None:
    a, b = pair
    rows = compare_kineto(a.tables, b.tables)
    length = next(r for r in rows if r["table"] == "kineto_critical_path" and r["metric"] == "length_us")
    base = a.tables["kineto_critical_path"][0]["length_us"]
    target = b.tables["kineto_critical_path"][0]["length_us"]
    assert (length["base"], length["target"], length["delta"]) == (base, target, target - base)
    assert length["delta_pct"] == pytest.approx(100.0 * (target - base) / base)
    assert all(r["delta"] != 0 for r in rows)  # unchanged figures are left out
    pcts = [abs(r["delta_pct"]) for r in rows if r["delta_pct"] is not None]
    assert pcts == sorted(pcts, reverse=True)


def test_diff_json_and_markdown_carry_them(pair: tuple[AnalysisReport, AnalysisReport]) -> None:
    result = diff_reports(*pair)
    assert result.kineto and result.to_dict()["kineto"] == result.kineto
    md = render_markdown(result)
    assert "| Kineto table | key | figure | base | target | Δ % |" in md
    # table names reach the Markdown escaped (the file is safe to open: rule 5)
    assert all(f"| {md_text(r['table'])} |" in md for r in result.kineto[:25])


def test_a_gate_on_kineto_figures_alone_is_refused(pair: tuple[AnalysisReport, AnalysisReport]) -> None:
    from my_utils.core.errors import InputError

    result = diff_reports(*pair)
    assert not result.changes and result.step_time is None  # these traces have no operations table, no steps
    assert any("only the Kineto analysis figures are compared" in w for w in result.warnings)
    assert any(w.startswith("the base and target reports have neither") for w in result.warnings)
    with pytest.raises(InputError, match="found only Kineto analysis figures"):
        result.gate(5.0)


def test_report_diffs_show_the_gpu_level_from_the_kineto_tables(pair: tuple[AnalysisReport, AnalysisReport]) -> None:
    """Issue 34: every diff leads with the GPU level; for reports it is their temporal/overlap/idle tables' figures."""
    a, b = pair
    result = diff_reports(a, b)
    rows = {r.key: r for r in result.gpu_rows}
    for report, col in ((a, "base"), (b, "target")):
        (temporal,) = [r for r in report.tables["kineto_temporal"]]
        span, idle = temporal["span_us"] / 1e3, temporal["idle_us"] / 1e3
        assert getattr(rows["span"], col) == pytest.approx(span)
        assert getattr(rows["idle"], col) == pytest.approx(idle)
        assert getattr(rows["busy"], col) == pytest.approx(span - idle)
        causes = sum(r["idle_us"] for r in report.tables["kineto_idle_device"]) / 1e3
        assert sum(getattr(rows[f"idle.{c}"], col) for c in ("host_wait", "kernel_wait", "other")) == \
            pytest.approx(causes)
    acc = result.accounting
    assert acc is not None and acc.window == "capture" and not acc.measured  # one capture a side: descriptive
    assert any("report keeps no per-step GPU split" in n for n in result.notes)
    assert result.headline.startswith("GPU idle ")
