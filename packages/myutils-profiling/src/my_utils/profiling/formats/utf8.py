"""JSON-like data made writable as UTF-8: one helper for every layer that writes what a trace named.

Below the readers so that the run model, the views and the CLI clean data the same way.
"""

from __future__ import annotations

from typing import Any


def utf8_clean(obj: Any) -> Any:
    """``obj`` (JSON-like) with every string, keys included, made writable as UTF-8 (``safe_io.utf8_text``).

    Kineto traces may name a kernel with a lone surrogate (a ``\\udcNN`` escape): valid JSON,
    but no UTF-8 writer can write it. Walked without recursion limits beyond the data's own.
    """
    from my_utils.core.safe_io import utf8_text

    if isinstance(obj, str):
        return utf8_text(obj)
    if isinstance(obj, dict):
        return {utf8_clean(k): utf8_clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [utf8_clean(v) for v in obj]
    return obj
