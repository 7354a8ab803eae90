"""The operation model as one registered Kineto analysis (``kineto.registry``: ``ops``): every table of one rank.

Beyond Holistic Trace Analysis (HTA has no operation model: its kernel breakdown stops at kernel
names); the question it answers is the one AMD's TraceLens perf model answers, with the formulas
derived and cited in ``ops.flops``, ``ops.norms`` and ``ops.traffic``.
"""

from __future__ import annotations

from my_utils.profiling.kineto.ops.breakdown import TOP_SHAPES, op_tables
from my_utils.profiling.kineto.ops.op_memory import TOP_OPERATORS, memory_tables
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Tables

#: The tables the analysis writes (``kineto_<name>`` in a report).
TABLES = ("op_categories", "op_operators", "op_shapes", "op_coverage", "op_memory", "memory_peaks")


def ops_tables(d: RankData, top: int = TOP_SHAPES, top_memory: int = TOP_OPERATORS) -> Tables:
    """GPU time by category, operator and shape against the roofline, and memory per operator (``ops.breakdown``,
    ``ops.op_memory``); ``top`` shape rows and ``top_memory`` memory rows are kept."""
    out: Tables = dict(op_tables(d, top))
    out.update(memory_tables(d, top_memory))
    return out
