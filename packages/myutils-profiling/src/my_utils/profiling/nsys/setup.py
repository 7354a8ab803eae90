"""Setup is not steady state: the one-off work of an export, and the GPU idle it covers.

Before a capture is judged (host-bound, launch-bound...), its one-off work is set apart:
communicator initialisation and teardown, context creation, host allocation, module and
library loading, JIT compilation, device allocation before the first kernel (the named query
``setup_activity`` says exactly what counts), and the first NVTX iteration when it is the
program's first (the capture holds the context creation) or a warm-up (at least
:data:`WARMUP_RATIO` times the median of the others). Idle GPU time inside those windows cannot
be saved by launching faster; the rules subtract it.

Three tables per export, small whatever the export's size (windows are merged per process,
gaps are streamed once and only their overlap with setup is kept):

``nsys_setup``
    per (process, kind): the names seen, how many calls or ranges, the union of their time,
    first start and last end;
``nsys_capture``
    per process: the capture span (first to last CUDA call, NVTX range, OS runtime call or GPU
    activity), the GPU span, the union of its setup windows (inside the capture and inside the
    GPU span), kernel launches and names, the names that repeat (``process_capture``), the NVTX
    iterations, and ``one_shot`` (1: nothing repeats, no steady state to judge) with the reason;
``nsys_setup_idle``
    per device: its idle time, the part inside setup windows, the host-wait part of each, and
    the idle outside setup split into host wait and the rest.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.nsys.model import Iterations, Table
from my_utils.profiling.nsys.queries import builtin, run_builtin
from my_utils.profiling.nsys.schema import NsysExport

WARMUP_RATIO = 1.2  # a first iteration this many times the median of the others is warm-up
FIRST_ITERATION = "first iteration"
CONTEXT = "context creation"
#: The order kinds are listed in (the usual order of a program's start).
KIND_ORDER = (CONTEXT, "device allocation before the first kernel", "host allocation", "module loading",
              "communicator init", "JIT compilation", FIRST_ITERATION, "communicator teardown")

Interval = tuple[int, int]


@dataclass(frozen=True)
class SetupWindow:
    """One piece of one-off work: the process, its kind, the call or range name, start and end (ns)."""

    pid: int | None
    kind: str
    name: str
    start: int
    end: int


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``intervals`` as sorted, disjoint intervals."""
    out: list[Interval] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def covered(intervals: Sequence[Interval]) -> int:
    """Total length of disjoint ``intervals``."""
    return sum(e - s for s, e in intervals)


def clip(intervals: Sequence[Interval], lo: int | None, hi: int | None) -> list[Interval]:
    """The parts of disjoint ``intervals`` inside ``[lo, hi]`` (nothing when either bound is None)."""
    if lo is None or hi is None:
        return []
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def windows(db: NsysExport, iterations: Iterations | None) -> list[SetupWindow]:
    """Every setup window of ``db`` (``setup_activity``, plus the first iteration where it counts as setup)."""
    rows = run_builtin(db, "setup_activity").rows
    out = [SetupWindow(pid, kind, str(name), int(s), int(e)) for pid, kind, name, s, e in rows]
    out += first_iterations(iterations, {w.pid for w in out if w.kind == CONTEXT})
    return out


def first_iterations(iterations: Iterations | None, started: set[int | None]) -> list[SetupWindow]:
    """The first NVTX iteration of each process when it is the program's first (``started``: processes whose
    context creation is in the capture) or a warm-up outlier."""
    if iterations is None:
        return []
    per: dict[Any, dict[int, tuple[int, int, str]]] = defaultdict(dict)
    for r in iterations.table.records():
        if isinstance(r.get("iteration"), int) and r.get("start") is not None and r.get("end") is not None:
            per[r.get("pid")][r["iteration"]] = (int(r["start"]), int(r["end"]), str(r.get("name") or ""))
    out = []
    for pid, its in per.items():
        first = min(its)
        s, e, name = its[first]
        others = [b - a for k, (a, b, _n) in its.items() if k != first]
        warm = bool(others) and (e - s) >= WARMUP_RATIO * statistics.median(others)
        if pid in started or warm:
            out.append(SetupWindow(pid, FIRST_ITERATION, name or "iteration", s, e))
    return out


def _gap_overlap(db: NsysExport, by_device: Mapping[Any, list[Interval]]) -> dict[Any, dict[str, int]]:
    """Per device: idle, host-wait idle, and the parts of each inside that device's setup windows (one streamed pass
    over the gaps, a pointer walking the sorted windows)."""
    q = builtin("gpu_idle_gaps")
    db.ensure_views()
    out: dict[Any, dict[str, int]] = defaultdict(lambda: {"idle_ns": 0, "setup_idle_ns": 0, "host_wait_ns": 0,
                                                          "setup_host_wait_ns": 0})
    pos: dict[Any, int] = defaultdict(int)
    for device, _pid, s, e, ns, category in db.iterate(q.sql, q.bind(), place="query gpu_idle_gaps"):
        row = out[device]
        row["idle_ns"] += ns
        host = category == "host_wait"
        if host:
            row["host_wait_ns"] += ns
        wins = by_device.get(device) or []
        j = pos[device]
        while j < len(wins) and wins[j][1] <= s:
            j += 1
        pos[device] = j
        inside = 0
        k = j
        while k < len(wins) and wins[k][0] < e:
            inside += min(e, wins[k][1]) - max(s, wins[k][0])
            k += 1
        row["setup_idle_ns"] += inside
        if host:
            row["setup_host_wait_ns"] += inside
    return out


