"""Nsight Compute analysis on the real CSVs (recomputed with the csv module) and on the documented 2025 and raw layouts."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.errors import UnsupportedInputError
from my_utils.profiling.cli import app
from my_utils.profiling.ncu.analysis import LATENCY_SOL_PCT, analyze_files
from my_utils.profiling.ncu.launches import read_launches

REAL = ["ncu/ai4mat__metrics_713_paddle_.csv", "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt",
        "ncu/ai4mat__gcn_paddle_ncu_metrics_show.csv.txt"]
SOL_C = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
SOL_M = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
# ncu 2025 details page: the 20 columns MANIFEST.md documents (no real file of this layout is public)
HEADER_2025 = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
               "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]


def _csv_rows(path: Path) -> list[dict[str, str]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    return list(csv.DictReader(lines[start:]))


def _num(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize("name", REAL)
def test_real_exports_per_kernel(real_fixtures: Any, name: str) -> None:
    path = real_fixtures / name
    rows = _csv_rows(path)
    per: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        per[r["Kernel Name"].strip()][r["ID"]][r["Metric Name"]] = _num(r["Metric Value"])
    a = analyze_files([path])
    assert {k.kernel for k in a.kernels} == set(per)

    def weighted(launches: dict[str, dict[str, float]], metric: str) -> float:
        # percentages pool launches weighted by their duration: a long launch counts for what it costs
        pairs = [(m[metric], m["gpu__time_duration.sum"]) for m in launches.values()]
        return sum(v * d for v, d in pairs) / sum(d for _, d in pairs)

    for k in a.kernels:
        m = per[k.kernel]
        assert k.launches == len(m)
        assert k.sol_compute_pct == pytest.approx(weighted(m, SOL_C))
        assert k.sol_memory_pct == pytest.approx(weighted(m, SOL_M))
        assert k.achieved_occupancy_pct == pytest.approx(weighted(m, OCC))
        assert k.duration_ms == pytest.approx(statistics.fmean(x["gpu__time_duration.sum"] for x in m.values()) / 1e6)
        c, mem = k.sol_compute_pct, k.sol_memory_pct
        want = "latency" if max(c, mem) < LATENCY_SOL_PCT else "compute" if c >= mem else "memory"
        assert k.bound == want
        assert k.theoretical_occupancy_pct is None and k.roof_pct is None  # not collected in these runs
    totals = [(k.duration_ms or 0) * k.launches for k in a.kernels]
    assert totals == sorted(totals, reverse=True)
    facts = {f.id.split(":")[0] for f in a.facts()}
    assert facts == {"ncu.bound", "ncu.occupancy", "ncu.roofline"}
    roof = [f for f in a.facts() if f.id.startswith("ncu.roofline")]
    assert all(not f.measured and "FLOP counters" in (f.not_measured or "") for f in roof)


def _write_2025(path: Path) -> None:
    """A details-page CSV in ncu 2025's layout: SOL and occupancy sections, and rule rows with speedups."""
    rows = []

    def launch(i: int, kernel: str, dur_us: str, sm: str, mem: str, l2: str, theo: str, ach: str) -> None:
        base = [str(i), "4242", "python3", "node", kernel, "1", "7", "(256, 1, 1)", "(1024, 1, 1)", "0", "9.0"]
        for section, metric, unit, value in [
                ("GPU Speed Of Light Throughput", "Duration", "usecond", dur_us),
                ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", sm),
                ("GPU Speed Of Light Throughput", "Memory Throughput", "%", mem),
                ("GPU Speed Of Light Throughput", "L2 Cache Throughput", "%", l2),
                ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", mem),
                ("Occupancy", "Theoretical Occupancy", "%", theo),
                ("Occupancy", "Achieved Occupancy", "%", ach)]:
            rows.append([*base, section, metric, unit, value, "", "", "", "", ""])
        rows.append([*base, "GPU Speed Of Light Throughput", "", "", "", "SOLBottleneck", "OPT", "Memory is more heavily utilized than Compute: look at the memory workload analysis.", "global", "31.5"])
        rows.append([*base, "Occupancy", "", "", "", "AchievedOccupancy", "OPT", "The difference between calculated theoretical and measured achieved occupancy...", "local", "12.25"])

    launch(0, "gemm_bf16_kernel", "1,250.5", "71.2", "40.1", "38.0", "50", "46.3")
    launch(1, "gemm_bf16_kernel", "1,249.5", "72.8", "41.9", "39.0", "50", "47.7")
    launch(2, "layernorm_kernel", "80.0", "12.0", "88.0", "60.0", "100", "91.0")
    buf = io.StringIO()
    buf.write("==PROF== Connected to process 4242\n")
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(HEADER_2025)
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def test_the_2025_layout_with_rules(tmp_path: Path) -> None:
    path = tmp_path / "report_2025.csv"
    _write_2025(path)
    a = analyze_files([path])
    gemm, ln = a.kernels
    assert (gemm.kernel, gemm.launches, ln.kernel) == ("gemm_bf16_kernel", 2, "layernorm_kernel")
    # duration-weighted: (71.2 * 1250.5 + 72.8 * 1249.5) / 2500
    assert gemm.duration_ms == pytest.approx(1.25) and gemm.sol_compute_pct == pytest.approx(71.99968)
    assert gemm.bound == "compute" and gemm.limiting_unit == "sm"
    assert (gemm.achieved_occupancy_pct, gemm.theoretical_occupancy_pct) == (pytest.approx(46.99972), 50.0)
    assert ln.bound == "memory" and ln.limiting_unit == "dram"
    assert len(a.rules) == 6 and {r.rule for r in a.rules} == {"SOLBottleneck", "AchievedOccupancy"}
    sol = [r for r in a.rules if r.rule == "SOLBottleneck" and r.kernel == "layernorm_kernel"]
    assert sol[0].speedup_pct == 31.5 and sol[0].speedup_type == "global" and sol[0].rule_type == "OPT"
    facts = {f.id: f for f in a.facts()}
    occ = facts["ncu.occupancy:gemm_bf16_kernel"]
    assert occ.value == pytest.approx(46.99972) and occ.denominator_value == 50.0
    assert facts["ncu.rule:AchievedOccupancy:layernorm_kernel:2"].value == 12.25


