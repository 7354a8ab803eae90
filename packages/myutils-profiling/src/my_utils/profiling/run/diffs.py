"""Two runs compared, per kind of input both hold: Kineto traces, nsys exports, ncu exports.

Each comparison is the one its command makes (``diff --base-trace``, ``nsys diff``, ``ncu diff``):
the same noise test, so a notebook and a CI gate agree on what changed.
"""

from __future__ import annotations

from typing import Any

from my_utils.profiling.formats.kinds import FileKind
from my_utils.profiling.run.inputs import RunInputs

__all__ = ["diff_results"]


def diff_results(base: RunInputs, target: RunInputs, *, sigmas: float = 3.0, min_pct: float = 5.0,
                 executor: Any = None) -> dict[str, Any]:
    """``{"kineto": DiffResult, "nsys": DiffResult, "ncu": NcuDiff}`` for each kind both runs hold."""
    out: dict[str, Any] = {}
    a, b = base.of(FileKind.KINETO_TRACE), target.of(FileKind.KINETO_TRACE)
    if a and b:
        from my_utils.profiling.analysis.diff import diff_traces

        out["kineto"] = diff_traces(a, b, sigmas=sigmas, min_pct=min_pct, executor=executor)
    if base.nsys_specs and target.nsys_specs:
        from my_utils.profiling.analysis.diff_nsys import diff_exports

        out["nsys"] = diff_exports(list(base.nsys_specs), list(target.nsys_specs), sigmas=sigmas, min_pct=min_pct)
    ncu_a, ncu_b = (x.of(FileKind.NCU_CSV, FileKind.NCU_REP) for x in (base, target))
    if ncu_a and ncu_b:
        from my_utils.profiling.analysis.diff_ncu import diff_ncu

        out["ncu"] = diff_ncu(ncu_a, ncu_b, sigmas=sigmas, min_pct=min_pct)
    return out
