"""NCCL collectives per rank and across ranks: time, bus bandwidth, and which rank arrives last.

A *participant* is one (export, process, device) that ran NCCL kernels: one per rank when
each rank wrote its own export, several when one export holds a whole node. Participants
are numbered by (export rank, device). The k-th kernel of a collective (``AllReduce``...)
on each participant is taken to be the same collective: true when every rank issues the
same sequence on one communicator, the common case; runs with several communicators per
rank should compare within one collective kind only.

Across ranks, on the UTC epoch (each export's clock anchor, so hosts' clock errors stay in
the figures: ``clock_note`` says so): *arrival* is the kernel start; the rank that arrives
last holds the others, whose kernels spin until it comes (``wait_ns`` = last arrival − own
arrival); *skew* = last arrival − first arrival; the collective's own time is ``max end −
last arrival``, from which the bus bandwidth follows (:func:`.nccl_ops.bus_bandwidth`) when
the message size is known: read per kernel from NCCL's own NVTX payloads where the export kept
them (:mod:`.nccl_sizes`), else ``message_bytes`` (NCCL's per-rank size, given by the caller,
said as such); otherwise each collective says why its size is not recorded. ``size_rows``
(``nsys_nccl_sizes``): per rank, collective and message size, the Kineto collectives table's
figures — count, time, algbw and busbw over the summed time (NCCL-tests' definitions, the same
``bus_factor``), the GPU's per-direction NVLink figure (``kineto.peaks``) and the share of it.

Memory: each participant's collectives are streamed from SQLite in (collective, sequence)
order and merged; only aggregates and the ``keep`` worst skews stay in memory.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from my_utils.profiling.model.tool_facts import Evidence, NsysFact, not_measured
from my_utils.profiling.nsys.hosts import export_host
from my_utils.profiling.nsys.nccl_hosts import HostArrival, HostTally, host_straggler
from my_utils.profiling.nsys.nccl_ops import bus_bandwidth
from my_utils.profiling.nsys.nccl_sizes import REASONS, SizeRow, SizeTally, kernel_sizes
from my_utils.profiling.nsys.schema import NsysExport

CLOCK_NOTE = ("arrival times of ranks on different hosts rely on each host's clock (nsys anchors every export "
              "to UTC); differences below the hosts' clock-sync error are not meaningful")


@dataclass(frozen=True)
class Participant:
    """One (export, process, device) that ran NCCL kernels, and the rank it stands for."""

    rank: int
    export_rank: int | None
    label: str
    pid: int | None
    device: int | None
    epoch_offset_ns: int | None
    host: str | None = None  # the host the export was captured on (``hosts.export_host``), None: not recorded


@dataclass(frozen=True)
class CollectiveAcross:
    """One collective seen on every participant that ran it."""

    collective: str
    seq: int
    ranks: int
    first_rank: int
    last_rank: int
    skew_ns: int
    duration_ns: int  # max end - last arrival
    waits_ns: tuple[tuple[int, int], ...]  # (rank, last arrival - own arrival)
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    message_bytes: int | None = None  # NCCL's per-rank size (the largest when ranks differ), None: not recorded
    size_source: str = ""  # "NCCL NVTX payload", "--nccl-bytes (given)", or why the size is not recorded


@dataclass(frozen=True)
class RankCollectiveStats:
    """One participant's collectives of one kind: count, kernel time, time spent waiting for the last rank."""

    rank: int
    collective: str
    count: int
    total_ns: int
    max_ns: int
    wait_ns: int
    last_arrivals: int  # how often this rank was the last to arrive
    busbw_gbps_mean: float | None
    sized: int = 0  # kernels whose message size is known
    size_note: str = ""  # why the others' size is not recorded


