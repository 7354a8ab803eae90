"""The acceptance cases of ``../shared/diagnosis/CASES.md``: what a careful engineer concludes from each shared capture.

Each case is analysed the way a user does (``myutils-profile analyze``'s ``run_analysis``, the JSON
and Markdown reports written) and checked for the principles, never for wording: the verdict's
class (a set of acceptable classes, and the keyword its first line starts with), the advice that
must not appear (regular expressions over every advice and suggestion text), severity against
impact (nothing critical below 5% of the step it states, findings in saving order, Fix first never
leaving out a larger saving), and, where the case says, the straggler host and the savings a fix
can make. The expected facts were recomputed from the raw files in CASES.md (sqlite3, gzip+json).

Checks that need facts another helper's branch produces are marked ``xfail(strict=True)`` with the
fact and the branch; they pass (and the mark must go) once that branch is merged.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.model import AnalysisReport, Finding

# the contract's numbers and words (HELPERS-CONTRACT.md), written here rather than imported from the code under test
CRITICAL_SHARE, WARNING_SHARE = 0.05, 0.01
KEYWORDS = {"setup": "Setup-dominated", "host": "Host-bound", "communication": "Communication-bound",
            "memory": "Memory-transfer-bound", "compute": "Compute-bound", "cpu": "CPU-only",
            "not measured": "Not measured"}

HTA = "kineto/hta"
RING = "nsys/dsl_ring_6ranks/"

# -- what must not be advised (CASES.md's "Forbidden"), as patterns over advice and suggestion text --
LAUNCH = re.compile(r"CUDA graph|torch\.compile|reduce-overhead", re.I)
DDP_OVERLAP = re.compile(r"overlap gradient buckets|DDP buckets|backward_prefetch|bucket_cap_mb", re.I)
MIXED_PRECISION = re.compile(r"mixed precision|autocast|\bbf16\b|\bfp16\b", re.I)
ATTENTION = re.compile(r"scaled_dot_product|\bsdpa\b|flash", re.I)
GPU = re.compile(r"caching allocator|torch\.cuda|autocast|mixed precision|kernel fusion|fuse (small )?kernels|"
                 r"CUDA graph|reduce-overhead|pin_memory|pinned memory|non_blocking", re.I)
E_NOTATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])")

NSIGHT = "from branch nsight (issue 33 contract)"


@dataclass(frozen=True)
class Case:
    """One case of CASES.md: its inputs, acceptable verdict classes, forbidden advice and the checks' needs."""

    nsys: tuple[str, ...] = ()
    traces: tuple[str, ...] = ()
    demo: bool = False
    verdicts: frozenset[str] = frozenset()
    forbidden: tuple[re.Pattern[str], ...] = ()
    max_unattributed_saving_ms: float | None = None
    straggler_host: str | None = None
    single_host: bool = False
    dominant_kernel: str | None = None
    needs: dict[str, str] = field(default_factory=dict)  # check -> the fact it waits for (xfail until merged)


CASES: dict[str, Case] = {
    "ring_6ranks": Case(nsys=(RING,), verdicts=frozenset({"setup"}), forbidden=(LAUNCH, DDP_OVERLAP),
                        max_unattributed_saving_ms=320.0, straggler_host="ault43",
                        needs={"verdict": f"setup.share {NSIGHT}", "forbidden": f"setup.share {NSIGHT}",
                               "savings": f"setup.idle {NSIGHT}", "straggler": f"stragglers.host {NSIGHT}"}),
    "fuser_2024": Case(nsys=("nsys/fuser__report1_2024.6.sqlite",), verdicts=frozenset({"setup"}),
                       forbidden=(LAUNCH,), max_unattributed_saving_ms=183.0,
                       needs={"verdict": f"setup.one_shot {NSIGHT}", "forbidden": f"setup.one_shot {NSIGHT}",
                              "savings": f"setup.idle {NSIGHT}"}),
    "h100_pair_before": Case(nsys=("nsys/nsysai__mfu_2gpu_before.sqlite",), verdicts=frozenset({"compute"}),
                             single_host=True, dominant_kernel="flash_fwd_kernel",
                             needs={"kernel": f"kernels.top {NSIGHT}", "hosts": f"context.hosts {NSIGHT}"}),
    "real54_v100": Case(traces=(f"{HTA}/df_index_resolver.json.gz",), verdicts=frozenset({"host"}),
                        forbidden=(MIXED_PRECISION, ATTENTION)),
    "rank_pair": Case(traces=(f"{HTA}/trace_filter__sampled_rank-0.json.gz", f"{HTA}/trace_filter__sampled_rank-1.json.gz"),
                      verdicts=frozenset({"host", "communication"}), forbidden=(ATTENTION, MIXED_PRECISION)),
    "cpu_demo": Case(demo=True, verdicts=frozenset({"cpu"}), forbidden=(GPU, ATTENTION)),
}


