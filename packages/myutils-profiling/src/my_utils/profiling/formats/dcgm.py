"""DcgmDmonProvider: the table ``dcgmi dmon -e <field ids>`` prints, one GPU sample per row.

dcgmi prints a header (``#Entity`` and each field's short name), a line of units (``ID``,
``W``, ``C``...), then one row per entity and sample (``GPU 0``, ``GPU-I 1``, ``GPU 0 LINK 2``),
values in fixed-width columns, ``N/A`` where a value is blank, and the header again every 14
samples (DCGM's ``dcgmi/DeviceMonitor.cpp``). Columns are read by the header's positions,
so blank cells and names with spaces stay in their column. Lines may start with a time stamp
added on the way to the file (``dcgmi dmon ... | ts '%.s'`` or an ISO 8601 time with a zone):
it becomes the event's ``ts``; a local time without a zone is kept in ``attrs["time"]`` only.

Each value becomes ``dcgm.<field>:<entity>`` (``dcgm.sm_active:gpu0``): the profiling fields
1001-1008 and 1013-1014 (``GRACT``, ``SMACT``, ``SMOCC``, ``TENSO``, ``DRAMA``, ``FP64A``,
``FP32A``, ``FP16A``, ``TIMMA``, ``THMMA``), which DCGM reports as ratios 0-1, in percent
(kind ``ratio``: averaged over samples); ``GPUTL``/``MCUTL`` in percent; power (W),
temperatures (C), clocks (MHz), frame buffer (MiB) and PCIe/NVLink throughput (B/s) as
gauges; other fields under their short name with the unit dcgmi printed. ``N/A`` is not
measured (NaN, ``attrs["status"]``), never 0. Samples have no step: ``attrs["sample"]``
counts them per entity. ``attrs["metric"]`` is the canonical name (``my_utils.core.metric_names``)
of the fields other tools record too (``SMACT`` is ``gpu.sm_active``, as nsys's ``SMs Active``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.core.metric_names import lookup
from my_utils.profiling.formats._files import rank_from_name
from my_utils.profiling.formats._text import TextLogProvider, inert, shown, text_lines

_WHAT = "a 'dcgmi dmon' table"

#: short name -> (event field, unit, kind, scale): DCGM's field definitions (dcgm_fields.h/.cpp)
FIELDS: dict[str, tuple[str, str, str, float]] = {
    "GRACT": ("gr_engine_active", "%", "ratio", 100.0),   # 1001
    "SMACT": ("sm_active", "%", "ratio", 100.0),          # 1002
    "SMOCC": ("sm_occupancy", "%", "ratio", 100.0),       # 1003
    "TENSO": ("tensor_active", "%", "ratio", 100.0),      # 1004
    "DRAMA": ("dram_active", "%", "ratio", 100.0),        # 1005
    "FP64A": ("fp64_active", "%", "ratio", 100.0),        # 1006
    "FP32A": ("fp32_active", "%", "ratio", 100.0),        # 1007
    "FP16A": ("fp16_active", "%", "ratio", 100.0),        # 1008
    "TIMMA": ("tensor_imma_active", "%", "ratio", 100.0),  # 1013
    "THMMA": ("tensor_hmma_active", "%", "ratio", 100.0),  # 1014
    "PCITX": ("pcie_tx", "B/s", "gauge", 1.0),            # 1009
    "PCIRX": ("pcie_rx", "B/s", "gauge", 1.0),            # 1010
    "NVLTX": ("nvlink_tx", "B/s", "gauge", 1.0),          # 1011
    "NVLRX": ("nvlink_rx", "B/s", "gauge", 1.0),          # 1012
    "GPUTL": ("gpu_util", "%", "ratio", 1.0),             # 203
    "MCUTL": ("mem_copy_util", "%", "ratio", 1.0),        # 204
    "POWER": ("power", "W", "gauge", 1.0),                # 155
    "POWINST": ("power_instant", "W", "gauge", 1.0),      # 158
    "TMPTR": ("gpu_temp", "C", "gauge", 1.0),             # 150
    "MMTMP": ("memory_temp", "C", "gauge", 1.0),          # 140
    "SMCLK": ("sm_clock", "MHz", "gauge", 1.0),           # 100
    "MMCLK": ("mem_clock", "MHz", "gauge", 1.0),          # 101
    "FBTTL": ("fb_total", "MiB", "gauge", 1.0),           # 250
    "FBFRE": ("fb_free", "MiB", "gauge", 1.0),            # 251
    "FBUSD": ("fb_used", "MiB", "gauge", 1.0),            # 252
}

_STAMP = re.compile(r"^\s*(?:\[(?P<b>[^\]]+)\]|(?P<t>\d{9,11}(?:\.\d+)?|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}"
                    r"(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?))\s+(?=\S)")
_ENTITY = re.compile(r"^(?P<group>GPU-CI|GPU-I|vGPU|GPU|Switch|SW|CPU|Core|Link)\s+(?P<id>\d+)"
                     r"(?:\s+LINK\s+(?P<link>\d+))?(?=[\s,]|$)")
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


@dataclass
class _Column:
    short: str
    start: int
    end: int | None
    unit: str = ""


def _stamp(text: str) -> tuple[float | None, str | None]:
    """The unix time of a line's time stamp (None without a zone) and its text."""
    text = text.strip()
    if re.fullmatch(r"\d{9,11}(?:\.\d+)?", text):
        return float(text), text
    try:
        when = datetime.fromisoformat(text.replace(",", "."))
    except ValueError:
        return None, text
    return (when.timestamp() if when.tzinfo is not None else None), text


