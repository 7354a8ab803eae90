"""The Nsight Compute findings at their thresholds, with the saving each states worked out by hand (issue 36).

``analysis.nsight.ncu_rules`` reads the ``ncu_kernels``/``ncu_rules`` tables and the ``ncu.*`` facts; the
tables and facts are built here the way ``analysis.nsight`` writes them, for the plausible bugs of
``.ci/mutants/ncu.toml`` the end-to-end tests let pass: a kernel at exactly 5 % of the profiled
time, a roofline at exactly 50 %, a rule at exactly 10 % estimated speedup, the roofline and
latency savings (the time beyond the roof, beyond the busiest unit), and a latency-bound kernel's
severity on its share of the profiled time (a percent, not a ratio).
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.profiling.analysis.nsight.ncu_rules import MAX_ROOF, MIN_KERNEL_SHARE, ncu_findings
from my_utils.profiling.model.report import EvidenceRow, Fact


def kernel(name: str, ms: float, launches: int, **row: Any) -> dict[str, Any]:
    """An ``ncu_kernels`` row: mean launch duration ``ms`` over ``launches`` launches."""
    return {"kernel": name, "duration_ms": ms, "launches": launches, "bound": row.pop("bound", "compute"),
            "sol_compute_pct": row.pop("compute", 30.0), "sol_memory_pct": row.pop("memory", 20.0),
            "arithmetic_intensity": 8.0, "attained_gflops": 1000.0, "achieved_occupancy_pct": None, **row}


def roof(name: str, pct: float) -> Fact:
    return Fact(f"ncu.roofline:{name}", "Attained share of the roofline", pct, "%", "ncu",
                "roof at 8.00 FLOP/byte on NVIDIA A100-SXM4-80GB", 10000.0, "GFLOP/s")


def bound(name: str, value: str) -> Fact:
    return Fact(f"ncu.bound:{name}", "What bounds the kernel", value, "", "ncu", detail="compute 30% / memory 45%")


def rule(kernel_name: str, launch_id: str, speedup: float, index: int = 0) -> Fact:
    return Fact(f"ncu.rule:SOLBottleneck:{kernel_name}:{launch_id}", "ncu rule SOLBottleneck", speedup, "%", "ncu",
                detail="the memory is busy", evidence=(EvidenceRow("ncu_rules", {
                    "index": index, "kernel": kernel_name, "launch_id": launch_id, "rule": "SOLBottleneck"},
                    {"speedup_pct": speedup}),))


def findings(tables: dict[str, Any], *facts: Fact) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in ncu_findings({f.id: f for f in facts}, tables)}


def test_a_roofline_gap_below_half_the_roof_and_the_time_beyond_the_roof() -> None:
    """gemm: 3 launches × 3 ms of 10 ms profiled. At 49.9 % of its roof a fix could save the 50.1 % of its 9 ms
    beyond what the roof allows (4.509 ms, 45.09 % of the profiled time); at 50 % exactly it is no gap."""
    assert MAX_ROOF == 50.0
    tables = {"ncu_kernels": [kernel("gemm", 3.0, 3), kernel("small", 1.0, 1)]}
    f = findings(tables, roof("gemm", 49.9))["ncu:roofline_gap:gemm"]
    assert f["impact"]["ms_per_step"] == pytest.approx(9.0 * 0.501)
    assert f["impact"]["share_of_step"] == pytest.approx(9.0 * 0.501 / 10.0)
    assert "ncu:roofline_gap:gemm" not in findings(tables, roof("gemm", 50.0))


def test_a_kernel_at_five_percent_of_the_profiled_time_gets_its_finding() -> None:
    """small: 1 launch of 5 ms of 100 ms profiled is exactly 5 %: it gets a finding; at 4.9 % it does not."""
    assert MIN_KERNEL_SHARE == 5.0
    at = {"ncu_kernels": [kernel("gemm", 95.0, 1), kernel("small", 5.0, 1)]}
    assert "ncu:roofline_gap:small" in findings(at, roof("gemm", 90.0), roof("small", 10.0))
    below = {"ncu_kernels": [kernel("gemm", 95.1, 1), kernel("small", 4.9, 1)]}
    assert "ncu:roofline_gap:small" not in findings(below, roof("gemm", 90.0), roof("small", 10.0))


def test_a_latency_bound_kernel_saves_the_time_beyond_its_busiest_unit() -> None:
    """compute 30 %, memory 45 % of peak: the busiest unit is memory, so at most 55 % of the kernel's time is idle
    units. gemm holds 90 % of the profiled time (a warning), small 10 % (under 20 %: info)."""
    tables = {"ncu_kernels": [kernel("gemm", 9.0, 1, bound="latency", compute=30.0, memory=45.0),
                              kernel("small", 1.0, 1, bound="latency", compute=30.0, memory=45.0)]}
    out = findings(tables, bound("gemm", "latency"), bound("small", "latency"))
    gemm, small = out["ncu:latency_bound:gemm"], out["ncu:latency_bound:small"]
    assert gemm["impact"]["ms_per_step"] == pytest.approx(9.0 * 0.55)
    assert gemm["impact"]["share_of_step"] == pytest.approx(9.0 * 0.55 / 10.0)
    assert (gemm["severity"], small["severity"]) == ("warning", "info")


def test_a_rule_at_ten_percent_estimated_speedup_is_a_warning() -> None:
    """Two launches of one rule: the larger speedup is quoted; 10 % exactly is a warning, 9.9 % info."""
    tables = {"ncu_kernels": [kernel("gemm", 2.0, 2)], "ncu_rules": [{"rule_type": "OPT", "description": "busy",
                                                                      "speedup_type": "global"}]}
    at = findings(tables, rule("gemm", "0", 10.0), rule("gemm", "1", 4.0))["ncu:rule:SOLBottleneck:gemm"]
    assert at["severity"] == "warning" and at["evidence"]["speedup_pct"] == 10.0
    assert at["impact"]["ms_per_step"] == pytest.approx(4.0 * 0.10)  # 10 % of the kernel's 2 × 2 ms
    below = findings(tables, rule("gemm", "0", 9.9))["ncu:rule:SOLBottleneck:gemm"]
    assert below["severity"] == "info"
