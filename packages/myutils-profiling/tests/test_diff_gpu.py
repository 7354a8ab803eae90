"""``analysis.diff_gpu``: the GPU level of a diff and the step-time change by cause.

Expected values are recomputed here from the raw trace (gzip + json, plain Python interval
arithmetic), never from the package. Generated pairs (Hypothesis) pin the accounting's
properties: the causes and the remainder add up to the step change, identical runs show
no change, a pair differing in one kernel's duration puts the whole change on it, one
sample a side is never significant, and unrelated traces always warn.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError
from my_utils.profiling.analysis.diff import OPERATIONS_HINT, diff_traces
from my_utils.profiling.analysis.diff_gpu import GpuSide, account, lane_facts
from my_utils.profiling.analysis.diff_gpu_read import GpuPass
from my_utils.profiling.kineto.read.provider import read_trace

CONTROL = "kineto/hta/trace_diff__control.json.gz"
TEST = "kineto/hta/trace_diff__test.json.gz"


# -- independent recomputation from the raw trace ------------------------------------------


def _union(iv: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _length(u: list[list[float]]) -> float:
    return sum(e - s for s, e in u)


def _clip(u: list[list[float]], a: float, b: float) -> float:
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e in u)


def _raw(path: Path) -> dict[str, Any]:
    """Span, busy, compute, communication, overlap, host-wait idle and per-step parts of a one-GPU trace (ms)."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    is_comm = [e["cat"] == "kernel" and "nccl" in e["name"].lower() for e in gpu]
    # computation: a kernel that is not NCCL and not a copy/set kernel by name (the kinds table's rules for this trace)
    is_comp = [e["cat"] == "kernel" and not c and not e["name"].lower().startswith(("memcpy", "memset"))
               for e, c in zip(gpu, is_comm, strict=True)]
    iv = [(e["ts"], e["ts"] + e["dur"]) for e in gpu]
    busy = _union(iv)
    comp = _union([x for x, c in zip(iv, is_comp, strict=True) if c])
    comm = _union([x for x, c in zip(iv, is_comm, strict=True) if c])
    cc = _union([x for x, a, b in zip(iv, is_comp, is_comm, strict=True) if a or b])
    start, end = min(s for s, _ in iv), max(e for _, e in iv)
    # host wait: the gap before an activity whose launching runtime call started after the gap began
    launch = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
            launch.setdefault(e["args"]["correlation"], e["ts"])
    host = 0.0
    reach = None
    for e in sorted(gpu, key=lambda e: e["ts"]):
        if reach is not None and e["ts"] > reach:
            t = launch.get(e.get("args", {}).get("correlation"))
            if t is not None and t > reach:
                host += e["ts"] - reach
        reach = e["ts"] + e["dur"] if reach is None else max(reach, e["ts"] + e["dur"])
    steps = sorted({(e["ts"], e["dur"]) for e in events if e.get("ph") == "X"
                    and str(e.get("name", "")).startswith("ProfilerStep#")})
    parts: dict[str, list[float]] = defaultdict(list)
    for ts, dur in steps:
        b, c, x = _clip(busy, ts, ts + dur), _clip(comp, ts, ts + dur), _clip(cc, ts, ts + dur)
        parts["compute"].append(c / 1e3)
        parts["exposed_communication"].append((x - c) / 1e3)
        parts["other_gpu"].append((b - x) / 1e3)
        parts["idle"].append((dur - b) / 1e3)
        parts["step"].append(dur / 1e3)
    return {"span": (end - start) / 1e3, "busy": _length(busy) / 1e3, "compute": _length(comp) / 1e3,
            "communication": _length(comm) / 1e3, "overlap": (_length(comp) + _length(comm) - _length(cc)) / 1e3,
            "host_wait": host / 1e3, "parts": {k: sum(v) / len(v) for k, v in parts.items()}, "steps": len(steps)}


