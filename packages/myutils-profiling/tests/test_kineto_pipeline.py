"""Pipeline bubbles (``kineto.pipeline``, ``analysis.pipeline_rule``) on generated 1F1B pipelines: an ideal one (the
bubble is the schedule's, nothing flagged), one with a slow stage (the others idle beyond it: flagged, with its
excess), and look-alikes (microbatch names on one rank with no stage count; module names ``forward``/``backward``).

Each trace is a rank of a 4-stage pipeline running 8 microbatches, its ``PP:<stage><F|B><microbatch>`` ranges
(``torch.distributed.pipelining``'s names) placed by a small 1F1B simulator written here; the expected figures are
computed from the simulated times, never by the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.pipeline_rule import pipeline_facts, pipeline_findings
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.pipeline import classify, compile_patterns, expected_share

P, M = 4, 8
TAIL = 1_000.0  # the optimizer after the pipeline, inside the step


def simulate(tf: list[float], tb: list[float]) -> dict[int, list[tuple[str, int, float, float]]]:
    """1F1B: stage s runs min(P-1-s, M) forwards, then one forward and one backward in turn, then the backwards left.
    A forward waits for the previous stage's, a backward for the next stage's; returns (kind, mb, start, end)."""
    order = {}
    for s in range(P):
        warm = min(P - 1 - s, M)
        ops = [("F", j) for j in range(warm)]
        for i in range(M - warm):
            ops += [("F", warm + i), ("B", i)]
        ops += [("B", j) for j in range(M - warm, M)]
        order[s] = ops
    done: dict[tuple[int, str, int], float] = {}
    free = [0.0] * P
    pos = [0] * P
    out: dict[int, list[tuple[str, int, float, float]]] = {s: [] for s in range(P)}
    while any(pos[s] < len(order[s]) for s in range(P)):
        for s in range(P):
            if pos[s] >= len(order[s]):
                continue
            kind, j = order[s][pos[s]]
            dep = (s - 1, "F", j) if kind == "F" and s > 0 else (s + 1, "B", j) if kind == "B" and s < P - 1 else None
            if dep is not None and dep not in done:
                continue
            start = max(free[s], done.get(dep, 0.0) if dep else 0.0)
            end = start + (tf[s] if kind == "F" else tb[s])
            done[(s, kind, j)] = end
            free[s] = end
            out[s].append((kind, j, start, end))
            pos[s] += 1
    return out


def write_pipeline(tmp_path: Path, tf: list[float], tb: list[float]) -> tuple[list[Path], dict[int, Any]]:
    sched = simulate(tf, tb)
    end = max(e for ops in sched.values() for *_x, e in ops)
    paths = []
    for s, ops in sched.items():
        events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": end + TAIL,
                   "pid": 1, "tid": 1}]
        events += [{"ph": "X", "cat": "user_annotation", "name": f"PP:{s}{k}{j}", "ts": a, "dur": b - a, "pid": 1,
                    "tid": 1} for k, j, a, b in ops]
        p = tmp_path / f"rank{s}.json"
        p.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": s, "world_size": P}}))
        paths.append(p)
    return paths, sched


def _rows(paths: list[Path], **options: Any) -> list[dict[str, Any]]:
    result = analyze_traces(paths, executor="serial", analyses=["pipeline"], options={"pipeline": options})
    return result.to_rows()["kineto_pipeline_bubble"]


def test_an_ideal_pipeline_has_the_schedules_bubble(tmp_path: Path) -> None:
    paths, sched = write_pipeline(tmp_path, [1000.0] * P, [2000.0] * P)
    rows = _rows(paths)
    window = max(e for ops in sched.values() for *_x, e in ops)
    assert window == pytest.approx((M + P - 1) * 3000)  # 1F1B's length with equal stages
    for r in rows:
        assert (r["stages"], r["microbatches"], r["chunks"], r["schedule"]) == (P, M, 1, "1F1B / GPipe")
        assert r["window_us"] == pytest.approx(window)
        assert r["bubble_pct"] == pytest.approx(100 * (P - 1) / (M + P - 1))
        assert r["expected_pct"] == pytest.approx(100 * (P - 1) / (M + P - 1))
        assert r["excess_us"] == pytest.approx(0, abs=1e-6) and not r["flagged"]
    tables = {"kineto_pipeline_bubble": rows}
    assert not pipeline_findings({f.id: f for f in pipeline_facts(tables)}, tables)


def test_a_slow_stage_leaves_the_others_idle_beyond_the_schedule(tmp_path: Path) -> None:
    tf, tb = [1000.0] * P, [2000.0] * P
    tf[2], tb[2] = 1800.0, 3600.0
    paths, sched = write_pipeline(tmp_path, tf, tb)
    rows = {r["rank"]: r for r in _rows(paths)}
    window = max(e for ops in sched.values() for *_x, e in ops)
    share = (P - 1) / (M + P - 1)
    for s in range(P):
        busy = M * (tf[s] + tb[s])
        bubble = window - busy
        excess = max(bubble - share * window, 0.0)
        r = rows[s]
        assert r["busy_us"] == pytest.approx(busy) and r["bubble_us"] == pytest.approx(bubble)
        assert r["excess_us"] == pytest.approx(excess)
        assert r["excess_step_pct"] == pytest.approx(100 * excess / (window + TAIL))
        flagged = 100 * excess / (window + TAIL) >= 2.0 and bubble >= 1.25 * share * window
        assert r["flagged"] == flagged
    assert rows[0]["flagged"] and not rows[2]["flagged"]  # the slow stage itself is the busy one
    tables = {"kineto_pipeline_bubble": list(rows.values())}
    facts = {f.id: f for f in pipeline_facts(tables)}
    (finding,) = pipeline_findings(facts, tables)
    worst = max(range(P), key=lambda s: rows[s]["excess_step_pct"])
    assert finding["id"] == "pipeline:bubble" and f"rank {worst}" in finding["title"]
    assert finding["impact"]["ms_per_step"] == pytest.approx(rows[worst]["excess_us"] / 1e3)
    assert finding["impact"]["share_of_step"] == pytest.approx(rows[worst]["excess_step_pct"] / 100)
    assert facts["pipeline.bubble_excess"].ranks == (worst,)


def test_one_rank_without_a_stage_count_is_measured_not_judged(tmp_path: Path) -> None:
    """GPipe names on one rank (``Forward i``/``Backward i``): the bubble is measured; the stage count is not known, so
    nothing is expected and nothing flagged (a NotMeasured fact says why) — unless the stages option gives it."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 0, "dur": 60_000, "pid": 1, "tid": 1}]
    t = 0.0
    for j in range(4):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"Forward {j}", "ts": t, "dur": 1000, "pid": 1,
                       "tid": 1})
        t += 4000
    for j in range(4):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"Backward {j}", "ts": t, "dur": 2000, "pid": 1,
                       "tid": 1})
        t += 5000
    path = tmp_path / "gpipe.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (row,) = _rows([path])
    assert row["stages"] is None and row["expected_pct"] is None and not row["flagged"]
    window = t - 5000 + 2000
    assert row["bubble_us"] == pytest.approx(window - 4 * 3000)
    facts = pipeline_facts({"kineto_pipeline_bubble": [row]})
    assert not facts[0].measured and "stage count unknown" in str(facts[0].value)
    (given,) = _rows([path], stages=2)
    assert given["stages"] == 2 and given["expected_pct"] == pytest.approx(100 * 1 / (4 + 1))


