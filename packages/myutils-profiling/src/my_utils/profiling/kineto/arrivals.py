"""Collective arrivals across ranks: who waited for whom, working against waiting, stragglers by host first.

A synchronous collective ends on every rank only once the last rank has arrived, so the time an
early rank spends inside it is the *other* rank's lateness, not its own work. Per rank, every
communication kernel is one arrival (its start on the trace's clock, ``ts`` + the trace's base);
the same collective on several ranks is matched by (process group, collective, ``Seq``) when the
kernel carries torch's collective arguments, else by (kernel name, occurrence). For one
collective, the rank starting last is the one the others waited for; a rank's *wait* is the time
from its own start to the last rank's (at most its kernel's duration), its *working*
communication the rest. Beyond HTA, whose straggler view is per kernel (the min/max bars of
``get_gpu_kernel_breakdown``, ``kineto.stragglers``) and never says who waited for whom. Only the
ranks analysed are compared: with 2 traces of a 128-rank job, "last" means last of those 2.

Hosts come from each trace's context (``host_name`` in its metadata, else a file name written by
``tensorboard_trace_handler``: ``<host>_<pid>.<ms>.pt.trace.json``). When every rank's host is
known and there are several, arrivals are grouped by host first: a host whose median arrival
trails the earliest host's by more than :data:`HOST_RATIO` times the largest spread inside any
host (and by at least :data:`MIN_LAG_US`) is the straggler, not one of its ranks. Clocks of
different hosts are not synchronised: lags across hosts carry that caveat, lags inside one do not.

Tables: ``kineto_collective_wait`` per rank and per step (``step`` None: the whole trace): the
collectives matched, communication time, the part spent waiting for a later rank, the rest
(working), the rank waited for most, and how often this rank was the last;
``kineto_collective_wait_regions`` the same per rank and user annotation: the innermost
``record_function`` range open on the launching thread when the collective was launched, the
collective's own (``nccl:all_reduce``...) left out (the main
thread's when the launching thread had none: DDP's hooks launch from autograd's thread inside
``backward()``), so that a region's time spent waiting for another rank is told from its own work;
``kineto_host_arrivals`` per host: its ranks, its mean lag behind the earliest host, the mean
spread of arrivals inside it.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only in the workers: the parent matches the arrivals with plain Python
    np = lazy_module("numpy", __name__, "np")

HOST_RATIO = 3.0
#: The ranges torch opens around a collective itself: not the region it was launched from.
_COLLECTIVE_RANGES = ("nccl:", "gloo:", "c10d::", "c10d:", "record_param_comms")
MIN_LAG_US = 100.0
#: ``tensorboard_trace_handler``'s default worker name: ``<hostname>_<pid>``, then ``.<ms>.pt.trace.json``.
_HANDLER_NAME = re.compile(r"^(?P<host>.+)_\d+\.\d+\.pt\.trace\.json(\.gz)?$")


def host_from_file_name(path: str | Path) -> str | None:
    """The host in a file name written by ``tensorboard_trace_handler`` with its default worker name, else None."""
    m = _HANDLER_NAME.match(Path(path).name)
    return m.group("host") if m else None


@dataclass(frozen=True)
class CollectiveWaitRow(Row):
    """One rank's communication (in one step, or all of it): time waiting for later ranks and time working."""

    rank: int | None
    host: str | None
    step: int | None
    collectives: int
    comm_us: float
    wait_us: float
    working_us: float
    waited_for: int | None
    waited_for_us: float
    last_count: int
    mean_lateness_us: float


@dataclass(frozen=True)
class RegionWaitRow(Row):
    """One rank's collectives launched under one annotation: time waiting for a later rank and time working."""

    rank: int | None
    host: str | None
    region: str
    collectives: int
    comm_us: float
    wait_us: float
    working_us: float
    waited_for: int | None


@dataclass(frozen=True)
class HostArrivalRow(Row):
    """One host's ranks and how late they arrive, against the earliest host and among themselves."""

    host: str
    ranks: str
    collectives: int
    mean_lag_us: float
    mean_spread_us: float
    straggler: bool


def arrival_tables(d: RankData) -> Tables:
    """Every communication kernel of the rank, for the match across ranks (a private table: never reported)."""
    comm = KINDS.index(KernelKind.COMMUNICATION)
    rows: list[dict[str, Any]] = []
    occurrence: Counter[str] = Counter()
    steps = sorted((s[0], s[0] + s[1], s[2]) for s in d.step_events)
    for r in np.flatnonzero((d.gpu_kind == comm) & ~d.gpu_sync).tolist() if len(d.gpu_ts) else []:
        a = d.gpu_args.get(r) or {}
        name = d.names[int(d.gpu_name[r])]
        ts = float(d.gpu_ts[r])
        if isinstance(a.get("Collective name"), str) and isinstance(a.get("Seq"), int):
            pg = str(a.get("Process Group Name") or a.get("Process Group Description") or "")
            key = f"{pg}|{a['Collective name']}|{a['Seq']}"
        else:
            key = f"{name}#{occurrence[name]}"
            occurrence[name] += 1
        step = next((n for lo, hi, n in steps if lo <= ts <= hi), None)
        rows.append({"key": key, "ts": ts + d.base_us, "dur": float(d.gpu_dur[r]), "step": step,
                     "region": _region(d, int(d.gpu_rt[r]))})
    return {"_arrivals": rows} if rows else {}


