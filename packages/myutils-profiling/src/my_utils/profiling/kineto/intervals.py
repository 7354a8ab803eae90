"""Interval arithmetic on sorted numpy columns: unions and their lengths, never a Python loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")



def union(starts: Any, ends: Any) -> tuple[Any, Any]:
    """The disjoint, sorted intervals covering ``[starts[i], ends[i])`` (touching ones merged)."""
    if len(starts) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=np.float64)[order]
    e = np.asarray(ends, dtype=np.float64)[order]
    reach = np.maximum.accumulate(e)
    # a new interval begins where its start lies past everything seen so far
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [len(s) - 1]))
    return s[first], reach[last]


def length(starts: Any, ends: Any) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    s, e = union(starts, ends)
    return float((e - s).sum())


def overlap_length(a: tuple[Any, Any], b: tuple[Any, Any]) -> float:
    """Length covered by both interval sets: |A| + |B| - |A ∪ B|."""
    la, lb = length(*a), length(*b)
    both = length(np.concatenate((a[0], b[0])), np.concatenate((a[1], b[1])))
    return la + lb - both
