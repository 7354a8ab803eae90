"""The step times a my_utils capture window wrote into its trace (``otherData.myutils_capture``).

myutils-tracing's ``TorchProfilerBackend`` records, with each window's trace, the steps since
the previous window: each step's time and whether the window profiled all of it (``inside``),
none of it (``outside``) or part (``partial``: the profiler's start or its export). Two tables:
``capture_windows`` (one row per trace: the window and the steps it holds) and
``capture_steps`` (one row per recorded step). ``analysis.capture_overhead`` turns them into
the ``capture.overhead`` fact. A trace without the record gives no rows; a malformed record
is skipped row by row (a trace is evidence, not configuration).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_STATES = frozenset({"inside", "outside", "partial"})


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def capture_tables(metadata: Mapping[str, Any], rank: int | None, file: str) -> dict[str, tuple[dict[str, Any], ...]]:
    """``{"capture_windows": ..., "capture_steps": ...}`` of one trace (empty when it holds no capture record)."""
    other = metadata.get("otherData")
    capture = other.get("myutils_capture") if isinstance(other, Mapping) else None
    if not isinstance(capture, Mapping):
        return {}
    window = str(capture.get("window") or "")
    windows = ({"rank": rank, "file": file, "window": window, "first_step": _int(capture.get("first_step")),
                "last_step": _int(capture.get("last_step")), "stop_reason": capture.get("stop_reason")},)
    steps = []
    for s in capture.get("steps") or ():
        if not isinstance(s, Mapping):
            continue
        step, ms, state = _int(s.get("step")), s.get("ms"), s.get("state")
        if step is None or state not in _STATES or not isinstance(ms, (int, float)) or isinstance(ms, bool) \
                or not math.isfinite(ms) or ms < 0:
            continue
        steps.append({"rank": rank, "window": window, "step": step, "ms": float(ms), "state": state})
    return {"capture_windows": windows, "capture_steps": tuple(steps)}
