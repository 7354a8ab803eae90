"""Merged timelines: metric events and torch traces of many ranks → one Chrome/Perfetto trace on one clock.

``stream.planned`` lays the merge out with one task per rank's regions and per torch trace
(process pool or Dask, as ingest) and streams the result from sorted temporary files, so
memory does not grow with the rank count; ``write_trace`` writes it, split or trimmed under
``--max-mb``; ``merge_trace`` is the small in-memory form of the same merge.

Light to import: the names are resolved on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "ClockSync": "my_utils.profiling.trace.clock",
    "MergedTrace": "my_utils.profiling.trace.merge",
    "merge_trace": "my_utils.profiling.trace.merge",
    "read_torch_trace": "my_utils.profiling.trace.torch_trace",
    "write_trace": "my_utils.profiling.trace.write",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.trace.clock import ClockSync as ClockSync
    from my_utils.profiling.trace.merge import MergedTrace as MergedTrace
    from my_utils.profiling.trace.merge import merge_trace as merge_trace
    from my_utils.profiling.trace.torch_trace import read_torch_trace as read_torch_trace
    from my_utils.profiling.trace.write import write_trace as write_trace
