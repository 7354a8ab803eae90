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
    # std 8 ms over 16 steps on each side: standard error hypot(2, 2) = 2.83 ms; a 5 ms change is
    # 1.77 standard errors: significant at 1 sigma, not at 3 (min_pct 0 isolates the sigma test)
    base, target = {"x": _stats("x", 100.0, 8.0)}, {"x": _stats("x", 105.0, 8.0)}
    se = math.hypot(8 / 4, 8 / 4)
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
