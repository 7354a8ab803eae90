"""The acceptance cases of ``../shared/diagnosis/CASES.md``: what a careful engineer concludes from each shared capture.

Each case is analysed the way a user does (``myutils-profile analyze``'s ``run_analysis``, the JSON
and Markdown reports written) and checked for the principles, never for wording: the verdict's
class (a set of acceptable classes, and the keyword its first line starts with), the advice that
must not appear (regular expressions over every advice and suggestion text), severity against
impact (nothing critical below 5% of the step it states, findings in saving order, Fix first never
leaving out a larger saving), and, where the case says, the straggler host and the savings a fix
can make. The expected facts were recomputed from the raw files in CASES.md (sqlite3, gzip+json).
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.model.report import AnalysisReport, Finding

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



@dataclass(frozen=True)
class Case:
    """One case of CASES.md: its inputs, acceptable verdict classes, forbidden advice."""

    nsys: tuple[str, ...] = ()
    traces: tuple[str, ...] = ()
    demo: bool = False
    verdicts: frozenset[str] = frozenset()
    forbidden: tuple[re.Pattern[str], ...] = ()
    max_unattributed_saving_ms: float | None = None
    straggler_host: str | None = None
    single_host: bool = False
    dominant_kernel: str | None = None


CASES: dict[str, Case] = {
    "ring_6ranks": Case(nsys=(RING,), verdicts=frozenset({"setup"}), forbidden=(LAUNCH, DDP_OVERLAP),
                        max_unattributed_saving_ms=320.0, straggler_host="ault43"),
    "fuser_2024": Case(nsys=("nsys/fuser__report1_2024.6.sqlite",), verdicts=frozenset({"setup"}),
                       forbidden=(LAUNCH,), max_unattributed_saving_ms=183.0),
    "h100_pair_before": Case(nsys=("nsys/nsysai__mfu_2gpu_before.sqlite",), verdicts=frozenset({"compute"}),
                             single_host=True, dominant_kernel="flash_fwd_kernel"),
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


def _advice_texts(report: AnalysisReport) -> list[str]:
    return [t for f in report.findings for t in (f.suggestion, *(a.text for a in f.advice)) if t]


def _saving(f: Finding) -> float | None:
    return None if f.impact.breakdown else f.impact.share_of_step


@pytest.mark.parametrize("name", _where("verdict"))
def test_the_verdict_class(name: str, analysed: Any) -> None:
    name, c, report, markdown = analysed(name)
    verdict = report.headline["verdict"]
    assert verdict["bound"] in c.verdicts, (name, verdict["lines"])
    assert verdict["lines"][0].startswith(KEYWORDS[verdict["bound"]])
    assert f"Verdict ({verdict['bound']})" in markdown


@pytest.mark.parametrize("name", ["ring_6ranks", "fuser_2024"])
def test_a_setup_dominated_capture_gets_no_performance_score(name: str, analysed: Any) -> None:
    _name, _c, report, _md = analysed(name)
    perf = report.dimensions["performance"]
    assert perf["score"] is None and "setup-dominated" in perf["not_measured"], perf
    assert "performance" not in report.scores


@pytest.mark.parametrize("name", _where("forbidden"))
def test_no_forbidden_advice(name: str, analysed: Any) -> None:
    name, c, report, _md = analysed(name)
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
def test_savings_never_exceed_what_their_fix_can_remove(name: str, analysed: Any) -> None:
    name, c, report, _md = analysed(name)
    assert c.max_unattributed_saving_ms is not None
    for f in report.findings:
        ms = f.impact.ms_per_step
        assert ms is None or ms <= c.max_unattributed_saving_ms, (name, f.id, ms, f.impact.basis)


@pytest.mark.parametrize("name", _where("straggler"))
def test_the_straggler_is_a_host(name: str, analysed: Any) -> None:
    name, c, report, _md = analysed(name)
    assert c.straggler_host is not None
    stragglers = [f for f in report.findings if f.category == "imbalance"]
    assert any(c.straggler_host in f.title for f in stragglers), [f.title for f in stragglers]
    for f in stragglers:  # a rank is named only with its host
        if re.search(r"\brank \d+\b", f.title):
            assert "host" in f.title, f.title


@pytest.mark.parametrize("name", _where("hosts"))
def test_single_host_runs_get_no_cross_host_clock_caveat(name: str, analysed: Any) -> None:
    name, _c, report, _md = analysed(name)
    assert "different hosts" not in report.to_json(), name


@pytest.mark.parametrize("name", _where("kernel"))
def test_the_dominant_kernel_is_named_up_front(name: str, analysed: Any) -> None:
    name, c, report, _md = analysed(name)
    assert c.dominant_kernel is not None
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


# -- the setup facts against the raw exports ---------------------------------------------------------------------
# Recomputed here with sqlite3 and a plain interval union, independently of nsys/setup.py: the NVTX ranges and CUDA
# calls of the one-off work CASES.md names, and the GPU idle lying inside them. The analysis may find more setup
# (allocation bursts, teardown), never less, and its idle saving must stay below the idle outside these windows.

_SETUP_NVTX = ("ncclCommInitRank", "KernelExecutor::compileFusion")
_SETUP_API = ("cuLibraryLoadData", "cuModuleLoadData", "cuModuleLoadDataEx")


def _sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    import sqlite3

    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _raw_setup(path: Path) -> tuple[float, float, float]:
    """(ms of the named one-off work, GPU idle ms inside it, GPU idle ms in all) of one export."""
    tables = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    gpu = [(s, e) for t in ("KERNEL", "MEMCPY", "MEMSET") if f"CUPTI_ACTIVITY_KIND_{t}" in tables
           for s, e in _sql(path, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")]
    quoted_nvtx = ",".join(f"'{n}'" for n in _SETUP_NVTX)
    quoted_api = ",".join(f"'{n}'" for n in _SETUP_API)
    nvtx = _sql(path, "SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE "
                      f"n.end IS NOT NULL AND coalesce(n.text, s.value) IN ({quoted_nvtx})")
    api = _sql(path, "SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                     f"WHERE s.value IN ({quoted_api})")
    windows = _union([(s, e) for s, e in nvtx + api])
    busy = _union(gpu)
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(busy)]
    inside = sum(max(0, min(e, we) - max(s, ws)) for s, e in gaps for ws, we in windows) / 1e6
    return sum(e - s for s, e in windows) / 1e6, inside, sum(e - s for s, e in gaps) / 1e6


@pytest.mark.parametrize("name", ["ring_6ranks", "fuser_2024"])
def test_the_setup_facts_hold_the_raw_one_off_work_and_cap_the_idle_saving(name: str, analysed: Any,
                                                                          real_fixtures: Any) -> None:
    _name, c, report, _md = analysed(name)
    paths = [real_fixtures / n for n in (real_fixtures.names(RING) if name == "ring_6ranks" else c.nsys)]
    rank_of = {row["file"]: row["rank"] for row in report.tables["nsys_inputs"]}
    outside = 0.0
    for path in paths:
        setup_ms, inside_ms, idle_ms = _raw_setup(path)
        tag = f":rank{rank_of[path.name]}" if len(paths) > 1 else ""
        share = report.fact(f"setup.share{tag}") or report.fact("setup.share")
        assert share is not None and share.number is not None and share.denominator_value
        assert share.number * share.denominator_value / 100.0 >= setup_ms - 0.01, (path.name, share.detail)
        outside = max(outside, idle_ms - inside_ms)
    assert report.headline["verdict"]["bound"] == "setup"
    assert ("ncclCommInitRank" if name == "ring_6ranks" else "compileFusion") in report.headline["verdict"]["lines"][0]
    idle = [f for f in report.findings if f.id == "nsys:gpu_idle"]
    assert all((f.impact.ms_per_step or 0.0) <= outside + 0.01 for f in idle), (outside, [f.impact for f in idle])


# -- the held-out set: every other shared capture of the same kinds reads by the same principles ------------------

def _check_consistency(where: str, report: AnalysisReport) -> None:
    verdict = report.headline["verdict"]
    assert verdict["lines"][0].startswith(KEYWORDS[verdict["bound"]]), (where, verdict)
    savings = []
    for f in report.findings:
        share = _saving(f)
        assert f.severity != "critical" or (share is not None and share >= CRITICAL_SHARE), (where, f.id, f.impact)
        for text in (f.title, f.detail, f.suggestion, *(a.text for a in f.advice)):
            assert not E_NOTATION.search(text), (where, f.id, text)
        if share is not None:
            savings.append(share)
    assert savings == sorted(savings, reverse=True), where
    if verdict["bound"] == "cpu":
        assert not any(GPU.search(t) for t in _advice_texts(report)), where
    if verdict["bound"] in ("host", "setup", "cpu"):
        assert not any(MIXED_PRECISION.search(t) for t in _advice_texts(report)), where


@pytest.mark.parametrize("folder", ["kineto/hta/", "kineto/kineto_repo/", "nsys/"])
def test_every_shared_capture_reads_by_the_same_principles(folder: str, real_fixtures: Any, tmp_path: Path) -> None:
    from my_utils.profiling.cli.analyze import run_analysis

    names = [n for n in real_fixtures.names(folder) if n.count("/") == folder.count("/")
             and n.endswith((".json", ".json.gz", ".sqlite")) and "memory_timeline" not in n]
    assert names, folder
    for i, name in enumerate(names):
        out = tmp_path / str(i)
        path = real_fixtures / name
        if name.endswith(".sqlite"):
            run_analysis(None, "pretrain", out, None, "json", True, nsys=[str(path)])
        else:
            run_analysis(None, "pretrain", out, [path], "json", True)
        _check_consistency(name, AnalysisReport.load(out))
