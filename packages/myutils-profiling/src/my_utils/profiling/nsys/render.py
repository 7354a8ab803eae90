"""Tables as text for a terminal and as CSV (the project's one writer, :mod:`my_utils.core.csv_safe`).

Rendering only: every number was computed before (``*_ns`` columns are shown in ms for
reading; CSV keeps the raw nanoseconds, so a spreadsheet gets exact values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from my_utils.core.csv_safe import csv_table

MAX_CELL = 60


def _cell(value: Any, ns: bool) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) and ns:
        return f"{value / 1e6:.3f}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value / 1e6:.3f}" if ns else f"{value:.3f}" if abs(value) < 1e6 else f"{value:.4g}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def text_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> str:
    """An aligned text table; ``*_ns`` columns are shown as ``*_ms``."""
    ns = [c.endswith("_ns") for c in columns]
    head = [c[:-3] + "_ms" if n else c for c, n in zip(columns, ns, strict=True)]
    body = [[_cell(v, n) for v, n in zip(r, ns, strict=True)] for r in rows]
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(head)]
    numeric = [all(_is_num(r[i]) for r in rows if r[i] is not None) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric, strict=True)).rstrip()

    out = [title] if title else []
    out += [line(head), line(["-" * w for w in widths])] + [line(b) for b in body]
    if not rows:
        out.append("(no rows)")
    return "\n".join(out)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def csv_text(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """CSV with a header: text cells formula-safe whatever the reader's row split, numbers as written."""
    return csv_table(columns, rows)
