"""One row per rank: what ``nsys summary`` leads with when a run has several ranks.

Each row is one device of one export (a rank when each rank wrote its own export; the NCCL
participant numbering — by device — when one export holds several processes), read from the
tables the summaries already hold: capture span and one-off work of the processes that ran on
the device (``nsys_capture``), GPU span, busy and idle outside setup (``nsys_busy_device``,
``nsys_setup_idle``), the device's kernel with the most time (``nsys_top_kernel_device``), NCCL kernel time and the time spent waiting for the last rank
(the NCCL analysis), NVTX iterations. Nothing is recomputed from the exports.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from my_utils.profiling.nsys.model import ExportSummary, Table

if TYPE_CHECKING:
    from my_utils.profiling.nsys.run import RunSummary

COLUMNS = ("rank", "host", "device", "gpu", "capture_ns", "setup_pct", "span_ns", "busy_pct", "idle_outside_setup_ns",
           "top_kernel", "top_kernel_ns", "nccl_ns", "nccl_wait_ns", "iterations", "iteration_median_ns")


def _top_kernel(s: ExportSummary, device: Any) -> tuple[str | None, int | None]:
    rows = s.table("nsys_top_kernel_device").where(device=device)
    if not rows:
        return None, None
    top = rows[0]
    return str(top.get("short_name") or top.get("name")), top.get("total_ns")


def _pids(s: ExportSummary, device: Any) -> set[Any]:
    """The processes whose kernels ran on ``device`` (all of the export's when none is recorded)."""
    return {r["pid"] for r in s.table("nsys_launch_short").where(device=device)}


def _capture(s: ExportSummary, pids: set[Any]) -> tuple[int | None, float | None]:
    rows = [r for r in s.table("nsys_capture").records() if r.get("capture_ns") and (not pids or r["pid"] in pids)]
    total = sum(int(r["capture_ns"]) for r in rows)
    if not total:
        return None, None
    return total, 100.0 * sum(int(r.get("setup_ns") or 0) for r in rows) / total


def _iterations(s: ExportSummary) -> tuple[int | None, float | None]:
    if s.iterations is None or not s.iterations.stats:
        return None, None
    counts = [st.count for st in s.iterations.stats]
    return sum(counts), statistics.median(st.median_ns for st in s.iterations.stats)


def rank_overview(run: RunSummary) -> Table:
    """The rows of the module docstring, in rank order."""
    nccl: dict[tuple[str, Any], tuple[int, int, int]] = {}  # (export label, device) -> (rank, total, wait)
    if run.nccl is not None:
        for p in run.nccl.participants:
            mine = [r for r in run.nccl.per_rank if r.rank == p.rank]
            nccl[(p.label, p.device)] = (p.rank, sum(r.total_ns for r in mine), sum(r.wait_ns for r in mine))
    rows = []
    for s in run.exports:
        gpus = {g.device: g.name for g in s.gpus}
        setup = {r["device"]: r for r in s.table("nsys_setup_idle").records()}
        its, median = _iterations(s)
        for r in s.table("nsys_busy_device").records():
            device = r["device"]
            top, top_ns = _top_kernel(s, device)
            capture, setup_pct = _capture(s, _pids(s, device))
            rank, comm, wait = nccl.get((s.label, device), (s.rank, None, None))
            idle_in_setup = (setup.get(device) or {}).get("setup_idle_ns") or 0
            rows.append((s.rank if s.rank is not None else rank, s.host, device, gpus.get(device), capture, setup_pct,
                         r["span_ns"], r["busy_pct"], (r["idle_ns"] or 0) - idle_in_setup, top, top_ns, comm, wait,
                         its, median))
    rows.sort(key=lambda x: (x[0] is None, x[0] if isinstance(x[0], int) else 0, str(x[1]), x[2] or 0))
    return Table("nsys_rank_overview", COLUMNS, tuple(rows))
