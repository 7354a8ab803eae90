"""The analyzer's findings on synthetic runs are exactly the planted ones; pure noise gives none.

Each run is 4 ranks × 12 regions of about 10 ms (Gaussian noise, 5 % CV; each region is 8 % of
the step, under the bottleneck threshold) plus ``step_time`` (their sum) and a flat memory gauge,
written as raw event lines. Into it one thing is planted at a time: a spike (one step of one
region 40× longer), a leak (memory growing 1 % a step on one rank), a straggler (one rank 15 %
slower on every step). The full analyzer (every built-in rule, facts, ranking) must report that
and nothing else; the same runs without a plant, at 10k, 100k and 1M events, must report nothing
(1M events before: 40 anomaly warnings at 3σ without a multiple-testing correction).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from my_utils.profiling.analysis import MetricsAnalyzer

RANKS = 4
REGIONS = 12
PER_STEP = REGIONS + 2  # regions, step_time, memory


def _write_run(path: Path, events: int, seed: int, spike: tuple[int, int, int] | None = None,
               leak_rank: int | None = None, straggler: int | None = None) -> Path:
    """A run of about ``events`` event lines; ``spike`` = (rank, step, region)."""
    rng = random.Random(seed)
    steps = max(10, events // (RANKS * PER_STEP))
    with path.open("w") as fh:
        for step in range(steps):
            for rank in range(RANKS):
                total = 0.0
                slow = 1.15 if rank == straggler else 1.0
                for i in range(REGIONS):
                    v = 10.0 * slow * (1.0 + rng.gauss(0.0, 0.05))
                    if spike == (rank, step, i):
                        v *= 40.0
                    total += v
                    fh.write(json.dumps({"name": f"region{i}", "value": v, "kind": "duration", "unit": "ms",
                                         "source": "mytimer", "rank": rank, "step": step, "attrs": {"depth": 0}}))
                    fh.write("\n")
                fh.write(json.dumps({"name": "step_time", "value": total, "kind": "duration", "unit": "ms",
                                     "source": "mytimer", "rank": rank, "step": step}) + "\n")
                memory = 2e9 * (1.0 + (0.01 * step if rank == leak_rank else 0.0)) + rng.gauss(0.0, 1e6)
                fh.write(json.dumps({"name": "memory.allocated", "value": memory, "kind": "gauge", "unit": "bytes",
                                     "source": "mytimer", "rank": rank, "step": step}) + "\n")
    return path


def _ids(path: Path) -> set[str]:
    report = MetricsAnalyzer(path, traces=[]).analyze()
    assert report.summary["rule_errors"] == []
    return {f.id for f in report.findings}


@pytest.mark.parametrize("events", [10_000, 100_000, pytest.param(1_000_000, marks=pytest.mark.slow)])
def test_noise_only_runs_have_no_finding(tmp_path: Path, events: int) -> None:
    assert _ids(_write_run(tmp_path / "noise.jsonl", events, seed=events)) == set()


def test_a_planted_spike_is_the_one_finding(tmp_path: Path) -> None:
    path = _write_run(tmp_path / "spike.jsonl", 20_000, seed=1, spike=(2, 40, 5))
    report = MetricsAnalyzer(path, traces=[]).analyze()
    assert {f.id for f in report.findings} == {"anomaly:mytimer:step_time:rank2"}
    (f,) = report.findings
    assert f.evidence["steps"] == [40]
    assert f.evidence["explained_by"]["name"] == "region5"  # the region that carries it, not a second finding
    assert "region5" in f.suggestion and f.evidence["fdr"] == 0.05


def test_a_planted_leak_is_the_one_finding(tmp_path: Path) -> None:
    path = _write_run(tmp_path / "leak.jsonl", 10_000, seed=2, leak_rank=1)
    assert _ids(path) == {"memory_growth:mytimer:memory.allocated:rank1"}


def test_a_planted_straggler_is_the_one_finding(tmp_path: Path) -> None:
    path = _write_run(tmp_path / "straggler.jsonl", 10_000, seed=3, straggler=3)
    report = MetricsAnalyzer(path, traces=[]).analyze()
    assert {f.id for f in report.findings} == {"rank_imbalance:mytimer:rank3"}
    (f,) = report.findings
    steps = f.evidence["steps_compared"]
    assert f.evidence["above_median_steps"] == steps  # late on every step, and it says so
    assert "no collectives" in f.detail and "every collective" not in f.detail


def test_a_bottleneck_and_a_suggestion_on_one_fact_are_one_finding() -> None:
    from my_utils.core.events import MetricEvent

    events = []
    for s in range(20):
        for name, ms in (("dataloader", 40.0), ("forward", 30.0), ("backward", 30.0)):
            events.append(MetricEvent(name, ms, "duration", "ms", "mytimer", 0, s, attrs={"depth": 0}))
        events.append(MetricEvent("step_time", 100.0, "duration", "ms", "mytimer", 0, s))
    report = MetricsAnalyzer(events, traces=[]).analyze()
    ids = [f.id for f in report.findings]
    # before: "dataloader takes 40% of step time" and "data loading takes 40% of step time" as two cards;
    # the share alone is a breakdown (info), so the data-loading suggestion owns the fact
    assert "suggestion:data_loading:rank0" in ids and "bottleneck:dataloader" not in ids
    (f,) = [f for f in report.findings if f.id == "suggestion:data_loading:rank0"]
    assert f.evidence["merged"] == ["bottleneck:dataloader"] and "num_workers" in f.suggestion
