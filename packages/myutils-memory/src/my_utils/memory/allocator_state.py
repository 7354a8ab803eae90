"""The caching allocator's state in a snapshot: reserved against allocated, free space per segment, cudaMalloc churn.

Totals follow ``python -m torch.cuda._memory_viz stats`` (its ``segsum``), so the two agree on
the same file: *reserved* is the segments' total size; *allocated* the requested bytes of the
blocks in state ``active_allocated``; the rest of a segment is free, *internal* where an
allocated block was rounded up past its request, *external* in the blocks not allocated.

The trace adds what the end state cannot show: the ``segment_alloc``/``segment_free`` entries
are the allocator's own cudaMalloc/cudaFree calls (``segment_map``/``segment_unmap`` with
expandable segments), so reserved memory can be replayed over the trace and its highest value
set against the peak in use; a segment freed and another allocated later is a round trip, each
a device synchronisation the cache exists to avoid; an ``oom`` entry records a failed request.

A snapshot made from a CPU profile (``_profile_to_snapshot``) has no allocator: its one segment
per device spans the lowest to the highest address the profile saw (terabytes apart on a
CPU), so ``recorded`` is False there and no reserved figure is reported from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.memory.snapshot_io import block_addresses, has_times

__all__ = ["SEGMENT_ACTIONS", "AllocatorState", "OomEvent", "SegmentState", "allocator_state", "requested_bytes",
           "reserved_steps"]

#: trace actions that change reserved memory, and in which direction
SEGMENT_ACTIONS = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


@dataclass(frozen=True)
class SegmentState:
    """One segment at the end of the trace (``memory_viz stats``'s per-segment line)."""

    device: int
    address: int
    stream: int
    pool: str
    total_bytes: int
    allocated_bytes: int
    internal_free_bytes: int
    external_free_bytes: int
    largest_free_bytes: int
    blocks: int
    expandable: bool

    @property
    def free_bytes(self) -> int:
        """Reserved minus allocated: external (unallocated blocks) plus internal (rounding) free space."""
        return self.internal_free_bytes + self.external_free_bytes


@dataclass(frozen=True)
class OomEvent:
    """A request the allocator could not serve (a trace ``oom`` entry)."""

    device: int
    at_s: float
    requested_bytes: int
    device_free_bytes: int | None
    reserved_bytes: int
    in_use_bytes: int


@dataclass(frozen=True)
class AllocatorState:
    """The allocator at the end of the trace and what it did during it (all devices together).

    ``reserved_bytes`` ... ``segments`` are ``memory_viz stats``'s figures;
    ``max_reserved_bytes`` is the highest reserved memory over the trace (replayed from its
    segment entries); ``round_trips`` counts segments allocated after an earlier segment free on
    the same device.
    """

    recorded: bool
    segments: tuple[SegmentState, ...]
    reserved_bytes: int
    allocated_bytes: int
    internal_free_bytes: int
    external_free_bytes: int
    largest_free_bytes: int
    largest_request_bytes: int
    segment_allocs: int
    segment_alloc_bytes: int
    segment_frees: int
    segment_free_bytes: int
    round_trips: int
    reserved_before_bytes: int
    max_reserved_bytes: int
    max_reserved_at_s: float
    ooms: tuple[OomEvent, ...]
    expandable_segments: bool | None

    @property
    def free_bytes(self) -> int:
        """Reserved minus allocated (``memory_viz stats``'s total_free)."""
        return self.internal_free_bytes + self.external_free_bytes

    @property
    def cuda_calls(self) -> int:
        """cudaMalloc plus cudaFree calls (segment entries, mapped/unmapped included) during the trace."""
        return self.segment_allocs + self.segment_frees


def requested_bytes(block: dict[str, Any]) -> int:
    """The bytes a block's user asked for (``requested_size``), its size where the snapshot records none."""
    r = block.get("requested_size")
    return int(r) if r is not None else int(block.get("size", 0) or 0)


def _is_recorded(snapshot: dict[str, Any]) -> bool:
    """Whether the segments come from the allocator, not from ``_profile_to_snapshot``: that one records no times
    and none of the allocator's segment fields (``segment_type``, ``allocated_size``)."""
    segs = snapshot.get("segments", [])
    if not segs or any("segment_type" in s or "allocated_size" in s for s in segs):
        return True
    return has_times(snapshot)


def _segment(seg: dict[str, Any]) -> SegmentState:
    allocated = internal = external = largest = 0
    for _, b in block_addresses(seg):
        size = int(b.get("size", 0) or 0)
        if b.get("state") == "active_allocated":
            asked = requested_bytes(b)
            allocated += asked
            internal += size - asked
        else:
            external += size
            if b.get("state", "inactive") == "inactive":
                largest = max(largest, size)
    blocks = seg.get("blocks", [])
    if not blocks:  # a segment listing no blocks holds none: all free (memory_viz's segsum refuses such a segment)
        external = largest = int(seg.get("total_size", 0))
    return SegmentState(int(seg.get("device", 0) or 0), int(seg["address"]), int(seg.get("stream", 0) or 0),
                        str(seg.get("segment_type", "")), int(seg["total_size"]), allocated, internal, external,
                        largest, len(blocks), bool(seg.get("is_expandable", False)))


def _expandable(snapshot: dict[str, Any], segments: list[SegmentState]) -> bool | None:
    """Whether expandable segments were on: the snapshot's allocator settings, else its segments; None if unknown."""
    settings = snapshot.get("allocator_settings")
    if isinstance(settings, dict) and "expandable_segments" in settings:
        return bool(settings["expandable_segments"])
    if any(s.expandable for s in segments):
        return True
    return None if not segments else False


def allocator_state(snapshot: dict[str, Any], segment_events: Sequence[tuple[int, float, int]],
                    oom_entries: Sequence[tuple[int, float, dict[str, Any]]], largest_request: int,
                    in_use_at: Callable[[float], int]) -> AllocatorState:
    """The allocator's state in ``snapshot`` (checked by ``load_snapshot``), from what the summary's replay collected.

    ``segment_events`` are (device, seconds since the trace began, signed bytes: + for
    segment_alloc/map, - for segment_free/unmap) in trace order per device; ``oom_entries``
    (device, seconds, entry); ``in_use_at(t)`` the bytes in use at ``t``.
    """
    segments = [_segment(s) for s in snapshot.get("segments", [])]
    reserved_end = sum(s.total_bytes for s in segments)
    allocs = alloc_bytes = frees = free_bytes = trips = 0
    freed_on: set[int] = set()
    for device, _, size in segment_events:
        if size >= 0:
            allocs += 1
            alloc_bytes += size
            trips += device in freed_on
        else:
            frees += 1
            free_bytes -= size
            freed_on.add(device)
    reserved_before = reserved_end - alloc_bytes + free_bytes
    level = top = reserved_before
    top_at = 0.0
    changes = sorted((t, size) for _, t, size in segment_events)
    for t, size in changes:
        level += size
        if level > top:
            top, top_at = level, t
    ooms = []
    for device, t, e in oom_entries:
        reserved = reserved_before + sum(size for when, size in changes if when <= t)
        free = e.get("device_free")
        ooms.append(OomEvent(device, t, int(e.get("size", 0) or 0), int(free) if isinstance(free, int) else None,
                             reserved, in_use_at(t)))
    return AllocatorState(
        recorded=_is_recorded(snapshot), segments=tuple(segments), reserved_bytes=reserved_end,
        allocated_bytes=sum(s.allocated_bytes for s in segments),
        internal_free_bytes=sum(s.internal_free_bytes for s in segments),
        external_free_bytes=sum(s.external_free_bytes for s in segments),
        largest_free_bytes=max((s.largest_free_bytes for s in segments), default=0),
        largest_request_bytes=largest_request, segment_allocs=allocs, segment_alloc_bytes=alloc_bytes,
        segment_frees=frees, segment_free_bytes=free_bytes, round_trips=trips, reserved_before_bytes=reserved_before,
        max_reserved_bytes=top, max_reserved_at_s=top_at, ooms=tuple(ooms),
        expandable_segments=_expandable(snapshot, segments),
    )


def reserved_steps(before: int, segment_events: Sequence[tuple[int, float, int]], t0_us: float = 0.0,
                   scale: float = 1e6) -> list[tuple[float, int]]:
    """Reserved bytes over the trace as (time, bytes from then on), starting with (0, ``before``).

    ``segment_events`` are (device, time, signed bytes) with times in the trace's unit; they are
    shifted by ``t0_us`` and divided by ``scale`` (µs to seconds by default).
    """
    level = before
    out = [(0.0, before)]
    for t, size in sorted((t, size) for _, t, size in segment_events):
        level += size
        out.append(((t - t0_us) / scale, level))
    return out
