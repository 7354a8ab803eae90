"""Setup in Nsight Systems exports on the cases the real captures lack (issue 36, ``.ci/mutants/nsys.toml``).

The real exports' setup windows (communicator init, allocation before the first kernel) never
cut a GPU idle gap in part, their first iterations sit far from the warm-up ratio, and none has a
single NVTX iteration. Here: setup windows clipped to a span, the first iteration at exactly
1.2× the median of the others, one iteration (nothing repeats), and a host-allocation call added
to a copy of a real export so that it starts inside one idle gap and ends inside another, one of
them a host wait: only the parts of the gaps inside it are setup idle, and only the host-wait
gap's part is setup host wait. Expected figures are read from the raw export with sqlite3.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py

from my_utils.profiling.nsys.analyze import summarize
from my_utils.profiling.nsys.model import Iterations, Table
from my_utils.profiling.nsys.setup import FIRST_ITERATION, WARMUP_RATIO, _one_shot, clip, first_iterations

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def test_setup_is_clipped_to_the_span() -> None:
    assert clip([(0, 10), (20, 30), (40, 50)], 5, 25) == [(5, 10), (20, 25)]
    assert clip([(0, 10)], None, 25) == []


def _iterations(pid: int, durations: list[int]) -> Iterations:
    rows, t = [], 1_000
    for i, d in enumerate(durations):
        rows.append((pid, i, t, t + d, "train_step"))
        t += d + 10
    return Iterations("train_step", "given", Table("nsys_iterations", ("pid", "iteration", "start", "end", "name"),
                                                   tuple(rows)), ())


def test_a_first_iteration_at_exactly_the_warm_up_ratio_is_setup() -> None:
    """Later iterations of 100, 100 and 200 µs (median 100): a first one of 120 µs (1.2×) is warm-up; 119 µs is
    not; the slowest later iteration (200) is no yardstick."""
    assert WARMUP_RATIO == 1.2
    (w,) = first_iterations(_iterations(7, [120_000, 100_000, 100_000, 200_000]), set())
    assert (w.pid, w.kind, w.start, w.end) == (7, FIRST_ITERATION, 1_000, 121_000)
    assert first_iterations(_iterations(7, [119_999, 100_000, 100_000, 200_000]), set()) == []


def test_one_nvtx_iteration_repeats_nothing() -> None:
    row = {"kernels": 40, "kernel_names": 3, "repeated_names": 3}
    assert _one_shot(row, 1) == (1, "1 NVTX iteration: nothing repeats")
    assert _one_shot(row, 2) == (0, "")


def _gaps(path: Path) -> list[tuple[int, int, int | None]]:
    """(gap start, gap end, correlation id of the activity ending it) of the single device, raw."""
    ops: list[tuple[int, int, int]] = []
    for t in GPU_TABLES:
        if t in H.tables(path):
            ops += H.raw(path, f"SELECT start, end, correlationId FROM {t} WHERE end >= start")
    out, reach = [], None
    for s, e, corr in sorted(ops):
        if reach is not None and s > reach:
            out.append((reach, s, corr))
        reach = e if reach is None else max(reach, e)
    return out


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def test_a_setup_call_across_gaps_counts_only_their_parts_inside_it(real_fixtures: Any, tmp_path: Path) -> None:
    """extrap__con_kernel has six idle gaps; none is a host wait and none lies in its own setup calls (all before
    the first copy or after the last). A cudaHostRegister call is added from the middle of the third gap to the
    middle of the fifth, whose copy is relaunched inside it (a host wait)."""
    src = real_fixtures / "nsys/extrap__con_kernel.sqlite"
    gaps = _gaps(src)
    assert len(gaps) == 6
    third, fifth = gaps[2], gaps[4]
    window = ((third[0] + third[1]) // 2, (fifth[0] + fifth[1]) // 2)
    relaunch = (fifth[0] + 500, fifth[0] + 600)  # the fifth gap's copy, now launched after the gap began
    path = tmp_path / "host_register.sqlite"
    shutil.copy(src, path)
    conn = sqlite3.connect(path)
    try:
        name_id = conn.execute("SELECT MAX(id) + 1 FROM StringIds").fetchone()[0]
        conn.execute("INSERT INTO StringIds (id, value) VALUES (?, 'cudaHostRegister_v4000')", (name_id,))
        conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, "
                     "nameId, returnValue) SELECT ?, ?, eventClass, globalTid, 999999, ?, 0 "
                     "FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1", (*window, name_id))
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = ?, end = ? WHERE correlationId = ?",
                     (*relaunch, fifth[2]))
        conn.commit()
    finally:
        conn.close()
    launches = dict(H.raw(path, "SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    host_wait = [g for g in _gaps(path) if launches.get(g[2], -1) > g[0]]
    assert host_wait == [fifth]
    before = {r["device"]: r for r in summarize(src).table("nsys_setup_idle").records()}
    (row,) = summarize(path).table("nsys_setup_idle").records()
    assert before[row["device"]]["setup_idle_ns"] == 0
    assert row["setup_idle_ns"] == sum(_overlap((s, e), window) for s, e, _c in gaps) > 0
    assert row["setup_host_wait_ns"] == _overlap(fifth[:2], window) > 0
    assert row["setup_host_wait_ns"] < row["setup_idle_ns"]
