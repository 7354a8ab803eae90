"""The fact rules (``analysis.fact_rules``) at each threshold and on the other side of each condition (issue 36).

The real traces of ``test_kineto_verdict.py`` sit far from every threshold, so none of the
plausible bugs of ``.ci/mutants/diagnosis.toml`` in this module was caught. The facts are built
here as ``analysis.facts`` states them (``:rank<r>`` scopes, shares of a GPU span of 1,000 ms,
host wait as a share of the idle), with a torch.profiler step series of 5 steps of 100 ms; every
expected figure is worked out in the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.profiling.analysis.fact_rules import fact_findings
from my_utils.profiling.analysis.rules._series import STEP_TIME, Series
from my_utils.profiling.model.report import EvidenceRow, Fact

SPAN = 1000.0
STEPS = 5


def steps(rank: int = 0, values: list[float] | None = None, source: str = "torch_profiler") -> dict[Any, Series]:
    v = values or [100.0] * STEPS
    return {(STEP_TIME, rank, source): Series(STEP_TIME, rank, "duration", "ms", source, None,
                                              list(range(1, len(v) + 1)), list(v))}


def facts(*fs: Fact) -> dict[str, Fact]:
    return {f.id: f for f in fs}


def comm(rank: int, share: float, overlap: float, exposed_ms: float, time_ms: float = 300.0) -> list[Fact]:
    tag = f":rank{rank}"
    streams = EvidenceRow("kineto_overlap", {"rank": rank}, {"comm_streams": [20], "shared_streams": []})
    return [Fact(f"comm.share{tag}", "communication share", share, "%", "kineto", "GPU busy time", 800.0, "ms"),
            Fact(f"comm.overlap{tag}", "overlapped", overlap, "%", "kineto", "communication kernel time", time_ms,
                 "ms", evidence=(streams,)),
            Fact(f"comm.time{tag}", "communication kernel time", time_ms, "ms", "kineto"),
            Fact(f"comm.exposed{tag}", "exposed", exposed_ms, "ms", "kineto", "GPU span", SPAN, "ms")]


def idle(rank: int, idle_pct: float, host_pct: float) -> list[Fact]:
    tag = f":rank{rank}"
    return [Fact(f"gpu.idle{tag}", "GPU idle", idle_pct, "%", "kineto", "GPU span", SPAN, "ms", (rank,)),
            Fact(f"gpu.idle_host_wait{tag}", "host wait", host_pct, "%", "kineto", "idle", SPAN * idle_pct / 100,
                 "ms", (rank,))]


def run(fs: dict[str, Fact], ranks: tuple[int, ...] = (0,), series: dict[Any, Series] | None = None,
        tables: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    s: dict[Any, Series] = {}
    for r in ranks:
        s.update(steps(r))
    s.update(series or {})
    t = {"kineto_temporal": [{"rank": r} for r in ranks], **(tables or {})}
    return {f["id"]: f for f in fact_findings(fs, s, t)}


def test_communication_at_ten_percent_of_busy_time_is_judged() -> None:
    assert "communication:no_overlap" in run(facts(*comm(0, 10.0, 0.0, 200.0)))
    assert "communication:no_overlap" not in run(facts(*comm(0, 9.9, 0.0, 200.0)))


def test_well_overlapped_communication_with_much_exposed_is_still_flagged() -> None:
    """50 % overlapped (above the 30 % floor) but 150 ms exposed, 15 % of the span: flagged; with 50 ms exposed
    (5 %) it is not. The saving is the exposed time per step: 150 ms over 5 steps of 100 ms."""
    f = run(facts(*comm(0, 40.0, 50.0, 150.0)))["communication:no_overlap"]
    assert f["impact"]["ms_per_step"] == pytest.approx(30.0) and f["impact"]["share_of_step"] == pytest.approx(0.3)
    assert "communication:no_overlap" not in run(facts(*comm(0, 40.0, 50.0, 50.0)))


def test_host_bound_at_its_thresholds() -> None:
    """Idle exactly 20 % of the span, exactly half of it host wait: flagged."""
    assert "gpu:host_bound" in run(facts(*idle(0, 20.0, 50.0)))
    assert "gpu:host_bound" not in run(facts(*idle(0, 19.9, 50.0)))
    assert "gpu:host_bound" not in run(facts(*idle(0, 20.0, 49.9)))


def test_host_bound_is_critical_on_host_wait_as_a_share_of_the_span() -> None:
    """40 % idle, half of it host wait, is 20 % of the span: a warning; 60 % idle, half host wait, 30 %: critical."""
    assert run(facts(*idle(0, 40.0, 50.0)))["gpu:host_bound"]["severity"] == "warning"
    assert run(facts(*idle(0, 60.0, 50.0)))["gpu:host_bound"]["severity"] == "critical"


def _kinds(f: dict[str, Any]) -> list[str]:
    return [a["kind"] for a in f["advice"]]


def test_a_quarter_of_kernels_shorter_than_their_launch_is_said() -> None:
    short = Fact("launch.short_kernels:rank0", "short", 25.0, "%", "kineto", "kernel launches", 400.0, "count")
    f = run(facts(*idle(0, 40.0, 80.0), short))["gpu:host_bound"]
    assert "idle:short_kernels" in _kinds(f) and "100 of 400 kernels" in f["detail"]
    fewer = Fact("launch.short_kernels:rank0", "short", 24.9, "%", "kineto", "kernel launches", 400.0, "count")
    assert "idle:short_kernels" not in _kinds(run(facts(*idle(0, 40.0, 80.0), fewer))["gpu:host_bound"])


def test_host_syncs_are_weighed_against_the_host_wait_idle() -> None:
    """400 ms idle, 200 ms of it host wait: a 15 ms sync is over 5 % of the host wait (10 ms) and is advice, though
    under 5 % of all the idle (20 ms)."""
    def sync(ms: float) -> Fact:
        return Fact("sync.host:rank0", "host syncs", ms, "ms", "kineto",
                    evidence=(EvidenceRow("kineto_sync", {"rank": 0, "name": "cudaStreamSynchronize"}, {}),))
    assert "idle:sync" in _kinds(run(facts(*idle(0, 40.0, 50.0), sync(15.0)))["gpu:host_bound"])
    assert "idle:sync" not in _kinds(run(facts(*idle(0, 40.0, 50.0), sync(9.0)))["gpu:host_bound"])


def test_the_rank_with_the_largest_saving_is_quoted() -> None:
    """Rank 0: 30 % idle, 60 % host wait (18 % of the span); rank 1: 50 % idle, 90 % host wait (45 %)."""
    f = run(facts(*idle(0, 30.0, 60.0), *idle(1, 50.0, 90.0)), ranks=(0, 1))["gpu:host_bound"]
    assert "on rank 1" in f["title"] and f["evidence"]["ranks"] == [1, 0]
    assert f["impact"]["ms_per_step"] == pytest.approx(SPAN * 0.5 * 0.9 / STEPS)


def _comm_series(values: list[float]) -> dict[Any, Series]:
    return {("gpu.comm_time", 0, "torch_profiler"): Series("gpu.comm_time", 0, "duration", "ms", "torch_profiler",
                                                           None, list(range(1, len(values) + 1)), values)}


def test_a_step_at_one_and_a_half_times_the_median_is_a_spike() -> None:
    """Communication 10, 10, 10, 10, 15 ms: the last step is 1.5× the others' median (no spread among them); the
    saving is its 5 ms above the median spread over the 5 steps, 1 ms per step of the 100 ms median step."""
    f = run({}, series=_comm_series([10.0, 10.0, 10.0, 10.0, 15.0]))["communication:spike:rank0"]
    assert f["evidence"]["steps"] == [5]
    assert f["impact"]["ms_per_step"] == pytest.approx(1.0) and f["impact"]["share_of_step"] == pytest.approx(0.01)
    assert "communication:spike:rank0" not in run({}, series=_comm_series([10.0, 10.0, 10.0, 10.0, 14.9]))


def test_slow_collectives_of_one_rank_and_the_time_beyond_the_link() -> None:
    """Rank 0: 10 ms of AllReduce at 20 % of the link, so 8 ms beyond what the link needs (1.6 ms per step);
    rank 1's flagged row is rank 1's, not rank 0's."""
    link = Fact("comm.busbw_link:rank0", "slowest", 20.0, "%", "kineto", "NVLink", 300.0, "GB/s", (0,),
                detail="allreduce of 64.0 MiB")
    rows = [{"rank": 0, "collective": "allreduce", "flagged": True, "total_us": 10_000.0, "link_pct": 20.0,
             "message_bytes": 64 * 2**20, "count": 10, "busbw_gbps": 60.0},
            {"rank": 1, "collective": "allgather", "flagged": True, "total_us": 50_000.0, "link_pct": 10.0,
             "message_bytes": 32 * 2**20, "count": 10, "busbw_gbps": 30.0}]
    f = run(facts(link), ranks=(0, 1), tables={"kineto_collectives": rows})["communication:slow_link"]
    assert f["evidence"]["names"] == ["allreduce"] and f["evidence"]["excess_ms"] == pytest.approx(8.0)
    assert f["impact"]["ms_per_step"] == pytest.approx(8.0 / STEPS)
