"""CUDA graphs in Kineto traces (``kineto.cuda_graphs``): a generated capture that replays a graph, and one built to
look like it (the same kernels, launched one by one, ``graph id`` 0); the advice gate then drops CUDA-graph advice.

The events follow what Kineto writes (``libkineto``: a graph replay's kernels carry the ``cudaGraphLaunch``'s
correlation id, and, built against CUDA 12+, ``graph id`` / ``graph node id`` arguments; 0 outside graphs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.advice_gate import removed_pieces
from my_utils.profiling.analysis.contents import capture_contents
from my_utils.profiling.kineto import analyze_traces

LANE = {"pid": 1, "tid": 1}


def _x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **LANE, "args": args}


def _kernel(name: str, corr: int, ts: float, dur: float, graph: int = 0, node: int = 0) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"stream": 7, "correlation": corr, "device": 0, "graph id": graph, "graph node id": node}}


KERNELS = (("gemm_a", 40.0), ("relu_b", 10.0), ("gemm_c", 30.0))


def _trace(tmp_path: Path, graphs: bool) -> Path:
    """Three steps; step 1 captures and instantiates a graph, each step replays it (``graphs``) or launches the
    same three kernels one by one (the look-alike); every step also runs one ordinary kernel."""
    events: list[dict[str, Any]] = []
    corr = 100
    for step in range(1, 4):
        t = step * 10_000.0
        events.append(_x("user_annotation", f"ProfilerStep#{step}", t, 9_000))
        if step == 1:
            events += [_x("cuda_runtime", "cudaStreamBeginCapture", t + 10, 5),
                       _x("cuda_runtime", "cudaStreamEndCapture", t + 400, 50),
                       _x("cuda_runtime", "cudaGraphInstantiate", t + 500, 800)]
        events.append(_x("cpu_op", "CUDAGraph.replay" if graphs else "model.forward", t + 2000, 300))
        k0 = t + 2500
        if graphs:
            corr += 1
            events.append(_x("cuda_runtime", "cudaGraphLaunch", t + 2010, 20, correlation=corr))
            for node, (name, dur) in enumerate(KERNELS, start=1):
                events.append(_kernel(name, corr, k0, dur, graph=7, node=node))
                k0 += dur + 1
        else:
            for name, dur in KERNELS:
                corr += 1
                events += [_x("cuda_runtime", "cudaLaunchKernel", t + 2010 + corr % 10, 5, correlation=corr),
                           _kernel(name, corr, k0, dur)]
                k0 += dur + 1
        corr += 1
        events += [_x("cuda_runtime", "cudaLaunchKernel", t + 2400, 5, correlation=corr),
                   _kernel("optimizer_step", corr, t + 3000, 20)]
    path = tmp_path / ("graphs.json" if graphs else "lookalike.json")
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_graph_replays_are_named_and_their_kernels_attributed(tmp_path: Path) -> None:
    rows = analyze_traces(_trace(tmp_path, True), executor="serial", analyses=["cuda_graphs"]).to_rows()
    (graph,) = rows["kineto_cuda_graphs"]
    graph_us = 3 * sum(d for _n, d in KERNELS)
    all_us = graph_us + 3 * 20
    assert (graph["name"], graph["graph_id"], graph["launches"], graph["kernels"]) == ("cudaGraphLaunch", 7, 3, 9)
    assert graph["kernel_us"] == pytest.approx(graph_us)
    assert graph["kernel_share_pct"] == pytest.approx(100 * graph_us / all_us)
    assert graph["launched_under"] == "CUDAGraph.replay"
    assert (graph["captures"], graph["instantiations"]) == (1, 1)
    kernels = {r["kernel"]: r for r in rows["kineto_cuda_graph_kernels"]}
    assert set(kernels) == {n for n, _d in KERNELS}  # the ordinary kernel is not a graph's
    assert kernels["gemm_a"]["count"] == 3 and kernels["gemm_a"]["total_us"] == pytest.approx(120)
    assert kernels["gemm_a"]["launched_by"] == "cudaGraphLaunch under CUDAGraph.replay"
    # launch statistics leave graph kernels out: only the ordinary kernel is a launch
    assert rows["kineto_launch"][0]["launches"] == 3


def test_the_lookalike_has_no_graph(tmp_path: Path) -> None:
    rows = analyze_traces(_trace(tmp_path, False), executor="serial", analyses=["cuda_graphs"]).to_rows()
    assert not rows.get("kineto_cuda_graphs")
    assert rows["kineto_launch"][0]["launches"] == 12


def test_no_cuda_graph_advice_for_a_run_that_replays_graphs(tmp_path: Path) -> None:
    """The capture's contents see the graph launches; the advice gate removes the CUDA-graph pieces (host-bound)."""
    replay = analyze_traces(_trace(tmp_path, True), executor="serial", analyses=["cuda_graphs"]).to_rows()
    plain = analyze_traces(_trace(tmp_path, False), executor="serial", analyses=["cuda_graphs"]).to_rows()
    with_graphs = capture_contents(replay, {})
    without = capture_contents(plain, {})
    assert "cuda_graphs" in with_graphs.features and "cuda_graphs" not in without.features
    assert {"cuda_graphs", "cuda_graphs_short", "reduce_overhead"} <= set(removed_pieces("host", with_graphs))
    assert "cuda_graphs" not in removed_pieces("host", without)


def test_capture_in_the_window_is_one_off_work(tmp_path: Path) -> None:
    """The capture and instantiation of step 1 are setup (kind ``graph capture``), and step 1 is not steady state."""
    result = analyze_traces(_trace(tmp_path, True), executor="serial", analyses=["setup"])
    rows = result.to_rows()
    kinds = {r["kind"]: r for r in rows["kineto_setup_kinds"]}
    assert kinds["graph capture"]["events"] == 2  # one begin-to-end capture, one instantiation
    assert kinds["graph capture"]["us"] == pytest.approx((400 + 50 - 10) + 800)  # begin to end, instantiation
    assert kinds["graph capture"]["steps"] == "step 1"
    assert rows["kineto_setup"][0]["unsteady_steps"] == "1"
    assert any("steps 1 hold one-off work (graph capture (step 1" in w for w in result.warnings)
