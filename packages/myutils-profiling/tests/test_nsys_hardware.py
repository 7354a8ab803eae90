"""The hardware table: every row sourced; the figures agree with what real nsys exports report about their GPUs."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from my_utils.profiling.hardware import figures, gpu_model, link_bandwidth, memory_bandwidth, mfu, peak_flops
from my_utils.profiling.nsys.analyze import summarize


def test_every_row_cites_a_vendor_document() -> None:
    rows = figures()
    assert len(rows) > 40
    for f in rows:
        assert f.source and f.source_url.startswith("https://") and f.unit and f.value > 0
        assert f.kind in ("gpu", "link")
    # one figure per (model, quantity, dtype): a number is fixed in one place
    keys = [(f.model, f.quantity, f.dtype) for f in rows]
    assert len(keys) == len(set(keys))
    # datasheets quote tensor throughput with sparsity; the table keeps dense figures and says so
    assert all("sparsity" in f.per for f in rows if f.quantity == "peak_flops" and f.dtype in ("tf32", "bf16")
               and f.model.startswith(("A100", "H100", "H200")))


@pytest.mark.parametrize(("name", "model", "bf16"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", 989.5e12), ("NVIDIA H100 PCIe", "H100 PCIe 80GB", 756.5e12),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 312e12), ("A100-PCIE-40GB", "A100 PCIe 40GB", 312e12),
    ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", 71e12), ("Tesla V100-SXM2-32GB", "Tesla V100 SXM2", None),
])
def test_reported_names_find_their_model(name: str, model: str, bf16: float | None) -> None:
    assert gpu_model(name) == model
    peak = peak_flops(name, "bf16")
    assert (peak.value if peak else None) == bf16
    assert gpu_model("GeForce GTX 1060 with Max-Q Design") is None and gpu_model("NVIDIA GeForce RTX 3090 Ti") is None


@pytest.mark.parametrize("key", ["nsys/fuser__report1_2024.6.sqlite", "nsys/pipit__perlmutter-cloverleaf-cuda.sqlite",
                                 "nsys/extrap__ex-gpu.s10.sqlite", "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"])
def test_memory_bandwidth_agrees_with_what_exports_report(real_fixtures: Any, key: str) -> None:
    path = real_fixtures / key
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    if "TARGET_INFO_CUDA_GPU" in tables:  # 2021: kB/s
        name, bw = conn.execute("SELECT name, globalMemoryBandwidth * 1000.0 FROM TARGET_INFO_CUDA_GPU").fetchone()
    else:
        name, bw = conn.execute("SELECT name, memoryBandwidth FROM TARGET_INFO_GPU WHERE smCount > 0").fetchone()
    conn.close()
    f = memory_bandwidth(name)
    assert f is not None and f.value == pytest.approx(bw, rel=2e-3)  # datasheets round to 3-4 digits


def test_the_ring_gpus_agree_too(real_fixtures: Any) -> None:
    name = sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))[0]
    conn = sqlite3.connect((real_fixtures / name).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    gpu, bw = conn.execute("SELECT name, memoryBandwidth FROM TARGET_INFO_GPU LIMIT 1").fetchone()
    conn.close()
    f = memory_bandwidth(gpu)
    assert f is not None and f.model == "GeForce RTX 3090" and f.value == pytest.approx(bw, rel=2e-3)


def test_links_and_mfu() -> None:
    assert link_bandwidth("NVLink 4 (H100)") == 450e9  # NVIDIA's 900 GB/s counts both directions
    assert link_bandwidth("NVLink 4 (H100)", per_direction=False) == 900e9
    assert link_bandwidth("PCIe 4.0 x16") == 31.5e9 and link_bandwidth("nope") is None
    # 8 H100s doing 3.958e15 FLOP per 1 s step in bf16 run at half of their dense peak
    assert mfu(8 * 989.5e12 * 0.5, 1.0, "NVIDIA H100 80GB HBM3", "bf16", gpus=8) == pytest.approx(0.5)
    assert mfu(1e12, 1.0, "GeForce GTX 1060", "fp32") is None


def test_summary_facts_name_the_model_or_say_why_not(real_fixtures: Any) -> None:
    facts = {f.id: f for f in summarize(real_fixtures / "nsys/fuser__report1_2024.6.sqlite").facts()}
    assert facts["nsys.gpu_model"].value == "H100 SXM5 80GB"
    facts = {f.id: f for f in summarize(real_fixtures / "nsys/extrap__con_kernel.sqlite").facts()}
    assert not facts["nsys.gpu_model"].measured and "not in the hardware table" in str(facts["nsys.gpu_model"].not_measured)