def _entity(m: re.Match[str]) -> tuple[str, str]:
    """(the entity as dcgmi prints it, its name part in event names): ``("GPU 0", "gpu0")``."""
    group, ident, link = m.group("group"), m.group("id"), m.group("link")
    label = f"{group} {ident}" + (f" LINK {link}" if link else "")
    key = group.lower().replace("-", "_") + ident + (f"_link{link}" if link else "")
    return label, key


class _Table:
    """The layout in force (from the last header) and the samples counted per entity."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.columns: list[_Column] = []
        self.units_next = False
        self.samples: dict[str, int] = {}
        self.sep: str | None = None  # "," when the table was saved with commas between cells

    def header(self, number: int, text: str) -> None:
        self.sep = "," if "," in text else None
        if self.sep:
            cells = [c.strip() for c in text.split(",")]
            self.columns = [_Column(inert(c, 40), i, None) for i, c in enumerate(cells[1:])]
            if not self.columns or not all(c.short for c in self.columns):
                raise InputError(self.path, f"line {number}", "a '#Entity' header naming a field in every column")
            self.units_next = True
            return
        tokens = [(m.group(), m.start()) for m in re.finditer(r"\S+", text)]
        if len(tokens) < 2:
            raise InputError(self.path, f"line {number}", "a '#Entity' header naming at least one field")
        cols = tokens[1:]
        self.columns = [_Column(inert(short, 40), start, cols[i + 1][1] if i + 1 < len(cols) else None)
                        for i, (short, start) in enumerate(cols)]
        self.units_next = True

    def units(self, text: str) -> None:
        if self.sep:
            cells = [c.strip() for c in text.split(self.sep)][1:]
            for col in self.columns:
                col.unit = inert(cells[col.start], 20) if col.start < len(cells) else ""
            self.units_next = False
            return
        for col in self.columns:
            col.unit = inert(text[col.start:col.end].strip(), 20)
        self.units_next = False

    def values(self, number: int, text: str, rest_at: int) -> list[str]:
        if self.sep:
            cells = [c.strip() for c in text[rest_at:].strip().removeprefix(self.sep).split(self.sep)]
            if len(cells) != len(self.columns):
                raise InputError(self.path, f"line {number}", f"{len(self.columns)} comma-separated values, one per "
                                 f"header column; found {len(cells)}")
            return cells
        tokens = text[rest_at:].split()
        if len(tokens) == len(self.columns):
            return tokens
        if self.columns and len(text) > self.columns[0].start and not text[rest_at:self.columns[0].start].strip():
            return [text[c.start:c.end].strip() for c in self.columns]
        names = " ".join(c.short for c in self.columns)
        raise InputError(self.path, f"line {number}", f"{len(self.columns)} values, one per header column ({names}), "
                         f"in the header's columns; found {len(tokens)} in {shown(text)}")


def read_dcgm_dmon(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Parse one saved ``dcgmi dmon`` output into metric events (one per entity, sample and field)."""
    rank = rank if rank is not None else rank_from_name(path)
    table = _Table(path)
    out: list[MetricEvent] = []
    base = {"file": path.name}
    for number, line in text_lines(path, _WHAT):
        stamp = _STAMP.match(line)
        ts: float | None = None
        time_text: str | None = None
        if stamp is not None and not line.lstrip().startswith(("#", "GPU", "ID")):
            ts, time_text = _stamp(stamp.group("b") or stamp.group("t"))
            text = " " * stamp.end() + line[stamp.end():]  # the columns keep their positions
        else:
            text = line
        body = text.strip()
        if not body or body.startswith("dmon was stopped"):
            continue
        if body.startswith("#Entity"):
            table.header(number, text)
            continue
        if table.units_next and body.startswith("ID"):
            table.units(text)
            continue
        m = _ENTITY.match(body)
        if m is None:
            raise InputError(path, f"line {number}", f"{_WHAT}: a '#Entity' header, its 'ID' unit line or a sample "
                             f"row 'GPU <id> <values>'; found {shown(body)}")
        if not table.columns:
            raise InputError(path, f"line {number}", f"{_WHAT}: a '#Entity' header line before the first sample")
        table.units_next = False
        label, key = _entity(m)
        values = table.values(number, text, len(text) - len(text.lstrip()) + m.end())
        sample = table.samples.get(key, 0)
        table.samples[key] = sample + 1
        for col, cell in zip(table.columns, values, strict=True):
            event = _event(col, cell, label, key, sample)
            if event is None:
                continue
            name, value, kind, unit, attrs = event
            attrs.update(base, line=number)
            if time_text is not None and ts is None:
                attrs["time"] = time_text
            out.append(MetricEvent(name=name, value=value, kind=kind, unit=unit, source="dcgm_dmon", rank=rank,
                                   ts=ts, attrs=attrs))
    if not out:
        raise UnsupportedInputError(path, None, f"{_WHAT}: a '#Entity' header and sample rows; found no sample")
    return out


