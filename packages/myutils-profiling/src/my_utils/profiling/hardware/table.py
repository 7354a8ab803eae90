"""The one table of hardware figures: GPU peak throughput per data type, memory and link bandwidths.

``hardware.csv`` beside this module holds one figure per row, each citing the vendor
document it was read from (``source``, ``source_url``). Columns: ``kind`` (``gpu`` or
``link``), ``model``, ``match`` (a regular expression over the names tools report:
``NVIDIA H100 80GB HBM3``, ``A100-PCIE-40GB``, ``Tesla V100-SXM2-32GB``), ``quantity``
(``peak_flops``, ``memory_bandwidth``, ``nvlink_bandwidth``, ``link_bandwidth``),
``dtype`` (``fp64``, ``fp64_tensor``, ``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8``,
``int8``), ``value`` and ``unit`` (FLOP/s, OP/s, B/s), ``per`` (``total`` of both
directions, ``direction``, or a note such as "tensor cores, dense").

Peak figures are *dense*: datasheets quote tensor throughput "with sparsity", twice the
dense rate; the rows halve those and say so. MFU, roofline and bus-bandwidth checks read
this table and nothing else (the Kineto analyses too), so a figure is fixed in one place.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError

TABLE_PATH = Path(__file__).resolve().with_name("hardware.csv")
COLUMNS = ("kind", "model", "match", "quantity", "dtype", "value", "unit", "per", "source", "source_url")
DTYPES = ("fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class HardwareFigure:
    """One row of the table: a figure of a GPU model or a link, with the document it comes from."""

    kind: str
    model: str
    match: str
    quantity: str
    dtype: str
    value: float
    unit: str
    per: str
    source: str
    source_url: str

    def matches(self, reported_name: str) -> bool:
        """Whether a name a tool reported (nsys, torch, nvidia-smi) is this row's model."""
        return bool(self.match) and re.search(self.match, reported_name, re.IGNORECASE) is not None


@functools.lru_cache(maxsize=1)
def figures() -> tuple[HardwareFigure, ...]:
    """Every row of ``hardware.csv`` (read once), checked: a number, a unit and a source on each."""
    out = []
    with TABLE_PATH.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise InputError(TABLE_PATH, "line 1", f"the columns {', '.join(COLUMNS)}")
        for row in reader:
            where = f"line {reader.line_num}"
            try:
                value = float(row["value"])
            except ValueError:
                raise InputError(TABLE_PATH, where, f"a number in 'value', got {row['value']!r}") from None
            if not row["source"] or not row["source_url"].startswith("https://") or not row["unit"]:
                raise InputError(TABLE_PATH, where, "a unit, a source and an https source_url on every row")
            if row["quantity"] == "peak_flops" and row["dtype"] not in DTYPES:
                raise InputError(TABLE_PATH, where, f"a dtype among {', '.join(DTYPES)}")
            out.append(HardwareFigure(row["kind"], row["model"], row["match"], row["quantity"], row["dtype"], value,
                                      row["unit"], row["per"], row["source"], row["source_url"]))
    return tuple(out)


def gpu_model(reported_name: str) -> str | None:
    """The table's model for a reported GPU name (``NVIDIA H100 80GB HBM3`` → ``H100 SXM5 80GB``), or None."""
    for f in figures():
        if f.kind == "gpu" and f.matches(reported_name):
            return f.model
    return None


def gpu_figure(reported_name: str, quantity: str, dtype: str = "") -> HardwareFigure | None:
    """The row for ``quantity`` (and ``dtype``) of the GPU called ``reported_name``; None when the table lacks it."""
    model = gpu_model(reported_name)
    if model is None:
        return None
    return next((f for f in figures() if f.kind == "gpu" and f.model == model and f.quantity == quantity
                 and f.dtype == dtype), None)


def peak_flops(reported_name: str, dtype: str) -> HardwareFigure | None:
    """Dense peak FLOP/s of a GPU for ``dtype`` (``bf16``, ``fp32``, ...), with its source."""
    return gpu_figure(reported_name, "peak_flops", dtype)


def memory_bandwidth(reported_name: str) -> HardwareFigure | None:
    """Peak device-memory bandwidth (B/s) of a GPU, with its source."""
    return gpu_figure(reported_name, "memory_bandwidth")


def link_bandwidth(model: str, *, per_direction: bool = True) -> float | None:
    """A link's bandwidth in B/s (``PCIe 4.0 x16``, ``NVLink 4 (H100)``...), per direction by default.

    Rows marked ``total`` count both directions (NVIDIA's NVLink figures): halved per direction.
    """
    f = next((x for x in figures() if x.kind == "link" and x.model == model), None)
    if f is None:
        return None
    return f.value / 2 if per_direction and f.per == "total" else f.value


def mfu(flops_per_step: float, step_seconds: float, reported_name: str, dtype: str, gpus: int = 1) -> float | None:
    """Model FLOPs utilisation: achieved FLOP/s over ``gpus`` × the dense peak (None when the peak is unknown)."""
    peak = peak_flops(reported_name, dtype)
    if peak is None or step_seconds <= 0 or gpus < 1:
        return None
    return flops_per_step / step_seconds / (peak.value * gpus)
