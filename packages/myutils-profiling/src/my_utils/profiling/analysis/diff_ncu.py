"""``ncu diff``: the kernel time before and after by kernel, then the same kernels per metric, judged by direction.

First the GPU-level question a diff answers: how much kernel time the profiled launches
took on each side, and which kernels account for the change, each split into its per-launch
change and its launch-count change (the parts add up to the change; kernels without a
duration metric are the remainder). Nsight Compute replays each kernel alone, so there is
no idle time, overlap or step time to compare, and the page says so.

Then per (kernel, metric): kernels are matched by name; each metric's samples are its
values over the kernel's launches. A change is judged only when both sides have at least
two launches (one launch has no spread: ``unmeasured``), and is significant when it exceeds
``sigmas`` standard errors of the difference of the means *and* ``min_pct`` % of the base
(the test of ``myutils-profile diff``). Whether up is good is read from the metric
(:func:`better_direction`): a *rate* (``.per_second``, ``/second`` units, throughput,
bandwidth, occupancy, IPC) is better higher, whatever it counts; time, cycles, bytes and
instructions are better lower; other metrics (launch configuration, counts of unknown
meaning) are reported as *changed* without a verdict.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.paths import StrPath, as_paths
from my_utils.profiling.analysis.diff_model import MIN_SAMPLES, DiffResult, OpStats, compare, standard_error
from my_utils.profiling.ncu.launches import NcuLaunch, read_launches

_LOWER = re.compile(r"(gpu__time_duration|^Duration$|cycles|Cycles|bytes|Bytes|inst_executed|Executed Instructions|"
                    r"^Time$)")
_HIGHER = re.compile(r"(pct_of_peak|Throughput|Occupancy|warps_active|per_second|Bandwidth|^IPC|ipc|Frequency)")
# a rate: an amount per unit of time is better higher, whatever the amount (bytes/s, cycles/s, inst/s)
_RATE = re.compile(r"(\.per_second\b|per_second$|/s$|/second$|/nsecond$|/usecond$|/msecond$|^Gbyte/s|hz$)", re.I)
_TIME_UNITS = ("ms", "nsecond", "usecond", "msecond", "second", "cycle")


def better_direction(metric: str, unit: str = "") -> str | None:
    """``lower``, ``higher`` or None (no verdict) for a metric name as ncu writes it.

    Rates are looked at first: ``dram__bytes_read.sum.per_second`` counts bytes, but more of
    them per second is a faster kernel.
    """
    if _RATE.search(metric) or _RATE.search(unit.strip()):
        return "higher"
    if _LOWER.search(metric) or unit in _TIME_UNITS:
        return "lower"
    if _HIGHER.search(metric):
        return "higher"
    return None


@dataclass(frozen=True)
class NcuDiffRow:
    """One (kernel, metric): both sides' mean, spread and launches, the change and its verdict."""

    kernel: str
    metric: str
    unit: str
    base_mean: float | None
    base_std: float
    base_n: int
    target_mean: float | None
    target_std: float
    target_n: int
    delta: float | None
    delta_pct: float | None
    better: str | None
    significant: bool
    verdict: str  # improved, regressed, changed, unchanged, unmeasured (a side with one launch), added, removed


@dataclass(frozen=True)
class KernelTime:
    """One kernel's total profiled time on each side, and its change split into per-launch and launch-count parts.

    ``per_launch_ms`` = base launches × (target mean − base mean); ``count_ms`` = (target
    launches − base launches) × target mean (the base mean for a kernel gone): they add up
    to ``delta_ms``.
    """

    kernel: str
    base_launches: int
    target_launches: int
    base_mean_ms: float | None
    target_mean_ms: float | None
    base_std_ms: float
    target_std_ms: float
    significant: bool  # the per-launch duration changed beyond the noise (repeated launches on both sides)
    measured: bool

    @property
    def base_ms(self) -> float:
        """Total time of the base's launches."""
        return self.base_launches * (self.base_mean_ms or 0.0)

    @property
    def target_ms(self) -> float:
        """Total time of the target's launches."""
        return self.target_launches * (self.target_mean_ms or 0.0)

    @property
    def delta_ms(self) -> float:
        """Target total minus base total."""
        return self.target_ms - self.base_ms

    @property
    def per_launch_ms(self) -> float:
        """The part of the change due to each launch taking longer or shorter."""
        if self.base_mean_ms is None or self.target_mean_ms is None:
            return 0.0
        return self.base_launches * (self.target_mean_ms - self.base_mean_ms)

    @property
    def count_ms(self) -> float:
        """The part of the change due to more or fewer launches."""
        return self.delta_ms - self.per_launch_ms

    def to_dict(self) -> dict[str, Any]:
        """JSON row."""
        return {**asdict(self), "base_ms": self.base_ms, "target_ms": self.target_ms, "delta_ms": self.delta_ms,
                "per_launch_ms": self.per_launch_ms, "count_ms": self.count_ms}


