"""The analyses users pick Holistic Trace Analysis for, over Kineto traces, per rank and for all ranks.

``analyze_traces(paths, ranks=None, executor="process") -> KinetoAnalysis``: temporal
breakdown, GPU kernel breakdown, idle-time breakdown (per stream and per device),
compute–communication overlap, kernel launch statistics, GPU time per user annotation,
CUDA syncs, the profiler's own overhead, the trace's context (GPU, ranks, versions) and a
capture-health check, each file streamed once — plus the registered analyses
(``kineto.registry``: critical path, queue length, copy bandwidth, kernel sequences, ATen
launch delays, call stacks, collectives, stragglers, CUPTI counters, MFU, idle explained).
``TraceFilter`` keeps part of each trace; ``kineto_frames`` gives every table as a pandas
DataFrame; ``critical_path.critical_path`` / ``stack_of`` answer for one window / one event;
``write_overlay`` writes the critical path and counter tracks back into a trace for Perfetto.
Light to import: names resolve on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "analyze_traces": "my_utils.profiling.kineto.run",
    "analyze_file": "my_utils.profiling.kineto.run",
    "KinetoAnalysis": "my_utils.profiling.kineto.model",
    "RankAnalysis": "my_utils.profiling.kineto.model",
    "KernelKind": "my_utils.profiling.kineto.kinds",
    "kind_of": "my_utils.profiling.kineto.kinds",
    "TraceFilter": "my_utils.profiling.kineto.filters",
    "kineto_frames": "my_utils.profiling.kineto.frames",
    "stack_of": "my_utils.profiling.kineto.call_stacks",
    "write_overlay": "my_utils.profiling.kineto.overlay",
    "read_rank": "my_utils.profiling.kineto.run",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.kineto.call_stacks import stack_of as stack_of
    from my_utils.profiling.kineto.filters import TraceFilter as TraceFilter
    from my_utils.profiling.kineto.frames import kineto_frames as kineto_frames
    from my_utils.profiling.kineto.kinds import KernelKind as KernelKind
    from my_utils.profiling.kineto.kinds import kind_of as kind_of
    from my_utils.profiling.kineto.model import KinetoAnalysis as KinetoAnalysis
    from my_utils.profiling.kineto.model import RankAnalysis as RankAnalysis
    from my_utils.profiling.kineto.overlay import write_overlay as write_overlay
    from my_utils.profiling.kineto.run import analyze_file as analyze_file
    from my_utils.profiling.kineto.run import analyze_traces as analyze_traces
    from my_utils.profiling.kineto.run import read_rank as read_rank
