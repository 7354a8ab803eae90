"""The gate's verdicts on baselines built to pass and to fail, in both directions of a metric."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from my_utils.profiling.history.context import SeriesKey
from my_utils.profiling.history.gate import Baseline, GateSettings, choose_baseline, judge, run_gate
from my_utils.profiling.history.stats import t_sf

KEY = SeriesKey("pretrain", "8x H100", 16)


def _baseline(values: list[float]) -> Baseline:
    return Baseline(tuple(range(len(values))), tuple(values))


@pytest.fixture
def noisy() -> list[float]:
    return list(100 + np.random.default_rng(3).normal(0, 2, 30))


def test_a_slow_run_fails_and_its_numbers_are_the_baselines(noisy: list[float]) -> None:
    v = judge("step_time.median", "ms", 110.0, _baseline(noisy), GateSettings())
    median = statistics.median(noisy)
    mad = statistics.median(abs(x - median) for x in noisy) * 1.4826
    sigmas = (110.0 - median) / (mad * math.sqrt(1 + math.pi / 60))
    assert v.regression and v.worse
    assert v.change_pct == pytest.approx((110 - median) / median * 100)
    assert v.sigmas == pytest.approx(sigmas) and v.p_value == pytest.approx(t_sf(sigmas, 29))


def test_noise_passes_and_improvements_never_fail(noisy: list[float]) -> None:
    s = GateSettings()
    assert not judge("step_time.median", "ms", 101.0, _baseline(noisy), s).regression
    assert not judge("step_time.median", "ms", 80.0, _baseline(noisy), s).regression  # faster
    assert not judge("mfu", "%", 130.0, _baseline(noisy), s).regression  # higher MFU is better
    assert judge("mfu", "%", 85.0, _baseline(noisy), s).regression  # lower MFU is worse


def test_small_or_insignificant_changes_pass() -> None:
    tight = [100.0 + 0.01 * (i % 3) for i in range(30)]
    assert not judge("step_time.median", "ms", 102.0, _baseline(tight), GateSettings(min_pct=3)).regression
    wide = list(100 + np.random.default_rng(1).normal(0, 10, 30))
    assert not judge("step_time.median", "ms", 110.0, _baseline(wide), GateSettings()).regression


def test_too_few_runs_are_not_judged() -> None:
    v = judge("step_time.median", "ms", 500.0, _baseline([100.0] * 4), GateSettings(min_runs=5))
    assert not v.judged and "4 comparable run(s)" in v.reason
    assert not run_gate("run 1", KEY, {"step_time.median": (1.0, "ms")}, {"step_time.median": _baseline([1.0])},
                        GateSettings()).judged


def test_max_p_is_shared_by_the_metrics_judged(noisy: list[float]) -> None:
    value = statistics.median(noisy) * 1.05  # a p-value between 0.01/2 and 0.01 for this baseline
    one = judge("step_time.median", "ms", value, _baseline(noisy), GateSettings(max_p=0.5))
    bound = one.p_value * 1.5
    assert judge("step_time.median", "ms", value, _baseline(noisy), GateSettings(max_p=bound)).regression
    assert not judge("step_time.median", "ms", value, _baseline(noisy), GateSettings(max_p=bound), 2).regression


def test_the_baseline_starts_after_its_last_change() -> None:
    values = [100.0 + (i % 5) * 0.1 for i in range(20)] + [80.0 + (i % 5) * 0.1 for i in range(12)]
    chosen = choose_baseline(list(range(32)), values, 5)
    assert chosen.since_change and chosen.run_ids == tuple(range(20, 32))
    assert not choose_baseline(list(range(12)), values[:12], 5).since_change