@dataclass(frozen=True)
class NcclAnalysis:
    """Per-rank and across-rank collective figures of a run."""

    participants: tuple[Participant, ...]
    per_rank: tuple[RankCollectiveStats, ...]
    worst_skew: tuple[CollectiveAcross, ...]
    collectives: int
    aligned: bool  # False when an export has no clock anchor (cross-rank timing not measured)
    message_bytes: int | None
    clock_note: str = CLOCK_NOTE
    unmatched: dict[str, int] = field(default_factory=dict)  # collective -> instances seen on fewer ranks
    sizes: tuple[SizeRow, ...] = ()  # per rank, collective and message size (``nsys_nccl_sizes``)
    hosts: tuple[HostArrival, ...] = ()  # per host, at the collectives spanning several hosts (``nsys_nccl_hosts``)

    @property
    def host_count(self) -> int | None:
        """Distinct hosts among the participants (None when an export does not name its host)."""
        if any(p.host is None for p in self.participants):
            return None
        return len({p.host for p in self.participants})

    def facts(self) -> list[NsysFact]:
        """Facts: per collective kind, the rank that most often arrives last, its skew, and bus bandwidth."""
        return nccl_facts(self)


def participants(dbs: Sequence[NsysExport]) -> list[tuple[Participant, NsysExport]]:
    """Every (export, process, device) with NCCL kernels, numbered as ranks (see the module doc)."""
    found = []
    hosts = {id(db): export_host(db)[0] for db in dbs}
    for order, db in enumerate(dbs):
        db.ensure_views()
        for pid, device in db.query("SELECT DISTINCT pid, device FROM nsys_kernel WHERE kind = 'communication' "
                                    "ORDER BY device, pid", place="NCCL kernels"):
            found.append((db.rank if db.rank is not None else order, device, pid, db))
    single = len(found) == len({id(x[3]) for x in found})  # one participant per export: the export's rank
    out = []
    for i, (export_rank, device, pid, db) in enumerate(sorted(found, key=lambda x: (x[0], x[1] or 0))):
        rank = export_rank if single else i
        out.append((Participant(rank, db.rank, db.label, pid, device, db.epoch_offset_ns, hosts[id(db)]), db))
    return out


Row = tuple[str, int, int, int, int, int | None, str]
PAYLOAD = "NCCL NVTX payload"
GIVEN = "--nccl-bytes (given)"


def _stream(p: Participant, db: NsysExport, given: int | None, reason: str | None) -> Iterator[Row]:
    """(collective, seq, rank, start, end, bytes, size source) of one participant in (collective, seq) order, on the
    UTC epoch when anchored; ``bytes`` from NCCL's payloads, else ``given``, else None with the reason."""
    sql = ("SELECT COALESCE(k.collective, 'unknown') AS coll, "
           "ROW_NUMBER() OVER (PARTITION BY k.collective ORDER BY k.start, k.end) AS seq, "
           "k.start + COALESCE((SELECT epoch_offset_ns FROM nsys_export), 0), "
           "k.end + COALESCE((SELECT epoch_offset_ns FROM nsys_export), 0), z.bytes, z.note "
           "FROM nsys_kernel k LEFT JOIN temp.nsys_nccl_size z ON z.pid IS k.pid AND z.device IS k.device "
           "AND z.start = k.start AND z.end = k.end "
           "WHERE k.kind = 'communication' AND k.pid IS ? AND k.device IS ? ORDER BY coll, seq")
    for coll, seq, start, end, size, note in db.iterate(sql, (p.pid, p.device), place="NCCL collectives"):
        if size is not None:
            yield coll, seq, p.rank, start, end, int(size), PAYLOAD
        elif given is not None:
            yield coll, seq, p.rank, start, end, given, GIVEN
        else:
            yield coll, seq, p.rank, start, end, None, note or REASONS[reason or "no_call"]



def _across_size(rows: list[Row]) -> tuple[int | None, str]:
    """One collective's size from its ranks' (the largest when they differ, said), or why it is not recorded."""
    sizes = [r[5] for r in rows if r[5] is not None]
    if len(sizes) < len(rows):
        return None, next(r[6] for r in rows if r[5] is None)
    sources = sorted({r[6] for r in rows})
    source = " and ".join(sources)
    if len(set(sizes)) > 1:
        source += f" (ranks differ: {min(sizes)}..{max(sizes)} B, the largest used)"
    return max(sizes), source


