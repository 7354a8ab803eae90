"""The maximum of any index range of a long array, each answer in constant time after one linear setup.

A summary asks for the peak of every region (or window) over the trace's running levels.
Slicing the levels for each region costs regions x entries: a file of overlapping regions
would take hours. Here the levels are cut into blocks of ``BLOCK``; a sparse table over the
block maxima answers the whole blocks of a range in two look-ups, and the at most two partial
blocks at its ends are sliced (``max`` over at most ``2 * BLOCK`` values, in C).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

__all__ = ["BLOCK", "RangeMax"]

BLOCK = 256


class RangeMax:
    """``RangeMax(values).max(lo, hi)`` is ``max(values[lo:hi])`` (``hi > lo``), in O(BLOCK) time."""

    def __init__(self, values: Sequence[int]) -> None:
        self.values = values
        blocks = array("q", (max(values[i:i + BLOCK]) for i in range(0, len(values), BLOCK)))
        self.table = [blocks]  # table[k][i]: the max of blocks i .. i + 2**k - 1
        width = 1
        while 2 * width <= len(blocks):
            prev = self.table[-1]
            self.table.append(array("q", (max(prev[i], prev[i + width]) for i in range(len(prev) - width))))
            width *= 2

    def max(self, lo: int, hi: int) -> int:
        """The largest of ``values[lo:hi]``; ``hi`` must be greater than ``lo``."""
        first, last = -(-lo // BLOCK), hi // BLOCK  # the whole blocks inside [lo, hi)
        if first >= last:
            return max(self.values[lo:hi])
        k = (last - first).bit_length() - 1
        best = max(self.table[k][first], self.table[k][last - (1 << k)])
        if lo < first * BLOCK:
            best = max(best, max(self.values[lo:first * BLOCK]))
        if last * BLOCK < hi:
            best = max(best, max(self.values[last * BLOCK:hi]))
        return best
