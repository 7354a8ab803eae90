"""The diff's significance test and gate at their edges, on numbers worked out by hand.

Each test here killed a planted bug the rest of the suite let through (``.ci/mutants.toml``:
``diff-gate-speedup``, ``diff-noise-sigmas``, ``diff-added-floor``, ``diff-removed-sign``).
"""

from __future__ import annotations

import math

import pytest

from my_utils.profiling.analysis.diff import STEP_TIME, DiffResult, OpStats, compare


def _stats(name: str, mean: float, std: float = 0.0, steps: int = 16) -> OpStats:
    return OpStats(name, count=steps, steps=steps, mean=mean, std=std)


def test_significance_needs_sigmas_standard_errors() -> None:
    # population std 8 ms over 16 steps on each side: the unbiased standard error of each mean is
    # 8 / sqrt(15) = 2.07 ms, of the difference hypot(2.07, 2.07) = 2.92 ms; a 5 ms change is 1.71
    # standard errors: significant at 1 sigma, not at 3 (min_pct 0 isolates the sigma test)
    base, target = {"x": _stats("x", 100.0, 8.0)}, {"x": _stats("x", 105.0, 8.0)}
    se = math.hypot(8 / math.sqrt(15), 8 / math.sqrt(15))
    (three,) = compare(base, target, sigmas=3.0, min_pct=0.0)
    (one,) = compare(base, target, sigmas=1.0, min_pct=0.0)
    assert three.noise == pytest.approx(3 * se) and not three.significant
    assert one.noise == pytest.approx(se) and one.significant


def test_added_and_removed_names_carry_their_sign_and_need_min_pct_of_the_step() -> None:
    # base step 200 ms, min_pct 5 %: an added/removed name counts from 10 ms per step on
    base = {"kept": _stats("kept", 50.0), "gone": _stats("gone", 30.0), "crumb_gone": _stats("crumb_gone", 2.0)}
    target = {"kept": _stats("kept", 50.0), "new": _stats("new", 12.0), "crumb_new": _stats("crumb_new", 9.9)}
    changes = {c.name: c for c in compare(base, target, min_pct=5.0, base_step_mean=200.0)}
    assert (changes["gone"].status, changes["gone"].delta, changes["gone"].significant) == ("removed", -30.0, True)
    assert (changes["new"].status, changes["new"].delta, changes["new"].significant) == ("added", 12.0, True)
    assert changes["crumb_gone"].delta == -2.0 and not changes["crumb_gone"].significant
    assert changes["crumb_new"].delta == 9.9 and not changes["crumb_new"].significant
    assert changes["gone"].count_delta == -1.0 and changes["new"].count_delta == 1.0


def test_a_removed_name_or_a_faster_one_never_fails_the_gate() -> None:
    base = {"gone": _stats("gone", 40.0), "faster": _stats("faster", 60.0), "same": _stats("same", 100.0)}
    target = {"faster": _stats("faster", 30.0), "same": _stats("same", 100.0)}
    step = compare({STEP_TIME: _stats(STEP_TIME, 200.0)}, {STEP_TIME: _stats(STEP_TIME, 130.0)})[0]
    result = DiffResult("a", "b", compare(base, target, base_step_mean=200.0), step)
    assert {c.name for c in result.significant} == {"gone", "faster", STEP_TIME} - {STEP_TIME}
    gate = result.gate(1.0)
    assert gate.passed and gate.regressions == ()
    # the same names the other way round are the regressions
    back = DiffResult("b", "a", compare(target, base, base_step_mean=130.0),
                      compare({STEP_TIME: _stats(STEP_TIME, 130.0)}, {STEP_TIME: _stats(STEP_TIME, 200.0)})[0])
    assert {c.name for c in back.gate(1.0).regressions} == {STEP_TIME, "gone", "faster"}


def test_two_samples_have_one_degree_of_freedom() -> None:
    # two steps a side, population std 1 ms: the standard error of each mean is 1 / sqrt(2 - 1) = 1 ms,
    # not 1 / sqrt(2); a 4 ms change is 2.83 standard errors of the difference: within noise at 3 sigma
    (change,) = compare({"x": _stats("x", 100.0, 1.0, steps=2)}, {"x": _stats("x", 104.0, 1.0, steps=2)},
                        sigmas=3.0, min_pct=0.0)
    assert change.noise == pytest.approx(3 * math.sqrt(2)) and not change.significant and change.measured
    (one,) = compare({"x": _stats("x", 100.0, 1.0, steps=1)}, {"x": _stats("x", 104.0, 1.0, steps=1)},
                     sigmas=3.0, min_pct=0.0)
    assert one.status == "unmeasured" and not one.significant


def test_a_child_is_folded_only_inside_its_parent_and_never_when_it_changed_more() -> None:
    def pair(name: str, a: float, b: float) -> tuple[dict[str, OpStats], dict[str, OpStats]]:
        return {name: _stats(name, a)}, {name: _stats(name, b)}

    base, target = {}, {}
    for name, a, b in (("parent", 100.0, 120.0), ("inside", 10.0, 25.0), ("bigger", 10.0, 40.0),
                       ("half_in", 10.0, 20.0)):
        x, y = pair(name, a, b)
        base.update(x)
        target.update(y)
    parents = {"inside": ("parent", 1.0), "bigger": ("parent", 1.0), "half_in": ("parent", 0.94)}
    result = DiffResult("a", "b", compare(base, target, min_pct=5.0, parents=parents))
    # +15 inside a +20 parent: folded; +30 cannot all lie inside a +20 parent; 94 % inside is not a true child
    assert result.folded() == {"inside": "parent"}
    exact = DiffResult("a", "b", compare(base, {**target, "inside": _stats("inside", 30.0)}, min_pct=5.0,
                                         parents=parents))
    assert exact.folded() == {"inside": "parent"}  # a change equal to its parent's still fits inside it