@dataclass(frozen=True)
class NcuDiff:
    """Every (kernel, metric) row and each kernel's time; ``regressions(pct)`` is what a CI gate fails on."""

    base: str
    target: str
    rows: tuple[NcuDiffRow, ...]
    settings: dict[str, float] = field(default_factory=dict)
    kernels: tuple[KernelTime, ...] = ()  # largest |delta_ms| first
    warnings: tuple[str, ...] = ()
    unknown_ms: tuple[float, float] = (0.0, 0.0)  # launches without a duration metric: not in any kernel's time

    @property
    def significant(self) -> list[NcuDiffRow]:
        """Significant rows, largest relative change first."""
        return sorted((r for r in self.rows if r.significant), key=lambda r: -abs(r.delta_pct or 0.0))

    @property
    def descriptive(self) -> bool:
        """No row could be judged: every kernel was profiled once on a side."""
        return not any(r.verdict not in ("unmeasured", "added", "removed") for r in self.rows)

    def regressions(self, pct: float) -> list[NcuDiffRow]:
        """Significant changes in the worse direction by at least ``pct`` %."""
        return [r for r in self.significant if r.verdict == "regressed" and abs(r.delta_pct or 0.0) >= pct]

    @property
    def total_ms(self) -> tuple[float, float]:
        """Profiled kernel time on each side (the sum of every launch's duration)."""
        return (math.fsum(k.base_ms for k in self.kernels), math.fsum(k.target_ms for k in self.kernels))

    @property
    def launches(self) -> tuple[int, int]:
        """Profiled launches on each side."""
        return (sum(k.base_launches for k in self.kernels), sum(k.target_launches for k in self.kernels))

    @property
    def headline(self) -> str:
        """The one line: the kernel time change and the kernels behind it, the like-for-like caveat first."""
        (ta, tb), (na, nb) = self.total_ms, self.launches
        shown = [k for k in self.kernels if abs(k.delta_ms) > 0][:HEADLINE_KERNELS]
        parts = []
        for k in shown:
            how = ("changed per launch" if k.significant else "unchanged per launch" if k.measured
                   else "per launch not judged")
            parts.append(f"{_label(k.kernel)} {k.delta_ms:+,.3f} ms ({k.per_launch_ms:+,.3f} per launch, {how}; "
                         f"{k.count_ms:+,.3f} from {k.base_launches} → {k.target_launches} launches)")
        rest = math.fsum(k.delta_ms for k in self.kernels[len(shown):])
        if len(self.kernels) > len(shown) and abs(rest) > 0:
            parts.append(f"{rest:+,.3f} ms in {len(self.kernels) - len(shown)} other kernel(s)")
        text = (f"Profiled kernel time {tb - ta:+,.3f} ms ({ta:,.3f} → {tb:,.3f} ms over {na} → {nb} launches)"
                + (": " + "; ".join(parts) if parts else "") + ". Nsight Compute replays each kernel alone: no idle "
                "time, overlap or step time to compare")
        if self.descriptive:
            text += "; descriptive: one launch per kernel and side, nothing judged"
        caveats = [c for w in self.warnings if (c := _caveat(w))]
        return (f"Not like for like ({'; '.join(caveats)}). " if caveats else "") + text + "."

    def as_result(self) -> DiffResult:
        """This diff as the model the diff pages draw: one name per kernel (its launch durations), the kernel-time
        table, the headline and the warnings."""
        from my_utils.profiling.analysis.diff_gpu import GpuRow

        base, target = {}, {}
        for k in self.kernels:
            name = f"kernel:{k.kernel}"
            if k.base_launches:
                base[name] = OpStats(name, k.base_launches, k.base_launches, k.base_mean_ms or 0.0, k.base_std_ms,
                                     "ms", "ncu")
            if k.target_launches:
                target[name] = OpStats(name, k.target_launches, k.target_launches, k.target_mean_ms or 0.0,
                                       k.target_std_ms, "ms", "ncu")
        sigmas, min_pct = self.settings.get("sigmas", 3.0), self.settings.get("min_pct", 5.0)
        (ta, tb), (na, nb) = self.total_ms, self.launches
        rows = (GpuRow("kernel_time", "profiled kernel time (sum of launch durations)", "ms", ta, tb),
                GpuRow("launches", "profiled launches", "", float(na), float(nb)),
                GpuRow("kernels", "kernels", "", float(sum(1 for k in self.kernels if k.base_launches)),
                       float(sum(1 for k in self.kernels if k.target_launches))))
        notes = ["Nsight Compute replays each kernel alone: there is no idle time, overlap or step time to compare; "
                 f"each launch is a sample, a kernel launched once on a side is not judged (significant above "
                 f"{sigmas:g} standard errors and {min_pct:g}% of the base)"]
        return DiffResult(self.base, self.target, compare(base, target, sigmas=sigmas, min_pct=min_pct),
                          warnings=list(self.warnings), settings=dict(self.settings), notes=notes,
                          sampling="per launch", summary_rows=rows, headline_text=self.headline)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        (ta, tb), (na, nb) = self.total_ms, self.launches
        return {"base": self.base, "target": self.target, "headline": self.headline, "settings": dict(self.settings),
                "warnings": list(self.warnings), "descriptive": self.descriptive,
                "kernel_time": {"base_ms": ta, "target_ms": tb, "delta_ms": tb - ta, "base_launches": na,
                                "target_launches": nb, "unknown_ms": list(self.unknown_ms),
                                "kernels": [k.to_dict() for k in self.kernels]},
                "significant": len(self.significant), "rows": [asdict(r) for r in self.rows]}


