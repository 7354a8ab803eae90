"""Setup (one-off work) in Kineto traces: generated captures built to be setup-dominated and to look like it but
not be, and the real traces of the diagnosis cases, which are steady state.

The compile markers are the names torch 2.13's ``torch.compile`` records on the CPU (Dynamo's
``dynamo_timed`` phases, ``entire_frame_compile``; ``Torch-Compiled Region``, ``TorchDynamo Cache
Lookup`` and ``CompiledFunction`` run on every call). Expected values are recomputed here from the
events written (or, for the real traces, from gzip+json).
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.contract_facts import contract_facts

LANE = {"pid": 1, "tid": 1}


def _op(name: str, ts: float, dur: float, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **LANE}


def _launch(corr: int, ts: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 5, **LANE,
            "args": {"correlation": corr}}


def _kernel(name: str, corr: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"stream": 7, "correlation": corr, "device": 0}}


def _facts(path: Path) -> dict[str, Any]:
    rows = analyze_traces(path, executor="serial", analyses=["setup"]).to_rows()
    return {f.id: f for f in contract_facts(rows)} | {"_rows": rows}


def _steady(start: float, steps: int, step_us: float, corr0: int) -> list[dict[str, Any]]:
    """``steps`` iterations of a compiled model: a region, a cache lookup, CompiledFunction and two kernels."""
    out: list[dict[str, Any]] = []
    for i in range(steps):
        t = start + i * step_us
        corr = corr0 + 2 * i
        out += [_op(f"ProfilerStep#{i + 1}", t, step_us - 10, "user_annotation"),
                _op("Torch-Compiled Region: 0/0", t + 10, step_us - 100),
                _op("TorchDynamo Cache Lookup", t + 12, 3),
                _op("CompiledFunction", t + 20, step_us - 200),
                _launch(corr, t + 30), _kernel("triton_poi_fused_relu_0", corr, t + 40, step_us / 2),
                _launch(corr + 1, t + 50), _kernel("sm90_xmma_gemm_f32", corr + 1, t + 40 + step_us / 2, 100)]
    return out


def test_a_capture_that_is_90_percent_compilation_is_setup(tmp_path: Path) -> None:
    """9 s of Dynamo/Inductor compilation (nested phases), then ten 100 ms steps: setup is the compile's union over
    the capture, and the GPU idle while it compiled is setup idle."""
    compile_events = [_op("entire_frame_compile", 0, 9_000_000),
                      _op("_compile.compile_inner (dynamo_timed)", 10, 8_999_000),
                      _op("compile_fx.<locals>.fw_compiler_base (dynamo_timed)", 500_000, 8_000_000),
                      _op("compile_file", 600_000, 7_000_000)]
    events = [_launch(1, 5), _kernel("triton_poi_fused_relu_0", 1, 20, 100), *compile_events, *_steady(9000000, 10, 100000, 10)]
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps({"traceEvents": events}))
    facts = _facts(path)
    end = max(e["ts"] + e["dur"] for e in events)
    share = facts["setup.share"]
    assert share.number == pytest.approx(100 * 9_000_000 / end) and share.number > 89
    assert share.denominator_value == pytest.approx(end / 1e3)
    assert "compilation 9,000.0 ms" in share.detail and "entire_frame_compile" in share.detail
    # the GPU sat idle from the first kernel's end (120 µs) to the first step's kernel, inside the compile until 9 s
    assert facts["setup.idle"].number == pytest.approx((9_000_000 - 120) / 1e3)
    assert facts["setup.one_shot"].number == 0 and facts["setup.one_shot"].detail == "10 ProfilerSteps"


def test_a_compiled_model_in_steady_state_is_not_setup(tmp_path: Path) -> None:
    """The same compiled model without its compilation: Torch-Compiled Region, TorchDynamo Cache Lookup and
    CompiledFunction run every step, so nothing is one-off."""
    path = tmp_path / "steady.json"
    path.write_text(json.dumps({"traceEvents": _steady(0, 10, 100_000, 10)}))
    facts = _facts(path)
    assert facts["setup.share"].number == 0.0 and facts["setup.share"].detail == "no one-off work found"
    assert facts["setup.idle"].number == 0.0
    assert facts["setup.one_shot"].number == 0


@pytest.mark.parametrize("name", ["df_index_resolver.json.gz", "trace_filter__sampled_rank-0.json.gz",
                                  "trace_filter__sampled_rank-1.json.gz"])
def test_the_real_steady_state_cases_are_not_setup(real_fixtures: Any, name: str) -> None:
    """real54_v100 and rank_pair (diagnosis/CASES.md): no compile phase, allocation call, long first call or step
    0 in the raw trace, so no setup; several ProfilerSteps, so not one-shot."""
    path = real_fixtures / "kineto" / f"hta/{name}"
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    assert not any("dynamo_timed" in e["name"] or e["name"] in ("cudaMalloc", "cudaHostAlloc", "ProfilerStep#0")
                   for e in events)
    steps = sum(e["name"].startswith("ProfilerStep#") for e in events)
    facts = _facts(path)
    assert facts["setup.share"].number == 0.0
    assert (facts["setup.one_shot"].number, facts["setup.one_shot"].detail) == (0, f"{steps} ProfilerSteps")


def test_allocations_and_first_calls_on_htas_simple_add(real_fixtures: Any) -> None:
    """HTA's simple_add trace (41.6 s, no step): its cudaMalloc/cudaHostAlloc calls, and the first call of each
    non-blocking runtime call that took >= 1 ms and >= 10x the median of >= 2 later ones, recomputed from the
    raw events; their union over the capture is the setup share."""
    path = real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz"
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), int)
                  and e.get("cat") != "Trace"]  # the profiler's own span is no recorded work
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    allocs = [e for e in runtime if e["name"] in ("cudaMalloc", "cudaHostAlloc")]
    blocking = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
                "cudaMemcpy", "cudaMemcpyAsync"}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(runtime, key=lambda e: e["ts"]):
        if e["name"] not in blocking and e not in allocs:
            by_name.setdefault(e["name"], []).append(e)
    first = [calls[0] for calls in by_name.values() if len(calls) >= 3 and calls[0]["dur"] >= 1000
             and calls[0]["dur"] >= 10 * statistics.median(c["dur"] for c in calls[1:])]
    def library_op(name: str) -> bool:  # cuBLAS operators, whose first call sets up the library
        rest = name.removeprefix("aten::")
        return rest != name and rest in ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")

    def conv_op(name: str) -> bool:  # cuDNN's, whose first call benchmarks its algorithms
        rest = name.removeprefix("aten::")
        return rest != name and rest.startswith(("cudnn_", "convolution", "_convolution"))

    conv: list[dict[str, Any]] = []
    for pick, into in ((library_op, first), (conv_op, conv)):
        ops = [e for e in events if e.get("cat") == "cpu_op" and pick(e["name"])]
        for name in {e["name"] for e in ops}:
            calls = sorted((e for e in ops if e["name"] == name), key=lambda e: e["ts"])
            if len(calls) >= 3 and calls[0]["dur"] >= max(1000, 10 * statistics.median(c["dur"] for c in calls[1:])):
                into.append(calls[0])
    covered = _union([(e["ts"], e["ts"] + e["dur"]) for e in allocs + first + conv])
    span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    facts = _facts(path)
    kinds = {r["kind"]: r for r in facts["_rows"]["kineto_setup_kinds"]}
    assert kinds["allocation and loading"]["events"] == len(allocs)
    assert kinds["first calls"]["events"] == len(first)
    assert kinds.get("cuDNN benchmark", {}).get("events", 0) == len(conv)
    assert facts["setup.share"].number == pytest.approx(100 * covered / span)
    assert facts["setup.one_shot"].number == 0  # no step, but kernels repeat


def _union(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -float("inf")
    for s, e in sorted(intervals):
        if e > reach:
            total += e - max(s, reach)
            reach = e
    return total


def test_step_zero_is_setup_and_one_shot_needs_repeated_work(tmp_path: Path) -> None:
    """ProfilerStep#0 (the first iteration) is setup. A single step whose kernels each run once is one-shot; a
    kernel running twice is repeated work; without steps and kernels it cannot be told (not measured)."""
    events = [_op("ProfilerStep#0", 0, 1000, "user_annotation"), _launch(1, 10), _kernel("gemm_a", 1, 20, 100),
              _launch(2, 30), _kernel("gemm_b", 2, 200, 100), _launch(3, 40),
              _kernel("vectorized_elementwise_kernel", 3, 400, 10), _launch(4, 50),
              _kernel("vectorized_elementwise_kernel", 4, 500, 10)]
    path = tmp_path / "once.json"
    path.write_text(json.dumps({"traceEvents": events}))
    facts = _facts(path)
    assert facts["setup.share"].number == pytest.approx(100.0)
    assert facts["setup.one_shot"].number == 1
    assert facts["setup.one_shot"].detail == "each of the 2 non-elementwise kernels runs once, in 1 ProfilerStep"
    path.write_text(json.dumps({"traceEvents": [*events, _launch(5, 60), _kernel("gemm_a", 5, 700, 100)]}))
    assert _facts(path)["setup.one_shot"].number == 0
    path.write_text(json.dumps({"traceEvents": [_op("aten::mm", 0, 100)]}))
    one_shot = _facts(path)["setup.one_shot"]
    assert not one_shot.measured and "repeated work cannot be told" in one_shot.value.reason


def test_steps_holding_compilation_or_autotuning_are_named(tmp_path: Path) -> None:
    """Dynamo compiles inside step 1 and Inductor autotunes a matmul template inside step 2 (torch 2.13's
    ``select_algorithm`` times it as ``mm_template_autotuning (dynamo_timed)``: compilation and autotuning both);
    steps 3-5 are the compiled steady state. The setup rows say which steps, and the warning says they are not
    steady."""
    events = _steady(0, 5, 100_000, 10)
    events += [_op("entire_frame_compile", 1_000, 60_000), _op("compile_fx.<locals>.fw_compiler_base (dynamo_timed)",
                                                                2_000, 50_000),
               _op("mm_template_autotuning (dynamo_timed)", 101_000, 30_000)]
    path = tmp_path / "compiled_in_window.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = analyze_traces(path, executor="serial", analyses=["setup"])
    rows = result.to_rows()
    kinds = {r["kind"]: r for r in rows["kineto_setup_kinds"]}
    assert kinds["compilation"]["steps"] == "steps 1-2"
    assert kinds["autotuning"]["steps"] == "step 2"
    assert rows["kineto_setup"][0]["unsteady_steps"] == "1-2"
    (warning,) = [w for w in result.warnings if "not steady state" in w]
    assert warning.startswith("compiled_in_window.json: steps 1-2 hold one-off work (compilation (steps 1-2, 90.0 ms)")
    assert "autotuning (step 2, 30.0 ms)" in warning


def test_a_compiled_model_in_steady_state_names_no_step(tmp_path: Path) -> None:
    """The look-alike: ``Torch-Compiled Region``/``CompiledFunction`` in every step is how a compiled model runs."""
    path = tmp_path / "steady.json"
    path.write_text(json.dumps({"traceEvents": _steady(0, 5, 100_000, 10)}))
    result = analyze_traces(path, executor="serial", analyses=["setup"])
    assert result.to_rows()["kineto_setup"][0]["unsteady_steps"] == ""
    assert not [w for w in result.warnings if "not steady state" in w]


@pytest.mark.parametrize(("first_us", "benchmarked"), [(50_000, True), (1_000, False)])
def test_a_cudnn_benchmark_in_the_first_step(tmp_path: Path, first_us: float, benchmarked: bool) -> None:
    """``torch.backends.cudnn.benchmark``: the first ``aten::cudnn_convolution`` times cuDNN's algorithms (50 ms against
    1 ms for each later call) inside step 1, which is then not steady state; the look-alike runs every call alike."""
    events = _steady(0, 4, 100_000, 10)
    for i in range(4):
        events.append(_op("aten::cudnn_convolution", i * 100_000 + 500, first_us if i == 0 else 1_000))
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows = analyze_traces(path, executor="serial", analyses=["setup"]).to_rows()
    kinds = {r["kind"]: r for r in rows["kineto_setup_kinds"]}
    assert ("cuDNN benchmark" in kinds) == benchmarked
    assert rows["kineto_setup"][0]["unsteady_steps"] == ("1" if benchmarked else "")
    if benchmarked:
        assert (kinds["cuDNN benchmark"]["events"], kinds["cuDNN benchmark"]["us"]) == (1, first_us)
        assert kinds["cuDNN benchmark"]["steps"] == "step 1"
