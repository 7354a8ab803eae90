"""Pipeline bubbles from Nsight Systems exports: the microbatch NVTX ranges of each rank, judged as the Kineto ones.

The same names and rule as ``kineto.pipeline`` (its module docstring): an NVTX push/pop or start/end
range named ``PP:2F3``, ``forward-compute``, ``_exec_backward_pass``... is one microbatch pass of the export's
rank; its *work* is the union of the non-communication kernels launched (any thread of the process) while it
runs, or the range itself when it launched none. Times go on the UTC epoch (``NsysExport.epoch_offset_ns``) so
that the exports of one job share a clock; an export without that anchor keeps its own window. The whole
capture is one step (nsys has no ``ProfilerStep``): ``nsys_pipeline_bubble`` rows carry ``step`` None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.kineto.pipeline import (
    MicrobatchRange,
    PipelineBubbleRow,
    _union,
    bubble_rows,
    classify,
    compile_patterns,
)
from my_utils.profiling.nsys.schema import NsysExport


def export_ranges(db: NsysExport, patterns: Mapping[str, str] | None = None) -> list[MicrobatchRange]:
    """The microbatch ranges of one open export (its views made), in µs on the epoch when it has the anchor."""
    compiled = compile_patterns(patterns)
    names = [str(n) for (n,) in db.query("SELECT DISTINCT name FROM nsys_nvtx WHERE name IS NOT NULL",
                                          place="view nsys_nvtx")]
    hit = {n: got for n in names if (got := classify(n, compiled)) is not None}
    if not hit:
        return []
    marks = ",".join("?" * len(hit))
    ranges = db.query(f"SELECT start, end, name FROM nsys_nvtx WHERE name IN ({marks}) ORDER BY start",
                      tuple(hit), place="view nsys_nvtx")
    launches = db.query("SELECT r.start, k.start, k.end FROM nsys_runtime r JOIN nsys_kernel k ON k.corr = r.corr "
                        "AND k.pid IS r.pid WHERE k.kind != 'communication' ORDER BY r.start",
                        place="views nsys_runtime, nsys_kernel")
    calls = [c for c, _s, _e in launches]
    offset = db.epoch_offset_ns or 0
    out = []
    import bisect

    for start, end, name in ranges:
        framework, kind, stage, mb = hit[str(name)]
        mine = launches[bisect.bisect_left(calls, start):bisect.bisect_right(calls, end)]
        if mine:
            lo, hi = min(s for _c, s, _e in mine), max(e for _c, _s, e in mine)
            busy = _union([(s, e) for _c, s, e in mine])
        else:
            lo, hi, busy = start, end, end - start
        out.append(MicrobatchRange(db.rank, None, kind, stage, mb, (lo + offset) / 1e3, (hi + offset) / 1e3,
                                   busy / 1e3, framework))
    return out


def pipeline_rows(per_export: Sequence[tuple[list[MicrobatchRange], bool]], stages: int | None = None
                  ) -> list[dict[str, Any]]:
    """``nsys_pipeline_bubble`` rows from each export's ranges (and whether it is on the epoch)."""
    ranges = [r for got, _epoch in per_export for r in got]
    if not ranges:
        return []
    one_clock = all(epoch for got, epoch in per_export if got)
    rows: list[PipelineBubbleRow] = bubble_rows(ranges, {}, stages=stages, one_clock=one_clock)
    return [r.to_row() for r in rows]
