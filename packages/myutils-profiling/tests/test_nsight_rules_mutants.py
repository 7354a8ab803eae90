"""The Nsight Systems findings at each threshold and on the other side of each condition (issue 36).

The real exports of ``test_nsight_facts.py`` and ``test_nsys_wire_analyze.py`` sit far from the
rules' thresholds, so ``.ci/mutants/nsys.toml`` found these unpinned: a device idle exactly 20 %
of its span, the host-wait share taken *outside* setup, a capture exactly half setup, copies at
exactly 30 % of busy time, a host blocked while the GPU is busy (nothing to win), a first
iteration at exactly 1.2× the median, well-overlapped but much exposed communication, a rank
wait spread over the ranks, and a late host's own ranks not counted as waiting for it. The facts
are built as ``analysis.nsight.facts`` states them (``nsys.gpu_idle`` in ms, host wait as % of
the idle, one device of 1,000 ms span); every figure is worked out in the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.profiling.analysis.nsight.rules import SETUP_DOMINANT, nsight_findings, setup_dominated
from my_utils.profiling.model.report import EvidenceRow, Fact

SCOPE = "rank0:device0"
SPAN = 1000.0


def _ev(rank: int | None = 0, device: int | None = 0, **values: Any) -> tuple[EvidenceRow, ...]:
    return (EvidenceRow("nsys_busy_device", {"rank": rank, "device": device}, dict(values)),)


def device(busy_pct: float, idle_ms: float | None = None, host_pct: float | None = None,
           scope: str = SCOPE, rank: int | None = 0) -> dict[str, Fact]:
    """``nsys.gpu_busy`` (% of a 1,000 ms span), ``nsys.gpu_idle`` (ms) and ``nsys.idle_host_wait`` (% of idle)."""
    out = {f"nsys.gpu_busy:{scope}": Fact(f"nsys.gpu_busy:{scope}", "GPU busy", busy_pct, "%", "nsys", "GPU span",
                                          SPAN, "ms", evidence=_ev(rank))}
    if idle_ms is not None:
        out[f"nsys.gpu_idle:{scope}"] = Fact(f"nsys.gpu_idle:{scope}", "GPU idle", idle_ms, "ms", "nsys",
                                             detail="gaps", evidence=_ev(rank))
    if host_pct is not None:
        out[f"nsys.idle_host_wait:{scope}"] = Fact(f"nsys.idle_host_wait:{scope}", "host wait", host_pct, "%",
                                                   "nsys", evidence=_ev(rank))
    return out


def findings(facts: dict[str, Fact], tables: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in nsight_findings(facts, tables or {})}


def test_a_device_idle_exactly_a_fifth_of_its_span_is_flagged() -> None:
    assert "nsys:gpu_idle" in findings(device(80.0, 200.0, 90.0))
    assert "nsys:gpu_idle" not in findings(device(80.01, 199.9, 90.0))


def test_the_host_wait_share_is_of_the_idle_outside_setup() -> None:
    """400 ms idle, half of it (200 ms) host wait; 100 ms of the idle lies in setup, all of it host wait. Outside
    setup: 300 ms idle, 100 ms of it host wait (33 %): not launch-bound, though 50 % of all the idle was."""
    setup = {"nsys_setup_idle": [{"rank": 0, "device": 0, "setup_idle_ns": 100e6, "setup_host_wait_ns": 100e6}]}
    f = findings(device(60.0, 400.0, 50.0), setup)["nsys:gpu_idle"]
    assert f["evidence"]["idle_ms"] == pytest.approx(300.0)
    assert f["evidence"]["host_wait_pct_of_idle"] == pytest.approx(100 * 100 / 300)
    assert [a["kind"] for a in f["advice"]] == ["idle:other"]


def test_a_capture_half_setup_is_setup_dominated() -> None:
    assert SETUP_DOMINANT == 50.0
    share = Fact("setup.share", "one-off work", 50.0, "%", "nsys", detail="ncclCommInitRank")
    assert setup_dominated({share.id: share})[0]
    assert not setup_dominated({share.id: Fact("setup.share", "one-off work", 49.9, "%", "nsys")})[0]


def test_copies_at_thirty_percent_of_busy_time_are_flagged() -> None:
    def copies(pct: float) -> dict[str, Fact]:
        fid = f"nsys.copy_share:{SCOPE}"
        return {**device(60.0), fid: Fact(fid, "copies", pct, "%", "nsys", "GPU busy time", 600.0, "ms",
                                          evidence=_ev())}
    f = findings(copies(30.0))["nsys:copies"]
    assert f["evidence"]["copy_ms"] == pytest.approx(180.0)
    assert "nsys:copies" not in findings(copies(29.9))


def test_a_host_blocked_while_the_gpu_is_busy_wins_nothing() -> None:
    """300 ms of syncs in a 1,000 ms span (30 %): flagged when the GPU idles 50 %, not when it idles 10 %."""
    sync = Fact("nsys.host_sync", "host blocked in syncs", 300.0, "ms", "nsys", detail="cudaStreamSynchronize",
                evidence=(EvidenceRow("nsys_cuda_api", {"name": "cudaStreamSynchronize"}, {}),))
    idle_gpu = {**device(50.0, scope="device0", rank=None), sync.id: sync}
    assert "nsys:host_sync" in findings(idle_gpu)
    busy_gpu = {**device(90.0, scope="device0", rank=None), sync.id: sync}
    assert "nsys:host_sync" not in findings(busy_gpu)


def test_a_first_iteration_at_exactly_the_warm_up_ratio_is_warm_up() -> None:
    """The median iteration 10 ms; the first one, an outlier, 12 ms: 1.2× exactly."""
    def run(first_ns: int) -> dict[str, dict[str, Any]]:
        out = Fact("nsys.iteration_outliers:pid5", "outliers", 1, "count", "nsys", detail="iteration 0",
                   evidence=(EvidenceRow("nsys_iterations", {"rank": None, "pid": 5, "iteration": 0},
                                         {"cpu_ns": first_ns, "robust_z": 9.0}),))
        time = Fact("nsys.iteration_time:pid5", "iteration time (median)", 10.0, "ms", "nsys", steps=10)
        tables = {"nsys_iterations": [{"rank": None, "pid": 5, "iteration": i} for i in range(10)]}
        return findings({out.id: out, time.id: time}, tables)
    assert "nsys:warmup_in_window" in run(12_000_000)
    assert "nsys:warmup_in_window" not in run(11_999_999)


def _comm(overlap_pct: float, exposed_ms: float) -> dict[str, Fact]:
    overlap = Fact(f"nsys.comm_overlap:{SCOPE}", "overlap", overlap_pct, "%", "nsys", "NCCL kernel time", 300.0, "ms",
                   evidence=_ev(computation_ns=500e6))
    exposed = Fact(f"nsys.comm_exposed:{SCOPE}", "exposed", exposed_ms, "ms", "nsys")
    return {**device(80.0), overlap.id: overlap, exposed.id: exposed}


def test_well_overlapped_communication_with_much_exposed_is_flagged() -> None:
    """300 ms of NCCL in 800 ms busy (37.5 %), half of it overlapped, 150 ms (15 % of the span) exposed: flagged;
    with 50 ms (5 %) exposed it is not."""
    f = findings(_comm(50.0, 150.0))["nsys:comm_exposed"]
    assert f["impact"]["ms_per_step"] == pytest.approx(150.0)
    assert "nsys:comm_exposed" not in findings(_comm(50.0, 50.0))


def _waits(coll: str = "AllReduce", **wait_ms: float) -> Fact:
    ranks = tuple(int(r.removeprefix("r")) for r in wait_ms)
    rows = tuple(EvidenceRow("nsys_nccl_ranks", {"rank": int(r.removeprefix("r")), "collective": coll},
                             {"wait_ns": ms * 1e6}) for r, ms in wait_ms.items())
    return Fact(f"nsys.nccl_wait:{coll}", "waiting", 40.0, "%", "nsys", "NCCL kernel time", 100.0, "ms", ranks,
                evidence=rows)


def test_a_rank_wait_is_a_saving_per_rank() -> None:
    """Ranks 0-3 wait 4, 6, 1 and 1 ms for rank 3 (12 ms summed): 3 ms per rank, of the 1,000 ms span."""
    wait = _waits(r0=4.0, r1=6.0, r2=1.0, r3=1.0)
    last = Fact("nsys.nccl_last_rank:AllReduce", "last", 3, "", "nsys", detail="last 9 of 10 times")
    f = findings({**device(80.0), wait.id: wait, last.id: last})["nsys:rank_skew:AllReduce"]
    assert f["evidence"]["wait_ms"] == pytest.approx(12.0) and f["impact"]["ms_per_step"] == pytest.approx(3.0)


def test_a_late_hosts_own_ranks_do_not_wait_for_it() -> None:
    """Host node-b (ranks 2, 3) arrives late: ranks 0 and 1 wait 4 + 6 ms for it (5 ms each); the 1 ms that 2 and 3
    spend waiting for each other is no wait for the host."""
    wait = _waits(r0=4.0, r1=6.0, r2=1.0, r3=1.0)
    host = Fact("stragglers.host", "host node-b arrives late at collectives", 18.0, "ms", "nsys", ranks=(2, 3),
                detail="node-b 18 ms behind")
    f = findings({**device(80.0), wait.id: wait, host.id: host})["nsys:host_skew"]
    assert f["title"].startswith("ranks 0, 1 wait 18.0 ms for host node-b")
    assert f["evidence"]["wait_ms"] == pytest.approx(10.0) and f["impact"]["ms_per_step"] == pytest.approx(5.0)
