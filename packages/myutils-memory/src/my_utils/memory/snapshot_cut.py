"""A smaller snapshot holding one time range of a big one (memory_viz tabs die on >= 1 GB pickles).

Trace entries outside ``[from, to]`` (seconds since the first entry, as the summary prints
them; entry numbers for snapshots made from a CPU profile, which record no times) are dropped. memory_viz replays a trace backwards from the allocator state in
``segments``, so that state is rewound to time ``to``: blocks allocated after ``to`` are
removed, blocks freed after it are put back, and segments mapped or unmapped after it
likewise. Memory allocated before ``from`` shows as already in use, as memory_viz draws any
block whose allocation the trace does not hold.
"""

from __future__ import annotations

import pickle
from bisect import bisect_left
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UsageError
from my_utils.memory.snapshot import PICKLE_PROTOCOL, REGIONS_KEY, save_snapshot
from my_utils.memory.snapshot_io import block_addresses, entry_time_us, has_times, trace_origin_us

__all__ = ["cut_snapshot", "save_cut"]


def _rewind(segments: list[dict[str, Any]], later: list[dict[str, Any]], device: int) -> list[dict[str, Any]]:
    """``segments`` (those of ``device``) as they were before the entries ``later`` happened."""
    segs = {s["address"]: dict(s) for s in segments}
    live: dict[int, dict[str, Any]] = {}
    for s in segs.values():
        for addr, b in block_addresses(s):
            if b.get("state") == "active_allocated":
                live[addr] = {"size": b["size"], "requested_size": b.get("requested_size", b["size"]),
                                      "frames": b.get("frames", [])}
    for e in reversed(later):
        action, addr = e.get("action"), e.get("addr")
        if addr is None:  # an entry without an address (e.g. "snapshot", "oom") changes no block
            continue
        if action == "alloc":
            live.pop(addr, None)
        elif action == "free_completed":
            live[addr] = {"size": e.get("size", 0), "requested_size": e.get("size", 0), "frames": e.get("frames", [])}
        elif action == "segment_alloc":
            segs.pop(addr, None)
        elif action == "segment_free":
            segs[addr] = {"device": device, "address": addr, "total_size": e.get("size", 0),
                          "stream": e.get("stream", 0), "segment_type": "large", "segment_pool_id": (0, 0),
                          "is_expandable": False, "frames": e.get("frames", [])}
    out = []
    addresses = sorted(live)  # once: each segment takes its slice by bisection (no segments x blocks scan)
    for base, s in sorted(segs.items()):
        end = base + s["total_size"]
        blocks, cursor, used = [], base, 0
        for addr in addresses[bisect_left(addresses, base):bisect_left(addresses, end)]:
            b = live[addr]
            if addr > cursor:
                blocks.append({"address": cursor, "size": addr - cursor, "requested_size": 0,
                               "state": "inactive", "frames": []})
            blocks.append({"address": addr, "size": b["size"], "requested_size": b["requested_size"],
                           "state": "active_allocated", "frames": b["frames"]})
            cursor = addr + b["size"]
            used += b["size"]
        if cursor < end:
            blocks.append({"address": cursor, "size": end - cursor, "requested_size": 0, "state": "inactive",
                           "frames": []})
        out.append({**s, "blocks": blocks, "allocated_size": used, "active_size": used, "requested_size": used})
    return out


def cut_snapshot(snapshot: dict[str, Any], start_s: float, stop_s: float) -> dict[str, Any]:
    """A new snapshot with the trace entries between ``start_s`` and ``stop_s`` and the state at ``stop_s``."""
    t0, timed = trace_origin_us(snapshot), has_times(snapshot)
    if not stop_s > start_s or start_s < 0:
        unit = ("seconds since the first trace entry" if timed else
                "entry numbers: this snapshot records no times")
        raise UsageError(f"cut: --from {start_s:g} and --to {stop_s:g} must satisfy 0 <= from < to "
                         f"({unit}, as `myutils memory summarize` prints them)")
    lo, hi = t0 + start_s * 1e6, t0 + stop_s * 1e6
    traces, segments = [], []
    by_device: dict[int, list[dict[str, Any]]] = {}
    for seg in snapshot.get("segments", []):
        by_device.setdefault(seg.get("device", 0), []).append(seg)
    devices = max(len(snapshot.get("device_traces", [])), 1 + max(by_device, default=-1))
    for device in range(devices):
        trace = snapshot["device_traces"][device] if device < len(snapshot.get("device_traces", [])) else []
        times = [entry_time_us(e, i, timed) for i, e in enumerate(trace)]
        traces.append([e for e, t in zip(trace, times, strict=True) if lo <= t <= hi])
        later = [e for e, t in zip(trace, times, strict=True) if t > hi]
        segments += _rewind(by_device.get(device, []), later, device)
    out = {k: v for k, v in snapshot.items() if k not in ("segments", "device_traces", REGIONS_KEY)}
    out["segments"] = segments
    out["device_traces"] = traces
    regions = snapshot.get(REGIONS_KEY)
    if isinstance(regions, list):
        out[REGIONS_KEY] = [r for r in regions if isinstance(r, dict)
                            and r.get("stop_us", 0) >= lo and r.get("start_us", 0) <= hi]
    return out


def save_cut(path: Path, cut: dict[str, Any], source: Path) -> None:
    """``save_snapshot(path, cut)``; data nested too deeply to pickle (kept from ``source``) is bad input."""
    try:
        save_snapshot(path, cut)
    except RecursionError:
        key = next((k for k, v in cut.items() if not _picklable(v)), None)
        raise InputError(source, f"key {key!r}" if key is not None else "top level",
                         "expected data nested at most a few hundred levels deep (it cannot be written back)") from None


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value, protocol=PICKLE_PROTOCOL)
    except RecursionError:
        return False
    return True
