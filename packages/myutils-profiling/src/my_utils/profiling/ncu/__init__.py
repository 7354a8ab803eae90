"""Nsight Compute analysis: per-kernel speed of light, occupancy, limiting unit, roofline, rules, and diffs.

Light to import: names resolve on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

if TYPE_CHECKING:
    from my_utils.profiling.ncu.analysis import KernelSummary as KernelSummary
    from my_utils.profiling.ncu.analysis import NcuAnalysis as NcuAnalysis
    from my_utils.profiling.ncu.analysis import analyze_files as analyze_files
    from my_utils.profiling.ncu.analysis import analyze_launches as analyze_launches
    from my_utils.profiling.ncu.diff import NcuDiff as NcuDiff
    from my_utils.profiling.ncu.diff import diff_ncu as diff_ncu
    from my_utils.profiling.ncu.launches import NcuLaunch as NcuLaunch
    from my_utils.profiling.ncu.launches import NcuRule as NcuRule
    from my_utils.profiling.ncu.launches import read_launches as read_launches

_EXPORTS = {
    "KernelSummary": "my_utils.profiling.ncu.analysis", "NcuAnalysis": "my_utils.profiling.ncu.analysis",
    "analyze_files": "my_utils.profiling.ncu.analysis", "analyze_launches": "my_utils.profiling.ncu.analysis",
    "NcuDiff": "my_utils.profiling.ncu.diff", "diff_ncu": "my_utils.profiling.ncu.diff",
    "NcuLaunch": "my_utils.profiling.ncu.launches", "NcuRule": "my_utils.profiling.ncu.launches",
    "read_launches": "my_utils.profiling.ncu.launches",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
