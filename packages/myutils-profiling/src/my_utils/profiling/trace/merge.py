"""Metric events (MyTimer regions) + torch.profiler traces of many ranks → one timeline on one clock.

One process per rank (pid = rank + 1; pid 0 is Perfetto's idle process), named
``rank R (host)``. Inside it: a ``mytimer`` lane (CPU regions), ``mytimer cuda`` (CUDA
times of the same regions, when timed) and one lane per thread of the rank's torch trace.
Every tid is unique in the file and above every pid (Perfetto keys threads by tid).

Clocks: MyTimer events are unix seconds already corrected by the rank's logger when the
``clock_sync`` record says ``applied=1``; torch traces run on the rank's own clock. With
``auto_align`` each rank's *measured* offset (re-based onto ``reference_rank``) is added
where it was not applied yet; without a record, timestamps are kept as recorded and a
warning says so. Output ``ts`` are µs since ``otherData.time_origin_unix_s`` (a whole
second): unix µs as doubles would lose the nanoseconds that keep torch slices nested.

The work is done by the streaming merge (:mod:`my_utils.profiling.trace.stream`: one task
per rank's regions and per torch trace, spill files k-way merged), which the ``trace``
command writes straight to the output; :func:`merge_trace` is its small in-memory form.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.trace.records import materialized
from my_utils.profiling.trace.spill_merge import fields
from my_utils.profiling.trace.stream import TRACE_SCHEMA_VERSION, planned
from my_utils.profiling.trace.torch_trace import TorchTrace

__all__ = ["TRACE_SCHEMA_VERSION", "MergedTrace", "merge_trace"]


@dataclass
class MergedTrace:
    """The merged document in pieces: ``metadata`` (M events), ``events`` (the rest), ``other`` (otherData)."""

    metadata: list[dict[str, Any]]
    events: list[dict[str, Any]]
    other: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """The whole trace as one JSON object (``write_trace`` streams it instead)."""
        return {"traceEvents": self.metadata + self.events, "displayTimeUnit": "ms", "otherData": self.other}


def merge_trace(events: Iterable[MetricEvent], torch_traces: Sequence[TorchTrace | str | Path] = (), *,
                reference_rank: int = 0, auto_align: bool = True, sources: Sequence[str] = (),
                executor: Any = "serial", max_workers: int | None = None) -> MergedTrace:
    """Build the merged timeline in memory (see the module doc); ``events`` is streamed once.

    The small-input API over the streaming merge (:func:`my_utils.profiling.trace.stream.planned`):
    the same layout, clocks and output, with every event parsed into a dict. ``torch_traces``
    are read traces or paths (read by the tasks of ``executor``). For many ranks use the
    ``trace`` command, or ``planned`` + ``write_trace``, which never hold the events.
    """
    with planned(events, torch_traces, reference_rank=reference_rank, auto_align=auto_align, sources=sources,
                 executor=executor, max_workers=max_workers) as plan:
        out = [e for line in plan.records(0) for e in json.loads(b"[" + fields(line)[4] + b"]")]
        return MergedTrace(json.loads("[" + plan.head.text() + "]"), out, materialized(plan.other), plan.warnings)
