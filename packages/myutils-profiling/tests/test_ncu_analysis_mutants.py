"""The per-kernel Nsight Compute summary at its thresholds and on the launches its real fixtures lack (issue 36).

Each test is one plausible bug of ``.ci/mutants/ncu.toml`` the other tests let pass: the latency
threshold at exactly 60 % of peak, a tie between the compute and memory units, a launch without a
duration among timed ones, a roofline from launches some of which lack FLOP counters, mixed
precisions, the memory SOL (a maximum over units) and occupancy kept out of the unit breakdown,
DRAM writes in the bytes moved, and the percent unit of a rule's estimated speedup. Launches are
built here as the CSV reader yields them (durations in ms, percentages with unit ``%``), and every
expected value is worked out by hand in the test.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from my_utils.profiling.ncu.analysis import LATENCY_SOL_PCT, summarize_kernel
from my_utils.profiling.ncu.csv_read import read_ncu_csv
from my_utils.profiling.ncu.launches import NcuLaunch

DURATION = "gpu__time_duration.sum"
SOL_C = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
SOL_M = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
FFMA = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
HFMA = "sm__sass_thread_inst_executed_op_hfma_pred_on.sum"


def sol(i: int, compute: float, memory: float, duration_ms: float | None = 1.0, **more: tuple[float, str]) -> NcuLaunch:
    m: dict[str, tuple[float, str]] = {SOL_C: (compute, "%"), SOL_M: (memory, "%"), **more}
    if duration_ms is not None:
        m[DURATION] = (duration_ms, "ms")
    return NcuLaunch("report.csv", str(i), "k", m)


def test_latency_bound_only_below_sixty_percent_of_peak() -> None:
    """ncu's rule: a kernel is latency-bound when neither unit reaches 60 % of peak; at 60 % exactly it is not."""
    assert LATENCY_SOL_PCT == 60.0
    assert summarize_kernel("k", [sol(0, 60.0, 10.0)]).bound == "compute"
    assert summarize_kernel("k", [sol(0, 10.0, 60.0)]).bound == "memory"
    assert summarize_kernel("k", [sol(0, 59.9, 10.0)]).bound == "latency"


def test_a_tie_between_the_units_is_compute_like_the_limiting_unit() -> None:
    """Equal compute and memory SOL: the bound and the limiting unit (``sm`` on a tie) agree."""
    k = summarize_kernel("k", [sol(0, 70.0, 70.0)])
    assert (k.bound, k.limiting_unit) == ("compute", "sm")


def test_a_launch_without_a_duration_makes_the_mean_unweighted() -> None:
    """Weights only when every launch has one: (80 + 20) / 2, not the timed launch's 80 alone."""
    k = summarize_kernel("k", [sol(0, 80.0, 10.0, duration_ms=2.0), sol(1, 20.0, 10.0, duration_ms=None)])
    assert k.sol_compute_pct == pytest.approx(50.0)
    timed = summarize_kernel("k", [sol(0, 80.0, 10.0, duration_ms=3.0), sol(1, 20.0, 10.0, duration_ms=1.0)])
    assert timed.sol_compute_pct == pytest.approx((80 * 3 + 20 * 1) / 4)


def _counted(i: int, ffma: float | None, hfma: float = 0.0, read_mb: float = 1.0, write_mb: float = 0.0,
             duration_ms: float = 1.0) -> NcuLaunch:
    m: dict[str, tuple[float, str]] = {DURATION: (duration_ms, "ms"), "dram__bytes_read.sum": (read_mb, "Mbyte"),
                                       "dram__bytes_write.sum": (write_mb, "Mbyte"), SOL_C: (70.0, "%"),
                                       SOL_M: (20.0, "%")}
    if ffma is not None:
        m[FFMA] = (ffma, "inst")
    if hfma:
        m[HFMA] = (hfma, "inst")
    return NcuLaunch("report.csv", str(i), "k", m)


def test_no_roofline_from_a_part_of_the_launches() -> None:
    """One launch without FLOP counters: the kernel's FLOPs are unknown, so no intensity (not the others' alone)."""
    k = summarize_kernel("k", [_counted(0, 1e6), _counted(1, None)])
    assert k.arithmetic_intensity is None and k.attained_gflops is None
    both = summarize_kernel("k", [_counted(0, 1e6), _counted(1, 3e6)])
    assert both.arithmetic_intensity == pytest.approx(2 * (1e6 + 3e6) / 2e6)  # FMA = 2 FLOPs; 1 MB read each


def test_the_precision_is_the_one_most_launches_use() -> None:
    """Two fp32 launches and one fp16 launch: the roof is the fp32 one."""
    k = summarize_kernel("k", [_counted(0, 1e6), _counted(1, 1e6), _counted(2, 0.0, hfma=1e6)])
    assert k.precision == "fp32"


def test_dram_writes_count_in_the_bytes_moved() -> None:
    """FLOP per DRAM byte over reads *and* writes: 2e6 FLOPs over 1 MB read + 3 MB written is 0.5 FLOP/byte."""
    k = summarize_kernel("k", [_counted(0, 1e6, read_mb=1.0, write_mb=3.0)])
    assert k.arithmetic_intensity == pytest.approx(2e6 / 4e6)


def test_the_unit_breakdown_leaves_out_the_memory_sol_and_occupancy() -> None:
    """The memory SOL is the maximum over memory units and occupancy is no unit: the busiest *unit* here is DRAM."""
    x = sol(0, 40.0, 90.0, **{DRAM_PCT: (50.0, "%"), OCC: (95.0, "%")})
    assert x.breakdown() == {"sm": 40.0, "dram": 50.0}
    assert summarize_kernel("k", [x]).limiting_unit == "dram"


def test_a_rule_speedup_is_a_percent(tmp_path: Path) -> None:
    """The ``Estimated Speedup`` of a rule row is read with its unit, %, like the metrics' percentages."""
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
            "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]
    ident = ["0", "42", "python", "host", "gemm", "1", "7", "(128, 1, 1)", "(64, 1, 1)", "0", "9.0"]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerows([head, [*ident, "GPU Speed Of Light", "Duration", "usecond", "10", "", "", "", "", ""],
                 [*ident, "GPU Speed Of Light", "", "", "", "SOLBottleneck", "OPT", "busy", "global", "12.5"]])
    path = tmp_path / "r.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    rule = next(e for e in read_ncu_csv(path) if e.name == "ncu.rule:SOLBottleneck")
    assert (rule.value, rule.unit) == (12.5, "%")
