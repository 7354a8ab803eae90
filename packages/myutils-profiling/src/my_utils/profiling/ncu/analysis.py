"""Per-kernel Nsight Compute analysis: speed of light, occupancy, the limiting unit, roofline, ncu's own rules.

Per kernel name (launches pooled; percentages are means over launches weighted by each launch's
duration, so a long launch counts for what it costs — an unweighted mean when a launch has no
duration; ``duration_ms`` is the plain mean launch duration):

- **SOL**: compute (SM) and memory throughput as % of peak; the kernel is *compute*- or
  *memory*-bound by the larger, and *latency*-bound when neither reaches
  :data:`LATENCY_SOL_PCT` (ncu's own threshold: below 60 % of peak on both, the units wait).
- **Limiting unit**: the busiest unit of the throughput breakdown rows present (``sm``,
  ``l1tex``, ``lts``, ``dram``...), else the SOL side.
- **Occupancy**: achieved vs theoretical warps (%), each "not measured" when the export lacks it.
- **Roofline** (when the SASS FLOP counters and DRAM bytes were collected): arithmetic
  intensity (FLOP per DRAM byte) and attained FLOP/s; with the GPU's peaks from the
  hardware table (``gpu=``), the roof at that intensity and the share of it attained.
- **Rules**: every rule row (``Rule Name``, type, description, ``Estimated Speedup``) as data.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from my_utils.core.paths import StrPath, as_paths
from my_utils.profiling.model.tool_facts import Evidence, NsysFact, not_measured
from my_utils.profiling.ncu.launches import NcuLaunch, NcuRule, read_launches

LATENCY_SOL_PCT = 60.0


@dataclass(frozen=True)
class KernelSummary:
    """One kernel's figures, means over its launches (None: the export lacks the metric)."""

    kernel: str
    launches: int
    duration_ms: float | None
    sol_compute_pct: float | None
    sol_memory_pct: float | None
    bound: str | None  # "compute", "memory", "latency"
    limiting_unit: str | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    arithmetic_intensity: float | None  # FLOP per DRAM byte
    attained_gflops: float | None
    precision: str | None
    roof_gflops: float | None  # min(peak, AI x memory bandwidth) of the GPU given
    roof_pct: float | None
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class NcuAnalysis:
    """Every kernel's summary (longest total time first) and every rule row."""

    kernels: tuple[KernelSummary, ...]
    rules: tuple[NcuRule, ...]
    gpu: str | None
    files: tuple[str, ...]

    def facts(self) -> list[NsysFact]:
        """Facts per kernel: SOL, bound, occupancy (or why not measured), roofline share; one per rule speedup."""
        return ncu_facts(self)


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def _weighted(values: Sequence[float | None], weights: Sequence[float | None]) -> float | None:
    """The mean of ``values`` weighted by ``weights`` (launch durations); unweighted when a weight is missing."""
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None]
    if not pairs:
        return None
    if any(w is None or w <= 0 for _, w in pairs):
        return statistics.fmean(v for v, _ in pairs)
    total = sum(w for _, w in pairs if w is not None)
    return sum(v * w for v, w in pairs if w is not None) / total


def _bound(compute: float | None, memory: float | None) -> str | None:
    if compute is None and memory is None:
        return None
    c, m = compute or 0.0, memory or 0.0
    if max(c, m) < LATENCY_SOL_PCT:
        return "latency"
    return "compute" if c >= m else "memory"


def summarize_kernel(kernel: str, launches: Sequence[NcuLaunch], gpu: str | None = None) -> KernelSummary:
    """The summary of one kernel's launches (see the module doc)."""
    weights = [x.get("duration") for x in launches]
    compute = _weighted([x.get("sol_compute") for x in launches], weights)
    memory = _weighted([x.get("sol_memory") for x in launches], weights)
    units: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for x in launches:
        for unit, pct in x.breakdown().items():
            units[unit].append((pct, x.get("duration")))

    def unit_mean(u: str) -> float:
        return _weighted([p for p, _ in units[u]], [w for _, w in units[u]]) or 0.0

    limiting = max(units, key=unit_mean) if units else (
        None if compute is None and memory is None else "sm" if (compute or 0) >= (memory or 0) else "memory")
    flops, bytes_, secs, precs = 0.0, 0.0, 0.0, []
    roofline = True
    for x in launches:
        f = x.flops()
        b = x.get("dram_bytes")
        if b is None and x.get("dram_bytes_read") is not None:
            b = (x.get("dram_bytes_read") or 0.0) + (x.get("dram_bytes_write") or 0.0)
        d = x.get("duration")
        if f is None or b is None or d is None:
            roofline = False
            break
        flops, bytes_, secs = flops + f[0], bytes_ + b, secs + d / 1e3
        precs.append(f[1])
    ai = attained = roof = roof_pct = None
    precision = max(set(precs), key=precs.count) if precs else None
    if roofline and bytes_ > 0 and secs > 0:
        ai, attained = flops / bytes_, flops / secs / 1e9
        if gpu is not None and precision is not None:
            from my_utils.profiling.hardware.table import memory_bandwidth, peak_flops

            peak, bw = peak_flops(gpu, precision), memory_bandwidth(gpu)
            if peak is not None and bw is not None:
                roof = min(peak.value, ai * bw.value) / 1e9
                roof_pct = 100.0 * attained / roof if roof else None
    return KernelSummary(
        kernel, len(launches), _mean([x.get("duration") for x in launches]), compute, memory, _bound(compute, memory),
        limiting, _weighted([x.get("achieved_occupancy") for x in launches], weights),
        _weighted([x.get("theoretical_occupancy") for x in launches], weights), ai, attained, precision, roof, roof_pct,
        tuple(sorted({x.file for x in launches})))


