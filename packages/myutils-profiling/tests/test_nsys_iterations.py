"""NVTX iteration outliers are two-sided: a step far faster than its process's median is one too.

A skipped or cut-off step (a data loader that returned nothing, an early ``break``) is as far
from steady state as a stall; the robust z-score flags both sides. The fixture is a copy of a
real export (pipit's saxpy, five ``saxpy`` ranges) with one middle range cut short; the
expected outliers are recomputed from the raw NVTX rows.
"""

from __future__ import annotations

import shutil
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py

from my_utils.profiling.nsys.analyze import summarize
from my_utils.profiling.nsys.iterations import OUTLIER_Z

SAXPY = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
RANGES = ("SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
          "WHERE n.eventType IN (59, 60) AND COALESCE(n.text, s.value) = 'saxpy' ORDER BY n.start")


def _with_a_fast_step(real_fixtures: Any, tmp_path: Path, which: int, keep_ns: int) -> Path:
    """A copy of the saxpy export whose ``which``-th range (1-based) lasts ``keep_ns``."""
    path = tmp_path / "saxpy_fast.sqlite"
    shutil.copyfile(H.export_path(real_fixtures, SAXPY), path)
    start = H.raw(path, RANGES)[which - 1][0]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE NVTX_EVENTS SET end = start + ? WHERE start = ?", (keep_ns, start))
    conn.close()
    return path


def _robust_z(path: Path) -> dict[int, float]:
    """Iteration (1-based) -> 0.6745 (x - median) / MAD of the range lengths, from the raw rows."""
    times = [e - s for s, e in H.raw(path, RANGES)]
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times)
    return {i: 0.6745 * (t - med) / mad for i, t in enumerate(times, 1)}


def test_a_fast_middle_step_is_an_outlier(real_fixtures: Any, tmp_path: Path) -> None:
    path = _with_a_fast_step(real_fixtures, tmp_path, 4, 1_000)
    z = _robust_z(path)
    assert z[4] < -OUTLIER_Z  # the fixture holds a fast outlier, by the raw rows
    want = {i for i, v in z.items() if abs(v) > OUTLIER_Z}
    s = summarize(path, iteration_range="saxpy")
    assert s.iterations is not None
    (st,) = s.iterations.stats
    assert {o.iteration for o in st.outliers} == want and 4 in want
    fast = next(o for o in st.outliers if o.iteration == 4)
    assert (fast.cpu_ns, fast.position) == (1_000, "middle") and fast.robust_z == round(z[4], 2)
    assert fast.cpu_ns < st.median_ns
    fact = next(f for f in s.facts() if f.id.startswith("nsys.iteration_outliers"))
    assert fact.value == len(want) and "#4 (middle, z=-" in fact.detail


def test_a_step_just_inside_the_bound_is_not_an_outlier(real_fixtures: Any, tmp_path: Path) -> None:
    """The unmodified export's fast side: its quickest steps lie within the bound, so none is flagged."""
    path = H.export_path(real_fixtures, SAXPY)
    z = _robust_z(path)
    assert min(z.values()) > -OUTLIER_Z
    s = summarize(path, iteration_range="saxpy")
    assert s.iterations is not None
    (st,) = s.iterations.stats
    assert {o.iteration for o in st.outliers} == {i for i, v in z.items() if abs(v) > OUTLIER_Z}
    assert all(o.robust_z > 0 for o in st.outliers)
