"""The operation model: FLOPs and bytes per operator and shape, breakdowns down to argument shapes, the roofline,
an operation-matched diff, per-operation memory and replay scripts (issue 38).

``op_cost(name, args)`` models one call (``cost``, ``flops``, ``norms``, ``traffic``); ``ops_tables``
is the registered Kineto analysis (``ops``) giving every table of a rank; ``op_frames`` and
``reports.roofline_chart.roofline_figure`` give them as DataFrames and a plotly figure;
``reports.table_export.write_tables`` writes CSV and an Excel workbook; ``replay_script`` /
``replay_from_trace`` write a standalone script that re-runs one operation; ``ops.op_diff.op_diff``
pairs the operations of two runs (not re-exported here: the name is its module's).
Light to import: names resolve on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Cost": "my_utils.profiling.kineto.ops.cost",
    "op_cost": "my_utils.profiling.kineto.ops.cost",
    "OpArgs": "my_utils.profiling.kineto.ops.args",
    "ops_tables": "my_utils.profiling.kineto.ops.tables",
    "op_frames": "my_utils.profiling.kineto.ops.frames",
    "replay_script": "my_utils.profiling.kineto.ops.replay",
    "replay_from_trace": "my_utils.profiling.kineto.ops.replay",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.kineto.ops.args import OpArgs as OpArgs
    from my_utils.profiling.kineto.ops.cost import Cost as Cost
    from my_utils.profiling.kineto.ops.cost import op_cost as op_cost
    from my_utils.profiling.kineto.ops.frames import op_frames as op_frames
    from my_utils.profiling.kineto.ops.replay import replay_from_trace as replay_from_trace
    from my_utils.profiling.kineto.ops.replay import replay_script as replay_script
    from my_utils.profiling.kineto.ops.tables import ops_tables as ops_tables
