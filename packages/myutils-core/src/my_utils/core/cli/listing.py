"""The text of ``myutils plugins list``: a table or JSON rows, without typer.

Shared by the typer command and the start-up fast path (``cli.entry``), which must print the
same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from my_utils.core.plugin_types import PluginRecord

__all__ = ["COLUMNS", "render_records"]

COLUMNS = ("name", "kind", "distribution", "version", "status")


def _table(records: Sequence[PluginRecord]) -> str:
    rows = [COLUMNS] + [
        (r.name, r.kind, r.distribution or "-", r.version or "-",
         f"{r.status.value} ({r.reason})" if r.reason else r.status.value)
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    )


def render_records(records: Sequence[PluginRecord], as_json: bool) -> str:
    """The rows as ``plugins list`` prints them (without the final newline)."""
    if as_json:
        return json.dumps([r.as_dict() for r in records], indent=2)
    return _table(records)