@pytest.fixture(scope="module")
def real_pair(real_fixtures: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    return (diff_traces([real_fixtures / CONTROL], [real_fixtures / TEST]), _raw(real_fixtures / CONTROL),
            _raw(real_fixtures / TEST))


def test_the_gpu_level_before_and_after_matches_the_raw_traces(real_pair: Any) -> None:
    result, a, b = real_pair
    rows = {r.key: r for r in result.gpu_rows}
    for key, raw_key in (("span", "span"), ("busy", "busy"), ("compute", "compute"),
                         ("communication", "communication"), ("overlap", "overlap"), ("idle.host_wait", "host_wait")):
        assert rows[key].base == pytest.approx(a[raw_key], abs=1e-6), key
        assert rows[key].target == pytest.approx(b[raw_key], abs=1e-6), key
    assert rows["idle"].base == pytest.approx(a["span"] - a["busy"], abs=1e-6)
    # the case's figures (CASES.md diff_a100_v100), as a reader sees them
    assert (round(a["busy"], 1), round(a["span"], 1), round(b["busy"], 1), round(b["span"], 1)) == \
        (388.6, 464.6, 717.9, 745.2)
    assert round(rows["busy"].base_share or 0, 1) == 83.6 and round(rows["busy"].target_share or 0, 1) == 96.3
    assert (round(a["compute"], 1), round(b["compute"], 1), round(a["overlap"], 1), round(b["overlap"], 1)) == \
        (281.3, 548.1, 75.6, 178.0)
    assert sum(ms for key, r in rows.items() if key.startswith("idle.") for ms in [r.base or 0.0]) == \
        pytest.approx(rows["idle"].base, abs=1e-6)  # the causes split the idle time


def test_different_gpus_point_to_the_operation_matched_section(real_pair: Any, tmp_path: Path) -> None:
    """A100 vs V100, the operation section not asked for: one note says kernel names do not pair across GPUs and
    what --operations does; the same GPU on both sides says nothing of it."""
    result = real_pair[0]
    assert result.operations is None  # opt-in: the default diff reads no operators' shapes
    assert [n for n in result.notes if "--operations" in n] == [OPERATIONS_HINT]
    assert "operator + shape + call stack" in OPERATIONS_HINT and "kernel names differ across GPUs" in OPERATIONS_HINT
    # no GPU model in these traces: their kernel names say the architecture (Ampere on both, then Volta on one)
    ampere, volta = [[("ampere_sgemm_64x64_nn", 5.0)]] * 2, [[("volta_sgemm_128x64_nn", 5.0)]] * 2
    a, b, c = (_no_model(_write(tmp_path / f"{n}.json", k)) for n, k in (("a", ampere), ("b", ampere), ("c", volta)))
    assert not any("--operations" in n for n in diff_traces([a], [b]).notes)
    assert OPERATIONS_HINT in diff_traces([a], [c]).notes
    asked = diff_traces([a], [c], operations=True)
    assert asked.operations is not None and OPERATIONS_HINT not in asked.notes


def _no_model(path: Path) -> Path:
    """The trace without its ``deviceProperties``: the GPU model unknown."""
    doc = json.loads(path.read_text())
    del doc["deviceProperties"]
    path.write_text(json.dumps(doc))
    return path


def test_the_step_change_is_accounted_for_by_cause(real_pair: Any) -> None:
    result, a, b = real_pair
    acc = result.accounting
    assert acc is not None and acc.window == "step" and acc.measured and acc.samples == (6, 6)
    assert acc.base == pytest.approx(a["parts"]["step"]) and acc.target == pytest.approx(b["parts"]["step"])
    by = {c.key: c for c in acc.causes}
    for key in ("compute", "exposed_communication", "other_gpu", "idle"):
        assert by[key].delta == pytest.approx(b["parts"][key] - a["parts"][key], abs=1e-9), key
    assert math.fsum(c.delta for c in acc.causes) + acc.remainder == pytest.approx(acc.delta, abs=1e-9)
    assert abs(acc.remainder) < 1e-6  # one trace a side: the windows are the provider's steps
    assert acc.causes[0].key == "compute" and by["compute"].significant
    assert result.headline.count("+46.6 ms/step (77.5 → 124.1 ms, +60.1%, 6 and 6 steps): +44.3 ms compute "
                                 "(GPU 84% → 96% busy)") == 1


def test_the_typed_and_the_dict_paths_agree(real_fixtures: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    typed = read_trace(real_fixtures / CONTROL, passes=(GpuPass,), events=False).results[0]
    monkeypatch.setenv("MYUTILS_TYPED_TRACE", "0")
    plain = read_trace(real_fixtures / CONTROL, passes=(GpuPass,), events=False).results[0]
    assert typed == plain and len(typed) == 1 and len(typed[0].windows) == 6


def test_lane_windows_add_up_and_touching_intervals_merge() -> None:
    # two compute kernels touching at 10, a communication kernel half under them, a copy alone, then idle
    lane = lane_facts("x", [0, 10, 15, 30], [10, 20, 25, 35], [0, 0, 1, 2], [(0, 40), (0, 20)], {}, "step", scale=1.0)
    assert (lane.span_ms, lane.busy_ms, lane.compute_ms, lane.communication_ms, lane.overlap_ms) == \
        (35.0, 30.0, 20.0, 10.0, 5.0)
    assert lane.windows[0] == (40.0, 20.0, 5.0, 5.0, 10.0)
    assert lane.windows[1] == (20.0, 20.0, 0.0, 0.0, 0.0)
    assert all(sum(w[1:]) == w[0] for w in lane.windows)


# -- generated pairs ------------------------------------------------------------------------


def _write(path: Path, steps: list[list[tuple[str, float]]], host: str = "forward", gap: float = 3.0) -> Path:
    """A one-GPU Kineto trace: per step an annotation, then each kernel launched and run back to back on one stream."""
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    t, corr = 1000.0, 1
    for i, kernels in enumerate(steps):
        s0 = t - 1.0
        for name, dur in kernels:
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t - 1.0, "dur": 0.5, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t, "dur": dur,
                           "args": {"correlation": corr, "stream": 7}})
            corr += 1
            t += dur + gap
        events.append({"ph": "X", "cat": "user_annotation", "name": host, "pid": 1, "tid": 1, "ts": s0 + 0.1,
                       "dur": t - s0 - 0.2})
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                       "ts": s0, "dur": t - s0})
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}]}))
    return path