def analyze_collectives(dbs: Sequence[NsysExport], *, message_bytes: int | None = None,
                        keep: int = 20, init_end: Mapping[tuple[str, int | None], int] | None = None
                        ) -> NcclAnalysis | None:
    """Collectives of every participant, merged across ranks; None when no export has NCCL kernels.

    ``init_end`` maps (export label, pid) to the end of that process's communicator initialisation on the UTC
    epoch (``nsys_setup``), so a late host can be explained by its setup."""
    parts = participants(dbs)
    if not parts:
        return None
    aligned = all(p.epoch_offset_ns is not None for p, _ in parts) or len({id(db) for _, db in parts}) == 1
    n_all = len(parts)
    reasons = {id(db): kernel_sizes(db) for db in {id(db): db for _, db in parts}.values()}
    streams = [_stream(p, db, message_bytes, reasons[id(db)]) for p, db in parts]
    tally = SizeTally({p.rank: db for p, db in parts}, {p.rank: p.device for p, _ in parts})
    sized: dict[tuple[int, str], int] = defaultdict(int)
    notes: dict[tuple[int, str], str] = {}
    merged = heapq.merge(*streams, key=lambda r: (r[0], r[1]))
    count: dict[tuple[int, str], int] = defaultdict(int)
    total: dict[tuple[int, str], int] = defaultdict(int)
    longest: dict[tuple[int, str], int] = defaultdict(int)
    waits: dict[tuple[int, str], int] = defaultdict(int)
    lasts: dict[tuple[int, str], int] = defaultdict(int)
    bw_sum: dict[tuple[int, str], float] = defaultdict(float)
    bw_n: dict[tuple[int, str], int] = defaultdict(int)
    unmatched: dict[str, int] = defaultdict(int)
    ends = {p.rank: t for p, _ in parts if (t := (init_end or {}).get((p.label, p.pid))) is not None}
    hosts = HostTally({p.rank: p.host for p, _ in parts}, ends)
    worst: list[tuple[int, int, CollectiveAcross]] = []
    n_coll = 0
    for (coll, seq), group in itertools.groupby(merged, key=lambda r: (r[0], r[1])):
        rows = list(group)  # one row per participant: bounded by the number of ranks
        for _, _, rank, s, e, size, source in rows:
            count[(rank, coll)] += 1
            total[(rank, coll)] += e - s
            longest[(rank, coll)] = max(longest[(rank, coll)], e - s)
            tally.add(rank, coll, size, source, e - s)
            if size is not None:
                sized[(rank, coll)] += 1
            else:
                notes.setdefault((rank, coll), source)
        if len(rows) < n_all:
            unmatched[coll] += 1
        if not aligned or len(rows) < 2:
            continue
        n_coll += 1
        last = max(rows, key=lambda r: (r[3], r[2]))
        first = min(rows, key=lambda r: (r[3], r[2]))
        end = max(r[4] for r in rows)
        size, source = _across_size(rows)
        across = CollectiveAcross(coll, seq, len(rows), first[2], last[2], last[3] - first[3], end - last[3],
                                  tuple((r[2], last[3] - r[3]) for r in rows), message_bytes=size, size_source=source)
        if size is not None:
            bw = bus_bandwidth(coll, size, across.duration_ns, len(rows))
            if bw is not None:
                across = dataclasses.replace(across, algbw_gbps=bw[0], busbw_gbps=bw[1])
        lasts[(last[2], coll)] += 1
        hosts.add([(r[2], r[3]) for r in rows])
        for rank, wait in across.waits_ns:
            waits[(rank, coll)] += wait
        for _, _, rank, s, e, nbytes, _src in rows:
            bw = bus_bandwidth(coll, nbytes, e - s, len(rows)) if nbytes is not None else None
            if bw is not None:
                bw_sum[(rank, coll)] += bw[1]
                bw_n[(rank, coll)] += 1
        item = (across.skew_ns, -n_coll, across)
        if len(worst) < keep:
            heapq.heappush(worst, item)
        else:
            heapq.heappushpop(worst, item)
    per_rank = tuple(RankCollectiveStats(rank, coll, count[(rank, coll)], total[(rank, coll)], longest[(rank, coll)],
                                         waits[(rank, coll)], lasts[(rank, coll)],
                                         bw_sum[(rank, coll)] / bw_n[(rank, coll)] if bw_n[(rank, coll)] else None,
                                         sized[(rank, coll)], notes.get((rank, coll), ""))
                     for rank, coll in sorted(count))
    ran = {coll: sum(1 for _r, c in count if c == coll) for _, coll in count}
    # a cross-host clock caveat only where ranks may be on different hosts
    known = {p.host for p, _ in parts}
    note = CLOCK_NOTE if len(known - {None}) > 1 or (None in known and len({id(db) for _, db in parts}) > 1) else ""
    return NcclAnalysis(tuple(p for p, _ in parts), per_rank,
                        tuple(x[2] for x in sorted(worst, key=lambda x: (-x[0], -x[1]))), n_coll, aligned,
                        message_bytes, clock_note=note, unmatched=dict(unmatched), sizes=tally.rows(ran),
                        hosts=hosts.result())


