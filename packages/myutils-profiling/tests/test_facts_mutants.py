"""The run's facts (``analysis.facts``) from tables built to tell each plausible bug apart (issue 36).

``.ci/mutants/diagnosis.toml`` planted bugs here that the real traces of ``test_kineto_verdict.py``
do not show: a synchronous step timed by its fastest rank, a warm-up step judged with only 3 steps
after it, a tie between step sources not won by MyTimer, host wait as a ratio, copies over the
span instead of busy time, exposed communication counting its overlapped part, an unweighted MFU,
the fastest flagged collective, the operator with the least idle, kernel-to-kernel gaps left out
of the path's overhead, a trace whose context says 0 GPUs. The tables hold the columns the
Kineto analyses write; every expected figure is worked out in the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.profiling.analysis.facts import (
    build_facts,
    gpu_facts,
    kineto_facts,
    primary_step_source,
    step_facts,
)
from my_utils.profiling.analysis.rules._series import STEP_TIME, Series
from my_utils.profiling.model.report import Fact


def series(rank: int | None, values: list[float], source: str = "mytimer") -> dict[Any, Series]:
    return {(STEP_TIME, rank, source): Series(STEP_TIME, rank, "duration", "ms", source, None,
                                              list(range(1, len(values) + 1)), list(values))}


def by_id(facts: list[Fact]) -> dict[str, Fact]:
    return {f.id: f for f in facts}


def test_a_synchronous_step_takes_its_slowest_rank() -> None:
    """Per step the slowest of ranks 0 and 1: 15, 20, 35 ms (median 20), not the fastest 10, 5, 30 (median 10)."""
    s = {**series(0, [10.0, 20.0, 30.0]), **series(1, [15.0, 5.0, 35.0])}
    f = by_id(step_facts(s, "mytimer", warmup_steps=0))
    assert f["step_time.median:mytimer"].number == 20.0 and f["step_time.worst:mytimer"].number == 35.0


def test_the_warm_up_step_is_left_out_when_three_steps_remain() -> None:
    """Four steps, the first a 100 ms warm-up: three remain, so the worst step is step 4's 12 ms."""
    f = by_id(step_facts(series(0, [100.0, 10.0, 11.0, 12.0]), "mytimer", warmup_steps=1))
    assert f["step_time.worst:mytimer"].number == 12.0 and "warm-up step 1 left out" in f["step_time.worst:mytimer"].detail
    three = by_id(step_facts(series(0, [100.0, 10.0, 11.0]), "mytimer", warmup_steps=1))
    assert three["step_time.worst:mytimer"].number == 100.0  # two would remain: nothing left out


def test_a_tie_between_step_sources_goes_to_mytimer() -> None:
    s = {**series(0, [10.0] * 5, "mytimer"), **series(0, [11.0] * 5, "torch_profiler")}
    assert primary_step_source(s) == "mytimer"
    assert by_id(build_facts(s, {}, {}))["step_time.median"].source == "mytimer"


TEMPORAL = [{"rank": 0, "span_us": 1_000_000.0, "idle_us": 400_000.0, "compute_us": 500_000.0}]


def test_gpu_shares_with_their_own_denominators() -> None:
    """Rank 0: 1,000 ms span, 400 ms idle (600 ms busy). Host wait 300 of 400 ms idle: 75 % (a percent); copies
    120 ms of 600 ms busy: 20 %; NCCL 200 ms, 50 ms of it under computation: 150 ms exposed, 25 % overlapped."""
    tables = {"kineto_temporal": TEMPORAL,
              "kineto_idle_device": [{"rank": 0, "category": "host_wait", "idle_us": 300_000.0},
                                     {"rank": 0, "category": "other", "idle_us": 100_000.0}],
              "kineto_kernel_kinds": [{"rank": 0, "kind": "memory", "busy_us": 120_000.0}],
              "kineto_overlap": [{"rank": 0, "communication_us": 200_000.0, "overlap_us": 50_000.0}]}
    f = by_id(gpu_facts(tables))
    assert f["gpu.idle_host_wait:rank0"].number == pytest.approx(75.0)
    assert f["memory.copy_share:rank0"].number == pytest.approx(20.0)
    assert f["comm.exposed:rank0"].number == pytest.approx(150.0)
    assert f["comm.overlap:rank0"].number == pytest.approx(25.0)
    assert f["comm.share:rank0"].number == pytest.approx(100 * 200 / 600)


def test_kineto_facts_weight_pick_and_sum_as_stated() -> None:
    """MFU 40 % over a 100 ms window and 20 % over 300 ms: 25 % weighted; the slowest flagged collective is the one
    at 10 % of its link; the operator holding the most idle (20 ms) is named first; the path's overhead is its
    launch (10 %) and kernel-to-kernel (5 %) gaps."""
    tables = {
        "kineto_mfu": [{"rank": 0, "mfu_pct": 40.0, "window_us": 100_000.0, "coverage_pct": 90.0},
                       {"rank": 1, "mfu_pct": 20.0, "window_us": 300_000.0, "coverage_pct": 80.0}],
        "kineto_collectives": [{"rank": 0, "flagged": True, "link_pct": 20.0, "link": "NVLink", "collective": "a"},
                               {"rank": 0, "flagged": True, "link_pct": 10.0, "link": "NVLink", "collective": "b"}],
        "kineto_idle_host_ops": [{"rank": 0, "operator": name, "idle_us": us} for name, us in
                                 (("aten::a", 5_000.0), ("aten::b", 20_000.0), ("aten::c", 1_000.0),
                                  ("aten::d", 3_000.0))],
        "kineto_critical_path": [{"rank": 0, "length_us": 1_000.0, "window": "ProfilerStep#3", "cpu_bound_pct": 40.0,
                                  "gpu_compute_bound_pct": 45.0, "gpu_kernel_launch_overhead_pct": 10.0,
                                  "gpu_kernel_kernel_overhead_pct": 5.0}],
    }
    f = by_id(kineto_facts(tables))
    assert f["mfu"].number == pytest.approx((40 * 100 + 20 * 300) / 400)
    assert f["comm.busbw_link:rank0"].number == 10.0 and "b of" in f["comm.busbw_link:rank0"].detail
    op = f["idle.host_op:rank0"]
    assert op.label == "GPU waited on aten::b" and op.number == pytest.approx(20.0)
    assert op.detail == "aten::b: 20.0 ms; aten::a: 5.0 ms; aten::d: 3.0 ms"
    assert f["critical_path.overhead:rank0"].number == pytest.approx(15.0)


def test_a_trace_whose_context_names_no_gpu_is_cpu_only() -> None:
    tables = {"kineto_inputs": [{"file": "cpu.json"}], "kineto_context": [{"rank": 0, "gpu": "", "gpu_count": 0}]}
    assert by_id(build_facts({}, tables, {}))["context.cpu_only"].number == 1
    named = {**tables, "kineto_context": [{"rank": 0, "gpu": "", "gpu_count": 1}]}
    assert by_id(build_facts({}, named, {}))["context.cpu_only"].number == 0
