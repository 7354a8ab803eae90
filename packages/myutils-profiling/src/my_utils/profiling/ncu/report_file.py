"""``.ncu-rep`` reports through NVIDIA's ``ncu_report`` module, or a one-line refusal when it is absent.

``ncu_report`` ships with Nsight Compute (``extras/python``) and is not on PyPI, so this
reader cannot be exercised where Nsight Compute is not installed; it reads each action's
metrics by name (value as a number when it is one, with its unit) and nothing else.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.profiling.ncu.launches import NcuLaunch, refuse_report


def ncu_report_module() -> tuple[Any | None, str]:
    """NVIDIA's ``ncu_report`` module when importable, else None and why not."""
    try:
        return importlib.import_module("ncu_report"), ""
    except ImportError as exc:
        return None, f"not importable: {exc}"


def read_report(path: Path) -> list[NcuLaunch]:
    """The launches of a ``.ncu-rep`` (every action of every range); refused in one line without ``ncu_report``."""
    module, reason = ncu_report_module()
    if module is None:
        raise refuse_report(path, reason)
    try:
        ctx = module.load_report(str(path))
    except Exception as exc:
        raise InputError(path, None, f"a report ncu_report can load ({type(exc).__name__}: {exc})") from None
    out: list[NcuLaunch] = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            launch = NcuLaunch(path.name, str(len(out)), str(action.name()))
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                try:
                    value = float(metric.as_double())
                except (TypeError, ValueError):
                    continue
                unit = str(metric.unit() or "")
                if name == "gpu__time_duration.sum" and unit in ("nsecond", "ns"):
                    value, unit = value / 1e6, "ms"
                launch.metrics[str(name)] = (value, unit)
            out.append(launch)
    return out
