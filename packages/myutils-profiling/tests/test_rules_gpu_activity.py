"""One rule reads GPU activity whichever tool recorded it: DCGM, nsys GPU metrics, NVML through the monitor."""

from __future__ import annotations

import shutil
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent
from my_utils.core.testing import check_analysis_rule
from my_utils.profiling.formats.dcgm import read_dcgm_dmon
from my_utils.profiling.nsys.provider import read_nsys_sqlite

DATA = Path(__file__).resolve().parent / "data"
EXPORT = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
# what nsys --gpu-metrics-devices writes (metric names of its Hopper/Ampere sets), in a copy of a real export
METRICS = {1: "GR Active [Throughput %]", 2: "SMs Active [Throughput %]", 3: "DRAM Read Bandwidth [Throughput %]"}


def export_with_gpu_metrics(real_fixtures: Any, tmp_path: Path, sm: list[int]) -> Path:
    path = tmp_path / "rank0.sqlite"
    shutil.copyfile(real_fixtures / EXPORT, path)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER, sourceId INTEGER, typeName TEXT, "
                "metricId INTEGER, metricName TEXT)")
    con.execute("CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER, metricId INTEGER, value INTEGER)")
    con.executemany("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (65792, 0, 'GPU 0', ?, ?)", METRICS.items())
    for i, v in enumerate(sm):
        con.execute("INSERT INTO GPU_METRICS VALUES (?, 65792, 2, ?)", (1000 * i, v))
        con.execute("INSERT INTO GPU_METRICS VALUES (?, 65792, 1, ?)", (1000 * i, min(100, v + 20)))
    con.commit()
    con.close()
    return path


def test_nsys_gpu_metrics_become_canonical_events(real_fixtures: Any, tmp_path: Path) -> None:
    sm = [12, 18, 25, 9, 30, 14]
    events = {e.name: e for e in read_nsys_sqlite(export_with_gpu_metrics(real_fixtures, tmp_path, sm), rank=0)}
    active = events["gpu.sm_active:GPU 0"]
    con = sqlite3.connect(tmp_path / "rank0.sqlite")
    (mean, n), = con.execute("SELECT AVG(value), COUNT(*) FROM GPU_METRICS WHERE metricId = 2").fetchall()
    assert active.value == pytest.approx(mean) == pytest.approx(statistics.fmean(sm))
    assert (active.unit, active.attrs["count"], active.attrs["nsys_metric"]) == ("%", n, METRICS[2])
    assert events["gpu.gr_engine_active:GPU 0"].value == pytest.approx(statistics.fmean(min(100, v + 20) for v in sm))
    assert not any(n.startswith("gpu.dram") for n in events)  # listed in the metric table, never sampled
    findings = check_analysis_rule("source_checks", list(events.values()))
    assert [f["id"] for f in findings] == ["source_checks:sm_active_low:nsys_sqlite:GPU 0:rank0"]
    assert findings[0]["evidence"]["mean"] == pytest.approx(mean) and "nsys GPU metrics" in findings[0]["title"]


def test_a_busy_gpu_is_not_flagged_by_any_tool(real_fixtures: Any, tmp_path: Path) -> None:
    events = read_nsys_sqlite(export_with_gpu_metrics(real_fixtures, tmp_path, [85, 90, 88, 92, 87]), rank=0)
    assert check_analysis_rule("source_checks", events) == []


def test_dcgm_and_nsys_give_the_same_verdict_for_the_same_activity(real_fixtures: Any, tmp_path: Path) -> None:
    """DCGM's SMACT (a ratio) of GPU 1 and nsys's SMs Active (a %) of the same values: one threshold, one mean."""
    dcgm = read_dcgm_dmon(DATA / "dcgmi_dmon_2gpu_h100.txt")
    smact = [e.value for e in dcgm if e.name == "dcgm.sm_active:gpu1"]
    assert all(e.attrs["metric"] == "gpu.sm_active" for e in dcgm if e.name.startswith("dcgm.sm_active"))
    by_dcgm = [f for f in check_analysis_rule("source_checks", dcgm) if "gpu1" in f["id"]]
    nsys = read_nsys_sqlite(export_with_gpu_metrics(real_fixtures, tmp_path, [round(v) for v in smact]), rank=None)
    by_nsys = check_analysis_rule("source_checks", nsys)
    assert len(by_dcgm) == len(by_nsys) == 1
    assert by_nsys[0]["evidence"]["mean"] == pytest.approx(by_dcgm[0]["evidence"]["mean"], abs=0.5)
    assert by_dcgm[0]["evidence"]["metric"] == by_nsys[0]["evidence"]["metric"] == "gpu.sm_active"


def _monitor(rank: int, values: list[float]) -> list[MetricEvent]:
    """Events as the memory monitor's provider emits them (``monitor/<metric>``, no step, a time each)."""
    return [MetricEvent(name="monitor/gpu_util_pct", value=v, kind="gauge", unit="%", source="memory_monitor",
                        rank=rank, ts=1e9 + i, attrs={"metric": "gpu.utilization"}) for i, v in enumerate(values)]


def test_nvml_utilisation_is_read_when_no_sm_activity_was_recorded() -> None:
    findings = check_analysis_rule("source_checks", _monitor(3, [20.0, 30.0, 10.0, 25.0, 15.0]))
    assert [f["id"] for f in findings] == ["source_checks:utilization_low:memory_monitor:GPU:rank3"]
    assert findings[0]["evidence"]["mean"] == pytest.approx(20.0)
    assert "any kernel, not SMs at work" in findings[0]["title"]
    sm = [MetricEvent(name="gpu.sm_active:GPU 0", value=30.0, kind="ratio", unit="%", source="nsys_sqlite", rank=3,
                      attrs={"count": 10, "min": 20.0, "max": 40.0})]
    both = check_analysis_rule("source_checks", _monitor(3, [20.0] * 5) + sm)
    assert [f["evidence"]["metric"] for f in both] == ["gpu.sm_active"]  # one fact, one finding
