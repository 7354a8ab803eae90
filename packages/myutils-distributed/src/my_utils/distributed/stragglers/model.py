"""What ``analyze_stragglers`` returns: frozen dataclasses, JSON through ``to_dict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Outlier", "RankClock", "RankValue", "SectionStats", "StragglerReport"]

#: 2: the ranks' times are medians of their working time per step, ``slowdown`` a median ratio,
#: stragglers persistent by late steps; ``late_steps``, ``waiting``, ``outliers`` and ``period`` added.
SCHEMA_VERSION = 2


@dataclass(frozen=True, slots=True)
class RankValue:
    """A value (ms) and the rank it belongs to."""

    rank: int
    ms: float


@dataclass(frozen=True, slots=True)
class Outlier:
    """One step in which one rank took far longer in a section than the other ranks (a spike or a stall)."""

    rank: int
    step: int
    ms: float
    reference_ms: float

    @property
    def excess_ms(self) -> float:
        """How much longer than the other ranks' median it took."""
        return self.ms - self.reference_ms


@dataclass(frozen=True, slots=True)
class SectionStats:
    """One section (a timed region name) across ranks.

    Times are *working* time: when a section ends in a collective (``collective``: its ends
    spread, over steps, at most half as far as its starts; ``end_spread_ratio`` is that median
    ratio), a rank's head start over the last rank to come in is waiting for the others, not
    work of its own, and is taken out (``waiting``: each rank's mean wait per compared step).

    ``steps`` counts the steps the section was compared in (two ranks or more), ``seen_steps``
    those it ran in on any rank. ``min``/``median``/``max`` are over the ranks' *median* time per
    step (the median's rank is the one closest to it). Each rank's time in a step is also divided
    by the median of the other ranks' times in that step: ``slowest_rank`` is the rank whose
    median of those ratios is largest, ``slowdown`` that median, and ``late_steps`` the steps in
    which its ratio reached the minimum slowdown; ``slowest_excess_ms`` is its median time less the
    median of the other ranks' medians; ``sign_test_p`` how likely chance (a coin per step) would
    make it late on as many steps. It is the ``straggler`` when the late steps are at least
    the persistent fraction of the compared steps and that chance at most 1 % (so its median ratio is at least the minimum
    slowdown: one slow step does not make a straggler, and with two ranks neither is one by
    default). ``slowest_steps`` counts the steps it was the slowest rank. ``outliers`` are the steps
    in which a rank that is not the straggler took far longer than the others (largest first);
    ``period`` is set when one rank's outliers recur every ``period`` steps through the run with a
    similar size (``my_utils.core.step_patterns``), at ``recurring_steps``. ``start_spread_ms``
    is the mean, over steps, of last minus first start (clock offsets applied);
    ``last_to_start_rank`` started last most often.
    """

    section: str
    steps: int
    seen_steps: int
    ranks: int
    min: RankValue
    median: RankValue
    max: RankValue
    slowdown: float
    slowest_rank: int
    slowest_excess_ms: float
    slowest_steps: int
    late_steps: int
    sign_test_p: float
    straggler: int | None
    collective: bool
    end_spread_ratio: float | None
    waiting: list[RankValue]
    outliers: list[Outlier]
    period: int | None
    recurring_steps: list[int]
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
    min_excess_ms: float
    #: what the reader of the report must know about the inputs (files given but not read, and why)
    notes: list[str] = field(default_factory=list)

    @property
    def stragglers(self) -> list[tuple[int, str]]:
        """(rank, section) for every flagged section, in section order."""
        return [(s.straggler, s.section) for s in self.sections if s.straggler is not None]

    @property
    def outliers(self) -> list[tuple[str, Outlier]]:
        """(section, outlier) for every outlying step, largest excess first."""
        found = [(s.section, o) for s in self.sections for o in s.outliers]
        return sorted(found, key=lambda x: (-x[1].excess_ms, x[1].step, x[1].rank, x[0]))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``schema_version`` first)."""
        return {
            "schema_version": SCHEMA_VERSION,
            **asdict(self),
            "stragglers": [{"rank": rank, "section": section} for rank, section in self.stragglers],
            "outliers": [{"section": section, "rank": o.rank, "step": o.step, "ms": o.ms,
                          "reference_ms": o.reference_ms} for section, o in self.outliers],
        }
