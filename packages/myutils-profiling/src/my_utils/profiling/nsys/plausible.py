"""Numbers that cannot be: on-device copy and set bandwidths above the GPU's memory bandwidth.

A memset or a device-to-device copy cannot move bytes faster than the GPU's memory; when the
export says it did (a duration recorded too short), the figure is marked implausible, with the
limit beside it, and no fact or finding is built on it. The limit is the hardware table's
memory bandwidth for the GPU (``hardware/hardware.csv``), else the one the export's own GPU
table records. Host-device copies are not checked: their limit is the system's link, which the
export does not name.
"""

from __future__ import annotations

from collections.abc import Sequence

from my_utils.profiling.nsys.model import Table
from my_utils.profiling.nsys.schema import GpuInfo

ON_DEVICE = ("device", "DtoD")  # memset's direction, and device-to-device copies


def memory_limit(gpus: Sequence[GpuInfo], used: set[int | None]) -> tuple[float | None, str]:
    """(GB/s, where it comes from) of the memory bandwidth of the GPU the export's work ran on; (None, why) when the
    devices differ or nothing records it."""
    from my_utils.profiling.hardware.table import memory_bandwidth

    names = {g.name for g in gpus if g.device in used}
    if len(names) != 1:
        return None, "the export's devices are not one GPU model" if names else "the export names no GPU"
    (name,) = names
    bw = memory_bandwidth(name)
    if bw is not None:
        return bw.value / 1e9, f"{bw.model} memory bandwidth ({bw.source})"
    own = [g.memory_bandwidth_bps for g in gpus if g.name == name and g.memory_bandwidth_bps]
    if own:
        return max(own) / 1e9, f"{name} memory bandwidth as the export's GPU table records it"
    return None, f"{name!r}: no memory bandwidth in the hardware table or the export"


def check_copies(table: Table, gpus: Sequence[GpuInfo], used: set[int | None]) -> Table:
    """``nsys_copies`` with ``limit_gbps``, ``limit_source`` and ``implausible`` (the reason, or empty) per row."""
    if not len(table.columns):
        return table
    limit, source = memory_limit(gpus, used)
    rows = []
    for r in table.records():
        bound = limit if r.get("direction") in ON_DEVICE else None
        why = ""
        if bound is not None:
            over = [f"{label} {v:,.1f} GB/s" for label, v in (("mean", r.get("bandwidth_gbps")),
                                                              ("fastest operation", r.get("peak_gbps")))
                    if isinstance(v, (int, float)) and v > bound]
            if over:
                why = f"{' and '.join(over)} above the {bound:,.1f} GB/s limit ({source})"
        rows.append((*(r[c] for c in table.columns), bound, source if bound is not None else "", why))
    return Table(table.name, (*table.columns, "limit_gbps", "limit_source", "implausible"), tuple(rows))