def setup_tables(db: NsysExport, iterations: Iterations | None) -> dict[str, Table]:
    """``nsys_setup``, ``nsys_capture`` and ``nsys_setup_idle`` of one export (module docstring)."""
    found = windows(db, iterations)
    per_pid: dict[Any, list[SetupWindow]] = defaultdict(list)
    for w in found:
        per_pid[w.pid].append(w)
    union = {pid: merge((w.start, w.end) for w in ws) for pid, ws in per_pid.items()}
    rank = db.rank
    setup_rows = []
    for pid, ws in sorted(per_pid.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        kinds: dict[str, list[SetupWindow]] = defaultdict(list)
        for w in ws:
            kinds[w.kind].append(w)
        for kind in sorted(kinds, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER)):
            items = kinds[kind]
            names = sorted({w.name for w in items}, key=lambda n: -sum(w.end - w.start for w in items if w.name == n))
            setup_rows.append((rank, pid, kind, ", ".join(names[:4]) + (f" and {len(names) - 4} more"
                                                                         if len(names) > 4 else ""),
                               len(items), covered(merge((w.start, w.end) for w in items)),
                               min(w.start for w in items), max(w.end for w in items)))
    counts = _iteration_counts(iterations)
    capture_rows = []
    for r in run_builtin(db, "process_capture").records():
        pid = r["pid"]
        u = union.get(pid, [])
        one_shot, why = _one_shot(r, counts.get(pid))
        capture_rows.append((rank, pid, r["capture_start"], r["capture_end"], r["capture_ns"], r["gpu_start"],
                             r["gpu_end"], covered(clip(u, r["capture_start"], r["capture_end"])),
                             covered(clip(u, r["gpu_start"], r["gpu_end"])), r["kernels"], r["kernel_names"],
                             r["repeated_names"], counts.get(pid), one_shot, why))
    devices: dict[Any, set[Any]] = defaultdict(set)
    for device, pid in db.query("SELECT DISTINCT device, pid FROM nsys_gpu_op", place="GPU activity"):
        devices[device].add(pid)
    by_device = {d: merge(iv for p in pids for iv in union.get(p, [])) for d, pids in devices.items()}
    idle = _gap_overlap(db, by_device)
    idle_rows = [(rank, d, v["idle_ns"], v["setup_idle_ns"], v["host_wait_ns"], v["setup_host_wait_ns"],
                  v["host_wait_ns"] - v["setup_host_wait_ns"],
                  v["idle_ns"] - v["setup_idle_ns"] - (v["host_wait_ns"] - v["setup_host_wait_ns"]))
                 for d, v in sorted(idle.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))]
    return {
        "nsys_setup": Table("nsys_setup", ("rank", "pid", "kind", "names", "count", "union_ns", "first_start",
                                           "last_end"), tuple(setup_rows)),
        "nsys_capture": Table("nsys_capture", ("rank", "pid", "capture_start", "capture_end", "capture_ns",
                                               "gpu_start", "gpu_end", "setup_ns", "setup_in_gpu_span_ns", "kernels",
                                               "kernel_names", "repeated_names", "iterations", "one_shot",
                                               "one_shot_reason"), tuple(capture_rows)),
        "nsys_setup_idle": Table("nsys_setup_idle", ("rank", "device", "idle_ns", "setup_idle_ns", "host_wait_ns",
                                                     "setup_host_wait_ns", "outside_host_wait_ns", "outside_other_ns"),
                                 tuple(idle_rows)),
    }


def _iteration_counts(iterations: Iterations | None) -> dict[Any, int]:
    if iterations is None:
        return {}
    per: dict[Any, set[int]] = defaultdict(set)
    for r in iterations.table.records():
        if isinstance(r.get("iteration"), int):
            per[r.get("pid")].add(r["iteration"])
    return {pid: len(its) for pid, its in per.items()}


def _one_shot(row: Mapping[str, Any], iterations: int | None) -> tuple[int, str]:
    """(1, why) when the process repeats nothing: fewer than 2 NVTX iterations, or no kernel other than element-wise
    and memory kernels launched twice; (0, "") otherwise."""
    if iterations is not None:
        if iterations < 2:
            return 1, f"{iterations} NVTX iteration: nothing repeats"
        return 0, ""
    if not row["kernels"]:
        return 0, ""
    if not row["repeated_names"]:
        return 1, (f"no kernel other than element-wise and memory kernels ran twice ({row['kernels']} launch(es) "
                   f"of {row['kernel_names']} kernel name(s))")
    return 0, ""
