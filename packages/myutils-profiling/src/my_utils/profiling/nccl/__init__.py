"""NCCL's own outputs analysed: Inspector logs (top operations, rank skew, Prometheus text), RAS client output,
and the links an ``NCCL_DEBUG=INFO`` log describes (expected bus bandwidth per communicator).

Light to import: names resolve on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

if TYPE_CHECKING:
    from my_utils.profiling.nccl.inspector import InspectorAnalysis as InspectorAnalysis
    from my_utils.profiling.nccl.inspector import analyze_inspector as analyze_inspector
    from my_utils.profiling.nccl.ras import RasReport as RasReport
    from my_utils.profiling.nccl.ras import read_ras as read_ras
    from my_utils.profiling.nccl.topology import NcclTopology as NcclTopology
    from my_utils.profiling.nccl.topology import expected_busbw as expected_busbw
    from my_utils.profiling.nccl.topology import read_topology as read_topology

_EXPORTS = {
    "InspectorAnalysis": "my_utils.profiling.nccl.inspector", "analyze_inspector": "my_utils.profiling.nccl.inspector",
    "RasReport": "my_utils.profiling.nccl.ras", "read_ras": "my_utils.profiling.nccl.ras",
    "NcclTopology": "my_utils.profiling.nccl.topology", "expected_busbw": "my_utils.profiling.nccl.topology",
    "read_topology": "my_utils.profiling.nccl.topology",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