def nccl_facts(a: NcclAnalysis) -> list[NsysFact]:
    """The NCCL facts of a run (see :meth:`NcclAnalysis.facts`)."""
    ranks = tuple(p.rank for p in a.participants)
    out: list[NsysFact] = []
    kinds = sorted({s.collective for s in a.per_rank})
    for coll in kinds:
        rows = [s for s in a.per_rank if s.collective == coll]
        if not a.aligned:
            out.append(not_measured(f"nsys.nccl_last_rank:{coll}", f"Rank arriving last at {coll}",
                                    "an export has no UTC clock anchor: ranks cannot be lined up", ranks=ranks))
            continue
        worst = max(rows, key=lambda s: (s.last_arrivals, s.wait_ns == 0, -s.rank))
        n = sum(s.last_arrivals for s in rows)
        out.append(NsysFact(
            f"nsys.nccl_last_rank:{coll}", f"Rank arriving last at {coll}", worst.rank, "",
            denominator=f"{coll} collectives matched on every rank", denominator_value=float(n),
            denominator_unit="count", ranks=ranks, aggregate="across ranks, on the UTC epoch", steps=None,
            detail=f"last at {worst.last_arrivals} of {n}" + (f"; {a.clock_note}" if a.clock_note else ""),
            evidence=tuple(Evidence("nsys_nccl_ranks", {"rank": s.rank, "collective": coll},
                                    {"last_arrivals": s.last_arrivals, "wait_ns": s.wait_ns}) for s in rows)))
        waited = sum(s.wait_ns for s in rows)
        kernel = sum(s.total_ns for s in rows)
        out.append(NsysFact(
            f"nsys.nccl_wait:{coll}", f"Time NCCL kernels spent waiting for the last rank ({coll})",
            100.0 * waited / kernel if kernel else None, "%", denominator=f"{coll} kernel time summed over ranks",
            denominator_value=kernel / 1e6, denominator_unit="ms", ranks=ranks, aggregate="sum over ranks",
            detail=a.clock_note,
            evidence=tuple(Evidence("nsys_nccl_ranks", {"rank": s.rank, "collective": coll},
                                    {"wait_ns": s.wait_ns, "total_ns": s.total_ns}) for s in rows)))
        out.append(_busbw_fact(a, coll, rows, ranks))
    out.append(host_fact(a))
    return out


