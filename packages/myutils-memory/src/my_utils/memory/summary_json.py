"""``MemorySummary`` as JSON (``myutils memory summarize --json OUT``): every figure, and each stack's full stack.

The text names a stack by its operation and the user's frames; the JSON keeps, for each stack
listed, every frame of its first allocation as recorded (``full_stack``), so a tool can show
what the text left out. The file carries ``format`` and ``schema_version``; new fields are
additive. Reserved memory is ``null`` where the snapshot has no allocator segments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.safe_io import strict_json, utf8_text
from my_utils.memory.allocator_advice import allocator_findings
from my_utils.memory.allocator_state import AllocatorState
from my_utils.memory.snapshot_stacks import StackTotal
from my_utils.memory.snapshot_summary import MemorySummary

__all__ = ["FORMAT", "SCHEMA_VERSION", "summary_dict", "write_summary_json"]

FORMAT = "my_utils.memory.summary"
SCHEMA_VERSION = 1


def _text(value: Any) -> Any:
    return utf8_text(value) if isinstance(value, str) else value


def _stack(st: StackTotal) -> dict[str, Any]:
    return {
        "operation": _text(st.operation), "frames": [_text(f) for f in st.frames],
        "live_end_bytes": st.live_end_bytes, "live_at_peak_bytes": st.live_at_peak_bytes,
        "allocated_bytes": st.total_bytes, "allocations": st.count, "growth_bytes_per_unit": st.growth_bytes_per_s,
        "full_stack": [{"name": _text(n), "filename": _text(f), "line": line} for n, f, line in st.full_stack],
    }


def _allocator(a: AllocatorState | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "recorded": a.recorded, "reserved_bytes": a.reserved_bytes if a.recorded else None,
        "allocated_bytes": a.allocated_bytes, "free_bytes": a.free_bytes,
        "internal_free_bytes": a.internal_free_bytes, "external_free_bytes": a.external_free_bytes,
        "largest_free_bytes": a.largest_free_bytes, "largest_request_bytes": a.largest_request_bytes,
        "segment_allocs": a.segment_allocs, "segment_alloc_bytes": a.segment_alloc_bytes,
        "segment_frees": a.segment_frees, "segment_free_bytes": a.segment_free_bytes, "round_trips": a.round_trips,
        "reserved_before_bytes": a.reserved_before_bytes, "max_reserved_bytes": a.max_reserved_bytes,
        "max_reserved_at": a.max_reserved_at_s, "expandable_segments": a.expandable_segments,
        "segments": [{"device": g.device, "address": g.address, "stream": g.stream, "pool": _text(g.pool),
                      "reserved_bytes": g.total_bytes, "allocated_bytes": g.allocated_bytes,
                      "internal_free_bytes": g.internal_free_bytes, "external_free_bytes": g.external_free_bytes,
                      "largest_free_bytes": g.largest_free_bytes, "blocks": g.blocks, "expandable": g.expandable}
                     for g in a.segments],
        "ooms": [{"device": o.device, "at": o.at_s, "requested_bytes": o.requested_bytes,
                  "device_free_bytes": o.device_free_bytes, "reserved_bytes": o.reserved_bytes,
                  "in_use_bytes": o.in_use_bytes} for o in a.ooms],
    }


def summary_dict(summary: MemorySummary, source: str) -> dict[str, Any]:
    """The JSON object of ``summary`` (read from ``source``)."""
    s = summary
    findings = allocator_findings(s.allocator, peak_bytes=s.peak_bytes, entries=s.entries,
                                  timed=s.time_unit == "s", time_unit=s.time_unit)
    recorded = s.allocator is None or s.allocator.recorded
    return {
        "format": FORMAT, "schema_version": SCHEMA_VERSION, "source": _text(source), "time_unit": s.time_unit,
        "entries": s.entries, "actions": {_text(k): v for k, v in s.actions.items()}, "duration": s.duration_s,
        "peak_bytes": s.peak_bytes, "peak_at": s.peak_at_s, "before_trace_bytes": s.baseline_bytes,
        "before_trace_live_at_end_bytes": s.baseline_end_bytes, "end_bytes": s.end_bytes,
        "reserved_bytes": s.reserved_bytes if recorded else None,
        "frames_view": s.frames_view, "stacks_seen": s.stacks_seen,
        "top_stacks": [_stack(st) for st in s.top_stacks], "peak_stacks": [_stack(st) for st in s.peak_stacks],
        "growing_stacks": [_stack(st) for st in s.growing_stacks],
        "regions": [{"name": _text(r.name), "start": r.start_s, "stop": r.stop_s, "start_bytes": r.start_bytes,
                     "stop_bytes": r.stop_bytes, "peak_bytes": r.peak_bytes} for r in s.regions],
        "regions_are_windows": s.regions_are_windows,
        "trend": {"verdict": s.trend, "slope_bytes_per_unit": s.slope_bytes_per_s},
        "allocator": _allocator(s.allocator),
        "findings": [{"kind": f.kind.value, "severity": f.severity, "evidence": _text(f.evidence),
                      "advice": f.advice} for f in findings],
    }


def write_summary_json(path: str | Path, summary: MemorySummary, source: str) -> Path:
    """Write ``summary_dict`` to ``path`` atomically; return the path."""
    target = Path(path)
    text = strict_json(summary_dict(summary, source), indent=1)
    with atomic_write(target) as fh:
        fh.write(text + "\n")
    return target
