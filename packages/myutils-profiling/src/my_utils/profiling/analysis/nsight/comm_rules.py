"""The communication findings of Nsight Systems exports: exposed NCCL time, and ranks or hosts waiting at collectives.

``nsys:comm_exposed``
    communication at least :data:`MIN_COMM_SHARE` % of busy time, and less than :data:`MAX_OVERLAP` %
    of it under computation or its exposed part at least :data:`MIN_EXPOSED` % of the span; never
    on a device that ran no computation kernel (nothing to overlap with).
``nsys:host_skew``
    the ranks of one host arrive together and later than the others (``stragglers.host``): the
    straggler is the host, and the advice is about that host.
``nsys:rank_skew:<collective>``
    otherwise, NCCL kernels spend at least :data:`MIN_WAIT` % of their time waiting for the last rank.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.advice import COMM_ADVICE
from my_utils.profiling.analysis.nsight.advice import NSIGHT_ADVICE, advice_entry
from my_utils.profiling.analysis.nsight.rule_base import (
    MS,
    Clock,
    mean_span,
    one,
    rank_device,
    scopes,
    span_label,
    span_ms,
    where,
)
from my_utils.profiling.model.report import Fact

MIN_COMM_SHARE = 10.0  # % of busy time
MAX_OVERLAP = 30.0  # % of communication time
MIN_EXPOSED = 10.0  # % of the span
MIN_WAIT = 20.0  # % of NCCL kernel time
#: What to look at when a whole host arrives late (the rank advice, uneven data on one rank, does not apply).
HOST_SKEW_ADVICE = ("every rank of host {host} arrives late, together: look at that host rather than one rank — what "
                    "it ran before the collective (its setup, e.g. communicator initialisation, finished later), its "
                    "load, CPU binding, network and file system; compare the hosts' clocks before trusting a lag "
                    "under a millisecond")

def _shared_streams(tables: Mapping[str, Sequence[Mapping[str, Any]]], rank: Any, device: Any) -> list[Any]:
    """Streams where NCCL kernels run beside other work (ops on the stream beyond its NCCL kernels)."""
    nccl: dict[Any, int] = defaultdict(int)
    for r in tables.get("nsys_nccl_kernels") or []:
        if r.get("rank") == rank and r.get("device") == device:
            nccl[r.get("stream")] += int(r.get("count") or 0)
    return sorted((r.get("stream") for r in tables.get("nsys_busy_stream") or []
                   if r.get("rank") == rank and r.get("device") == device and r.get("stream") in nccl
                   and int(r.get("ops") or 0) > nccl[r.get("stream")]), key=str)


def comm_exposed(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
                  clock: Clock) -> list[dict[str, Any]]:
    per = []
    for scope, overlap in scopes(facts, "nsys.comm_overlap").items():
        exposed, busy = facts.get(f"nsys.comm_exposed:{scope}"), facts.get(f"nsys.gpu_busy:{scope}")
        if overlap.number is None or exposed is None or exposed.number is None or busy is None or not busy.number:
            continue
        span = span_ms(busy)
        busy_ms = span * busy.number / 100.0
        comm_ms = overlap.denominator_value or 0.0
        share = 100.0 * comm_ms / busy_ms if busy_ms else 0.0
        exposed_pct = 100.0 * exposed.number / span if span else 0.0
        if share < MIN_COMM_SHARE or (overlap.number >= MAX_OVERLAP and exposed_pct < MIN_EXPOSED):
            continue
        if not any(float(e.values.get("computation_ns") or 0) > 0 for e in overlap.evidence):
            continue  # no computation kernel on the device: nothing to overlap the communication with
        rank, device = rank_device(overlap)
        shared = _shared_streams(tables, rank, device)
        text = COMM_ADVICE["no_overlap_shared_stream" if shared else "no_overlap_own_stream"].format(
            overlap=overlap.number)
        per.append({
            "id": f"nsys:comm_exposed:{scope}", "category": "optimization",
            "severity": "critical" if exposed_pct >= 20.0 else "warning",
            "title": f"communication is {overlap.number:.0f}% overlapped with compute on {where(rank, device)}: "
                     f"{comm_ms:,.1f} ms of NCCL, {exposed.number:,.1f} ms exposed",
            "detail": f"communication kernels cover {share:.1f}% of the GPU's busy time ({comm_ms:,.1f} ms of "
                      f"{busy_ms:,.1f} ms); {exposed.number:,.1f} ms ({exposed_pct:.1f}% of the {span:,.1f} ms span) "
                      "run with no computation kernel beside them"
                      + (f"; NCCL shares stream(s) {', '.join(map(str, shared))} with other work" if shared else ""),
            "evidence": {"names": ["gpu.comm_time"], "ranks": [rank], "where": where(rank, device),
                         "communication_ms": comm_ms, "overlap_pct": overlap.number, "exposed_ms": exposed.number,
                         "share_of_busy_pct": share, "shared_streams": shared, "table": "nsys_overlap", "steps": []},
            "suggestion": text,
            "facts": [overlap.id, exposed.id],
            "impact": clock.impact(exposed.number, span, "the exposed communication time: what full overlap would hide"),
            "advice": [advice_entry(text, "communication:no_overlap", overlap, exposed)],
        })
    return one(per, "nsys:comm_exposed")


def rank_skew(facts: Mapping[str, Fact], clock: Clock) -> list[dict[str, Any]]:
    """Ranks waiting at collectives: for a late host when arrivals group by host (``stragglers.host``), else for the
    rank arriving last."""
    host = facts.get("stragglers.host")
    if host is not None and host.number is not None:
        return _host_skew(facts, host, clock)
    out = []
    for coll, wait in scopes(facts, "nsys.nccl_wait").items():
        last = facts.get(f"nsys.nccl_last_rank:{coll}")
        if wait.number is None or wait.number < MIN_WAIT or last is None or last.number is None:
            continue
        ranks = [r for r in wait.ranks]
        waited = sum(float(e.values.get("wait_ns") or 0) for e in wait.evidence) / MS
        rank = int(last.number)
        per_rank = waited / max(len(ranks), 1)
        text = NSIGHT_ADVICE["rank_skew"].format(rank=rank, collective=coll)
        span = mean_span(facts)
        out.append({
            "id": f"nsys:rank_skew:{coll}", "category": "imbalance",
            "severity": "critical" if wait.number >= 50.0 else "warning",
            "title": f"ranks wait for rank {rank} at {coll}: {wait.number:.0f}% of NCCL kernel time is spent waiting "
                     "for the last rank to arrive",
            "detail": f"rank {rank} arrives {last.detail}; {waited:,.1f} ms of waiting summed over ranks "
                      f"{', '.join(map(str, ranks))} ({wait.denominator_value or 0:,.1f} ms of {coll} kernels)",
            "evidence": {"names": [f"nccl:{coll}"], "ranks": ranks, "last_rank": rank, "wait_pct": wait.number,
                         "wait_ms": waited, "table": "nsys_nccl_ranks", "steps": []},
            "suggestion": text,
            "facts": [wait.id, last.id],
            "impact": clock.impact(per_rank, span, "the mean time a rank's NCCL kernels waited for the last rank",
                                   span_label=span_label(facts)),
            "advice": [advice_entry(text, "imbalance:rank_skew", wait, last)],
        })
    return out


def _host_skew(facts: Mapping[str, Fact], host: Fact, clock: Clock) -> list[dict[str, Any]]:
    """One finding for a late host: its ranks arrive together, the other hosts' ranks wait for all of them."""
    waits = list(scopes(facts, "nsys.nccl_wait").values())
    late = {r for r in host.ranks if r is not None}
    ranks = sorted({r for w in waits for r in w.ranks if r is not None}, key=lambda r: r)
    waiting = [r for r in ranks if r not in late]
    waited = sum(float(e.values.get("wait_ns") or 0) for w in waits for e in w.evidence
                 if e.key.get("rank") in waiting) / MS
    name = host.label.removeprefix("host ").removesuffix(" arrives late at collectives")
    text = HOST_SKEW_ADVICE.format(host=name)
    colls = ", ".join(sorted(scopes(facts, "nsys.nccl_wait")))
    return [{
        "id": "nsys:host_skew", "category": "imbalance", "severity": "warning",
        "title": f"ranks {', '.join(map(str, waiting))} wait {host.number:,.1f} ms for host {name} at {colls}: its "
                 f"ranks {', '.join(str(r) for r in sorted(late))} arrive together, after the other host(s)",
        "detail": f"{host.detail}; {waited:,.1f} ms of waiting summed over ranks {', '.join(map(str, waiting))}. The "
                  "straggler is the host, not one rank of it",
        "evidence": {"names": [f"nccl:{c}" for c in sorted(scopes(facts, "nsys.nccl_wait"))], "ranks": sorted(late),
                     "host": name, "lag_ms": host.number, "wait_ms": waited, "table": "nsys_nccl_hosts", "steps": []},
        "suggestion": text,
        "facts": [host.id],
        "impact": clock.impact(waited / max(len(waiting), 1), mean_span(facts),
                               "the mean time a waiting rank's NCCL kernels waited for the late host",
                               span_label=span_label(facts)),
        "advice": [advice_entry(text, "imbalance:host_skew", host)],
    }]


