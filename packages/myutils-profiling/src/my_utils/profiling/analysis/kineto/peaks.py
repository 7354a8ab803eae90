"""The hardware figures the Kineto analyses need (GPU peak FLOP/s per dtype, NVLink bandwidth), behind one seam.

ARCHITECTURE.md §8: hardware facts live in one sourced table in ``my_utils.profiling.hardware``
(``hardware.csv``, every row citing its vendor datasheet). This module asks that table when it
is installed; MFU (``kineto.mfu``) and the bus-bandwidth check (``kineto.collectives``) call
:func:`peak_flops` and :func:`nvlink_bandwidth` and nothing else, so the figures come from one
place. Until that table is part of this version, :data:`_INTERIM` holds the few rows the
analyses and their tests use — copied from the same datasheets, with the same numbers and
sources — and is used only when ``my_utils.profiling.hardware`` cannot be imported. Remove it
once the table has landed.

Peak FLOP/s are *dense* (datasheets quote tensor rates "with sparsity", twice the dense rate);
link figures are *per direction* (NVIDIA quotes NVLink as the total of both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_V100 = ("NVIDIA Tesla V100 GPU Datasheet (2020)",
         "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf")
_A100 = ("NVIDIA A100 Tensor Core GPU Datasheet (2021)",
         "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_H100 = ("NVIDIA H100 Tensor Core GPU Datasheet (2023)",
         "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")

#: (model, name pattern, {dtype: dense FLOP/s}, NVLink total B/s, source) — interim rows, see the module docstring.
_INTERIM: tuple[tuple[str, str, dict[str, float], float, tuple[str, str]], ...] = (
    ("Tesla V100 SXM2", r"V100[- ]SXM2", {"fp64": 7.8e12, "fp32": 15.7e12, "fp16": 125e12}, 300e9, _V100),
    ("A100 SXM4 80GB", r"A100[- ]SXM4?[- ]80GB",
     {"fp64": 9.7e12, "fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12}, 600e9, _A100),
    ("A100 SXM4 40GB", r"A100[- ]SXM4?[- ]40GB",
     {"fp64": 9.7e12, "fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12}, 600e9, _A100),
    ("H100 SXM5 80GB", r"H100 80GB HBM3|H100[- ]SXM",
     {"fp64": 34e12, "fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12, "fp16": 989.5e12}, 900e9, _H100),
)


@dataclass(frozen=True)
class Peak:
    """One hardware figure: ``value`` in ``unit`` for the GPU ``model``, and the document it is read from."""

    model: str
    value: float
    unit: str
    source: str
    source_url: str


def _table() -> Any:
    try:
        from my_utils.profiling.hardware import table
    except ImportError:
        return None
    return table


def peak_flops(gpu_name: str, dtype: str) -> Peak | None:
    """Dense peak FLOP/s of the GPU a trace names (``NVIDIA A100-SXM4-80GB``) for ``dtype``; None when unknown."""
    table = _table()
    if table is not None:
        f = table.peak_flops(gpu_name, dtype)
        return None if f is None else Peak(f.model, f.value, f.unit, f.source, f.source_url)
    for model, pattern, flops, _link, (source, url) in _INTERIM:
        if re.search(pattern, gpu_name, re.IGNORECASE) and dtype in flops:
            return Peak(model, flops[dtype], "FLOP/s", source, url)
    return None


def nvlink_bandwidth(gpu_name: str) -> Peak | None:
    """Per-direction NVLink bandwidth (B/s) of the GPU a trace names; None when unknown (or no NVLink)."""
    table = _table()
    if table is not None:
        f = table.gpu_figure(gpu_name, "nvlink_bandwidth")
        if f is None:
            return None
        return Peak(f.model, f.value / 2 if f.per == "total" else f.value, f.unit, f.source, f.source_url)
    for model, pattern, _flops, link, (source, url) in _INTERIM:
        if re.search(pattern, gpu_name, re.IGNORECASE):
            return Peak(model, link / 2, "B/s", source, url)
    return None
