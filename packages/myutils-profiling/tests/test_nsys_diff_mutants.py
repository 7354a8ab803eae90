"""``nsys diff``'s sides, built for the plausible bugs its real-export tests let pass (issue 36).

``.ci/mutants/nsys.toml``: iterations under different NVTX range names on the two sides must be
said (their times compare different spans); a window's exposed communication is the part not
under computation; the per-iteration category spread is the population standard deviation, as
every other sample of the diff (the standard error adds the ``n − 1``). Each figure is worked out
by hand.
"""

from __future__ import annotations

import math

import pytest

from my_utils.profiling.analysis.diff_model import OpStats
from my_utils.profiling.analysis.diff_nsys import _parts, _range_warnings, _Side, _stats


def _side(names: set[str]) -> _Side:
    side = _Side()
    side.iteration_names = set(names)
    return side


def test_iterations_under_different_range_names_are_said() -> None:
    a, b = OpStats("step_time", 10, 10, 5.0, 0.1, "ms", "nsys"), OpStats("step_time", 10, 10, 5.0, 0.1, "ms", "nsys")
    (w,) = _range_warnings(None, a, b, _side({"train_step"}), _side({"ProfilerStep#*"}))
    assert w.startswith("the sides' iterations are different NVTX ranges (train_step vs ProfilerStep#*)")
    assert _range_warnings(None, a, b, _side({"train_step"}), _side({"train_step"})) == []


def test_a_windows_exposed_communication_is_what_computation_does_not_cover() -> None:
    """A 10 ms window: 8 ms busy, 5 ms computing, 3 ms of NCCL of which 1 ms under computation: 2 ms exposed,
    1 ms of other work (8 − 5 − 2) and 2 ms idle."""
    assert _parts(10e6, 8e6, 5e6, 3e6, 1e6) == pytest.approx((10.0, 5.0, 2.0, 1.0, 2.0))


def test_the_category_spread_is_the_population_one() -> None:
    """Communication of 1 and 3 ms in two iterations: mean 2 ms, population standard deviation 1 ms."""
    side = _Side()
    side.per_iter["communication"] = [1e6, 3e6]
    stats, _step = _stats(side)
    comm = stats["category:communication"]
    assert (comm.mean, comm.std) == (pytest.approx(2.0), pytest.approx(1.0))
    assert not math.isclose(comm.std, math.sqrt(2.0))
