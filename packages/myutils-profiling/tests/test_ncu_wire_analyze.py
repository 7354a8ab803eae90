"""Nsight Compute CSVs in the one analysis: ``ncu_kernels``/``ncu_rules`` tables, facts and findings.

The real CSVs (ncu 2020.2, no rule rows, no FLOP counters) are recomputed with the csv module;
the 2025 details page with rule rows and the ``--page raw`` layout with FLOP counters are built
from the formats MANIFEST.md documents (no real file of those layouts is public). Before this
wiring, an ncu-only run got no finding and no table beyond the events' totals.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.analysis import AnalysisReport
from my_utils.profiling.cli import app
from my_utils.profiling.reports.headline import find_row

REAL = "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
SOL_C = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
SOL_M = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
HEADER_2025 = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
               "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]


def run(args: list[str], out: Path) -> AnalysisReport:
    res = CliRunner().invoke(app, ["analyze", *args, "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return AnalysisReport.load(out)


def raw_kernels(path: Path) -> dict[str, dict[str, Any]]:
    """Per kernel: launches, SOL compute/memory (means weighted by launch duration) and mean duration (ms), read with
    the csv module."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    per: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in csv.DictReader(lines[start:]):
        per[r["Kernel Name"].strip()][r["ID"]][r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))

    def weighted(m: dict[str, dict[str, float]], metric: str) -> float:
        dur = [x["gpu__time_duration.sum"] for x in m.values()]
        return sum(x[metric] * d for x, d in zip(m.values(), dur, strict=True)) / sum(dur)

    return {k: {"launches": len(m), "compute": weighted(m, SOL_C), "memory": weighted(m, SOL_M),
                "ms": statistics.fmean(x["gpu__time_duration.sum"] for x in m.values()) / 1e6} for k, m in per.items()}


def test_ncu_alone_gives_kernel_findings_and_says_what_it_cannot_measure(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / REAL
    report = run(["--ncu", str(path)], tmp_path)
    raw = raw_kernels(path)
    rows = {r["kernel"]: r for r in report.tables["ncu_kernels"]}
    assert rows.keys() == raw.keys()
    total = sum(k["ms"] * k["launches"] for k in raw.values())
    latency = [f for f in report.findings if f.id.startswith("ncu:latency_bound:")]
    assert latency and len(latency) <= 5
    for f in latency:
        (kernel,) = f.evidence["names"]
        k = raw[kernel]
        assert max(k["compute"], k["memory"]) < 60  # ncu's threshold: latency-bound below 60% of both
        assert k["ms"] * k["launches"] >= 0.05 * total  # only kernels worth 5% of the profiled time get one
        assert f"compute {k['compute']:.0f}%, memory {k['memory']:.0f}%" in f.title
        for fid in f.facts:
            for ev in report.fact(fid).evidence:
                assert find_row(report, ev) is not None
    # no GPU timeline: the headline says so instead of a number, and no score pretends otherwise
    busy = report.fact("gpu.busy")
    assert busy is not None and not busy.measured and "Nsight Compute replays kernels" in str(busy.value)
    assert report.headline["verdict"]["bound"] == "not measured"
    assert "overall" not in report.scores and report.dimensions["performance"]["score"] is None
    roof = next(f for f in report.facts if f.id.startswith("ncu.roofline:"))
    assert not roof.measured  # the 2020 export has no FLOP counters


def _write_2025(path: Path) -> None:
    """A 2025 details page: two kernels, SOL and occupancy metrics, and rule rows with estimated speedups."""
    rows = []

    def launch(i: int, kernel: str, dur_us: str, sm: str, mem: str, speedup: str) -> None:
        base = [str(i), "4242", "python3", "node", kernel, "1", "7", "(256, 1, 1)", "(1024, 1, 1)", "0", "9.0"]
        for section, metric, unit, value in [
                ("GPU Speed Of Light Throughput", "Duration", "usecond", dur_us),
                ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", sm),
                ("GPU Speed Of Light Throughput", "Memory Throughput", "%", mem),
                ("Occupancy", "Theoretical Occupancy", "%", "50"),
                ("Occupancy", "Achieved Occupancy", "%", "31.5")]:
            rows.append([*base, section, metric, unit, value, "", "", "", "", ""])
        rows.append([*base, "Occupancy", "", "", "", "AchievedOccupancy", "OPT",
                     "The difference between calculated theoretical and measured achieved occupancy can be the "
                     "result of warp scheduling overheads or workload imbalances.", "local", speedup])

    launch(0, "gemm_bf16_kernel", "1,250.5", "71.2", "40.1", "18.5")
    launch(1, "gemm_bf16_kernel", "1,249.5", "72.8", "41.9", "22.75")
    launch(2, "layernorm_kernel", "80.0", "12.0", "30.0", "4.0")
    buf = io.StringIO()
    buf.write("==PROF== Connected to process 4242\n")
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(HEADER_2025)
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def test_rule_rows_become_findings_with_their_speedup(tmp_path: Path) -> None:
    path = tmp_path / "report_2025.csv"
    _write_2025(path)
    report = run(["--ncu", str(path)], tmp_path / "out")
    assert len(report.tables["ncu_rules"]) == 3
    gemm = next(f for f in report.findings if f.id == "ncu:rule:AchievedOccupancy:gemm_bf16_kernel")
    # severity follows the saving (issue 33): 22% of the profiled kernels' time is critical
    assert "up to 22.8% estimated speedup (2 launches)" in gemm.title and gemm.severity == "critical"
    assert sorted(gemm.facts) == ["ncu.rule:AchievedOccupancy:gemm_bf16_kernel:0",
                                  "ncu.rule:AchievedOccupancy:gemm_bf16_kernel:1"]
    # what it could save: the estimated speedup of the kernel's profiled time, of all profiled kernels' time
    gemm_ms, ln_ms = 1.25 * 2, 0.08
    assert gemm.impact.ms_per_step == pytest.approx(gemm_ms * 0.2275)
    assert gemm.impact.share_of_step == pytest.approx(gemm_ms * 0.2275 / (gemm_ms + ln_ms))
    ln = next(f for f in report.findings if f.id == "ncu:rule:AchievedOccupancy:layernorm_kernel")
    assert ln.severity == "info"
    for ev in (b for f in (gemm, ln) for a in f.advice for b in a.because):
        assert find_row(report, ev) is not None  # each rule row is a row of ncu_rules
    assert report.findings.index(gemm) < report.findings.index(ln)  # ranked by what they could save


def _write_raw(path: Path) -> None:
    """``--page raw`` with FLOP and DRAM counters: an fp32 kernel at 8.2 FLOP/byte, 8.2 TFLOP/s."""
    cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC", "gpu__time_duration.sum", "dram__bytes.sum",
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "sm__sass_thread_inst_executed_op_fmul_pred_on.sum", SOL_C, SOL_M]
    units = [""] * 11 + ["nsecond", "Mbyte", "inst", "inst", "inst", "%", "%"]
    data = [[str(i), "1", "a.out", "h", "sgemm", "1", "7", "(128,1,1)", "(64,1,1)", "0", "8.0", "1,000,000", "1,000",
             "4000000000", "100000000", "100000000", "85.0", "30.0"] for i in range(2)]
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([cols, units, *data])
    path.write_text(buf.getvalue(), encoding="utf-8")


