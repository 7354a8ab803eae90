"""The nsys report's charts (``reports.nsys_charts``): they draw the tables' numbers, checked against the raw exports."""

from __future__ import annotations

from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.analysis import AnalysisReport
from my_utils.profiling.analysis.nsight.analyze import NsightInputs, analyze_nsight
from my_utils.profiling.reports.charts import build_charts


def _report(*paths: Any) -> AnalysisReport:
    tables = analyze_nsight(NsightInputs(nsys=tuple(paths))).tables
    return AnalysisReport("1.2", "pretrain", {}, [], {"time_unit": "ms"}, tables=tables)


def test_each_device_bar_adds_up_to_its_span(real_fixtures: Any) -> None:
    ring = H.ring_by_rank(real_fixtures)  # rank order: the PMI_RANK each export recorded, not the sorted names
    charts = {c.id: c for c in build_charts(_report(*ring))}
    assert {"chart-nsys-busy", "chart-nsys-kernels", "chart-nsys-nccl"} <= set(charts)
    busy = charts["chart-nsys-busy"]
    traces = busy.figure["data"]
    for i, path in enumerate(ring):
        ops: list[tuple[int, int]] = []
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            ops += H.raw(path, f"SELECT start, end FROM {t}")
        span = max(e for _, e in ops) - min(s for s, _ in ops)
        union, _pieces = H.covered(ops)
        # busy + every kind of idle (the chart keeps 6 significant digits)
        assert sum(t["y"][i] for t in traces) == pytest.approx(span / 1e6, rel=1e-5)
        assert next(t for t in traces if t["name"] == "busy")["y"][i] == pytest.approx(union / 1e6, rel=1e-5)
    nccl = charts["chart-nsys-nccl"].figure["data"]
    wait = next(t for t in nccl if t["name"] == "rank wait")["y"]
    arrive = [H.raw(p, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] for p in ring]
    assert wait == [pytest.approx((max(arrive) - a) / 1e6, rel=1e-5, abs=1e-6) for a in arrive]


def test_no_nsys_tables_no_nsys_charts() -> None:
    report = AnalysisReport("1.2", "pretrain", {}, [], {"time_unit": "ms"}, tables={})
    assert not [c for c in build_charts(report) if c.id.startswith("chart-nsys")]
