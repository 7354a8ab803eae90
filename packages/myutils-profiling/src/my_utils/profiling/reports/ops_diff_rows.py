"""The operation-matched section of a diff page (``kineto.ops.op_diff``): one summary line and one table.

Shared by the Markdown and HTML diff pages, like ``diff_rows``: the line says how much of the
base's GPU time the operations paired, at which level, against what a kernel-name match pairs;
the table lists the operations whose per-step GPU time changed most, with their percent of the
roofline on each side where the model and the hardware table allow it ("–" where not).
"""

from __future__ import annotations

from typing import Any

HEADERS = ("operation", "paired by", "stack", "base µs/step", "target µs/step", "Δ µs/step", "base % of roof",
           "target % of roof")
TITLE = "Operations matched across the runs (operator, shapes and call stack)"


def summary_line(op: Any) -> str:
    """``Operations paired 100% of the base's GPU time (…); kernel names would pair 72%.``"""
    levels = ", ".join(f"{pct:.0f}% by {level}" for level, pct in op.by_level.items() if pct >= 0.5)
    return (f"Operations paired {op.paired_pct:.0f}% of the base's GPU time ({levels or 'none'}); matching kernel "
            f"names would pair {op.name_paired_pct:.0f}%. " + " ".join(f"{n}." for n in op.notes))


def _us(v: float | None) -> str:
    return "–" if v is None else f"{v:,.1f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}%"


def table_rows(op: Any, limit: int | None = None) -> list[tuple[str, ...]]:
    """The table's rows as text, largest change first (``limit`` rows)."""
    from my_utils.profiling.reports.diff_rows import short_name

    out: list[tuple[str, ...]] = []
    for p in list(op.rows)[:limit]:
        what = p.operator + (f" {p.shapes}" if p.shapes else "")
        out.append((short_name(what, 160), p.level, short_name(p.stack, 160), _us(p.base_us), _us(p.target_us),
                    f"{p.delta_us:+,.1f}", _pct(p.base_roofline_pct), _pct(p.target_roofline_pct)))
    return out