def test_roofline_gap_against_the_gpu_named(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    _write_raw(path)
    report = run(["--ncu", str(path), "--gpu", "NVIDIA A100-SXM4-80GB"], tmp_path / "out")
    flops, dram, secs = 2 * (2 * 4e9 + 1e8 + 1e8), 2 * 1000e6, 2e-3
    roof = min(19.5e12, flops / dram * 2039e9)  # A100 SXM4 80GB datasheet: fp32 peak, HBM2e bandwidth
    (f,) = [f for f in report.findings if f.id == "ncu:roofline_gap:sgemm"]
    attained = 100 * flops / secs / roof
    assert attained < 50 and f"attains {attained:.0f}% of its roofline" in f.title
    assert report.fact("ncu.roofline:sgemm").value == pytest.approx(attained)
    assert report.summary["nsight"] \
        == "Nsight Compute analyses of 1 export(s), 1 kernel(s) (roofline against NVIDIA A100-SXM4-80GB)"
    # without a GPU, the roofline is "not measured" and says how to get it
    plain = run(["--ncu", str(path)], tmp_path / "plain")
    assert not any(f.id.startswith("ncu:roofline_gap") for f in plain.findings)
    assert "--gpu" in str(plain.fact("ncu.roofline:sgemm").value)


def test_each_csv_is_parsed_once(real_fixtures: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling.ncu import csv_read

    calls: list[str] = []
    real = csv_read.read_ncu_csv

    def counting(path: Path, rank: int | None = None) -> Any:
        calls.append(Path(path).name)
        return real(path, rank)

    monkeypatch.setattr(csv_read, "read_ncu_csv", counting)
    path = real_fixtures / REAL
    report = run(["--ncu", str(path)], tmp_path)
    assert calls == [path.name] and report.summary["sources"] == ["ncu_csv"]