def analyze_launches(launches: Sequence[NcuLaunch], *, gpu: str | None = None) -> NcuAnalysis:
    """Summaries of every kernel in ``launches`` (total time first) and all their rule rows."""
    by: dict[str, list[NcuLaunch]] = defaultdict(list)
    for x in launches:
        by[x.kernel].append(x)
    kernels = [summarize_kernel(k, v, gpu) for k, v in by.items()]
    kernels.sort(key=lambda k: (-(k.duration_ms or 0.0) * k.launches, k.kernel))
    rules = tuple(r for x in launches for r in x.rules)
    return NcuAnalysis(tuple(kernels), rules, gpu, tuple(sorted({x.file for x in launches})))


def analyze_files(paths: StrPath | Sequence[StrPath], *, gpu: str | None = None) -> NcuAnalysis:
    """Read and analyse ncu exports (each parsed once); one path or a list of them."""
    return analyze_launches([x for p in as_paths(paths) for x in read_launches(p)], gpu=gpu)


def _over(k: KernelSummary) -> str:
    """How a kernel's percentages pool its launches (launches are replays of one kernel, not steps)."""
    return "one launch" if k.launches == 1 else f"mean over {k.launches} launches, weighted by duration"


def ncu_facts(a: NcuAnalysis) -> list[NsysFact]:
    """See :meth:`NcuAnalysis.facts`."""
    out: list[NsysFact] = []
    for k in a.kernels:
        ev = (Evidence("ncu_kernels", {"kernel": k.kernel}, {
            "sol_compute_pct": k.sol_compute_pct, "sol_memory_pct": k.sol_memory_pct, "launches": k.launches}),)
        base = f"ncu.{{}}:{k.kernel[:120]}"
        if k.bound is None:
            out.append(not_measured(base.format("bound"), "What bounds the kernel",
                                    "the export has no speed-of-light metrics", source="ncu"))
        else:
            out.append(NsysFact(base.format("bound"), "What bounds the kernel", k.bound, source="ncu",
                                aggregate=_over(k), evidence=ev,
                                detail=f"compute {k.sol_compute_pct or 0:.1f}% / memory {k.sol_memory_pct or 0:.1f}% "
                                       f"of peak; limiting unit {k.limiting_unit}"))
        if k.achieved_occupancy_pct is None:
            out.append(not_measured(base.format("occupancy"), "Achieved occupancy", "the export has no occupancy "
                                    "metrics (collect the Occupancy section)", unit="%", source="ncu"))
        else:
            theo = k.theoretical_occupancy_pct
            out.append(NsysFact(
                base.format("occupancy"), "Achieved occupancy", k.achieved_occupancy_pct, "%", source="ncu",
                denominator="theoretical occupancy" if theo is not None else "the SM's maximum warps",
                denominator_value=theo, denominator_unit="%" if theo is not None else "", aggregate=_over(k),
                evidence=ev, detail="theoretical occupancy not in the export" if theo is None else ""))
        if k.roof_pct is not None:
            out.append(NsysFact(base.format("roofline"), "Attained share of the roofline", k.roof_pct, "%",
                                source="ncu", denominator=f"roof at {k.arithmetic_intensity:.2f} FLOP/byte on {a.gpu}",
                                denominator_value=k.roof_gflops, denominator_unit="GFLOP/s",
                                aggregate=f"FLOPs and bytes summed over {k.launches} launch(es)", evidence=ev))
        elif k.arithmetic_intensity is None:
            out.append(not_measured(base.format("roofline"), "Attained share of the roofline",
                                    "FLOP counters or DRAM bytes were not collected (--section SpeedOfLight_RooflineChart "
                                    "or the sm__sass_thread_inst_executed_op_* and dram__bytes metrics)", unit="%",
                                    source="ncu"))
        else:
            out.append(not_measured(base.format("roofline"), "Attained share of the roofline",
                                    "the GPU's peaks are unknown: name it (--gpu) as in the hardware table", unit="%",
                                    source="ncu"))
    for i, r in enumerate(a.rules):
        if r.speedup_pct is None:
            continue
        out.append(NsysFact(
            f"ncu.rule:{r.rule}:{r.kernel[:80]}:{r.launch_id}", f"ncu rule {r.rule}", r.speedup_pct, "%",
            source="ncu", denominator=f"the kernel's duration ({r.speedup_type or 'estimated'} speedup)",
            detail=r.description[:500], evidence=(Evidence("ncu_rules", {"index": i, "kernel": r.kernel,
                                                                        "launch_id": r.launch_id, "rule": r.rule},
                                                           {"speedup_pct": r.speedup_pct}),)))
    return out
