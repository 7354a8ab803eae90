"""Findings about the caching allocator, each with its evidence and the advice that evidence calls for.

A finding names the figures it rests on and their denominators; the advice comes from one
table keyed by the kind of evidence (``ADVICE``), so it can be read and tested in one place.
Each kind has a look-alike that is *not* that finding and gives none:

- ``churn``: a segment allocated after the cache returned memory (cudaFree then cudaMalloc)
  during the trace. Segments allocated with none freed are the cache growing (warm-up).
- ``fragmentation``: the highest reserved memory exceeds the peak in use by at least
  ``FRAGMENTED_SHARE`` of it and ``FRAGMENTED_BYTES``. Free space inside segments at the end
  alone is not fragmentation: the cache keeps what the peak freed, on purpose.
- ``free_too_small``: free space in all would hold the largest request of the trace, but no
  free block does. Too little free space in all is not this.
- ``oom``: a request failed (a trace ``oom`` entry); whether cached memory could have served it
  decides the advice.
- ``no_times`` / ``not_recorded``: what the snapshot cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from my_utils.memory.allocator_state import AllocatorState
from my_utils.memory.byte_units import format_bytes

__all__ = ["ADVICE", "FRAGMENTED_BYTES", "FRAGMENTED_SHARE", "ROUND_TRIPS_WARNING", "AllocatorFinding", "Kind",
           "allocator_findings"]

ROUND_TRIPS_WARNING = 10
FRAGMENTED_SHARE = 0.25
FRAGMENTED_BYTES = 256 << 20
EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


class Kind(str, Enum):
    """The kind of evidence a finding rests on: it chooses the advice."""

    CHURN = "churn"
    FRAGMENTATION = "fragmentation"
    FREE_TOO_SMALL = "free_too_small"
    OOM_CACHED = "oom_cached"
    OOM_NEEDED = "oom_needed"
    NO_TIMES = "no_times"
    NOT_RECORDED = "not_recorded"


#: advice by kind; the second text replaces the first when expandable segments are on already
ADVICE: dict[Kind, tuple[str, str]] = {
    Kind.CHURN: (
        "each cudaFree/cudaMalloc synchronises the device: remove torch.cuda.empty_cache() from the step loop "
        f"(it returns the whole cache every time); if the frees come from memory pressure (the allocator frees its "
        f"cache and retries when cudaMalloc fails), set {EXPANDABLE} so segments grow in place",
        "expandable segments are on already: the frees come from torch.cuda.empty_cache() or from memory pressure; "
        "remove empty_cache() from the step loop, or lower the peak (smaller batch, activation checkpointing)"),
    Kind.FRAGMENTATION: (
        f"set {EXPANDABLE}: segments then grow and shrink in place instead of holding free pieces of many sizes; "
        "allocating the largest tensors first (or at fixed sizes) also lets the cache reuse them",
        "expandable segments are on already: the gap is memory freed and kept cached; look for allocations on "
        "side streams (record_stream keeps blocks until that stream catches up) and for sizes that vary per step"),
    Kind.FREE_TOO_SMALL: (
        f"set {EXPANDABLE}, so a request can extend a segment instead of needing one free block that large",
        "expandable segments are on already: the free space is spread over streams or pools; allocate the "
        "largest tensors first, at fixed sizes"),
    Kind.OOM_CACHED: (
        f"reserved but unallocated memory would have served the request: set {EXPANDABLE} (PyTorch's own advice "
        "for this case)",
        "expandable segments are on already: free cached memory was not contiguous on the stream that asked; "
        "lower the peak or allocate the largest tensors first"),
    Kind.OOM_NEEDED: (
        "the request needed more memory than the device had free: lower the peak (smaller batch, activation "
        "checkpointing, freeing references to tensors no longer needed)",
        "the request needed more memory than the device had free: lower the peak (smaller batch, activation "
        "checkpointing, freeing references to tensors no longer needed)"),
    Kind.NO_TIMES: (
        "record with torch.cuda.memory._record_memory_history() on a GPU to get times",
        "record with torch.cuda.memory._record_memory_history() on a GPU to get times"),
    Kind.NOT_RECORDED: (
        "record the allocator itself (torch.cuda.memory._record_memory_history() then _dump_snapshot) for its "
        "segments",
        "record the allocator itself (torch.cuda.memory._record_memory_history() then _dump_snapshot) for its "
        "segments"),
}


@dataclass(frozen=True)
class AllocatorFinding:
    """One finding: its kind, ``warning`` or ``info``, the evidence (figures and denominators) and the advice."""

    kind: Kind
    severity: str
    evidence: str
    advice: str




def _advice(kind: Kind, state: AllocatorState | None) -> str:
    plain, expandable = ADVICE[kind]
    return expandable if state is not None and state.expandable_segments else plain


def allocator_findings(state: AllocatorState | None, *, peak_bytes: int, entries: int, timed: bool,
                       time_unit: str = "s") -> list[AllocatorFinding]:
    """The findings ``state`` supports, warnings first (see the module docstring for each kind)."""
    out: list[AllocatorFinding] = []
    if state is None or not state.recorded:
        out.append(AllocatorFinding(Kind.NOT_RECORDED, "info",
                                    "the segments were made from a CPU profile, not recorded by the caching "
                                    "allocator: reserved memory, fragmentation and cudaMalloc churn are not measured",
                                    _advice(Kind.NOT_RECORDED, state)))
    else:
        out += _churn(state, entries) + _fragmentation(state, peak_bytes) + _free_too_small(state)
        out += _ooms(state, time_unit)
    if not timed:
        out.append(AllocatorFinding(Kind.NO_TIMES, "info", "this snapshot records no times: positions are entry "
                                    "numbers, and no rate per second can be given", _advice(Kind.NO_TIMES, state)))
    return sorted(out, key=lambda f: f.severity != "warning")


def _churn(state: AllocatorState, entries: int) -> list[AllocatorFinding]:
    if state.round_trips == 0:
        return []
    severity = "warning" if state.round_trips >= ROUND_TRIPS_WARNING else "info"
    evidence = (f"{state.segment_frees} cudaFree ({format_bytes(state.segment_free_bytes)}) and {state.segment_allocs} "
                f"cudaMalloc ({format_bytes(state.segment_alloc_bytes)}) calls by the allocator during the trace "
                f"({state.cuda_calls} of {entries} entries); {state.round_trips} segments were allocated after the "
                "cache had returned memory")
    return [AllocatorFinding(Kind.CHURN, severity, evidence, _advice(Kind.CHURN, state))]


def _fragmentation(state: AllocatorState, peak_bytes: int) -> list[AllocatorFinding]:
    gap = state.max_reserved_bytes - peak_bytes
    if state.max_reserved_bytes <= 0 or gap < FRAGMENTED_BYTES or gap < FRAGMENTED_SHARE * state.max_reserved_bytes:
        return []
    evidence = (f"reserved memory reached {format_bytes(state.max_reserved_bytes)} while the peak in use was "
                f"{format_bytes(peak_bytes)}: {format_bytes(gap)} ({100 * gap / state.max_reserved_bytes:.1f} % of reserved) "
                f"was never in use at once; at the end {format_bytes(state.free_bytes)} of {format_bytes(state.reserved_bytes)} "
                f"reserved is free inside {len(state.segments)} segments")
    if state.reserved_before_bytes > 0:
        evidence += (f" ({format_bytes(state.reserved_before_bytes)} was reserved before the trace began and may have served "
                     "a peak the trace did not see)")
    return [AllocatorFinding(Kind.FRAGMENTATION, "warning", evidence, _advice(Kind.FRAGMENTATION, state))]


def _free_too_small(state: AllocatorState) -> list[AllocatorFinding]:
    want = state.largest_request_bytes
    if want <= state.largest_free_bytes or state.external_free_bytes < want:
        return []
    evidence = (f"{format_bytes(state.external_free_bytes)} is free in unallocated blocks, but the largest is "
                f"{format_bytes(state.largest_free_bytes)}: the trace's largest request, {format_bytes(want)}, would need a new "
                "segment")
    return [AllocatorFinding(Kind.FREE_TOO_SMALL, "info", evidence, _advice(Kind.FREE_TOO_SMALL, state))]


def _ooms(state: AllocatorState, unit: str) -> list[AllocatorFinding]:
    out = []
    for oom in state.ooms:
        cached = oom.reserved_bytes - oom.in_use_bytes
        kind = Kind.OOM_CACHED if cached >= oom.requested_bytes else Kind.OOM_NEEDED
        free = "" if oom.device_free_bytes is None else f", {format_bytes(oom.device_free_bytes)} free on the device"
        where = f"{oom.at_s:.3f}s" if unit == "s" else f"entry {oom.at_s:.0f}"
        evidence = (f"a request of {format_bytes(oom.requested_bytes)} failed on device {oom.device} at {where}{free}; "
                    f"reserved {format_bytes(oom.reserved_bytes)}, in use {format_bytes(oom.in_use_bytes)}: {format_bytes(max(cached, 0))} "
                    "was cached but not allocated")
        out.append(AllocatorFinding(kind, "warning", evidence, _advice(kind, state)))
    return out