def _region(d: RankData, rt: int) -> str | None:
    """The innermost annotation open on the launching thread at launch ``rt`` (the main thread's when none)."""
    if rt < 0 or d.ann_ts is None or not len(d.ann_ts):
        return None
    t, thread = float(d.rt_ts[rt]), int(d.rt_thread[rt])
    steps = [s[3] for s in d.step_events]
    main = max(set(steps), key=steps.count) if steps else None
    own = [i for i, n in enumerate(d.names) if n.startswith(_COLLECTIVE_RANGES)]
    for lane in (thread, main):
        if lane is None:
            continue
        open_ = np.flatnonzero((d.ann_thread == lane) & (d.ann_ts <= t) & (d.ann_end > t)
                               & ~np.isin(d.ann_name, own or [-1]))
        if len(open_):
            inner = open_[np.lexsort((-(d.ann_end[open_] - d.ann_ts[open_]), d.ann_ts[open_]))[-1]]
            return d.names[int(d.ann_name[inner])]
    return None


def across_ranks(results: Sequence[Any]) -> Tables:
    """``collective_wait`` and ``host_arrivals`` (module docstring); none with fewer than two ranks."""
    per_rank: dict[int, dict[str, dict[str, Any]]] = {}
    host: dict[int, str | None] = {}
    for r in results:
        if r.rank is None or not r.tables.get("_arrivals"):
            continue
        per_rank[r.rank] = {a["key"]: a for a in r.tables["_arrivals"]}
        host[r.rank] = r.context.get("host") if isinstance(r.context.get("host"), str) else None
    if len(per_rank) < 2:
        return {}
    keys: Counter[str] = Counter(k for arrivals in per_rank.values() for k in arrivals)
    shared = [k for k, n in keys.items() if n >= 2]
    acc: dict[tuple[int, int | None], dict[str, Any]] = {}
    regions: dict[tuple[int, str], dict[str, Any]] = {}
    lateness: dict[int, list[float]] = {r: [] for r in per_rank}
    instances: list[dict[int, float]] = []
    for key in shared:
        starts = {rank: a[key]["ts"] for rank, a in per_rank.items() if key in a}
        last = max(starts, key=lambda x: (starts[x], x))
        first = min(starts.values())
        instances.append(starts)
        for rank, ts in starts.items():
            a = per_rank[rank][key]
            wait = min(max(starts[last] - ts, 0.0), a["dur"])
            lateness[rank].append(ts - first)
            for step in (None,) if a["step"] is None else (None, a["step"]):
                row = acc.setdefault((rank, step), {"n": 0, "comm": 0.0, "wait": 0.0, "last": 0,
                                                    "late": [], "for": Counter()})
                row["n"] += 1
                row["comm"] += a["dur"]
                row["wait"] += wait
                row["last"] += int(rank == last)
                row["late"].append(ts - first)
                if wait > 0:
                    row["for"][last] += wait
            if a.get("region") is not None:
                reg = regions.setdefault((rank, a["region"]), {"n": 0, "comm": 0.0, "wait": 0.0, "for": Counter()})
                reg["n"] += 1
                reg["comm"] += a["dur"]
                reg["wait"] += wait
                if wait > 0:
                    reg["for"][last] += wait
    rows = []
    for (rank, step), a in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1] is not None, kv[0][1] or 0)):
        top = a["for"].most_common(1)
        rows.append(CollectiveWaitRow(rank, host.get(rank), step, a["n"], a["comm"], a["wait"], a["comm"] - a["wait"],
                                      top[0][0] if top else None, float(top[0][1]) if top else 0.0, a["last"],
                                      statistics.fmean(a["late"])))
    out: Tables = {"collective_wait": rows}
    if regions:
        out["collective_wait_regions"] = [
            RegionWaitRow(rank, host.get(rank), region, a["n"], a["comm"], a["wait"], a["comm"] - a["wait"],
                          a["for"].most_common(1)[0][0] if a["for"] else None)
            for (rank, region), a in sorted(regions.items(), key=lambda kv: (kv[0][0], -kv[1]["wait"], kv[0][1]))]
    hosts = _host_rows(instances, host)
    if hosts:
        out["host_arrivals"] = hosts
    return out


def _host_rows(instances: list[dict[int, float]], host: dict[int, str | None]) -> list[HostArrivalRow]:
    """Per host: mean lag behind the earliest host and mean spread inside it; the straggler flagged."""
    if not instances or any(host.get(r) is None for inst in instances for r in inst):
        return []
    names = sorted({str(host[r]) for inst in instances for r in inst})
    if len(names) < 2:
        return []
    lag: dict[str, list[float]] = {h: [] for h in names}
    spread: dict[str, list[float]] = {h: [] for h in names}
    count: Counter[str] = Counter()
    for inst in instances:
        by_host: dict[str, list[float]] = {}
        for rank, ts in inst.items():
            by_host.setdefault(str(host[rank]), []).append(ts)
        if len(by_host) < 2:
            continue
        med = {h: statistics.median(v) for h, v in by_host.items()}
        earliest = min(med.values())
        for h, v in by_host.items():
            lag[h].append(med[h] - earliest)
            spread[h].append(max(v) - min(v))
            count[h] += 1
    means = {h: (statistics.fmean(lag[h]) if lag[h] else 0.0, statistics.fmean(spread[h]) if spread[h] else 0.0)
             for h in names}
    inside = max(s for _l, s in means.values())
    late = max(names, key=lambda h: means[h][0])
    flagged = means[late][0] >= MIN_LAG_US and means[late][0] > HOST_RATIO * inside
    ranks = {h: sorted({r for inst in instances for r in inst if str(host[r]) == h}) for h in names}
    return [HostArrivalRow(h, ", ".join(map(str, ranks[h])), count[h], means[h][0], means[h][1],
                           bool(flagged and h == late)) for h in names]
