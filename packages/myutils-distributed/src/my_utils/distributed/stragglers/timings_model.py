"""What ``analyze_rank_timings`` returns (Kineto traces, nsys exports): frozen dataclasses, JSON through ``to_dict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from my_utils.distributed.stragglers.model import SectionStats

__all__ = ["CollectiveLate", "CollectiveStats", "HostLateness", "RankLateness", "RankSource", "TimingsReport"]

#: 1: the first version (steps from ProfilerStep / NVTX iterations, collective arrivals by rank and host).
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class RankSource:
    """One rank and the file its times came from: its kind, where its rank came from, its host (None: not recorded)."""

    rank: int
    file: str
    kind: str
    rank_source: str
    host: str | None
    steps: int
    collectives: int


@dataclass(frozen=True, slots=True)
class CollectiveLate:
    """One collective occurrence matched on several ranks: who arrived last and by how much.

    ``lag_ms``: the last arrival minus the first (the longest any rank waited for it);
    ``behind_ms``: the last arrival minus the median of the other ranks' arrivals.
    """

    name: str
    seq: int
    step: int | None
    ranks: int
    last_rank: int
    last_host: str | None
    lag_ms: float
    behind_ms: float


@dataclass(frozen=True, slots=True)
class RankLateness:
    """One rank over the collectives it shared with others.

    ``late_ms``: the median over occurrences of its arrival minus the median of the other ranks'
    (positive: it tends to come after them); ``wait_ms``: the median of the last arrival minus its
    own (how long it waited inside the collective for the last rank); ``last``: how often it was last.
    """

    rank: int
    host: str | None
    occurrences: int
    last: int
    late_ms: float
    wait_ms: float


@dataclass(frozen=True, slots=True)
class HostLateness:
    """One host over the collectives that span several hosts (each host's arrival: the median of its ranks').

    ``lag_ms``: the median over those occurrences of its arrival minus the median of the other
    hosts' ranks; ``separation_ms``: the least, over them, of its first rank's arrival minus the
    other hosts' last (positive: every rank of it came after every other rank, every time);
    ``spread_ms``: the largest spread of its own ranks' arrivals in one occurrence; ``late``: how
    often its arrival was the last; ``setup_end_lag_ms``: the median end of its ranks' communicator
    setup minus the other hosts' (None when a file does not show it).
    """

    host: str
    ranks: tuple[int, ...]
    occurrences: int
    late: int
    lag_ms: float
    separation_ms: float
    spread_ms: float
    setup_end_lag_ms: float | None


@dataclass(frozen=True, slots=True)
class CollectiveStats:
    """Collective arrivals across ranks.

    ``occurrences`` were matched on two ranks or more (``unmatched``: seen on one rank only);
    ``names`` counts them per collective. ``late_host`` is the host whose ranks arrive after the
    others' by more than :data:`~my_utils.distributed.stragglers.timings.HOST_FACTOR` times the
    spread inside any host; ``late_rank`` the rank that is last when hosts do not explain it.
    ``persistent`` is True when that lateness held on enough occurrences to rule out chance
    (``sign_test_p``, against being last by chance: 1 / hosts or 1 / ranks); with one occurrence
    it is one observation, and ``persistent`` is False.
    """

    occurrences: int
    unmatched: int
    names: dict[str, int]
    hosts_known: bool
    worst: list[CollectiveLate]
    per_rank: list[RankLateness]
    per_host: list[HostLateness]
    late_host: str | None
    late_rank: int | None
    late_count: int
    sign_test_p: float
    persistent: bool


@dataclass(frozen=True, slots=True)
class TimingsReport:
    """Steps and collective arrivals of ranks read from profiler files, and what could not be measured.

    ``steps`` is the per-step straggler analysis of ``myutils stragglers`` over the ranks' step
    times (section ``step_source``), None with ``steps_note`` saying why; ``collectives`` likewise.
    """

    inputs: list[str]
    ranks: list[RankSource]
    clocks: list[str]
    step_source: str
    steps: SectionStats | None
    steps_note: str
    collectives: CollectiveStats | None
    collectives_note: str
    notes: list[str]
    persistent_fraction: float
    min_slowdown: float
    min_excess_ms: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``schema_version`` first)."""
        return {"schema_version": SCHEMA_VERSION, "source": "rank timings", **asdict(self)}