def _event(col: _Column, cell: str, label: str, key: str,
           sample: int) -> tuple[str, float, str, str, dict[str, Any]] | None:
    known = FIELDS.get(col.short)
    field, unit, kind, scale = known if known else (
        re.sub(r"[^\w.+\-]", "_", col.short.lower()), col.unit, "gauge", 1.0)
    attrs: dict[str, Any] = {"entity": label, "field": col.short, "sample": sample}
    canonical = lookup("dcgm", col.short)  # one name for the metric whichever tool recorded it
    if canonical is not None:
        attrs["metric"] = canonical[0].name
    if label.startswith("GPU ") and " LINK " not in label:
        attrs["gpu"] = int(label.split()[1])
    if not cell:  # dcgmi leaves a field this entity does not have blank
        return None
    if cell == "N/A":
        attrs["status"] = "N/A"
        value = math.nan
    elif _NUMBER.match(cell):
        value = float(cell) * scale if scale == 1.0 else round(float(cell) * scale, 9)  # 0.702 -> 70.2, not 70.1999
        if not math.isfinite(value):
            return None
    else:  # a text field (a name, a version): context, not a metric
        return None
    return f"dcgm.{field}:{key}", value, kind, unit, attrs


def looks_like_dmon(text: str) -> bool:
    """Whether ``text`` (the head of a file) holds a ``dcgmi dmon`` header."""
    return any(line.lstrip().startswith("#Entity") or "#Entity " in line[:40] for line in text.splitlines())


class DcgmDmonProvider(TextLogProvider):
    """GPU activity, power, temperature and memory per sample from saved ``dcgmi dmon`` output."""

    name = "dcgm_dmon"
    patterns = ("*.txt", "*.log", "*.dmon", "*.csv")
    what = "dcgmi dmon output"
    expected = _WHAT

    def looks_like(self, head: str) -> bool:
        """A ``#Entity`` header."""
        return looks_like_dmon(head)

    def read(self, path: Path) -> list[MetricEvent]:
        """One file's events."""
        return read_dcgm_dmon(path, self.rank)
