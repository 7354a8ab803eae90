"""``ncu diff``: the same kernels before and after, per metric, with the direction that is better.

Kernels are matched by name; each metric's samples are its values over the kernel's
launches. A change is significant when it exceeds ``sigmas`` standard errors of the
difference of the means *and* ``min_pct`` % of the base (the test of
``myutils-profile diff``). Whether up is good is read from the metric
(:func:`better_direction`): time, cycles, bytes and instructions are better lower;
throughput and occupancy percentages higher; other metrics (launch configuration, counts
of unknown meaning) are reported as *changed* without a verdict.
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

from my_utils.profiling.ncu.launches import NcuLaunch, read_launches

_LOWER = re.compile(r"(gpu__time_duration|^Duration$|cycles|Cycles|bytes|Bytes|inst_executed|Executed Instructions|"
                    r"^Time$)")
_HIGHER = re.compile(r"(pct_of_peak|Throughput|Occupancy|warps_active|per_second|Bandwidth|^IPC|ipc)")


def better_direction(metric: str, unit: str = "") -> str | None:
    """``lower``, ``higher`` or None (no verdict) for a metric name as ncu writes it."""
    if _LOWER.search(metric) or unit in ("ms", "nsecond", "usecond", "msecond", "cycle"):
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
    verdict: str  # improved, regressed, changed, unchanged, added, removed


@dataclass(frozen=True)
class NcuDiff:
    """Every (kernel, metric) row; ``regressions(pct)`` is what a CI gate fails on."""

    base: str
    target: str
    rows: tuple[NcuDiffRow, ...]
    settings: dict[str, float] = field(default_factory=dict)

    @property
    def significant(self) -> list[NcuDiffRow]:
        """Significant rows, largest relative change first."""
        return sorted((r for r in self.rows if r.significant), key=lambda r: -abs(r.delta_pct or 0.0))

    def regressions(self, pct: float) -> list[NcuDiffRow]:
        """Significant changes in the worse direction by at least ``pct`` %."""
        return [r for r in self.significant if r.verdict == "regressed" and abs(r.delta_pct or 0.0) >= pct]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"base": self.base, "target": self.target, "settings": dict(self.settings),
                "significant": len(self.significant), "rows": [asdict(r) for r in self.rows]}


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
        se = math.sqrt(sa * sa / len(va) + sb * sb / len(vb))
        significant = abs(delta) > max(sigmas * se, abs(ma) * min_pct / 100)
        pct = 100.0 * delta / ma if ma else None
        better = better_direction(metric, unit)
        verdict = "unchanged" if not significant else "changed" if better is None else (
            "improved" if (delta < 0) == (better == "lower") else "regressed")
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
                                   True, "added" if na == 0 else "removed"))
    return NcuDiff(base_label, target_label, tuple(rows), {"sigmas": sigmas, "min_pct": min_pct})


def diff_ncu(base: Sequence[str | Path], target: Sequence[str | Path], *, sigmas: float = 3.0,
             min_pct: float = 5.0) -> NcuDiff:
    """Compare two runs' ncu exports (each a list of files)."""
    la = [x for p in base for x in read_launches(p)]
    lb = [x for p in target for x in read_launches(p)]
    return diff_launches(la, lb, sigmas=sigmas, min_pct=min_pct, base_label=", ".join(Path(p).name for p in base),
                         target_label=", ".join(Path(p).name for p in target))
