"""The nsys_sqlite provider reads through the nsys schema adapter: each CUDA call once, every exporter era.

Expected figures are plain SQL on the raw exports (no package code). Regression: 2021.x and
2022.2 exports add a *backtrace* copy of every CUDA API call (``eventClass`` 67, the same
correlation id, the call's own name without the ``_v7000`` suffix); the provider's own reader
counted those calls twice (36 runtime calls on ex-gpu.s10 for 18 made, 95 on the saxpy rank
for 57, and each call's time twice).
"""

from __future__ import annotations

from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.nsys.provider import NsysSqliteMetricsProvider

BACKTRACE_EXPORTS = {"nsys/extrap__ex-gpu.s10.sqlite": (18, 36), "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite": (57, 95)}


@pytest.mark.parametrize("key", sorted(BACKTRACE_EXPORTS))
def test_each_cuda_call_counts_once(real_fixtures: Any, key: str) -> None:
    path = H.export_path(real_fixtures, key)
    calls, rows = BACKTRACE_EXPORTS[key]
    assert H.raw(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0] == rows
    want = {name: (n, ns) for name, n, ns in H.raw(
        path, "SELECT s.value, COUNT(*), SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
              "JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass <> 67 GROUP BY s.value")}
    events = [e for e in NsysSqliteMetricsProvider.from_input(path).collect() if e.name.startswith("runtime:")]
    got = {e.name.removeprefix("runtime:"): (e.attrs["count"], e.value) for e in events}
    assert sum(n for n, _ in got.values()) == calls == sum(n for n, _ in want.values())
    assert got.keys() == want.keys()  # no "runtime:cudaLaunchKernel" beside "runtime:cudaLaunchKernel_v7000"
    for name, (n, ns) in want.items():
        assert got[name][0] == n and got[name][1] == pytest.approx(ns / 1e6), name


@pytest.mark.parametrize("key", H.EXPORTS)
def test_totals_match_plain_sql_on_every_export(real_fixtures: Any, key: str) -> None:
    path = H.export_path(real_fixtures, key)
    tables = H.tables(path)
    events = NsysSqliteMetricsProvider.from_input(path).collect()
    by = {e.name: e for e in events}
    assert {e.source for e in events} == {"nsys_sqlite"} and {e.attrs["file"] for e in events} == {path.name}
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        (n, ns), = H.raw(path, "SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
        assert by["gpu.kernel_count"].value == n and by["gpu.kernel_time"].value == pytest.approx(ns / 1e6)
        assert sum(e.attrs["count"] for e in events if e.name.startswith("kernel:")) == n
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        (n, nbytes), = H.raw(path, "SELECT COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        copies = [e for e in events if e.name.startswith("memcpy:")]
        assert sum(e.attrs["count"] for e in copies) == n and sum(e.attrs["bytes"] for e in copies) == nbytes
    if "NVTX_EVENTS" in tables:
        n, = H.raw(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) AND end >= start")[0]
        assert sum(e.attrs["count"] for e in events if e.name.startswith("nvtx:")) == n


def test_timestamps_are_on_the_utc_epoch(real_fixtures: Any) -> None:
    path = H.export_path(real_fixtures, "nsys/fuser__report1_2024.6.sqlite")
    (epoch,), = H.raw(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    (first,), = H.raw(path, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    kernels = [e for e in NsysSqliteMetricsProvider.from_input(path).collect() if e.name.startswith("kernel:")]
    assert min(e.ts for e in kernels) == pytest.approx((epoch + first) / 1e9)


def test_gpu_names_are_the_cuda_devices(real_fixtures: Any) -> None:
    path = H.export_path(real_fixtures, "nsys/fuser__report1_2024.6.sqlite")
    names = sorted({r[0] for r in H.raw(path, "SELECT name FROM TARGET_INFO_GPU WHERE smCount > 0")})
    events = NsysSqliteMetricsProvider.from_input(path).collect()
    assert {tuple(e.attrs["gpus"]) for e in events} == {tuple(names)} and names == ["NVIDIA H100 80GB HBM3"]
