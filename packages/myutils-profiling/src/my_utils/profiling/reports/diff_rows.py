"""What the Markdown and HTML pages of a diff show, computed once: rows in display order, numbers as text.

A change nested in another listed change (``DiffResult.folded``: ``aten::_local_scalar_dense``
inside ``aten::item``) comes right under its ancestor with a depth, so the same milliseconds
are never listed as two separate slow-downs; the top-level rows are the ones counted. Names
are cut to ``NAME_CHARS`` with an ellipsis (the full name stays in the JSON and in the HTML's
hover text) and folded onto one line. Nothing here escapes: each renderer escapes for its format.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import one_line
from my_utils.profiling.providers.kineto_context import PLACE_KEYS

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff import DiffResult, OpChange, OpStats

NAME_CHARS = 80
#: Labels of the hardware fields, in the order the pages list them.
HARDWARE_LABELS: dict[str, str] = {
    "gpu": "GPU", "gpu_count": "GPUs visible", "gpu_memory_gib": "GPU memory (GiB)",
    "compute_capability": "compute capability", "sms": "SMs", "world_size": "world size", "rank": "rank", "ranks": "ranks",
    "backend": "backend", "torch": "torch", "cuda_runtime": "CUDA runtime", "cuda_driver": "CUDA driver",
    "cupti": "CUPTI", "nccl": "NCCL", "host": "host", "hosts": "hosts", "cpu": "CPU", "cpu_count": "CPUs",
    "machine": "machine",
}


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    """``name`` on one line, control characters as spaces, cut to ``limit`` characters with an ellipsis."""
    text = "".join(" " if (ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0) else ch for ch in one_line(str(name)))
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def number(value: float, digits: int = 3) -> str:
    """``value`` with thousands separators and ``digits`` decimals."""
    return f"{value:,.{digits}f}"


def stats_text(s: OpStats | None) -> str:
    """``mean ± std unit`` of one side, or an en dash when the name is absent there."""
    if s is None:
        return "–"
    unit = f" {s.unit}" if s.unit else ""
    return f"{number(s.mean)} ± {number(s.std)}{unit}"


def pct_text(c: OpChange) -> str:
    """The change in percent of the base, ``new``/``gone`` for names on one side only."""
    if c.base is None:
        return "new"
    if c.target is None:
        return "gone"
    return f"{c.delta_pct:+.1f}%" if c.delta_pct is not None else "n/a"


def count_text(value: float) -> str:
    """A count delta per step, signed, at most 3 decimals."""
    text = f"{value:+,.3f}".rstrip("0").rstrip(".")
    return "+0" if text in ("+", "-", "+0", "-0") else text


@dataclass(frozen=True)
class DiffRow:
    """One displayed change: ``depth`` 0 for a counted change, 1+ for one nested in the row above."""

    name: str  # the full name
    shown: str  # cut, one line
    depth: int
    status: str
    base: str
    target: str
    delta: str
    pct: str
    count: str
    change: OpChange


def rows(result: DiffResult, limit: int) -> tuple[list[DiffRow], int, int]:
    """Up to ``limit`` rows of the significant changes, nested ones under their ancestor.

    Returns ``(rows, top-level changes, nested changes)`` counted over all significant changes.
    """
    sig = result.significant
    folded = result.folded()
    children: dict[str, list[OpChange]] = defaultdict(list)
    for c in sig:
        if c.name in folded:
            children[folded[c.name]].append(c)
    out: list[DiffRow] = []

    def add(c: OpChange, depth: int) -> None:
        if len(out) >= limit:
            return
        unit = f" {c.unit}" if c.unit else ""
        out.append(DiffRow(c.name, short_name(c.name), depth, c.status, stats_text(c.base), stats_text(c.target),
                           f"{c.delta:+,.3f}{unit}", pct_text(c), count_text(c.count_delta), c))
        for child in children.get(c.name, []):
            add(child, depth + 1)

    top = [c for c in sig if c.name not in folded]
    for c in top:
        add(c, 0)
    return out, len(top), len(sig) - len(top)


def step_line(result: DiffResult) -> str | None:
    """``77.491 ms → 124.067 ms (+60.1%, significant; noise ±39.450 ms)``, or None without steps on both sides."""
    step = result.step_time
    if step is None or step.base is None or step.target is None:
        return None
    unit = f" {step.base.unit}" if step.base.unit else ""
    verdict = "significant" if step.significant else "within noise"
    return (f"{number(step.base.mean)}{unit} → {number(step.target.mean)}{unit} ({pct_text(step)}, {verdict}; "
            f"noise ±{number(step.noise)}{unit})")


def hardware_rows(result: DiffResult) -> list[tuple[str, str, str, bool]]:
    """``(label, base, target, differs)`` for every hardware field either side knows."""
    a, b = result.base_hardware, result.target_hardware
    keys = [k for k in HARDWARE_LABELS if k in a or k in b]
    keys += [k for k in dict.fromkeys([*a, *b]) if k not in HARDWARE_LABELS and k != "rank_source"]
    out = []
    for key in keys:
        va, vb = a.get(key), b.get(key)
        differs = va is not None and vb is not None and va != vb and key not in PLACE_KEYS
        out.append((HARDWARE_LABELS.get(key, key), _value(va), _value(vb), differs))
    return out


def _value(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)
