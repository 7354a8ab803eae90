"""The ``gpu_idle_causes`` query: a device's idle gaps by cause, recomputed from the raw exports in Python."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.nsys.analyze import summarize

KERNEL_WAIT_NS = 30_000


def raw_idle_causes(path: Path) -> dict[tuple[int, str], int]:
    """(device, category) -> idle ns, from the raw tables: a plain walk over the device's work in start order."""
    tables = H.tables(path)
    ops: list[tuple[int, int, int, int | None, int | None]] = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t in tables:
            ops += H.raw(path, f"SELECT deviceId, start, end, globalPid, correlationId FROM {t} WHERE end >= start")
    classes = {r[1] for r in H.raw(path, "PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")}
    skip = " AND eventClass NOT IN (67, 68, 69)" if "eventClass" in classes else ""
    launch: dict[tuple[int, int], int] = {}
    for tid, corr, start in H.raw(path, "SELECT globalTid, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                                        f"WHERE end >= start{skip}"):
        key = ((tid >> 24) << 24, corr)
        launch[key] = min(start, launch.get(key, start))
    out: dict[tuple[int, str], int] = defaultdict(int)
    by_device: dict[int, list[tuple[int, int, int | None, int | None]]] = defaultdict(list)
    for dev, s, e, pid, corr in ops:
        by_device[dev].append((s, e, pid, corr))
    for dev, rows in by_device.items():
        reach = None
        for s, e, pid, corr in sorted(rows, key=lambda r: (r[0], r[1])):
            if reach is not None and s > reach:
                started = launch.get((pid, corr)) if pid is not None and corr is not None else None
                cat = ("host_wait" if started is not None and started > reach else
                       "kernel_wait" if s - reach < KERNEL_WAIT_NS else "other")
                out[(dev, cat)] += s - reach
            reach = e if reach is None else max(reach, e)
    return dict(out)


@pytest.mark.parametrize("key", [k for k in H.EXPORTS if not k.startswith("ring:")] + ["ring:0"])
def test_idle_causes_match_a_plain_walk(real_fixtures: Any, key: str) -> None:
    path = H.export_path(real_fixtures, key)
    s = summarize(path)
    got = {(r["device"], r["category"]): r["idle_ns"] for r in s.table("nsys_idle_causes").records()}
    assert got == raw_idle_causes(path)
    for row in s.table("nsys_busy_device").records():  # the causes add up to the device's idle time
        assert sum(v for (dev, _), v in got.items() if dev == row["device"]) == row["idle_ns"]


def test_host_wait_fact(real_fixtures: Any) -> None:
    path = H.export_path(real_fixtures, "nsys/nsysai__mfu_2gpu_before.sqlite")
    want = raw_idle_causes(path)
    facts = {f.id: f for f in summarize(path).facts()}
    for dev in (0, 1):
        idle = sum(v for (d, _), v in want.items() if d == dev)
        fact = facts[f"nsys.idle_host_wait:device{dev}"]
        assert fact.value == pytest.approx(100 * want[(dev, "host_wait")] / idle)
        assert fact.denominator_value == pytest.approx(idle / 1e6) and fact.unit == "%"
        assert {e.key["category"] for e in fact.evidence} == {c for (d, c) in want if d == dev}
