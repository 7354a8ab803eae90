"""An operation against the roofline: its throughput, arithmetic intensity, bound and percent of the roof.

The roofline (Williams, Waterman & Patterson, CACM 2009) bounds the time of work of ``F`` FLOPs
moving ``B`` bytes by ``max(F / peak, B / bandwidth)``; the percent of the roof is that bound over
the time measured (100% means the kernel ran at the roof), and the bound is whichever term is
larger (compute or memory; the ridge point is ``peak / bandwidth`` FLOP per byte). Where the cost
is a range the percent is a range too, each end from the matching end of the cost; when the ends
fall on different sides of the ridge the bound says so.

Ceilings come from the one hardware table (``hardware.table``): the dense peak for the work's
dtype when it runs on matrix units (an fp32 product whose kernels are tensor-core kernels ran in
TF32, as ``kineto.mfu`` decides), the fp32 vector peak for everything else (the table has no
vector rates for narrower types, and such work is almost always memory-bound), and the device
memory bandwidth. A GPU the table lacks gives no ceiling, nor does a copy to or from the host
(:data:`HOST_COPY`: its roof is a link the trace does not name): the throughput is still stated,
the percent is "not measured" with the reason.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from my_utils.profiling.kineto.ops.cost import Cost


@dataclass(frozen=True)
class Ceiling:
    """The roof for one kind of work on one GPU: peak FLOP/s and bandwidth (B/s), or why there is none."""

    flops: float | None
    bandwidth: float | None
    label: str
    missing: str = ""


@functools.lru_cache(maxsize=256)
def ceiling(gpu: str, dtype: str, matrix: bool, tensor_core: bool = False) -> Ceiling:
    """The roof of ``gpu`` (the name a trace reports) for work in ``dtype`` on matrix units or not."""
    from my_utils.profiling.hardware import table

    if not gpu:
        return Ceiling(None, None, "", "the trace names no GPU")
    model = table.gpu_model(gpu)
    if model is None:
        return Ceiling(None, None, "", f"{gpu} is not in the hardware table")
    use = ("tf32" if tensor_core and dtype == "fp32" else dtype or "fp32") if matrix else "fp32"
    peak = table.peak_flops(gpu, use)
    bw = table.memory_bandwidth(gpu)
    missing = "" if peak is not None and bw is not None else \
        f"no {'dense ' + use if peak is None else 'memory bandwidth'} figure for {model} in the hardware table"
    label = f"{model}: {use} {'' if peak is None else f'{peak.value / 1e12:g} TFLOP/s'}" + \
        ("" if bw is None else f", {bw.value / 1e9:g} GB/s")
    return Ceiling(None if peak is None else peak.value, None if bw is None else bw.value, label, missing)


#: Copies that cross the host link, not device memory: their roof is the link, which the trace does not name.
HOST_COPY = re.compile(r"^Memcpy (?:HtoD|DtoH|HtoH|PtoP)")
HOST_LINK = Ceiling(None, None, "", "a copy between host and device (or devices): its roof is the link (PCIe, NVLink), "
                                    "which the trace does not name")


@dataclass(frozen=True)
class Judgement:
    """Throughput and roofline figures of some calls of one operation and shape."""

    tflops: float | None
    gbps: float | None
    intensity_low: float | None
    intensity_high: float | None
    bound: str
    roofline_pct_low: float | None
    roofline_pct_high: float | None
    not_measured: str


def judge(cost: Cost, calls: int, gpu_us: float, roof: Ceiling) -> Judgement:
    """The figures of ``calls`` calls costing ``cost`` each that kept the GPU busy ``gpu_us`` µs."""
    if gpu_us <= 0 or calls <= 0:
        return Judgement(None, None, None, None, "", None, None, "no GPU time under the calls")
    seconds = gpu_us * 1e-6
    tflops = cost.flops_low * calls / seconds / 1e12
    gbps = cost.bytes_low * calls / seconds / 1e9
    i_low = cost.flops_low / cost.bytes_low if cost.bytes_low > 0 else None
    i_high = cost.flops_high / cost.bytes_high if cost.bytes_high > 0 else None
    if roof.missing or roof.flops is None or roof.bandwidth is None:
        return Judgement(tflops, gbps, i_low, i_high, "", None, None, roof.missing or "no roof")
    ends = []
    for flops, nbytes in ((cost.flops_low, cost.bytes_low), (cost.flops_high, cost.bytes_high)):
        compute, memory = flops / roof.flops, nbytes / roof.bandwidth
        ends.append((100.0 * max(compute, memory) * calls / seconds, "compute" if compute >= memory else "memory"))
    (low, b_low), (high, b_high) = ends
    bound = b_low if b_low == b_high else "memory or compute (depends on the assumption)"
    return Judgement(tflops, gbps, i_low, i_high, bound, min(low, high), max(low, high), "")