KERNELS = ("gemm_a", "gemm_b", "ncclKernel_AllReduce_RING_LL_Sum_float", "elementwise_c")
durations = st.floats(1.0, 500.0, allow_nan=False)
step = st.lists(st.tuples(st.sampled_from(KERNELS), durations), min_size=1, max_size=5)
run = st.lists(step, min_size=2, max_size=5)
pair_settings = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pair_settings
@given(run, run)
def test_causes_and_the_remainder_add_up_to_the_step_change(tmp_path: Path, a: Any, b: Any) -> None:
    r = diff_traces([_write(tmp_path / "a.json", a)], [_write(tmp_path / "b.json", b)])
    acc = r.accounting
    assert acc is not None and r.step_time is not None
    assert acc.delta == pytest.approx(r.step_time.delta, abs=1e-9)
    assert math.fsum(c.delta for c in acc.causes) + acc.remainder == pytest.approx(acc.delta, abs=1e-9)
    assert abs(acc.remainder) <= 1e-6 * max(1.0, abs(acc.base))  # the windows are the steps themselves


@pair_settings
@given(run)
def test_identical_events_show_no_change(tmp_path: Path, a: Any) -> None:
    r = diff_traces([_write(tmp_path / "a.json", a)], [_write(tmp_path / "b.json", a)])
    assert not r.significant and all(c.delta == 0 for c in r.changes)
    assert r.accounting is not None and all(c.delta == 0 and not c.significant for c in r.accounting.causes)
    assert all(row.delta in (0, None) for row in r.gpu_rows)
    assert not r.warnings and r.similarity is not None and r.similarity.base_time_shared == 1.0


