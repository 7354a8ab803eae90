"""Each verdict class on runs built to be that class, and on look-alikes built not to be (issue 33, principle 1).

The facts are generated here the way the analyses state them (``gpu.busy``/``gpu.idle`` as % of a
GPU span, ``gpu.idle_host_wait`` as % of the idle time, ``setup.share`` as % of the capture...), so
every class is exercised on its own side and on the other side of its condition: a run that is 90%
communicator init is never host-bound; a compute-bound run with large idle that is not host wait
stays compute-bound (issue 36's mutant: host pressure taken as a share of the idle instead of the span).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.analysis.verdict import KEYWORDS, classify, fix_first, verdict
from my_utils.profiling.model.report import Fact, Finding, Impact, NotMeasured

SPAN = 1000.0


def gpu(idle: float, host_of_idle: float = 0.0, compute: float = 0.0, exposed_ms: float = 0.0,
        copies_of_busy: float = 0.0, span: float = SPAN) -> dict[str, Fact]:
    """Run-level GPU facts as ``analysis.facts`` states them (shares of a ``span`` ms GPU span)."""
    busy = 100.0 - idle
    out = [Fact("gpu.busy", "GPU busy", busy, "%", "kineto", "GPU span", span, "ms", (0,), "rank 0"),
           Fact("gpu.idle", "GPU idle", idle, "%", "kineto", "GPU span", span, "ms", (0,), "rank 0"),
           Fact("gpu.compute", "GPU computing", compute, "%", "kineto", "GPU span", span, "ms", (0,)),
           Fact("gpu.idle_host_wait", "GPU idle waiting for the host", host_of_idle, "%", "kineto", "idle",
                span * idle / 100.0, "ms"),
           Fact("comm.exposed", "communication not under compute", exposed_ms, "ms", "kineto", "GPU span", span),
           Fact("memory.copy_share", "copies and sets", copies_of_busy, "%", "kineto", "GPU busy", span * busy / 100)]
    return {f.id: f for f in out}


def setup(share: float | None = None, one_shot: int | None = None) -> dict[str, Fact]:
    out = {}
    if share is not None:
        out["setup.share"] = Fact("setup.share", "setup share of the capture", share, "%", "nsys", "capture span",
                                  1700.0, "ms", detail="ncclCommInitRank 1,367–1,673 ms per rank")
    if one_shot is not None:
        out["setup.one_shot"] = Fact("setup.one_shot", "no repeated work", one_shot, "count", "nsys",
                                     detail="every non-elementwise kernel runs once")
    return out


def cpu_only(value: int) -> dict[str, Fact]:
    return {"context.cpu_only": Fact("context.cpu_only", "CPU-only run", value, "flag", "the inputs",
                                     detail="1 trace(s) hold no kernel, memcpy or memset and no GPU device")}


def test_every_verdict_line_starts_with_its_keyword() -> None:
    runs: dict[str, Mapping[str, Fact]] = {
        "setup": {**gpu(98, 100), **setup(share=90.0)},
        "host": gpu(60, 90, compute=30),
        "communication": gpu(10, 10, compute=30, exposed_ms=600),
        "memory": gpu(10, 10, compute=20, copies_of_busy=80),
        "compute": gpu(10, 50, compute=85),
        "cpu": cpu_only(1),
        "not measured": {},
    }
    for bound, facts in runs.items():
        v = verdict(facts, [])
        assert v.bound == bound and v.lines[0].startswith(KEYWORDS[bound]), (bound, v.lines)


@settings(max_examples=60, deadline=None)
@given(share=st.floats(50.0, 100.0), idle=st.floats(0.0, 100.0), host=st.floats(0.0, 100.0))
def test_a_setup_dominated_capture_is_never_host_bound(share: float, idle: float, host: float) -> None:
    """90% communicator init and a GPU idle 98% waiting for the host: setup-dominated, with what the setup was."""
    v = verdict({**gpu(idle, host, compute=100 - idle), **setup(share=share)}, [])
    assert v.bound == "setup" and v.lines[0].startswith("Setup-dominated")
    assert "ncclCommInitRank" in v.lines[0] and "launching work faster" in v.lines[0]


@settings(max_examples=60, deadline=None)
@given(share=st.floats(0.0, 49.9), idle=st.floats(60.0, 100.0), host=st.floats(80.0, 100.0))
def test_a_capture_with_some_setup_is_judged_on_its_steady_state(share: float, idle: float, host: float) -> None:
    """The look-alike: setup under half the capture leaves a host-bound run host-bound."""
    assert classify({**gpu(idle, host, compute=(100 - idle) / 2), **setup(share=share)}) == "host"


def test_one_shot_work_is_setup_and_its_reason_is_said() -> None:
    v = verdict({**gpu(99.9, 100.0, compute=0.1), **setup(one_shot=1)}, [])
    assert v.bound == "setup" and "every non-elementwise kernel runs once" in v.lines[0]
    assert classify({**gpu(99.9, 100.0, compute=0.1), **setup(one_shot=0)}) == "host"  # repeated work: judged


def test_cpu_only_says_so_and_a_gpu_run_without_a_timeline_is_not_measured() -> None:
    v = verdict({**cpu_only(1), "step_time.median": Fact("step_time.median", "median", 12.5, "ms", "mytimer",
                                                         steps=30)}, [])
    assert v.bound == "cpu" and v.lines[0].startswith("CPU-only") and "12.50 ms median over 30 steps" in v.lines[0]
    assert classify(cpu_only(0)) == "not measured"  # GPU work exists, no timeline to judge it
    unknown = {"context.cpu_only": Fact("context.cpu_only", "CPU-only run", NotMeasured("MyTimer only"), "flag")}
    assert classify(unknown) == "not measured"


@settings(max_examples=100, deadline=None)
@given(compute=st.floats(50.0, 90.0), host_of_idle=st.floats(0.0, 100.0), idle_frac=st.floats(0.0, 1.0))
def test_a_compute_bound_run_with_idle_that_is_not_host_wait_stays_compute_bound(compute: float, host_of_idle: float,
                                                                                 idle_frac: float) -> None:
    """Host pressure is idle × host-wait share, a share of the *span*: at most the idle (≤ 100 − compute)."""
    idle = (100.0 - compute) * idle_frac
    facts = gpu(idle, host_of_idle, compute=compute)
    assert classify(facts) == "compute", (compute, idle, host_of_idle)


def test_host_wait_inside_setup_is_no_host_pressure() -> None:
    """Principle 1 below the setup threshold: 48% idle, all of it host wait, but 30 of those 48 points lie inside
    one-off work (setup.idle); compute at 44% then bounds the run (extrap__concurrent_s1_profile1's shape). The
    same run without the setup idle is the look-alike, and host-bound."""
    facts = gpu(48, 100, compute=44)
    idle_ms = SPAN * 48 / 100.0
    in_setup = Fact("setup.idle", "GPU idle inside setup", idle_ms * 30 / 48, "ms", "nsys",
                    "GPU idle time", idle_ms, "ms")
    v = verdict({**facts, **setup(share=20.0), in_setup.id: in_setup}, [])
    assert v.bound == "compute", v.lines
    assert v.lines[1].startswith("Next: host (18% of the span"), v.lines
    host = verdict({**facts, **setup(share=20.0)}, [])
    assert host.bound == "host" and "idle inside setup left out" not in host.lines[0]
    little = replace(in_setup, value=idle_ms * 2 / 48)  # 2 points in setup: still host-bound, and it says so
    line = verdict({**facts, **setup(share=20.0), in_setup.id: little}, []).lines[0]
    assert line.startswith("Host-bound") and "(46% of the span, 20.0 ms of idle inside setup left out)" in line


def test_host_bound_is_the_look_alike_of_compute_bound() -> None:
    assert classify(gpu(55.0, 95.0, compute=40.0)) == "host"  # 52% of the span waiting for the host
    assert classify(gpu(55.0, 40.0, compute=40.0)) == "compute"  # the same idle, mostly not host wait (22%)


def test_compute_bound_names_the_dominant_kernel_up_front() -> None:
    top = Fact("kernels.top", "kernel time in void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>(Params)",
               51.2, "%", "nsys", "all kernel time", 532.0, "ms", detail="272.3 ms in 68 launches")
    v = verdict({**gpu(9.6, 40.0, compute=85.0), top.id: top}, [])
    assert v.bound == "compute" and "flash_fwd_kernel takes 51% of kernel time (272.3 ms in 68 launches)" in v.lines[0]
    assert "kernels.top" in v.facts
    host = verdict({**gpu(60, 90, compute=30), top.id: top}, [])
    assert "flash_fwd_kernel" not in host.lines[0]  # only the compute-bound verdict names it


def _path(cpu_pct: float, coverage: float | None) -> dict[str, Fact]:
    out = {"critical_path.cpu": Fact("critical_path.cpu", "critical path: on the CPU", cpu_pct, "%", "kineto",
                                     "critical path length", 238.9, "ms"),
           "critical_path.gpu_compute": Fact("critical_path.gpu_compute", "path: compute", 100 - cpu_pct, "%")}
    if coverage is not None:
        out["critical_path.coverage"] = Fact("critical_path.coverage", "critical path coverage", coverage, "%",
                                             "kineto", "the analysed step", 345.8, "ms")
    return out


def test_the_critical_path_is_quoted_and_breaks_a_tie_only_when_it_covers_the_step() -> None:
    near_tie = gpu(45.0, 100.0, compute=40.0)  # host 45 vs compute 40: within the tie margin, host by pressure
    assert classify({**near_tie, **_path(100.0, 95.0)}) == "host"
    compute_path = {**near_tie, **_path(5.0, 95.0)}
    assert classify(compute_path) == "compute"  # a covering path that is mostly GPU compute breaks the tie
    assert classify({**near_tie, **_path(5.0, 69.1)}) == "host"  # a path over 69% of the step decides nothing
    line = verdict({**near_tie, **_path(100.0, 69.1)}, []).lines[0]
    assert "of the critical path is CPU work" not in line and "path 238.9 ms of a 345.8 ms step" in line
    line = verdict({**near_tie, **_path(100.0, 90.0)}, []).lines[0]
    assert "100% of the critical path is CPU work" in line  # at the threshold: quoted


def _finding(fid: str, share: float | None, category: str = "optimization", breakdown: bool = False) -> Finding:
    impact = Impact(None, None, region_ms=50.0, region_share=share) if breakdown else \
        Impact(None if share is None else share * 100, share, "", 5, step_source="mytimer")
    return Finding(fid, category, "warning", f"title {fid}", "", impact=impact)


def test_fix_first_leaves_out_capture_checks_and_breakdowns_and_never_a_larger_saving() -> None:
    findings = [_finding("capture:steps", 0.9, "capture"), _finding("bottleneck:forward", 0.8, "bottleneck", True),
                _finding("a", 0.30), _finding("b", 0.20), _finding("c", 0.10), _finding("d", 0.05)]
    top = fix_first(findings)
    assert [f.id for f in top] == ["a", "b", "c"]
    v = verdict(gpu(60, 90, compute=30), findings)
    assert v.lines[-1] == "Fix first: title a; title b; title c."
    assert "capture" not in v.lines[-1] and "forward" not in v.lines[-1]


def test_a_tie_at_the_cut_is_kept_and_stated() -> None:
    findings = [_finding("a", 0.30), _finding("b", 0.10), _finding("c", 0.05), _finding("d", 0.05)]
    top = fix_first(findings)
    assert [f.id for f in top] == ["a", "b", "c", "d"]
    line = verdict(gpu(60, 90, compute=30), findings).lines[-1]
    assert "title c (a tie); title d (a tie)" in line and "title a;" in line


def test_no_finding_with_a_saving_worth_it_means_no_fix_first_line() -> None:
    """The ring with its setup stated: a 0.7% rank wait and 0.3% of idle outside setup are nothing to fix first."""
    findings = [_finding("capture:x", 0.5, "capture"), _finding("bottleneck:y", 0.4, "bottleneck", True),
                _finding("nsys:rank_skew", 0.0066), _finding("nsys:gpu_idle", 0.0034)]
    assert fix_first(findings) == [] and not any(x.startswith("Fix first") for x in verdict({}, findings).lines)
    assert [f.id for f in fix_first([*findings, _finding("z", 0.01)])] == ["z"]  # at the 1% threshold: kept