def test_names_that_are_no_microbatch_pass() -> None:
    compiled = compile_patterns()
    for name in ("forward", "backward", "## forward ##", "aten::forward", "Forward", "PP:0SEND_F1", "PP:1RECV_B0"):
        assert classify(name, compiled) is None, name
    assert classify("PP:3W2", compiled)[1:] == ("W", 3, 2)
    assert classify("forward-compute", compiled)[:2] == ("Megatron-LM", "F")
    assert classify("PipelineEngine._exec_backward_pass", compiled)[:2] == ("DeepSpeed", "B")
    assert classify("my_fwd_7", compile_patterns({"F": r"my_fwd_\d+"}))[:2] == ("configured F", "F")


def test_expected_bubble_formula() -> None:
    assert expected_share(4, 8) == pytest.approx(3 / 11)
    assert expected_share(4, 8, chunks=2) == pytest.approx(3 / 19)  # interleaved: (p-1)/(v*m+p-1)
    assert expected_share(None, 8) is None and expected_share(1, 8) == 0


def test_work_is_the_kernels_a_range_launched(tmp_path: Path) -> None:
    """On a GPU run a range's work is its compute kernels (launched from any thread while it runs; NCCL kernels are
    communication, not work): a forward that waits 3 ms on a receive inside its range is not busy then."""
    lane = {"pid": 1, "tid": 1}
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "PP:1F0", "ts": 0, "dur": 5000, **lane},
        {"ph": "X", "cat": "user_annotation", "name": "PP:1B0", "ts": 6000, "dur": 4000, **lane},
    ]
    kernels = [("ncclKernel_SendRecv", 100, 3000, 1), ("gemm_fwd", 3200, 1000, 2), ("gemm_bwd", 6500, 2000, 3)]
    for name, ts, dur, corr in kernels:
        tid = 2 if name == "gemm_bwd" else 1  # the backward's kernel comes from autograd's thread
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts - 50, "dur": 10, "pid": 1,
                    "tid": tid, "args": {"correlation": corr}},
                   {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
                    "args": {"stream": 7, "correlation": corr, "device": 0}}]
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (row,) = _rows([path], stages=2)
    assert row["busy_us"] == pytest.approx(1000 + 2000)
    assert row["window_us"] == pytest.approx((6500 + 2000) - 3200)  # first work to last work
    assert row["bubble_us"] == pytest.approx(row["window_us"] - 3000)