@pair_settings
@given(run, st.integers(0, len(KERNELS) - 1), st.floats(50.0, 400.0))
def test_a_pair_differing_in_one_kernel_puts_the_whole_change_on_it(tmp_path: Path, a: Any, which: int,
                                                                   extra: float) -> None:
    name = KERNELS[which]
    a = [[(n, d) for n, d in s] + ([(name, 20.0)] if i == 0 else []) for i, s in enumerate(a)]  # it runs at least once
    b = [[(n, d + extra if n == name else d) for n, d in s] for s in a]
    r = diff_traces([_write(tmp_path / "a.json", a)], [_write(tmp_path / "b.json", b)])
    assert r.step_time is not None
    moved = [c for c in r.changes if c.delta != pytest.approx(0, abs=1e-9)]
    assert [c.name for c in moved if c.name.startswith("kernel:")] == [f"kernel:{name}"]
    kernel = next(c for c in moved if c.name == f"kernel:{name}")
    assert kernel.delta == pytest.approx(r.step_time.delta, rel=1e-9)  # the whole step change is that kernel's
    acc = r.accounting
    assert acc is not None
    part = "exposed_communication" if name.startswith("nccl") else "compute"
    by = {c.key: c for c in acc.causes}
    assert by[part].delta == pytest.approx(acc.delta, rel=1e-9)
    assert all(abs(c.delta) < 1e-6 for c in acc.causes if c.key != part)
    assert f"{name} " in r.headline  # the headline's kernel is that one


@pair_settings
@given(step, step, st.booleans())
def test_one_sample_a_side_is_never_significant(tmp_path: Path, a: Any, b: Any, with_step: bool) -> None:
    pa, pb = _write(tmp_path / "a.json", [a]), _write(tmp_path / "b.json", [b])
    if not with_step:  # a capture without ProfilerStep markers
        for p in (pa, pb):
            data = json.loads(p.read_text())
            data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name")).startswith("ProfilerStep")]
            p.write_text(json.dumps(data))
    r = diff_traces([pa], [pb])
    assert not r.significant and r.descriptive
    assert all(c.status in ("unmeasured", "added", "removed") for c in r.changes)
    assert r.accounting is not None and not r.accounting.measured
    assert not any(c.significant for c in r.accounting.causes)
    assert "descriptive" in r.headline and any("one sample" in n for n in r.notes)
    with pytest.raises(InputError, match="repeated samples"):
        r.gate(10)


@pair_settings
@given(run, run)
def test_two_unrelated_traces_always_warn(tmp_path: Path, a: Any, b: Any) -> None:
    b = [[(f"other_{n}", d) for n, d in s] for s in b]
    r = diff_traces([_write(tmp_path / "a.json", a)], [_write(tmp_path / "b.json", b, host="evaluate")])
    assert r.similarity is not None and r.similarity.little_in_common
    assert any(w.startswith("the workloads have little in common") for w in r.warnings)
    assert r.headline.startswith("Not like for like (") and "little in common" in r.headline.split(")")[0]


def test_account_without_gpu_activity_is_none() -> None:
    assert account(GpuSide(()), GpuSide(())) is None


def test_gpu_activity_on_one_side_only_is_warned(tmp_path: Path) -> None:
    gpu = _write(tmp_path / "gpu.json", [[("gemm_a", 10.0)], [("gemm_a", 10.0)]])
    data = json.loads(gpu.read_text())
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in ("kernel", "cuda_runtime")]
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps(data))
    r = diff_traces([cpu], [gpu])
    assert any(w.startswith("GPU activity on the target side only") for w in r.warnings)
    assert r.gpu_rows == [] and r.accounting is None
    assert not any("GPU activity" in w for w in diff_traces([gpu], [gpu]).warnings)
