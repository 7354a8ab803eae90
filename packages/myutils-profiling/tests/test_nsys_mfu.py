"""MFU of nsys exports: recomputed on every real export from its raw NVTX rows and the hardware.csv row (own SQL,
own CSV reading), "not measured" with the reasons the raw tables give, and bad options refused in one line."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest
from typer.testing import CliRunner

from my_utils.core.errors import UsageError
from my_utils.profiling.analysis.nsight.analyze import nsys_tables
from my_utils.profiling.analysis.nsight.facts import run_facts
from my_utils.profiling.cli import app
from my_utils.profiling.nsys.mfu import ModelFlops
from my_utils.profiling.nsys.run import analyze_run

HARDWARE_CSV = Path(__file__).resolve().parents[1] / "src/my_utils/profiling/hardware/hardware.csv"
SAXPY = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
FLOPS = 1e6  # small enough to stay under every peak on these short ranges
#: The range taken as one iteration, the dtype, and the --gpu a user would give, per real export. The exports hold
#: no training-step range, so a repeated range of each stands in for it: the arithmetic is what is checked.
SETUP: dict[str, tuple[str | None, str, str | None]] = {
    SAXPY: ("saxpy", "fp32", None),
    "nsys/fuser__report1_2024.6.sqlite": ("ExpressionEvaluator::evaluate", "bf16", None),
    "nsys/nsysai__mfu_2gpu_before.sqlite": ("aten::addmm*", "bf16", "NVIDIA H100 80GB HBM3"),
    "nsys/nsysai__mfu_2gpu_after.sqlite": ("aten::addmm*", "bf16", "NVIDIA H100 80GB HBM3"),
}
DEFAULT_RANGES = ("train_step", "ProfilerStep#*", "step", "iteration", "iter")


def nvtx_iterations(path: Path, pattern: str) -> dict[int, tuple[int, int]]:
    """pid -> (count, summed duration) of the NVTX ranges matching ``pattern``, read raw."""
    rows = H.raw(path, "SELECT (n.globalTid >> 24) << 24, COUNT(*), SUM(n.end - n.start) FROM NVTX_EVENTS n "
                       "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60, 70, 71) "
                       "AND n.end >= n.start AND COALESCE(n.text, s.value) GLOB ? GROUP BY 1", (pattern,))
    return {pid: (count, total) for pid, count, total in rows}


def gpu_names(path: Path) -> set[str]:
    """The CUDA GPUs an export names, read raw (none when it has no GPU table)."""
    have = H.tables(path)
    if "TARGET_INFO_GPU" in have and "smCount" in {r[1] for r in H.raw(path, "PRAGMA table_info(TARGET_INFO_GPU)")}:
        return {r[0] for r in H.raw(path, "SELECT name FROM TARGET_INFO_GPU WHERE smCount > 0")}
    if "TARGET_INFO_CUDA_GPU" in have:
        return {r[0] for r in H.raw(path, "SELECT name FROM TARGET_INFO_CUDA_GPU")}
    return set()


def peak_row(gpu: str, dtype: str) -> tuple[int, float] | None:
    """(line, FLOP/s) of the dense peak of ``gpu`` in ``dtype`` in hardware.csv, read with the csv module."""
    with HARDWARE_CSV.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    model = next((r["model"] for r in rows if r["kind"] == "gpu" and r["match"]
                  and re.search(r["match"], gpu, re.IGNORECASE)), None)
    for line, r in enumerate(rows, start=2):
        if r["model"] == model and r["quantity"] == "peak_flops" and r["dtype"] == dtype:
            return line, float(r["value"])
    return None


@pytest.mark.parametrize("key", H.EXPORTS)
def test_mfu_on_every_real_export(real_fixtures: Any, key: str) -> None:
    path = H.export_path(real_fixtures, key)
    pattern, dtype, gpu = SETUP.get(key, (None, "bf16", None))
    run = analyze_run([path], iteration_range=pattern, model=ModelFlops.parse(flops=FLOPS, dtype=dtype, gpu=gpu))
    rows = run.exports[0].table("nsys_mfu").records()
    run_mfu = next(f for f in run_facts(nsys_tables(run)) if f.id == "mfu")
    names = gpu_names(path) or ({gpu} if gpu else set())
    if pattern is None:
        # no export holds a step range: the default names find none, and MFU says so (with every other reason)
        assert not any(nvtx_iterations(path, p) for p in DEFAULT_RANGES) if "NVTX_EVENTS" in H.tables(path) else True
        (row,) = rows
        assert row["mfu_pct"] is None and "no iteration range found" in row["not_measured"]
        if len(names) == 1 and peak_row(next(iter(names)), dtype) is None:
            assert "hardware table" in row["not_measured"]
        assert not run_mfu.measured and "no iteration range found" in str(run_mfu.value)
        return
    expected = nvtx_iterations(path, pattern)
    assert {r["pid"]: (r["iterations"], r["time_ns"]) for r in rows} == expected
    (name,) = names
    line, peak = peak_row(name, dtype) or (0, 0.0)
    for r in rows:
        count, total = expected[r["pid"]]
        mfu = 100.0 * FLOPS / (total / count * 1e-9) / peak
        assert r["mfu_pct"] == pytest.approx(mfu) and r["gpu"] == name and not r["not_measured"]
        assert r["peak_row"].startswith(f"hardware.csv line {line}: ") and r["peak_tflops"] == pytest.approx(peak / 1e12)
        assert ("--gpu" in r["gpu_source"]) == (gpu is not None)
    weighted = sum(100.0 * FLOPS / (t / c * 1e-9) / peak * t for c, t in expected.values()) / sum(
        t for _, t in expected.values())
    assert run_mfu.number == pytest.approx(weighted) and f"hardware.csv line {line}" in run_mfu.denominator
    assert run_mfu.denominator_value == pytest.approx(sum(t for _, t in expected.values()) / 1e6)
    facts = [f for f in run.facts() if f.id.startswith("nsys.mfu")]
    assert len(facts) == len(rows) and all(f.measured and "hardware.csv line" in f.denominator for f in facts)


def test_without_an_input_mfu_is_not_measured_with_every_reason(real_fixtures: Any) -> None:
    path = real_fixtures / SAXPY
    (row,) = analyze_run([path], iteration_range="saxpy").exports[0].table("nsys_mfu").records()
    assert row["mfu_pct"] is None and "--flops-per-iteration" in row["not_measured"] and "--dtype" in row["not_measured"]
    s = analyze_run([path], iteration_range="saxpy", model=ModelFlops.parse(flops="1e6")).exports[0]
    assert "--dtype" in s.not_measured["mfu"] and "--flops-per-iteration" not in s.not_measured["mfu"]
    # a sliced export without its GPU table: the GPU must be named
    nsysai = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    assert not gpu_names(nsysai)
    s = analyze_run([nsysai], iteration_range="aten::addmm*", model=ModelFlops.parse(flops=1e6, dtype="bf16")).exports[0]
    assert "names no GPU" in s.not_measured["mfu"] and "--gpu" in s.not_measured["mfu"]


def test_six_n_t_and_a_figure_above_the_peak(real_fixtures: Any) -> None:
    path = real_fixtures / SAXPY
    (nt,) = analyze_run([path], iteration_range="saxpy", model=ModelFlops.parse(
        params="1000", tokens="200", dtype="fp32")).exports[0].table("nsys_mfu").records()
    (f,) = analyze_run([path], iteration_range="saxpy", model=ModelFlops.parse(
        flops=6 * 1000 * 200, dtype="fp32")).exports[0].table("nsys_mfu").records()
    assert nt["mfu_pct"] == pytest.approx(f["mfu_pct"]) and "6·N·T" in nt["flops_source"]
    count, total = nvtx_iterations(path, "saxpy")[f["pid"]]
    _line, peak = peak_row("NVIDIA A100-SXM4-40GB", "fp32") or (0, 1.0)
    too_many = 2 * peak * total / count * 1e-9  # twice what the peak allows in the mean iteration
    (row,) = analyze_run([path], iteration_range="saxpy", model=ModelFlops.parse(
        flops=too_many, dtype="fp32")).exports[0].table("nsys_mfu").records()
    assert row["mfu_pct"] is None and "above the fp32 peak" in row["not_measured"]


@pytest.mark.parametrize("args", [
    ["--flops-per-iteration", "nan"], ["--flops-per-iteration", "-1e15"], ["--flops-per-iteration", "0"],
    ["--flops-per-iteration", "inf"], ["--flops-per-iteration", "lots"], ["--dtype", "bfloat16"],
    ["--model-params", "7e9"], ["--flops-per-iteration", "1e15", "--model-params", "1", "--tokens-per-iteration", "2"],
    ["--model-params", "7e9", "--tokens-per-iteration", "-4096"],
])
def test_bad_mfu_options_exit_2_in_one_line(real_fixtures: Any, tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "s.json"
    res = CliRunner().invoke(app, ["nsys", "summary", str(real_fixtures / SAXPY), "--json", str(out), *args])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert not out.exists()
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(real_fixtures / SAXPY), "--output-dir",
                                   str(tmp_path / "rep"), *args])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and not (tmp_path / "rep").exists()
    with pytest.raises(UsageError):
        ModelFlops.parse(flops=float("nan"))


def test_summary_and_report_show_mfu_with_its_denominator(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / SAXPY
    args = ["--iteration-range", "saxpy", "--flops-per-iteration", "1e6", "--dtype", "fp32"]
    res = CliRunner().invoke(app, ["nsys", "summary", str(path), *args, "--json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    count, total = next(iter(nvtx_iterations(path, "saxpy").values()))
    line, peak = peak_row("NVIDIA A100-SXM4-40GB", "fp32") or (0, 1.0)
    mfu = 100.0 * 1e6 / (total / count * 1e-9) / peak
    assert f"MFU {mfu:.1f}%" in res.output and f"hardware.csv line {line}" in res.output
    data = json.loads((tmp_path / "s.json").read_text())
    (row,) = data["exports"][0]["tables"]["nsys_mfu"]
    assert row["mfu_pct"] == pytest.approx(mfu)
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(path), *args, "--output-dir", str(tmp_path / "rep"),
                                   "--formats", "json,html", "-q"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "rep/analysis_report.json").read_text())
    fact = next(f for f in report["facts"] if f["id"] == "mfu")
    assert fact["value"] == pytest.approx(mfu) and f"hardware.csv line {line}" in fact["denominator"]
    assert fact["source"] == "nsys NVTX iterations and the hardware table"
    html = (tmp_path / "rep/analysis_report.html").read_text()
    assert f"hardware.csv line {line}: A100 SXM4 40GB, peak_flops, fp32" in html and "nsys_mfu" in html