#: Kernels named in the headline at most.
HEADLINE_KERNELS = 3


def _caveat(warning: str) -> str | None:
    """The short form of a like-for-like warning for the headline (None: not a caveat)."""
    if warning.startswith("the workloads have little in common"):
        return "little in common"
    if warning.startswith("different GPU") or "the GPUs differ" in warning:
        return "different GPU"
    if "the GPUs may differ" in warning:
        return "GPU unknown, may differ"
    return None


def _label(kernel: str) -> str:
    from my_utils.profiling.analysis.diff_headline import kernel_label

    return kernel_label(kernel)


def _samples(launches: Sequence[NcuLaunch]) -> dict[tuple[str, str], tuple[list[float], str]]:
    out: dict[tuple[str, str], tuple[list[float], str]] = {}
    for x in launches:
        for metric, (value, unit) in x.metrics.items():
            out.setdefault((x.kernel, metric), ([], unit))[0].append(value)
    return out


def _moments(v: list[float]) -> tuple[float, float]:
    return statistics.fmean(v), statistics.pstdev(v) if len(v) > 1 else 0.0


def diff_launches(base: Sequence[NcuLaunch], target: Sequence[NcuLaunch], *, sigmas: float = 3.0,
                  min_pct: float = 5.0, base_label: str = "base", target_label: str = "target") -> NcuDiff:
    """Compare two sets of launches per (kernel, metric)."""
    a, b = _samples(base), _samples(target)
    rows: list[NcuDiffRow] = []
    kernels_a = {k for k, _ in a}
    kernels_b = {k for k, _ in b}
    for key in sorted(set(a) | set(b)):
        kernel, metric = key
        if kernel not in kernels_a or kernel not in kernels_b:
            continue  # a kernel on one side only: one row below, not one per metric
        if key not in a or key not in b:
            continue  # a metric collected on one side only compares nothing
        (va, unit), (vb, _) = a[key], b[key]
        ma, sa = _moments(va)
        mb, sb = _moments(vb)
        delta = mb - ma
        se = standard_error(sa, len(va), sb, len(vb))
        measured = len(va) >= MIN_SAMPLES and len(vb) >= MIN_SAMPLES  # one launch has no spread
        significant = measured and abs(delta) > max(sigmas * se, abs(ma) * min_pct / 100)
        pct = 100.0 * delta / ma if ma else None
        better = better_direction(metric, unit)
        verdict = "unmeasured" if not measured else "unchanged" if not significant else "changed" if better is None \
            else ("improved" if (delta < 0) == (better == "lower") else "regressed")
        rows.append(NcuDiffRow(kernel, metric, unit, ma, sa, len(va), mb, sb, len(vb), delta, pct, better,
                               significant, verdict))
    launches: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for x in base:
        launches[x.kernel][0] += 1
    for x in target:
        launches[x.kernel][1] += 1
    for kernel, (na, nb) in sorted(launches.items()):
        if na == 0 or nb == 0:
            rows.append(NcuDiffRow(kernel, "launches", "", na or None, 0.0, na, nb or None, 0.0, nb, None, None, None,
                                   max(na, nb) >= MIN_SAMPLES, "added" if na == 0 else "removed"))
    kernels, unknown = _kernel_times(base, target, sigmas, min_pct)
    return NcuDiff(base_label, target_label, tuple(rows), {"sigmas": sigmas, "min_pct": min_pct}, kernels,
                   tuple(_warnings(base, target, kernels)), unknown)


