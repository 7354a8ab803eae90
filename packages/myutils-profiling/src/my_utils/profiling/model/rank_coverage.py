"""Which ranks of a job a run's files cover, and what the cross-rank figures cannot show when some are missing.

A run analysed from part of its ranks (the 2 sampled ranks of a 128-rank job, a glob that matched 6 of 8
exports) still gives per-rank tables that look complete; its cross-rank figures (stragglers, collective
waits, the rank that arrives last, the spread of a kernel's time) compare only the ranks present, and the
rank that left no file is often the slow or crashed one. :func:`rank_coverage` compares the ranks read
with the world size the files declare (Kineto's ``distributedInfo.world_size``, the launcher's
``PMI_SIZE``/``WORLD_SIZE``/``SLURM_NTASKS`` in an nsys export) and says it once, naming the ranks present,
the ranks missing and where the world size came from. Without a declared world size nothing is claimed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: What compares ranks in a run; a missing rank is absent from each of these.
CROSS_RANK = ("stragglers and the rank that arrives last at a collective", "collective waits",
              "the spread of a kernel's time over ranks")


@dataclass(frozen=True)
class RankCoverage:
    """The ranks read, the world they belong to, and the ranks of that world no file holds."""

    present: tuple[int, ...]
    world_size: int
    missing: tuple[int, ...]
    world_source: str
    unknown: int = 0  # files whose rank is not known

    @property
    def complete(self) -> bool:
        """Whether every rank of the world was read."""
        return not self.missing

    def warning(self, what: str = "trace") -> str | None:
        """One line for the report's warnings, None when every rank is present."""
        if self.complete:
            return None
        n = len(self.present)
        unknown = f" and {self.unknown} {what}{'' if self.unknown == 1 else 's'} of unknown rank" if self.unknown else ""
        return (f"{n} of {self.world_size} ranks analysed ({what}s of {ranges(self.present)}{unknown}; world size "
                f"from {self.world_source}); {len(self.missing)} missing ({ranges(self.missing)}): "
                f"{', '.join(CROSS_RANK)} compare only the {n} rank{'' if n == 1 else 's'} present, and a rank that left no {what} "
                "(often the slow or the crashed one) cannot be named")


def rank_coverage(ranks: Iterable[int | None], world_sizes: Iterable[int | None],
                  world_source: str) -> RankCoverage | None:
    """The coverage of ``ranks`` in the declared world (the largest size declared), None without one."""
    declared = [w for w in world_sizes if isinstance(w, int) and not isinstance(w, bool) and w > 0]
    if not declared:
        return None
    world = max(declared)
    listed = list(ranks)
    present = tuple(sorted({r for r in listed if r is not None}))
    missing = tuple(r for r in range(world) if r not in set(present))
    return RankCoverage(present, world, missing, world_source, sum(1 for r in listed if r is None))


def ranges(numbers: Sequence[int], limit: int = 8) -> str:
    """Sorted integers as ranges: ``0, 2-5, 9`` (at most ``limit`` pieces, then how many more)."""
    pieces: list[str] = []
    nums = sorted(set(numbers))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        pieces.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    if not pieces:
        return "none"
    shown = ", ".join(pieces[:limit])
    return shown if len(pieces) <= limit else f"{shown} and {len(pieces) - limit} more range(s)"
