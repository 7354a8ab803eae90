"""Stragglers by host before rank: collective arrivals grouped by the host each rank ran on.

For every collective matched on ranks of at least two hosts (``nccl.analyze_collectives``
feeds :class:`HostTally` one collective at a time), each host's arrival is the median of its
ranks' kernel starts; the host with the latest is *late* there. Its *lag* is that median minus
the median of the other hosts' ranks, its *separation* runs from its earliest rank minus the
other hosts' latest (positive: every rank of it came after every other rank) to its latest
rank minus their earliest, and each host's *spread* is the last minus the first of its own ranks.

A host is the straggler (:func:`host_straggler`) when it is late in most collectives, its
separation is positive in each of them and at least :data:`HOST_FACTOR` times the largest
spread inside any host: its ranks arrive together, and later than the others by far more than
ranks of one host differ. Then the story is the host (its node, its setup), not one rank of it.
Memory: a few numbers per host.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HOST_FACTOR = 3.0  # the late host's separation over the largest spread inside a host
MIN_SEPARATION_NS = 100_000  # below 0.1 ms, host clocks cannot tell hosts apart


@dataclass(frozen=True)
class HostArrival:
    """One host's ranks and how they arrived at the collectives that span several hosts."""

    host: str
    ranks: tuple[int, ...]
    collectives: int  # collectives matched on ranks of two hosts or more
    late: int  # how often this host arrived last (median of its ranks)
    lag_ns: int  # summed over those: own median arrival - the other hosts' ranks' median arrival
    separation_min_ns: int | None  # over those, the least of: own first rank - the other hosts' last rank
    separation_max_ns: int | None  # ... the most of: own last rank - the other hosts' first rank
    spread_max_ns: int  # the largest spread of its own ranks' arrivals, over every collective
    init_end_ns: int | None = None  # median end of its ranks' communicator init (UTC), when the exports hold it

    @property
    def mean_lag_ns(self) -> float:
        """The mean lag over the collectives it was late at (0 when never late)."""
        return self.lag_ns / self.late if self.late else 0.0


class HostTally:
    """Accumulates host arrivals one collective at a time (rows: (rank, arrival ns))."""

    def __init__(self, host_of: Mapping[int, str | None], init_end: Mapping[int, int] | None = None) -> None:
        self.host_of = dict(host_of)
        self.init_end = dict(init_end or {})
        self.collectives: dict[str, int] = defaultdict(int)
        self.late: dict[str, int] = defaultdict(int)
        self.lag: dict[str, int] = defaultdict(int)
        self.sep: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.spread: dict[str, int] = defaultdict(int)

    @property
    def hosts(self) -> list[str]:
        """The distinct known hosts, sorted."""
        return sorted({h for h in self.host_of.values() if h is not None})

    def add(self, arrivals: Sequence[tuple[int, int]]) -> None:
        """One collective's (rank, arrival) rows; ignored unless every rank's host is known and two hosts take part."""
        by_host: dict[str, list[int]] = defaultdict(list)
        for rank, t in arrivals:
            host = self.host_of.get(rank)
            if host is None:
                return
            by_host[host].append(t)
        if len(by_host) < 2:
            return
        medians = {h: statistics.median(ts) for h, ts in by_host.items()}
        late = max(medians, key=lambda h: (medians[h], h))
        others = [t for h, ts in by_host.items() if h != late for t in ts]
        for h, ts in by_host.items():
            self.collectives[h] += 1
            self.spread[h] = max(self.spread[h], max(ts) - min(ts))
        self.late[late] += 1
        self.lag[late] += int(medians[late] - statistics.median(others))
        # (its first rank after the others' last, its last rank after the others' first): how far apart, at least/most
        self.sep[late].append((min(by_host[late]) - max(others), max(by_host[late]) - min(others)))

    def result(self) -> tuple[HostArrival, ...]:
        """One row per host that took part in a multi-host collective, the latest on average first."""
        out = []
        for host in self.collectives:
            ranks = tuple(sorted(r for r, h in self.host_of.items() if h == host))
            ends = [self.init_end[r] for r in ranks if r in self.init_end]
            seps = self.sep.get(host) or []
            out.append(HostArrival(host, ranks, self.collectives[host], self.late[host], self.lag[host],
                                   min(a for a, _ in seps) if seps else None, max(b for _, b in seps) if seps else None,
                                   self.spread[host],
                                   int(statistics.median(ends)) if ends else None))
        return tuple(sorted(out, key=lambda a: (-a.late, -a.mean_lag_ns, a.host)))


def host_straggler(hosts: Sequence[HostArrival]) -> HostArrival | None:
    """The late host when arrivals group by host (module docstring), else None."""
    if len(hosts) < 2:
        return None
    late = hosts[0]
    if late.late * 2 <= late.collectives or late.separation_min_ns is None:
        return None
    spread = max(h.spread_max_ns for h in hosts)
    if late.separation_min_ns < MIN_SEPARATION_NS or late.separation_min_ns < HOST_FACTOR * spread:
        return None
    return late