def _write_raw(path: Path) -> None:
    """``--page raw``: one column per metric, a units row, one row per launch (FLOP and DRAM counters)."""
    cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC", "gpu__time_duration.sum", "dram__bytes.sum",
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "sm__sass_thread_inst_executed_op_fmul_pred_on.sum", SOL_C, SOL_M]
    units = [""] * 11 + ["nsecond", "Mbyte", "inst", "inst", "inst", "%", "%"]
    data = [["0", "1", "a.out", "h", "sgemm", "1", "7", "(128,1,1)", "(64,1,1)", "0", "8.0",
             "1,000,000", "1,000", "4000000000", "100000000", "100000000", "85.0", "30.0"],
            ["1", "1", "a.out", "h", "sgemm", "1", "7", "(128,1,1)", "(64,1,1)", "0", "8.0",
             "1,000,000", "1,000", "4000000000", "100000000", "100000000", "86.0", "31.0"]]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerows([cols, units, *data])
    path.write_text(buf.getvalue(), encoding="utf-8")


def test_roofline_position_from_the_raw_page(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    _write_raw(path)
    (k,) = analyze_files([path], gpu="NVIDIA A100-SXM4-80GB").kernels
    flops = 2 * (2 * 4e9 + 1e8 + 1e8)  # two launches; an FMA is two FLOPs
    dram = 2 * 1000e6
    secs = 2 * 1e-3
    assert k.precision == "fp32" and k.arithmetic_intensity == pytest.approx(flops / dram)
    assert k.attained_gflops == pytest.approx(flops / secs / 1e9)
    roof = min(19.5e12, flops / dram * 2039e9) / 1e9  # A100 SXM4 80GB: fp32 peak and HBM bandwidth (datasheet)
    assert k.roof_gflops == pytest.approx(roof) and k.roof_pct == pytest.approx(100 * flops / secs / 1e9 / roof)
    no_gpu = analyze_files([path]).kernels[0]
    assert no_gpu.roof_pct is None and no_gpu.attained_gflops == pytest.approx(k.attained_gflops)
    fact = next(f for f in analyze_files([path]).facts() if f.id.startswith("ncu.roofline"))
    assert not fact.measured and "--gpu" in (fact.not_measured or "")


def test_ncu_rep_is_refused_in_one_line_without_ncu_report(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / "ncu/nsight-training__CuVectorAddDrv.ncu-rep"
    try:
        import ncu_report  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - only where Nsight Compute's Python module is installed
        assert read_launches(path)
        return
    with pytest.raises(UnsupportedInputError) as err:
        read_launches(path)
    text = str(err.value)
    assert "\n" not in text and "ncu_report" in text and "ncu --import" in text
    out = tmp_path / "k.json"
    res = CliRunner().invoke(app, ["ncu", "summary", str(path), "--json", str(out)])
    assert res.exit_code == 2 and "ncu_report" in res.output and not out.exists()


def test_cli_summary_json(tmp_path: Path) -> None:
    path = tmp_path / "report_2025.csv"
    _write_2025(path)
    out = tmp_path / "ncu.json"
    res = CliRunner().invoke(app, ["ncu", "summary", str(path), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "gemm_bf16_kernel" in res.output and "SOLBottleneck" in res.output
    data = json.loads(out.read_text())
    assert [k["kernel"] for k in data["kernels"]] == ["gemm_bf16_kernel", "layernorm_kernel"]
    assert len(data["rules"]) == 6 and any(f["id"].startswith("ncu.rule:") for f in data["facts"])
    res = CliRunner().invoke(app, ["ncu", "summary", str(real_path := tmp_path / "notes.csv")])
    assert res.exit_code == 2 and str(real_path) in res.output
