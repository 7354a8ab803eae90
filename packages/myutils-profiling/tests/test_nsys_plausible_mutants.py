"""Implausible copy bandwidths: which copies are checked and against what (issue 36, ``.ci/mutants/nsys.toml``).

Only on-device copies and sets are bounded by the GPU's memory bandwidth (the A100 SXM4 80GB's
2,039 GB/s in the hardware table, its datasheet's HBM2e figure); a host-device copy's limit is a
link the export does not name, so it is never judged. Both the mean and the fastest operation
are checked: a mean under the limit does not clear a fastest copy above it.
"""

from __future__ import annotations

from my_utils.profiling.nsys.model import Table
from my_utils.profiling.nsys.plausible import check_copies
from my_utils.profiling.nsys.schema import GpuInfo

A100 = GpuInfo(0, "NVIDIA A100-SXM4-80GB")


def checked(*rows: tuple[str, str, float, float]) -> dict[str, dict[str, object]]:
    table = Table("nsys_copies", ("op", "direction", "bandwidth_gbps", "peak_gbps"), rows)
    return {r["direction"]: r for r in check_copies(table, [A100], {0}).records()}


def test_only_on_device_copies_are_judged_and_the_fastest_one_counts() -> None:
    out = checked(("memcpy", "HtoD", 3000.0, 3500.0), ("memcpy", "DtoD", 1500.0, 2500.0),
                  ("memset", "device", 1000.0, 1200.0))
    assert out["HtoD"]["limit_gbps"] is None and out["HtoD"]["implausible"] == ""
    assert out["DtoD"]["limit_gbps"] == 2039.0
    assert out["DtoD"]["implausible"].startswith("fastest operation 2,500.0 GB/s above the 2,039.0 GB/s limit")
    assert out["device"]["limit_gbps"] == 2039.0 and out["device"]["implausible"] == ""
