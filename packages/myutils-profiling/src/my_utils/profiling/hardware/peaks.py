"""The hardware figures the Kineto analyses need (GPU peak FLOP/s per dtype, NVLink bandwidth), behind one seam.

ARCHITECTURE.md §8: hardware facts live in one sourced table, ``my_utils.profiling.hardware``
(``hardware.csv``, every row citing its vendor datasheet), read by the Nsight analyses too.
MFU (``kineto.mfu``) and the bus-bandwidth check (``kineto.collectives``) call
:func:`peak_flops` and :func:`nvlink_bandwidth` and nothing else, so the figures come from
that one place and are never copied here.

Peak FLOP/s are *dense* (datasheets quote tensor rates "with sparsity", twice the dense rate);
link figures are *per direction* (NVIDIA quotes NVLink as the total of both).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    """One hardware figure: ``value`` in ``unit`` for the GPU ``model``, and the document it is read from."""

    model: str
    value: float
    unit: str
    source: str
    source_url: str


def peak_flops(gpu_name: str, dtype: str) -> Peak | None:
    """Dense peak FLOP/s of the GPU a trace names (``NVIDIA A100-SXM4-80GB``) for ``dtype``; None when unknown."""
    from my_utils.profiling.hardware import table

    f = table.peak_flops(gpu_name, dtype)
    return None if f is None else Peak(f.model, f.value, f.unit, f.source, f.source_url)


def nvlink_bandwidth(gpu_name: str) -> Peak | None:
    """Per-direction NVLink bandwidth (B/s) of the GPU a trace names; None when unknown (or no NVLink)."""
    from my_utils.profiling.hardware import table

    f = table.gpu_figure(gpu_name, "nvlink_bandwidth")
    if f is None:
        return None
    return Peak(f.model, f.value / 2 if f.per == "total" else f.value, f.unit, f.source, f.source_url)
