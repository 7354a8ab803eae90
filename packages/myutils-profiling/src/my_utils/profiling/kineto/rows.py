"""The base of every table row: a frozen dataclass that turns into one plain JSON dict."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any


class Row:
    """Mixin for the frozen row dataclasses; ``to_row()`` gives the JSON-ready dict."""

    _private: tuple[str, ...] = ()  # fields kept for merging ranks, not shown in tables

    def to_row(self) -> dict[str, Any]:
        """The row as a dict of plain values (NaN becomes None: strict JSON has no NaN)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name in self._private:
                continue
            value = getattr(self, f.name)
            out[f.name] = None if isinstance(value, float) and not math.isfinite(value) else value
        return out


#: What an analysis returns: rows (``Row`` objects or plain dicts) per table name (``kineto.registry``).
Tables = dict[str, Sequence[Any]]


def pct(part: float, whole: float) -> float:
    """``100 * part / whole``, NaN when ``whole`` is zero."""
    return 100.0 * part / whole if whole > 0 else math.nan
