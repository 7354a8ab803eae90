"""Per-operation memory (``kineto.ops.op_memory``) on traces torch 2.13 records with ``profile_memory``.

The expected figures are recomputed from the raw ``[memory]`` events with a brute-force search
for the innermost operator around each event (gzip/json, not the code under test): per operator
the allocations and frees, the bytes no free in the trace released, and the peak per step.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from my_utils.profiling.kineto.ops.op_memory import device_name, memory_tables  # noqa: E402
from my_utils.profiling.kineto.run import read_rank  # noqa: E402


def _record(tmp_path: Path) -> Path:
    from torch.profiler import ProfilerActivity, profile, record_function

    keep = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        for step in range(3):
            with record_function(f"ProfilerStep#{step}"):
                a = torch.randn(128, 64)
                b = a @ a.T  # mm allocates the 128×128 result
                c = torch.cat([a, a])
                keep.append(torch.zeros(32 * (step + 1)))  # held past the capture: never freed in the trace
                del a, b, c
    path = tmp_path / "mem.json"
    prof.export_chrome_trace(str(path))
    return path


def _expected(path: Path) -> tuple[dict[str, list[int]], dict[int, int]]:
    events = json.loads(path.read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    steps = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
             if str(e.get("name", "")).startswith("ProfilerStep#")}
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # allocs, bytes, frees, bytes, unfreed bytes
    live: dict[int, tuple[str, int]] = {}
    peaks: dict[int, int] = {}
    for e in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"]):
        t, args = e["ts"], e["args"]
        around = [o for o in ops if o["tid"] == e["tid"] and o["ts"] <= t <= o["ts"] + o["dur"]]
        owner = max(around, key=lambda o: (o["ts"], -o["dur"]))["name"] if around else "(no operator)"
        row = per[owner]
        if args["Bytes"] > 0:
            row[0] += 1
            row[1] += args["Bytes"]
            live[args["Addr"]] = (owner, args["Bytes"])
        else:
            row[2] += 1
            row[3] -= args["Bytes"]
            live.pop(args["Addr"], None)
        for step, (start, end) in steps.items():
            if start <= t <= end:
                peaks[step] = max(peaks.get(step, 0), args["Total Allocated"])
    for owner, nbytes in live.values():
        per[owner][4] += nbytes
    return dict(per), peaks


def test_allocations_and_frees_per_operator_and_the_peak_per_step(tmp_path: Path) -> None:
    path = _record(tmp_path)
    per, peaks = _expected(path)
    tables = memory_tables(read_rank(path).data)
    got = {r.operator: [r.allocs, r.alloc_bytes, r.frees, r.freed_bytes, r.unfreed_bytes] for r in tables["op_memory"]}
    assert got == per
    assert {r.device for r in tables["op_memory"]} == {"cpu"}
    # torch.zeros allocates inside aten::empty: the three kept tensors are the bytes no free released
    assert got["aten::empty"][4] == 4 * 32 * (1 + 2 + 3)
    assert {r.step: r.peak_allocated for r in tables["memory_peaks"] if r.step is not None} == peaks
    events = json.loads(path.read_text())["traceEvents"]
    for r in tables["op_memory"]:  # each row names one of its events
        assert events[r.example_index]["name"] == "[memory]"


def test_a_trace_without_memory_events_has_no_memory_tables(real_fixtures: Any) -> None:
    d = read_rank(real_fixtures / "kineto/hta/trace_diff__test.json.gz").data
    assert memory_tables(d) == {}


@pytest.mark.parametrize(("device_type", "device_id", "name"), [(0, -1, "cpu"), (1, 3, "cuda:3"), (1, -1, "cuda")])
def test_device_names(device_type: int, device_id: int, name: str) -> None:
    assert device_name((device_type + 1) * 1000 + device_id + 1) == name