def host_fact(a: NcclAnalysis) -> NsysFact:
    """``stragglers.host``: the late host's mean lag when arrivals group by host (``nccl_hosts``), else why not."""
    ranks = tuple(p.rank for p in a.participants)
    label = "host arriving late at collectives"
    if not a.aligned:
        return not_measured("stragglers.host", label, "an export has no UTC clock anchor: ranks cannot be lined up",
                            unit="ms", ranks=ranks)
    if a.host_count is None:
        return not_measured("stragglers.host", label, "an export does not name its host", unit="ms", ranks=ranks)
    if a.host_count < 2:
        return not_measured("stragglers.host", label, "every rank ran on one host", unit="ms", ranks=ranks)
    late = host_straggler(a.hosts)
    spreads = "; ".join(f"{h.host} (rank{'s' if len(h.ranks) > 1 else ''} {', '.join(map(str, h.ranks))}): spread "
                        f"{h.spread_max_ns / 1e6:,.2f} ms, last at {h.late} of {h.collectives}" for h in a.hosts)
    ev = tuple(Evidence("nsys_nccl_hosts", {"host": h.host}, {"late": h.late, "lag_ns": h.lag_ns,
                                                              "separation_min_ns": h.separation_min_ns,
                                                              "spread_max_ns": h.spread_max_ns}) for h in a.hosts)
    if late is None:
        return not_measured("stragglers.host", label, f"arrivals do not group by host ({spreads})", unit="ms",
                            ranks=ranks)
    others = [h for h in a.hosts if h is not late]
    sep = (f"{(late.separation_min_ns or 0) / 1e6:,.1f}–{(late.separation_max_ns or 0) / 1e6:,.1f} ms"
           if late.separation_min_ns != late.separation_max_ns else f"{(late.separation_min_ns or 0) / 1e6:,.1f} ms")
    detail = (f"every rank of {late.host} arrives {sep} after every rank of "
              f"{', '.join(h.host for h in others)} in {late.late} of {late.collectives} collective(s); spread inside a "
              f"host at most {max(h.spread_max_ns for h in a.hosts) / 1e6:,.2f} ms ({spreads})")
    ends = [h.init_end_ns for h in others if h.init_end_ns is not None]
    if late.init_end_ns is not None and ends:
        gap = (late.init_end_ns - max(ends)) / 1e6
        if gap > 0:
            detail += f"; its communicator initialisation (ncclCommInit*) ended {gap:,.1f} ms later"
    detail += f"; {a.clock_note}" if a.clock_note else ""
    return NsysFact("stragglers.host", f"host {late.host} arrives late at collectives", late.mean_lag_ns / 1e6, "ms",
                    denominator="the other hosts' ranks' median arrival", ranks=late.ranks,
                    aggregate=f"median arrival of each host's ranks, mean over the {late.late} collective(s) it was last "
                              "at", detail=detail, evidence=ev)


def _busbw_fact(a: NcclAnalysis, coll: str, rows: list[RankCollectiveStats], ranks: tuple[int, ...]) -> NsysFact:
    """Mean bus bandwidth of ``coll`` over the ranks, with where the sizes came from and the link it compares with."""
    fid, label = f"nsys.nccl_busbw:{coll}", f"Bus bandwidth of {coll} (NCCL-tests definition)"
    bws = [s.busbw_gbps_mean for s in rows if s.busbw_gbps_mean is not None]
    if not bws:
        note = next((s.size_note for s in rows if s.size_note), "")
        why = (f"{note}; or give --nccl-bytes (NCCL's per-rank message size)" if note
               else "one rank ran it: the group size is unknown")
        return not_measured(fid, f"Bus bandwidth of {coll}", why, unit="GB/s", ranks=ranks)
    sized = [r for r in a.sizes if r.collective == coll and r.message_bytes is not None]
    sources = sorted({r.size_source for r in sized})
    links = sorted({r.link for r in sized})
    unsized = sum(s.count - s.sized for s in rows)
    return NsysFact(
        fid, label, sum(bws) / len(bws), "GB/s", ranks=ranks, aggregate="mean over ranks of each rank's mean",
        detail=(f"sizes from {' and '.join(sources)}: " + ", ".join(sorted({f'{r.message_bytes:,} B' for r in sized}))
                + " per rank; kernel durations" + (f"; {unsized} kernel(s) without a size left out" if unsized else "")
                + "; link: " + "; ".join(links)),
        evidence=tuple(Evidence("nsys_nccl_ranks", {"rank": s.rank, "collective": coll},
                                {"busbw_gbps_mean": s.busbw_gbps_mean, "sized": s.sized}) for s in rows))
