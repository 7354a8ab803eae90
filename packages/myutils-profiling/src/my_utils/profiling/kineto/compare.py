"""Two runs' Kineto tables side by side: the figures of the registered analyses that changed.

``diff`` compares operations by name; this adds, from the two reports' ``kineto_*`` tables,
the figures a Kineto analysis states for a run — the critical path's length and shares, MFU,
the queue's mean and maximum per stream, the bus bandwidth of each kind of collective, the GPU
time of each kernel sequence, the idle time held by each host operator — matched by their key
columns (rank included), each with base, target, delta and delta in % of the base. A figure on
one side only is listed with the other side null. Nothing here decides significance: these are
one number per run (no per-step spread), so the rows are ordered by the size of the change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Rows = Sequence[Mapping[str, Any]]

#: table -> (key columns, compared metrics)
COMPARED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kineto_critical_path": (("rank",), ("length_us", "cpu_bound_pct", "gpu_compute_bound_pct",
                                          "gpu_communication_bound_pct", "gpu_kernel_launch_overhead_pct",
                                          "gpu_kernel_kernel_overhead_pct")),
    "kineto_mfu": (("rank",), ("mfu_pct", "achieved_tflops")),
    "kineto_queue_length": (("rank", "device", "stream"), ("mean", "max")),
    "kineto_collectives": (("rank", "process_group", "collective", "dtype", "message_bytes"),
                           ("busbw_gbps", "mean_us")),
    "kineto_kernel_sequences": (("rank", "operator", "kernels"), ("kernel_us", "count")),
    "kineto_idle_host_ops": (("rank", "operator"), ("idle_us",)),
    "kineto_aten_launch": (("rank", "operator", "kernels"), ("launch_to_kernel_us", "op_to_launch_us")),
}
MAX_ROWS = 200


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def compare_kineto(base: Mapping[str, Rows], target: Mapping[str, Rows], max_rows: int = MAX_ROWS
                   ) -> list[dict[str, Any]]:
    """Rows ``table, key, metric, base, target, delta, delta_pct`` for the figures of :data:`COMPARED`."""
    out: list[dict[str, Any]] = []
    for table, (keys, metrics) in COMPARED.items():
        a = {tuple(r.get(k) for k in keys): r for r in base.get(table) or []}
        b = {tuple(r.get(k) for k in keys): r for r in target.get(table) or []}
        for key in sorted(set(a) | set(b), key=repr):
            for metric in metrics:
                va = _num(a[key].get(metric)) if key in a else None
                vb = _num(b[key].get(metric)) if key in b else None
                if va is None and vb is None:
                    continue
                delta = vb - va if va is not None and vb is not None else None
                out.append({"table": table, "key": dict(zip(keys, key, strict=True)), "metric": metric, "base": va,
                            "target": vb, "delta": delta,
                            "delta_pct": 100.0 * delta / abs(va) if delta is not None and va else None})
    changed = [r for r in out if r["delta"] is None or r["delta"] != 0]
    changed.sort(key=lambda r: -(abs(r["delta_pct"]) if r["delta_pct"] is not None else math.inf))
    return changed[:max_rows]
