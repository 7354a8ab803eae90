"""Nsight Compute analysis: per-kernel speed of light, occupancy, limiting unit, roofline and rules.

The run-to-run comparison of ncu exports is diagnosis: ``my_utils.profiling.analysis.diff_ncu``.

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
    from my_utils.profiling.ncu.launches import NcuLaunch as NcuLaunch
    from my_utils.profiling.ncu.launches import NcuRule as NcuRule
    from my_utils.profiling.ncu.launches import read_launches as read_launches

_EXPORTS = {
    "KernelSummary": "my_utils.profiling.ncu.analysis", "NcuAnalysis": "my_utils.profiling.ncu.analysis",
    "analyze_files": "my_utils.profiling.ncu.analysis", "analyze_launches": "my_utils.profiling.ncu.analysis",
    "NcuLaunch": "my_utils.profiling.ncu.launches", "NcuRule": "my_utils.profiling.ncu.launches",
    "read_launches": "my_utils.profiling.ncu.launches",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