def _analyse(case: Case, real_fixtures: Any, out: Path) -> tuple[AnalysisReport, str]:
    """The case analysed as a user does; the JSON report and the Markdown text."""
    if case.demo:
        pytest.importorskip("torch", reason="the demo trains a model with torch")
        proc = subprocess.run([sys.executable, "-m", "my_utils.profiling.examples.unified_metrics_demo", "--steps", "30",
                               "--output-dir", str(out)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
    else:
        from my_utils.profiling.cli.analyze import run_analysis

        nsys = [str(real_fixtures / n) for spec in case.nsys
                for n in (real_fixtures.names(spec) if spec.endswith("/") else [spec])]
        traces = [real_fixtures / t for t in case.traces]
        run_analysis(None, "pretrain", out, traces or None, "json,markdown", True, nsys=nsys)
    return AnalysisReport.load(out), (out / "analysis_report.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def analysed(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``analysed(name)``: the case's report and Markdown, each case analysed once per module."""
    done: dict[str, tuple[str, Case, AnalysisReport, str]] = {}

    def get(name: str) -> tuple[str, Case, AnalysisReport, str]:
        if name not in done:
            report, markdown = _analyse(CASES[name], real_fixtures, tmp_path_factory.mktemp(name))
            done[name] = (name, CASES[name], report, markdown)
        return done[name]
    return get


def _where(check: str) -> list[str]:
    """The cases a check applies to."""
    return [n for n, c in CASES.items() if {
        "savings": c.max_unattributed_saving_ms is not None, "straggler": c.straggler_host is not None,
        "hosts": c.single_host, "kernel": c.dominant_kernel is not None, "demo": c.demo}.get(check, True)]


def _waits(request: pytest.FixtureRequest, case: Case, check: str) -> None:
    """Mark this check xfail(strict) when its case says it needs a fact another branch produces."""
    if check in case.needs:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"needs {case.needs[check]}"))


def _advice_texts(report: AnalysisReport) -> list[str]:
    return [t for f in report.findings for t in (f.suggestion, *(a.text for a in f.advice)) if t]


def _saving(f: Finding) -> float | None:
    return None if f.impact.breakdown else f.impact.share_of_step


@pytest.mark.parametrize("name", _where("verdict"))
def test_the_verdict_class(name: str, analysed: Any, request: pytest.FixtureRequest) -> None:
    name, c, report, markdown = analysed(name)
    _waits(request, c, "verdict")
    verdict = report.headline["verdict"]
    assert verdict["bound"] in c.verdicts, (name, verdict["lines"])
    assert verdict["lines"][0].startswith(KEYWORDS[verdict["bound"]])
    assert f"Verdict ({verdict['bound']})" in markdown


@pytest.mark.parametrize("name", _where("forbidden"))
def test_no_forbidden_advice(name: str, analysed: Any, request: pytest.FixtureRequest) -> None:
    name, c, report, _md = analysed(name)
    _waits(request, c, "forbidden")
    for text in _advice_texts(report):
        for pattern in c.forbidden:
            assert not pattern.search(text), (name, pattern.pattern, text)


@pytest.mark.parametrize("name", _where("severity"))
def test_severity_follows_impact_and_findings_come_in_saving_order(name: str, analysed: Any) -> None:
    name, _c, report, _md = analysed(name)
    savings = []
    for f in report.findings:
        share = _saving(f)
        if f.severity == "critical":
            assert share is not None and share >= CRITICAL_SHARE, (name, f.id, f.impact)
        if f.severity == "warning" and f.category not in ("capture", "memory", "imbalance"):
            assert share is not None and share >= WARNING_SHARE, (name, f.id, f.impact)
        if share is not None:
            savings.append(share)
    # every finding that states a saving comes before those that do not, largest first
    stated = [_saving(f) is not None for f in report.findings]
    assert stated == sorted(stated, reverse=True), name
    assert savings == sorted(savings, reverse=True), name
    top = report.headline["top_findings"]
    left_out = [_saving(f) or 0.0 for f in report.findings if f.id not in top and f.category != "capture"]
    chosen = [_saving(next(f for f in report.findings if f.id == i)) or 0.0 for i in top]
    assert not chosen or not left_out or min(chosen) >= max(left_out) - 0.0005, name  # never a larger one left out
    for f in report.findings:  # every saving names what its share is of
        if f.impact.share_of_step is not None and f.impact.ms_per_step:
            assert f.impact.denominator and f.impact.denominator_ms, (name, f.id)


@pytest.mark.parametrize("name", _where("savings"))
def test_savings_never_exceed_what_their_fix_can_remove(name: str, analysed: Any, request: pytest.FixtureRequest) -> None:
    name, c, report, _md = analysed(name)
    assert c.max_unattributed_saving_ms is not None
    _waits(request, c, "savings")
    for f in report.findings:
        ms = f.impact.ms_per_step
        assert ms is None or ms <= c.max_unattributed_saving_ms, (name, f.id, ms, f.impact.basis)


@pytest.mark.parametrize("name", _where("straggler"))
def test_the_straggler_is_a_host(name: str, analysed: Any, request: pytest.FixtureRequest) -> None:
    name, c, report, _md = analysed(name)
    assert c.straggler_host is not None
    _waits(request, c, "straggler")
    stragglers = [f for f in report.findings if f.category == "imbalance"]
    assert any(c.straggler_host in f.title for f in stragglers), [f.title for f in stragglers]
    for f in stragglers:  # a rank is named only with its host
        if re.search(r"\brank \d+\b", f.title):
            assert "host" in f.title, f.title


@pytest.mark.parametrize("name", _where("hosts"))
def test_single_host_runs_get_no_cross_host_clock_caveat(name: str, analysed: Any,
                                                         request: pytest.FixtureRequest) -> None:
    name, c, report, _md = analysed(name)
    _waits(request, c, "hosts")
    assert "different hosts" not in report.to_json(), name


@pytest.mark.parametrize("name", _where("kernel"))
def test_the_dominant_kernel_is_named_up_front(name: str, analysed: Any, request: pytest.FixtureRequest) -> None:
    name, c, report, _md = analysed(name)
    assert c.dominant_kernel is not None
    _waits(request, c, "kernel")
    assert c.dominant_kernel in report.headline["verdict"]["lines"][0], report.headline["verdict"]["lines"]


@pytest.mark.parametrize("name", _where("plain"))
def test_no_e_notation_in_any_finding_text(name: str, analysed: Any) -> None:
    name, _c, report, _md = analysed(name)
    for f in report.findings:
        for text in (f.title, f.detail, f.suggestion, *(a.text for a in f.advice)):
            assert not E_NOTATION.search(text), (name, f.id, E_NOTATION.search(text))
    for line in report.headline["verdict"]["lines"]:
        assert not E_NOTATION.search(line), line


@pytest.mark.parametrize("name", _where("demo"))
def test_the_cpu_run_says_so_and_names_its_run(name: str, analysed: Any) -> None:
    _name, _c, report, markdown = analysed(name)
    assert report.fact("context.cpu_only").value == 1
    head = markdown.split("## Run", 1)[0]
    assert "CPU only" in head and "GPU not recorded" not in head
    run_ids = report.inputs["run_ids"]
    assert report.headline["title"] == f"run {run_ids[0]}" and ".pt.trace.json" not in report.headline["title"]
    worst = next(f for f in report.headline["facts"] if f["id"] == "step_time.worst")
    steps = [r for r in report.tables["steps"] if r["source"] == "mytimer"]
    expected = max(r["step_time"] for r in steps if r["step"] != 0)  # step 0 is warm-up, as the rules take it
    assert worst["value"] == pytest.approx(expected) and "warm-up step 0 left out" in worst["detail"]
    assert report.summary["verdict"] == "cpu" and report.summary["contents"]["gpu"] is False
