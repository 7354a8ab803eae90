"""The per-rank overview of an Nsight Systems run against the raw exports (issue 36, ``.ci/mutants/nsys.toml``).

No test read ``nsys_rank_overview``'s rows, so both of its plausible bugs lived: a device's row
must hold the capture of the process that ran on that device only (an export of two processes on
two GPUs: not both processes' captures), and the idle *outside* setup (a ring rank whose GPU idles
through ncclCommInitRank: not all its idle). Expected figures come from the raw exports (sqlite3).
"""

from __future__ import annotations

from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py

from my_utils.profiling.nsys.overview import rank_overview
from my_utils.profiling.nsys.run import analyze_run

ACTIVITY = (("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"), ("NVTX_EVENTS", "globalTid"), ("OSRT_API", "globalTid"),
            ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", "globalPid"))


def raw_capture(path: Any, process: int) -> int:
    """First to last CUDA call, NVTX range, OS runtime call or GPU activity of one process (``globalPid >> 24``)."""
    have = H.tables(path)
    spans = [H.raw(path, f"SELECT MIN(start), MAX(end) FROM {t} WHERE ({col} >> 24) = ? AND end >= start",
                   (process,))[0] for t, col in ACTIVITY if t in have]
    return max(e for _, e in spans if e is not None) - min(s for s, _ in spans if s is not None)


def test_each_devices_row_holds_its_own_process_capture(real_fixtures: Any) -> None:
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    on_device = dict(H.raw(path, "SELECT DISTINCT deviceId, globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    assert len(set(on_device.values())) == 2  # two processes, one per GPU
    rows = rank_overview(analyze_run([path])).records()
    assert {r["device"]: r["capture_ns"] for r in rows} == {d: raw_capture(path, p) for d, p in on_device.items()}


def test_the_idle_outside_setup_leaves_the_communicator_init_out(real_fixtures: Any) -> None:
    """Ring rank 0: its GPU idles through most of ncclCommInitRank. The overview's idle outside setup is the raw
    idle (the gaps between the device's activities) less the setup idle, which covers at least the init's part."""
    path = H.export_path(real_fixtures, "ring:0")
    ops = sorted(op for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                 if t in H.tables(path) for op in H.raw(path, f"SELECT start, end FROM {t} WHERE end >= start"))
    gaps, reach = [], None
    for s, e in ops:
        if reach is not None and s > reach:
            gaps.append((reach, s))
        reach = e if reach is None else max(reach, e)
    ((init_s, init_e),) = H.raw(path, "SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
                                      "WHERE s.value = 'ncclCommInitRank'")
    in_init = sum(max(0, min(e, init_e) - max(s, init_s)) for s, e in gaps)
    run = analyze_run([path])
    (setup,) = run.exports[0].table("nsys_setup_idle").records()
    assert setup["setup_idle_ns"] >= in_init > 0
    (row,) = rank_overview(run).records()
    assert row["idle_outside_setup_ns"] == sum(e - s for s, e in gaps) - setup["setup_idle_ns"]
