"""Nsight Compute exports as launches: one record per profiled kernel launch, its metrics and its rule rows.

The CSV is parsed once, by :func:`~my_utils.profiling.ncu.csv_read.read_ncu_csv` (the ``ncu_csv``
provider reads through it too: every layout — 2020 details with NVTX columns, 2023+ with launch columns, 2025 with rule
rows, ``--page raw`` with a units row); this module groups its events by launch. A metric
is found by its raw name (``sm__throughput.avg.pct_of_peak_sustained_elapsed``) or by the
name the details page shows (``Compute (SM) Throughput``): :data:`METRICS` lists both.

``.ncu-rep`` files need NVIDIA's ``ncu_report`` module (shipped with Nsight Compute under
``extras/python``): without it they are refused in one line saying how to export a CSV.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import UnsupportedInputError
from my_utils.profiling.ncu.csv_read import read_ncu_csv

#: Logical metric -> the names ncu writes for it (raw metric name first, then details-page names).
METRICS: dict[str, tuple[str, ...]] = {
    "duration": ("gpu__time_duration.sum", "Duration"),
    "sol_compute": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput", "SM [%]",
                    "Compute (SM) [%]"),
    "sol_memory": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput",
                   "Memory [%]"),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"),
    "achieved_occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"),
    "theoretical_occupancy": ("sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy"),
    "dram_bytes": ("dram__bytes.sum",),
    "dram_bytes_read": ("dram__bytes_read.sum",),
    "dram_bytes_write": ("dram__bytes_write.sum",),
}
#: Units throughput breakdowns are named after (the limiting unit of a kernel is the busiest of them).
UNIT_OF = {"L1/TEX Cache Throughput": "l1tex", "L2 Cache Throughput": "lts", "DRAM Throughput": "dram",
           "Compute (SM) Throughput": "sm"}
_SOL_NAMES = {n for k in ("sol_compute", "sol_memory") for n in METRICS[k]}
#: Text metrics kept in a launch's ``attrs`` (the raw page's GPU name: ``ncu diff`` compares the two sides' GPUs).
TEXT_ATTRS = frozenset({"device__attribute_display_name"})
_BYTE_SCALE = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12, "b": 1.0, "kb": 1e3,
               "mb": 1e6, "gb": 1e9}
# FLOP-counting instruction metrics: (precision, operations per instruction)
_FLOP_OPS = {f"sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (prec, 2 if op == "fma" else 1)
             for p, prec in (("d", "fp64"), ("f", "fp32"), ("h", "fp16")) for op in ("add", "mul", "fma")}


@dataclass(frozen=True)
class NcuRule:
    """A rule row of the details page: ncu's own advice, with its estimated speedup (%) when given."""

    kernel: str
    launch_id: str
    rule: str
    rule_type: str
    description: str
    speedup_type: str
    speedup_pct: float | None
    file: str = ""


@dataclass
class NcuLaunch:
    """One profiled launch: its kernel, ids, and metric values (value, unit) by the name ncu wrote."""

    file: str
    launch_id: str
    kernel: str
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    rules: list[NcuRule] = field(default_factory=list)

    def get(self, logical: str) -> float | None:
        """A logical metric (see :data:`METRICS`); durations in ms, byte counts in bytes."""
        for name in METRICS.get(logical, (logical,)):
            if name in self.metrics:
                value, unit = self.metrics[name]
                if logical.startswith("dram_bytes"):
                    return value * _BYTE_SCALE.get(unit.strip().lower(), 1.0)
                return value
        return None

    def flops(self) -> tuple[float, str] | None:
        """(FLOPs, dominant precision) from the SASS instruction counters, when the export has them."""
        per: dict[str, float] = {}
        for name, (prec, ops) in _FLOP_OPS.items():
            if name in self.metrics:
                per[prec] = per.get(prec, 0.0) + self.metrics[name][0] * ops
        if not per:
            return None
        return sum(per.values()), max(per, key=lambda p: per[p])

    def breakdown(self) -> dict[str, float]:
        """Throughput % per hardware unit: the SM (compute SOL) and each memory unit present (L1/TEX, L2, DRAM...).

        The memory SOL itself is left out: it is the maximum over the memory units, not a unit.
        """
        out: dict[str, float] = {}
        sm = self.get("sol_compute")
        if sm is not None:
            out["sm"] = sm
        for name, (value, unit) in self.metrics.items():
            if name in _SOL_NAMES or unit.strip() != "%":
                continue
            if name in UNIT_OF:
                out[UNIT_OF[name]] = value
            elif "pct_of_peak_sustained" in name and "__" in name and "warps_active" not in name:
                head, rest = name.split("__", 1)
                unit_name = rest.split("_", 1)[0] if head == "gpu" else head  # gpu__dram_throughput -> dram
                out[unit_name] = max(value, out.get(unit_name, 0.0))
        return out


def read_launches(path: str | Path) -> list[NcuLaunch]:
    """The launches of one ncu export (CSV of any layout; ``.ncu-rep`` through ``ncu_report`` when importable)."""
    p = Path(path)
    if p.suffix.lower() == ".ncu-rep":
        from my_utils.profiling.ncu.report_file import read_report

        return read_report(p)
    return launches_from_events(read_ncu_csv(p))


def launches_from_events(events: Iterable[Any]) -> list[NcuLaunch]:
    """Group ``ncu_csv`` metric events (``ncu:<metric>``, ``ncu.rule:<rule>``) by (file, launch id)."""
    by: dict[tuple[str, str], NcuLaunch] = {}
    for e in events:
        a = e.attrs
        key = (str(a.get("file", "")), str(a.get("launch_id", "")))
        launch = by.get(key)
        if launch is None:
            launch = by[key] = NcuLaunch(key[0], key[1], str(a.get("kernel", "")),
                                         attrs={k: a[k] for k in ("stream", "device", "cc", "block", "grid", "nvtx",
                                                                  "process") if k in a})
        if e.name.startswith("ncu.rule:"):
            value = e.value if isinstance(e.value, float) and math.isfinite(e.value) else None
            launch.rules.append(NcuRule(launch.kernel, launch.launch_id, e.name.removeprefix("ncu.rule:"),
                                        str(a.get("rule_type", "")), str(a.get("rule_description", "")),
                                        str(a.get("estimated_speedup_type", "")), value, key[0]))
        elif e.name.startswith("ncu:") and isinstance(e.value, float) and math.isfinite(e.value):
            launch.metrics[e.name.removeprefix("ncu:")] = (e.value, str(e.unit or ""))
        elif e.name.removeprefix("ncu:") in TEXT_ATTRS and str(a.get("text") or "").strip():
            # a text metric (the GPU's name) is no number: kept beside the ids, where ncu diff looks for the GPU
            launch.attrs[e.name.removeprefix("ncu:")] = str(a["text"]).strip()
    return sorted(by.values(), key=lambda x: (x.file, _num(x.launch_id)))


def _num(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 62, text)


def refuse_report(path: Path, reason: str) -> UnsupportedInputError:
    """The one-line refusal of a ``.ncu-rep`` that cannot be read here."""
    return UnsupportedInputError(
        path, None, f"an ncu CSV export; this .ncu-rep needs NVIDIA's ncu_report module ({reason}): add Nsight "
        "Compute's extras/python folder to PYTHONPATH, or export a CSV with `ncu --import "
        f"{path.name} --csv --page details > {path.stem}.csv`")
