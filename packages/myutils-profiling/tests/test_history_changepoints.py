"""Change points: planted steps found where they start, none in noise alone, the statistic checked by hand."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.history.changepoints import best_split, change_points


def _noisy(n: int, rng: np.random.Generator, cv: float = 0.02) -> np.ndarray:
    """Run-to-run noise as CI sees it: Gaussian, plus 1% of runs slowed 5-30% by a noisy neighbour."""
    noise = rng.normal(0.0, cv, n)
    slow = rng.random(n) < 0.01
    noise[slow] += rng.uniform(0.05, 0.3, int(slow.sum()))
    return 1.0 + noise


@pytest.mark.parametrize("seed", range(4))
def test_planted_steps_are_found_where_they_start(seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts, steps = [90, 200, 330, 450], [5.0, -10.0, 20.0, -5.0]
    level = np.full(560, 100.0)
    for start, pct in zip(starts, steps, strict=True):
        level[start:] *= 1 + pct / 100
    found = change_points(level * _noisy(560, rng))
    assert [c.index for c in found] == pytest.approx(starts, abs=3)
    for c, pct in zip(found, steps, strict=True):
        assert c.change_pct == pytest.approx(pct, abs=2.0)
        assert c.p_value < 1e-3 and (c.z > 0) == (pct < 0)  # left ranks high when the level then falls


@pytest.mark.parametrize("seed", range(3))
def test_noise_alone_has_no_change(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    assert change_points(200.0 * _noisy(1500, rng, cv=0.03)) == []


def test_flat_short_and_bad_series() -> None:
    assert change_points([5.0] * 50) == []
    assert change_points([1.0, 2.0, 3.0]) == []
    with pytest.raises(ValueError, match="finite"):
        change_points([1.0, float("nan")] * 10)


def test_the_statistic_is_the_mann_whitney_z_computed_by_hand() -> None:
    rng = np.random.default_rng(7)
    seg = np.round(rng.normal(10, 1, 40), 1)  # rounded: ties on purpose
    t, z, tried = best_split(seg, 5)
    left, right = seg[:t], seg[t:]
    # U by counting pairs (ties count half), and its tie-corrected variance, independently of the ranks
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(left, right))
    n1, n2, m = len(left), len(right), len(seg)
    ties = sum(c ** 3 - c for c in np.unique(seg, return_counts=True)[1])
    var = n1 * n2 / 12 * ((m + 1) - ties / (m * (m - 1)))
    assert z == pytest.approx((u - n1 * n2 / 2) / math.sqrt(var), rel=1e-9)
    assert tried == m - 10 + 1
    assert 2 * tried * NormalDist().cdf(-abs(z)) >= 0  # the Bonferroni bound is a probability's bound


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 1000), shift=st.floats(-1e3, 1e3))
def test_units_and_offsets_do_not_move_the_changes(seed: int, scale: float, shift: float) -> None:
    # ranks decide whether; least absolute deviations decide where: both ignore the unit and the origin
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0, 1, 60), rng.normal(1.5, 1, 60), rng.normal(-1, 1, 60)])
    base = [c.index for c in change_points(x + 10, min_change_pct=0)]
    moved = [c.index for c in change_points((x + 10) * scale + shift, min_change_pct=0)]
    assert moved == base


def test_a_large_move_is_placed_at_its_first_run() -> None:
    # two high runs just before a +10% step: the rank split alone put the change 2 runs early (28)
    rng = np.random.default_rng(0)
    before = [*(100 + rng.normal(0, 0.8, 28)), 101.4, 102.4]
    after = list(110 + rng.normal(0, 0.8, 10))
    assert [c.index for c in change_points([*before, *after])] == [30]
