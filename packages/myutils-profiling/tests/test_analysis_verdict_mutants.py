"""The verdict and the headline at their thresholds and on the other side of each condition (issue 36).

Each test is a plausible bug of ``.ci/mutants/diagnosis.toml`` that ``test_analysis_verdict.py``
let pass: a tie exactly :data:`~.verdict.TIE` points wide, a covering path deciding beyond a tie,
a path that is only partly one pressure, launch gaps on the path (host, not compute), memory and
communication pressure as shares of the *span* (not of busy time), a runner-up at exactly 10 %,
two savings exactly :data:`~.verdict.TIE_SHARE` apart, and the headline's top three (never a
capture check) and optional host context. The facts are generated the way ``analysis.facts``
states them (``test_analysis_verdict.gpu``), each run built to be its class or its look-alike.
"""

from __future__ import annotations

from my_utils.profiling.analysis.headline import build_headline
from my_utils.profiling.analysis.verdict import TIE, TIE_SHARE, classify, tied, verdict
from my_utils.profiling.model.report import Fact, Finding, Impact

SPAN = 1000.0


def gpu(idle: float, host_of_idle: float = 0.0, compute: float = 0.0, exposed_ms: float = 0.0,
        copies_of_busy: float = 0.0) -> dict[str, Fact]:
    """Run-level GPU facts, shares of a 1,000 ms GPU span (as ``analysis.facts`` writes them)."""
    busy = 100.0 - idle
    out = [Fact("gpu.busy", "GPU busy", busy, "%", "kineto", "GPU span", SPAN, "ms", (0,), "rank 0"),
           Fact("gpu.idle", "GPU idle", idle, "%", "kineto", "GPU span", SPAN, "ms", (0,), "rank 0"),
           Fact("gpu.compute", "GPU computing", compute, "%", "kineto", "GPU span", SPAN, "ms", (0,)),
           Fact("gpu.idle_host_wait", "GPU idle waiting for the host", host_of_idle, "%", "kineto", "idle",
                SPAN * idle / 100.0, "ms"),
           Fact("comm.exposed", "communication not under compute", exposed_ms, "ms", "kineto", "GPU span", SPAN),
           Fact("memory.copy_share", "copies and sets", copies_of_busy, "%", "kineto", "GPU busy",
                SPAN * busy / 100)]
    return {f.id: f for f in out}


def path(coverage: float = 95.0, **parts: float) -> dict[str, Fact]:
    """Critical-path facts: ``parts`` are % of the path (``cpu``, ``gpu_compute``, ``communication``, ``overhead``)."""
    out = {f"critical_path.{k}": Fact(f"critical_path.{k}", f"path: {k}", v, "%", "kineto", "critical path length",
                                      300.0, "ms") for k, v in parts.items()}
    out["critical_path.coverage"] = Fact("critical_path.coverage", "coverage", coverage, "%", "kineto", "the step",
                                         310.0, "ms")
    return out


def test_a_tie_exactly_tie_points_wide_is_broken_by_the_path() -> None:
    """Host 50 % of the span, compute 40 %: exactly TIE (10) points apart is a tie; a covering path that is 80 %
    GPU computation decides it (compute). One point wider, the pressures decide (host)."""
    assert TIE == 10.0
    assert classify({**gpu(50.0, 100.0, compute=40.0), **path(gpu_compute=80.0, cpu=20.0)}) == "compute"
    assert classify({**gpu(50.0, 100.0, compute=39.0), **path(gpu_compute=80.0, cpu=20.0)}) == "host"


def test_a_path_decides_nothing_beyond_a_tie() -> None:
    """Host 70 %, compute 20 %: a covering compute path does not overturn a 50-point lead."""
    assert classify({**gpu(70.0, 100.0, compute=20.0), **path(gpu_compute=90.0, cpu=10.0)}) == "host"


def test_a_path_decides_only_when_it_is_mostly_one_pressure() -> None:
    """Host 45 % leads compute 40 % within the tie margin; a path 45 % compute, 30 % CPU, 25 % NCCL is mostly
    nothing (no part over half), so the pressures decide: host."""
    facts = {**gpu(45.0, 100.0, compute=40.0), **path(gpu_compute=45.0, cpu=30.0, communication=25.0)}
    assert classify(facts) == "host"


def test_launch_gaps_on_the_path_are_host_time() -> None:
    """Compute 50 % leads host 45 %; the path is 30 % CPU work and 30 % launch/kernel-to-kernel gaps (host: 60 %),
    40 % computation: the host part is the majority, so the tie goes to host."""
    facts = {**gpu(45.0, 100.0, compute=50.0), **path(cpu=30.0, overhead=30.0, gpu_compute=40.0)}
    assert classify(facts) == "host"


def test_memory_pressure_is_a_share_of_the_span() -> None:
    """80 % idle (40 % of it host wait: host 32 % of the span), compute 10 %, copies 60 % of the 20 % busy time:
    copies take 12 % of the span, so the run is host-bound, not memory-bound (copies are 60 % of *busy*)."""
    v = verdict(gpu(80.0, 40.0, compute=10.0, copies_of_busy=60.0))
    assert v.bound == "host", v.lines
    assert v.lines[1].startswith("Next: memory (12% of the span against 32% for host)"), v.lines


def test_communication_pressure_is_a_share_of_the_span() -> None:
    """200 ms of exposed communication in a 1,000 ms span is 20 % of it (it would be 100 % of the 20 % busy time):
    host at 32 % bounds the run."""
    v = verdict(gpu(80.0, 40.0, compute=0.0, exposed_ms=200.0))
    assert v.bound == "host", v.lines
    assert v.lines[1].startswith("Next: communication (20% of the span"), v.lines


def test_a_runner_up_at_ten_percent_is_named() -> None:
    """Compute 85 %, host 10 % (10 % idle, all of it host wait): the runner-up at exactly 10 % is said."""
    v = verdict(gpu(10.0, 100.0, compute=85.0))
    assert v.bound == "compute" and v.lines[1] == "Next: host (10% of the span against 85% for compute).", v.lines


def test_two_savings_exactly_tie_share_apart_are_a_tie() -> None:
    assert tied(TIE_SHARE, 0.0) and tied(0.0, TIE_SHARE)
    assert not tied(2 * TIE_SHARE, 0.0)


def _finding(fid: str, share: float, category: str = "optimization") -> Finding:
    return Finding(fid, category, "warning", f"title {fid}", "",
                   impact=Impact(share * 100.0, share, "", 5, step_source="mytimer"))


def test_the_headline_names_no_capture_check_first() -> None:
    """Ranked findings with a capture check first: the headline's top three are the three largest savings."""
    findings = [_finding("capture:steps", 0.9, "capture"), _finding("a", 0.3), _finding("b", 0.2),
                _finding("c", 0.1)]
    h = build_headline(list(gpu(60.0, 90.0, compute=30.0).values()), findings, "run")
    assert h.top_findings == ("a", "b", "c")
    assert h.verdict.lines[-1] == "Fix first: title a; title b; title c."


def test_the_headline_shows_the_hosts_when_an_input_gives_them() -> None:
    hosts = Fact("context.hosts", "hosts", 2, "count", "kineto", detail="node-a, node-b")
    ids = [f.id for f in build_headline([*gpu(10.0, 50.0, compute=85.0).values(), hosts], [], "run").context]
    assert ids[-1] == "context.hosts"
    assert "context.hosts" not in [f.id for f in build_headline(list(gpu(10.0).values()), [], "run").context]
