"""SourceChecksRule: findings from DCGM, NCCL log and perf stat events, alone and through the analyzer."""

from __future__ import annotations

import inspect
import statistics
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent
from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import load_component
from my_utils.core.testing import check_analysis_rule
from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
from my_utils.profiling.formats.dcgm import read_dcgm_dmon
from my_utils.profiling.formats.nccl_log import read_nccl_log
from my_utils.profiling.formats.perf_stat import read_perf_stat

DATA = Path(__file__).resolve().parent / "data"
SOCKET_LOG = "nccl/dsl__example_2.502726.o.nccl2.22.3.log"
IB_LOG = "nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log"


def _events(real_fixtures: Path) -> list[MetricEvent]:
    return (read_dcgm_dmon(DATA / "dcgmi_dmon_2gpu_h100.txt") + read_nccl_log(real_fixtures / SOCKET_LOG)
            + read_perf_stat(DATA / "perf_stat_x_interval_percpu.csv"))


def _smact_mean(gpu: int) -> float:
    values = [float(line.split()[3]) * 100 for line in (DATA / "dcgmi_dmon_2gpu_h100.txt").read_text().splitlines()
              if line.split()[:2] == ["GPU", str(gpu)]]  # "GPU", "n", GRACT, SMACT, ...
    return statistics.fmean(values)


def test_contract_and_declared_options(real_fixtures: Path) -> None:
    from my_utils.profiling.plugin import RULE_OPTIONS

    findings = check_analysis_rule("source_checks", _events(real_fixtures))
    assert findings
    params = inspect.signature(load_component(PluginKind.ANALYSIS_RULE, "source_checks")).parameters
    assert {o.name: o.default for o in RULE_OPTIONS["source_checks"]} == {n: p.default for n, p in params.items()}


def test_findings_through_the_analyzer_name_gpu_rank_and_line(real_fixtures: Path) -> None:
    text = (real_fixtures / SOCKET_LOG).read_text().splitlines()
    report = MetricsAnalyzer(_events(real_fixtures)).analyze()
    found = {f.id: f for f in report.findings if f.id.startswith("source_checks:")}
    assert set(found) == {"source_checks:dcgm_sm_active:gpu1:norank", "source_checks:nccl_socket:rank0",
                          "source_checks:nccl_socket:rank1",
                          "source_checks:perf_ipc:perf.ipc@CPU0:norank:step0"}
    gpu1 = found["source_checks:dcgm_sm_active:gpu1:norank"]
    assert gpu1.evidence["mean"] == pytest.approx(_smact_mean(1)) and gpu1.evidence["samples"] == 16
    assert _smact_mean(0) > 40  # the busy GPU is not reported
    for rank, host in ((0, "ault42"), (1, "ault43")):
        line = 1 + next(i for i, t in enumerate(text) if t.startswith(host) and t.endswith("Using network Socket"))
        finding = found[f"source_checks:nccl_socket:rank{rank}"]
        assert finding.evidence["log_line"] == line and f"line {line}" in finding.title
        # the rule states no saving for it, and severity follows the saving (issue 33): info, the rule's
        # warning kept in the evidence
        assert finding.severity == "info" and finding.evidence["rule_severity"] == "warning"
        assert finding.evidence["ranks"] == [rank]
    ipc = found["source_checks:perf_ipc:perf.ipc@CPU0:norank:step0"]
    assert ipc.severity == "info" and ipc.evidence["ipc"] == pytest.approx(
        statistics.fmean([1022823159 / 1203321443, 1016403797 / 1210004521]))
    assert {"dcgm_dmon", "nccl_log"} <= {row["source"] for row in report.tables["totals"]}  # no steps: totals
    assert report.scores == {}  # no per-step durations: "not measured", never 100


def test_raw_and_aggregated_events_give_the_same_findings(real_fixtures: Path) -> None:
    events = _events(real_fixtures)
    raw = {f["id"]: f["evidence"] for f in check_analysis_rule("source_checks", events)}
    analyzed = MetricsAnalyzer(events).analyze()
    via = {f.id: dict(f.evidence) for f in analyzed.findings if f.id.startswith("source_checks:")}
    assert set(raw) == set(via)
    for key, evidence in raw.items():
        for field in ("mean", "samples", "log_line", "ipc"):
            if field in evidence:
                assert via[key][field] == pytest.approx(evidence[field]), (key, field)


def test_nothing_to_flag_on_infiniband_and_thresholds_apply(real_fixtures: Path) -> None:
    assert check_analysis_rule("source_checks", read_nccl_log(real_fixtures / IB_LOG)) == []
    dcgm = read_dcgm_dmon(DATA / "dcgmi_dmon_2gpu_h100.txt")
    assert check_analysis_rule("source_checks", dcgm, sm_active_low=10.0) == []
    assert len(check_analysis_rule("source_checks", dcgm, sm_active_low=95.0)) == 2
    assert check_analysis_rule("source_checks", dcgm, min_samples=17) == []
    assert check_analysis_rule("source_checks", read_perf_stat(real_fixtures / "perf/two_sum__perf_stat.txt")) == []


def test_source_checks_builds_no_event_of_other_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the rule walked every aggregated cell of the run (1M MetricEvents built on the bench's 1M-event
    run, ~30 % of the analysis) to find the few DCGM / NCCL / perf names it reads."""
    from my_utils.core.events import MetricEvent
    from my_utils.profiling.analysis.aggregate import EventAggregate
    from my_utils.profiling.analysis.rules.sources import SourceChecksRule

    agg = EventAggregate()
    timer = [MetricEvent(name=f"region{i}", value=1.0, kind="duration", unit="ms", source="mytimer", rank=0, step=s)
             for i in range(5) for s in range(50)]
    dcgm = [MetricEvent(name="dcgm.sm_active:GPU 0", value=10.0, kind="ratio", unit="%", source="dcgm_dmon", rank=0,
                        step=None) for _ in range(6)]
    for e in timer + dcgm:
        agg.add(e)
    built: list[str] = []
    real = agg.iter_aggregated

    def counting(only: Any = None) -> Any:
        for e in real(only):
            built.append(e.name)
            yield e

    monkeypatch.setattr(agg, "iter_aggregated", counting)
    findings = SourceChecksRule().evaluate(agg.aggregated())
    assert [f["id"] for f in findings] == ["source_checks:dcgm_sm_active:GPU 0:rank0"]
    assert built == ["dcgm.sm_active:GPU 0"]
