"""Who is slow, from profiler files: per-rank step times and collective arrivals of Kineto traces and nsys exports.

The files are read by whichever distribution registered a reader in core's rank-timings seam
(``my_utils.core.rank_timings``; myutils-profiling does), never imported from here. Two analyses:

- **Steps**: each rank's step times (``ProfilerStep#N``, NVTX iteration ranges) go through the
  same per-step statistics as the MyTimer sections (``analysis.SectionCounts``: medians of
  per-step ratios against the other ranks, late steps, sign test, outliers). Setup
  (communicator initialisation) is no step: readers give only repeated step ranges.
- **Collective arrivals**: an occurrence (same collective and sequence number) seen on two ranks
  or more: the last rank to arrive holds the others inside the collective. When every rank's host
  is known and there are several, hosts come first: a host whose ranks all arrive after every rank
  of the others, by at least :data:`HOST_FACTOR` times the spread inside any host, is late, and
  no single rank of it is named (its ranks arrive together: the cause is the host). Otherwise the
  rank last most often is named when it stands out. Either is *persistent* only when it held on
  :data:`~my_utils.core.rank_waits.MIN_STEPS` occurrences or more, in the persistent fraction of
  them, more often than chance (last of k by chance: 1/k; a one-sided binomial test at
  ``SIGN_ALPHA``); with fewer it is reported as what was seen, persistence not measured.

Clocks: ranks on different hosts are compared on the files' own clocks (nsys anchors each export
to UTC; Kineto traces carry their host's clock), so cross-host lags carry the hosts' clock error.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence

from my_utils.core.rank_timings import KINETO_TRACE, NSYS_EXPORT, RankTimings
from my_utils.core.rank_waits import MIN_STEPS
from my_utils.distributed.stragglers.analysis import SIGN_ALPHA, SectionCounts
from my_utils.distributed.stragglers.model import SectionStats
from my_utils.distributed.stragglers.robust import sign_test_p
from my_utils.distributed.stragglers.timings_model import (
    CollectiveLate,
    CollectiveStats,
    HostLateness,
    RankLateness,
    RankSource,
    TimingsReport,
)

__all__ = ["HOST_FACTOR", "MIN_LAG_MS", "analyze_rank_timings"]

#: A late host's ranks all come after every other rank by at least this many times the largest spread inside a host.
HOST_FACTOR = 3.0
#: Below this lateness (ms), clocks and launch jitter cannot tell ranks or hosts apart.
MIN_LAG_MS = 0.1
#: Occurrences kept in ``CollectiveStats.worst`` (the largest lags).
MAX_WORST = 50

_STEP_NAMES = {KINETO_TRACE: "ProfilerStep#N", NSYS_EXPORT: "NVTX iteration range"}


def analyze_rank_timings(timings: Sequence[RankTimings], inputs: Sequence[str], *, persistent_fraction: float = 0.5,
                         min_slowdown: float = 1.2, min_excess_ms: float = 20.0) -> TimingsReport:
    """Steps and collective arrivals across ``timings`` (one per rank; module docstring)."""
    ranks = sorted(timings, key=lambda t: t.rank)
    kinds = sorted({t.kind for t in ranks if t.steps})
    step_source = " and ".join(_STEP_NAMES.get(k, k) for k in kinds) or "step"
    steps, steps_note = _steps(ranks, step_source, persistent_fraction, min_slowdown, min_excess_ms)
    collectives, collectives_note = _collectives(ranks, persistent_fraction)
    said: dict[str, list[int]] = defaultdict(list)  # one line per note, naming its ranks (a note repeats per file)
    for t in ranks:
        for note in t.notes:
            said[note].append(t.rank)
    notes = [f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {note}" for note, rs in said.items()]
    return TimingsReport(
        inputs=list(inputs),
        ranks=[RankSource(t.rank, t.source, t.kind, t.rank_source, t.host, len(t.steps), len(t.collectives))
               for t in ranks],
        clocks=sorted({t.clock for t in ranks if t.clock}),
        step_source=step_source, steps=steps, steps_note=steps_note,
        collectives=collectives, collectives_note=collectives_note, notes=notes,
        persistent_fraction=persistent_fraction, min_slowdown=min_slowdown, min_excess_ms=min_excess_ms)


def _steps(ranks: Sequence[RankTimings], name: str, fraction: float, min_slowdown: float, min_excess_ms: float
           ) -> tuple[SectionStats | None, str]:
    with_steps = [t for t in ranks if t.steps]
    if not with_steps:
        return None, ("not measured: no file holds step ranges (ProfilerStep#N in a Kineto trace, a repeated NVTX "
                      "iteration range such as train_step in an nsys export)")
    if len(with_steps) < 2:
        return None, f"not compared: only rank {with_steps[0].rank} has step ranges"
    by_step: dict[int, dict[int, list[float]]] = defaultdict(dict)
    for t in with_steps:
        for s in t.steps:
            entry = by_step[s.step].get(t.rank)
            if entry is None:
                by_step[s.step][t.rank] = [s.ms, s.start_us / 1e6]
            else:  # the same step index twice in one file (a restarted profiler): their sum, the first start
                entry[0] += s.ms
                entry[1] = min(entry[1], s.start_us / 1e6)
    counts = SectionCounts(min_slowdown, min_excess_ms)
    for step in sorted(by_step):
        counts.add(step, by_step[step])
    stats = counts.stats(name, fraction, counts.median_ms())
    note = ""
    if stats.steps < MIN_STEPS:
        note = (f"{stats.steps} step(s) compared across ranks: fewer than {MIN_STEPS}, so no persistent straggler "
                "can be named from steps")
    return stats, note


def _median_without(values: dict[int, float], rank: int) -> float:
    return statistics.median(v for r, v in values.items() if r != rank)


def _collectives(ranks: Sequence[RankTimings], fraction: float) -> tuple[CollectiveStats | None, str]:
    seen: dict[tuple[str, int], dict[int, tuple[float, int | None]]] = defaultdict(dict)
    for t in ranks:
        for c in t.collectives:
            seen[(c.name, c.seq)].setdefault(t.rank, (c.arrival_us, c.step))
    if not seen:
        return None, "not measured: no collective (NCCL kernel) in any file"
    shared = {k: v for k, v in seen.items() if len(v) >= 2}
    unmatched = len(seen) - len(shared)
    if not shared:
        return None, (f"not compared: {unmatched} collective occurrence(s), each seen on one rank only (the files "
                      "hold different collectives, or one rank each)")
    host_of = {t.rank: t.host for t in ranks}
    setup_end = {t.rank: t.setup_end_us for t in ranks}
    hosts_known = all(host_of[r] is not None for k in shared for r in shared[k])
    late: dict[int, list[float]] = defaultdict(list)
    wait: dict[int, list[float]] = defaultdict(list)
    last_count: Counter[int] = Counter()
    names: Counter[str] = Counter()
    worst: list[CollectiveLate] = []
    occurrences: list[dict[int, float]] = []
    for (name, seq), by_rank in sorted(shared.items()):
        arrivals = {r: a for r, (a, _step) in by_rank.items()}
        occurrences.append(arrivals)
        names[name] += 1
        last = max(arrivals, key=lambda r: (arrivals[r], -r))
        last_count[last] += 1
        for r, a in arrivals.items():
            late[r].append((a - _median_without(arrivals, r)) / 1e3)
            wait[r].append((arrivals[last] - a) / 1e3)
        step = next((s for _a, s in by_rank.values() if s is not None), None)
        worst.append(CollectiveLate(name, seq, step, len(arrivals), last, host_of.get(last),
                                    (arrivals[last] - min(arrivals.values())) / 1e3,
                                    (arrivals[last] - _median_without(arrivals, last)) / 1e3))
    worst.sort(key=lambda c: (-c.lag_ms, c.name, c.seq))
    per_rank = [RankLateness(r, host_of.get(r), len(late[r]), last_count[r], statistics.median(late[r]),
                             statistics.median(wait[r])) for r in sorted(late)]
    per_host = _hosts(occurrences, host_of, setup_end) if hosts_known else []
    n = len(occurrences)
    late_host, late_rank, count, chance_p = None, None, 0, 1.0
    if per_host:
        spread = max(h.spread_ms for h in per_host)
        top = max(per_host, key=lambda h: (h.late, h.lag_ms, h.host))
        if top.lag_ms >= MIN_LAG_MS and top.separation_ms >= max(HOST_FACTOR * spread, MIN_LAG_MS):
            late_host, count = top.host, top.late
            chance_p = sign_test_p(top.late, top.occurrences, 1 / len(per_host))
    if late_host is None:
        top_rank = max(per_rank, key=lambda r: (r.last, r.late_ms, -r.rank))
        if top_rank.late_ms >= MIN_LAG_MS and (n < MIN_STEPS or top_rank.last >= fraction * n):
            late_rank, count = top_rank.rank, top_rank.last
            chance_p = sign_test_p(top_rank.last, n, 1 / len(per_rank))
    persistent = (late_host is not None or late_rank is not None) and n >= MIN_STEPS \
        and count >= fraction * n and chance_p <= SIGN_ALPHA
    if n >= MIN_STEPS and not persistent:
        late_host = late_rank = None  # enough occurrences to judge, and chance explains it: nobody is named
    note = "" if n >= MIN_STEPS else (
        f"{n} collective occurrence(s) matched across ranks: what is shown is {'one observation' if n == 1 else 'few observations'}; "
        f"whether a rank or host is late persistently needs {MIN_STEPS} or more")
    return CollectiveStats(n, unmatched, dict(names), hosts_known, worst[:MAX_WORST], per_rank, per_host,
                           late_host, late_rank, count, chance_p, persistent), note


def _hosts(occurrences: list[dict[int, float]], host_of: dict[int, str | None],
           setup_end: dict[int, float | None]) -> list[HostLateness]:
    """Per host, over the occurrences spanning two hosts or more (``HostLateness``)."""
    names = sorted({str(host_of[r]) for occ in occurrences for r in occ})
    if len(names) < 2:
        return []
    lag: dict[str, list[float]] = defaultdict(list)
    sep: dict[str, list[float]] = defaultdict(list)
    spread: dict[str, float] = defaultdict(float)
    late: Counter[str] = Counter()
    for occ in occurrences:
        by_host: dict[str, list[float]] = defaultdict(list)
        for r, a in occ.items():
            by_host[str(host_of[r])].append(a)
        if len(by_host) < 2:
            continue
        med = {h: statistics.median(v) for h, v in by_host.items()}
        late[max(med, key=lambda h: (med[h], h))] += 1
        for h, own in by_host.items():
            rest = [a for g, v in by_host.items() if g != h for a in v]
            lag[h].append((med[h] - statistics.median(rest)) / 1e3)
            sep[h].append((min(own) - max(rest)) / 1e3)
            spread[h] = max(spread[h], (max(own) - min(own)) / 1e3)
    out = []
    for h in names:
        if not lag[h]:
            continue
        mine = [r for r in host_of if host_of[r] == h]
        theirs = [r for r in host_of if host_of[r] is not None and host_of[r] != h]
        ends_own = [e for r in mine if (e := setup_end.get(r)) is not None]
        ends_rest = [e for r in theirs if (e := setup_end.get(r)) is not None]
        setup_lag = None
        if len(ends_own) == len(mine) and len(ends_rest) == len(theirs) and ends_rest:
            setup_lag = (statistics.median(ends_own) - statistics.median(ends_rest)) / 1e3
        out.append(HostLateness(h, tuple(sorted(mine)), len(lag[h]), late[h], statistics.median(lag[h]), min(sep[h]),
                                spread[h], setup_lag))
    return out
