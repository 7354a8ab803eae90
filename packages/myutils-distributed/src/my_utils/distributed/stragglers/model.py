"""What ``analyze_stragglers`` returns: frozen dataclasses, JSON through ``to_dict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RankClock", "RankValue", "SectionStats", "StragglerReport"]

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class RankValue:
    """A value (ms) and the rank it belongs to."""

    rank: int
    ms: float


@dataclass(frozen=True, slots=True)
class SectionStats:
    """One section (a timed region name) across ranks.

    ``min``/``median``/``max`` are over the ranks' mean time per step in the section (the
    median's rank is the one closest to it); ``slowdown`` is max / median. ``slowest_rank`` was
    the slowest in ``slowest_steps`` of ``steps`` steps; it is the ``straggler`` when that is at
    least the persistent fraction and its mean per-step time / median of the other ranks is
    at least the minimum slowdown. ``start_spread_ms`` is the mean, over steps, of last minus first start
    (clock offsets applied); ``last_to_start_rank`` started last most often.
    """

    section: str
    steps: int
    ranks: int
    min: RankValue
    median: RankValue
    max: RankValue
    slowdown: float
    slowest_rank: int
    slowest_steps: int
    slowest_mean_ratio: float
    straggler: int | None
    start_spread_ms: float
    last_to_start_rank: int | None


@dataclass(frozen=True, slots=True)
class RankClock:
    """The clock offset a rank recorded (``CLOCK_SYNC`` row) and whether it was already applied."""

    rank: int
    offset_s: float
    uncertainty_s: float
    reference_rank: int
    applied: bool


@dataclass(frozen=True, slots=True)
class StragglerReport:
    """Every section of a run and the persistent stragglers found (rank, section)."""

    log_dir: str
    ranks: list[int]
    steps: int
    sections: list[SectionStats]
    clocks: list[RankClock]
    persistent_fraction: float
    min_slowdown: float

    @property
    def stragglers(self) -> list[tuple[int, str]]:
        """(rank, section) for every flagged section, in section order."""
        return [(s.straggler, s.section) for s in self.sections if s.straggler is not None]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``schema_version`` first)."""
        return {
            "schema_version": SCHEMA_VERSION,
            **asdict(self),
            "stragglers": [{"rank": rank, "section": section} for rank, section in self.stragglers],
        }
