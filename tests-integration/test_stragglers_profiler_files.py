"""``myutils stragglers PATH...`` on profiler files: myutils-distributed's command, myutils-profiling's reader.

The two distributions meet only through core's rank-timings entry points, so this crosses them.
Expected figures come from the raw files (sqlite3 on the ring's exports) or from how a trace was
written (the generated Kineto pair: a planted slow rank, and a look-alike differing by noise).
"""

from __future__ import annotations

import json
import random
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "my_utils.core"]


def _stragglers(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "stragglers", *args], capture_output=True, text=True, timeout=300)


def _arrival_ms(path: Path) -> tuple[str, float]:
    """(host, the all-reduce kernel's start in ms on the UTC epoch) of one export, by sqlite3."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (host,) = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'").fetchone()
        (start,) = con.execute("SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                               "ON s.id = k.demangledName WHERE s.value LIKE '%AllReduce%'").fetchone()
    finally:
        con.close()
    return host, start / 1e6  # these exports already hold epoch ns (>= 1e18)


def test_the_ring_names_host_ault43_late_not_a_rank(real_fixtures: Any) -> None:
    paths = [real_fixtures / n for n in real_fixtures.names("nsys/dsl_ring_6ranks/")]
    folder = paths[0].parent
    raw: dict[str, list[float]] = {}
    for p in paths:
        host, ms = _arrival_ms(p)
        raw.setdefault(host, []).append(ms)
    late, early = "ault43.cscs.ch", "ault44.cscs.ch"
    assert min(raw[late]) > max(raw[early])  # the capture as CASES.md describes it
    lag = statistics.median(raw[late]) - statistics.median(raw[early])
    separation = min(raw[late]) - max(raw[early])
    spread = max(max(v) - min(v) for v in raw.values())

    proc = _stragglers(str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    c = doc["collectives"]
    assert c["occurrences"] == 1 and c["late_host"] == late and c["late_rank"] is None and not c["persistent"]
    hosts = {h["host"]: h for h in c["per_host"]}
    assert abs(hosts[late]["lag_ms"] - lag) < 1e-3 and abs(hosts[late]["separation_ms"] - separation) < 1e-3
    assert abs(max(h["spread_ms"] for h in hosts.values()) - spread) < 1e-3
    assert doc["steps"] is None and doc["steps_note"].startswith("not measured")

    text = _stragglers(str(folder)).stdout
    assert f"late host: {late} (ranks 0, 1, 2)" in text and "The host is late, not one of its ranks." in text
    assert "one observation" in text and "steps: not measured" in text
    # CASES.md: never one rank as the straggler without its host, never "host-bound"
    assert "late rank" not in text and "host-bound" not in text


def _trace(path: Path, rank: int, steps: list[tuple[float, float, float]], host: str) -> Path:
    """A Kineto trace of one rank: per step (start, all-reduce arrival, end) in ms, its kernel on the GPU."""
    events: list[dict[str, Any]] = []
    for i, (start, arrival, end) in enumerate(steps):
        t0 = 1.7e15 + start * 1e3
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                       "ts": t0, "dur": (end - start) * 1e3})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t0 + 10, "dur": 5, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0,
                       "tid": 7, "ts": 1.7e15 + arrival * 1e3, "dur": (end - arrival) * 1e3 - 1,
                       "args": {"correlation": i + 1, "stream": 7, "device": 0}})
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
           "host_name": host, "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def _pair(folder: Path, compute: dict[int, list[float]]) -> Path:
    """Two ranks joined by an all-reduce per step: each arrives after its compute; both leave when the last came."""
    folder.mkdir()
    start = 0.0
    steps: dict[int, list[tuple[float, float, float]]] = {0: [], 1: []}
    for i in range(len(compute[0])):
        arrivals = {r: start + compute[r][i] for r in (0, 1)}
        end = max(arrivals.values()) + 5.0
        for r in (0, 1):
            steps[r].append((start, arrivals[r], end))
        start = end + 0.5
    for r in (0, 1):
        _trace(folder / f"rank{r}.json", r, steps[r], "node0")
    return folder


def test_a_planted_slow_rank_in_kineto_traces_is_named(tmp_path: Path) -> None:
    rng = random.Random(7)
    compute = {0: [100 + rng.uniform(-1, 1) for _ in range(10)], 1: [125 + rng.uniform(-1, 1) for _ in range(10)]}
    folder = _pair(tmp_path / "slow", compute)
    proc = _stragglers(str(folder / "rank*.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)["collectives"]
    assert c["late_rank"] == 1 and c["late_count"] == 10 and c["persistent"]
    late = {r["rank"]: r["late_ms"] for r in c["per_rank"]}
    diffs = sorted(compute[1][i] - compute[0][i] for i in range(10))
    assert abs(late[1] - (diffs[4] + diffs[5]) / 2) < 1e-3
    text = _stragglers(str(folder)).stdout
    assert "late rank: 1 on host node0" in text and "persistent" in text


def test_two_ranks_differing_by_noise_are_not_stragglers(tmp_path: Path) -> None:
    rng = random.Random(8)
    compute = {r: [100 + rng.gauss(0, 0.3) for _ in range(10)] for r in (0, 1)}
    folder = _pair(tmp_path / "noise", compute)
    proc = _stragglers(str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["collectives"]["late_rank"] is None and not doc["collectives"]["persistent"]
    assert doc["steps"]["straggler"] is None