def _durations(launches: Sequence[NcuLaunch]) -> tuple[dict[str, list[float]], float]:
    """Per kernel, each launch's duration (ms); and how many launches had none."""
    out: dict[str, list[float]] = defaultdict(list)
    missing = 0
    for x in launches:
        d = x.get("duration")
        if d is None:
            missing += 1
        else:
            out[x.kernel].append(d)
    return out, float(missing)


def _kernel_times(base: Sequence[NcuLaunch], target: Sequence[NcuLaunch], sigmas: float,
                  min_pct: float) -> tuple[tuple[KernelTime, ...], tuple[float, float]]:
    (da, ma), (db, mb) = _durations(base), _durations(target)
    out = []
    for kernel in sorted(set(da) | set(db)):
        va, vb = da.get(kernel, []), db.get(kernel, [])
        mean_a, std_a = _moments(va) if va else (None, 0.0)
        mean_b, std_b = _moments(vb) if vb else (None, 0.0)
        measured = len(va) >= MIN_SAMPLES and len(vb) >= MIN_SAMPLES
        significant = False
        if measured and mean_a is not None and mean_b is not None:
            se = standard_error(std_a, len(va), std_b, len(vb))
            significant = abs(mean_b - mean_a) > max(sigmas * se, abs(mean_a) * min_pct / 100)
        out.append(KernelTime(kernel, len(va), len(vb), mean_a, mean_b, std_a, std_b, significant, measured))
    out.sort(key=lambda k: -abs(k.delta_ms))
    return tuple(out), (ma, mb)


def _warnings(base: Sequence[NcuLaunch], target: Sequence[NcuLaunch], kernels: Sequence[KernelTime]) -> list[str]:
    """Like-for-like warnings: kernel time in common, the GPU read from kernel names, launches without a duration."""
    from my_utils.profiling.analysis.diff_context import gpu_warnings, little_in_common_warning, similarity

    out = []
    ta = {f"kernel:{k.kernel}": k.base_ms for k in kernels if k.base_launches}
    tb = {f"kernel:{k.kernel}": k.target_ms for k in kernels if k.target_launches}
    sim = similarity(ta, tb, time_prefixes=("kernel:",), time_of="kernel")
    if ta and tb and (w := little_in_common_warning(sim)) is not None:
        out.append(w)
    hw_a = {"gpu": a} if (a := _device(base)) else {}
    hw_b = {"gpu": b} if (b := _device(target)) else {}
    if hw_a and hw_b and hw_a != hw_b:
        out.append(f"different GPU: {hw_a['gpu']!r} vs {hw_b['gpu']!r}: kernel times and metrics mix the code change "
                   "with the GPU")
    else:
        out += gpu_warnings(hw_a, hw_b, [k.kernel for k in kernels if k.base_launches],
                            [k.kernel for k in kernels if k.target_launches])
    return out


def _device(launches: Sequence[NcuLaunch]) -> str | None:
    """The GPU the launches ran on, when the export names it (``device__attribute_display_name``, ``Device``)."""
    for x in launches:
        for key in ("device__attribute_display_name", "Device", "Device Name"):
            value = x.attrs.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def diff_ncu(base: StrPath | Sequence[StrPath], target: StrPath | Sequence[StrPath], *, sigmas: float = 3.0,
             min_pct: float = 5.0) -> NcuDiff:
    """Compare two runs' ncu exports (each a file or a list of files)."""
    base, target = as_paths(base, "base"), as_paths(target, "target")
    la = [x for p in base for x in read_launches(p)]
    lb = [x for p in target for x in read_launches(p)]
    return diff_launches(la, lb, sigmas=sigmas, min_pct=min_pct, base_label=", ".join(Path(p).name for p in base),
                         target_label=", ".join(Path(p).name for p in target))
