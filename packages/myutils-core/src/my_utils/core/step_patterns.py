"""Steps that recur every p steps through a run: a stall (a data loader's refill, a periodic sync) among noise.

Random delays a busy host scatters over steps rarely line up at one period through the whole
run with similar sizes; a stall does. ``myutils stragglers`` and the profiling rules both call
:func:`recurring`, so they agree on what recurs.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MIN_REPEATS", "SIMILAR", "recurring"]

#: Recurring steps: at least this many, none smaller than the median of them over this factor (a
#: stall's steps can be made longer by other delays, never shorter).
MIN_REPEATS = 3
SIMILAR = 3.0


def recurring(steps: Sequence[int], excess: Sequence[float], first: int, last: int) -> tuple[int, list[int]] | None:
    """(period, steps) of the longest run of ``steps`` that recurs every p steps from ``first`` to ``last``.

    The run has at least :data:`MIN_REPEATS` steps, leaves no occurrence out between ``first``
    and ``last`` (it starts at most p after ``first`` and ends less than p before ``last``),
    and none of its excesses is under their median over :data:`SIMILAR`. None when no such run exists.
    """
    size = dict(zip(steps, excess, strict=True))
    flagged = sorted(size)
    best: tuple[int, list[int]] | None = None
    for i, a in enumerate(flagged):
        for b in flagged[i + 1:]:
            p = b - a
            if p < 2 or a - first > p:  # an occurrence before `a` would be missing (the first p steps may hold none)
                continue
            run = list(range(a, last + 1, p))  # ends less than p before `last`
            if len(run) < MIN_REPEATS or any(st not in size for st in run):
                continue
            sizes = sorted(size[st] for st in run)
            if sizes[0] <= 0 or SIMILAR * sizes[0] < sizes[(len(sizes) - 1) // 2]:
                continue
            if best is None or len(run) > len(best[1]):
                best = (p, run)
    return best
