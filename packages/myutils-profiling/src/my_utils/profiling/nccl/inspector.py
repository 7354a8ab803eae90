"""NCCL Inspector logs analysed: the collectives and point-to-point operations that take the time, rank skew, Prometheus.

The Inspector plugin writes one record per operation and process (``providers.nccl_inspector``);
:func:`analyze_inspector` reads every log of a job once and gives:

- ``top_collectives``: per (communicator, collective, message size rounded up to a power of two), the
  operations, their summed and mean time, and the bus bandwidth's geometric mean (the Inspector's own
  Prometheus exporter averages it so: one slow outlier does not hide a healthy link) and minimum;
- ``top_p2p``: the same for ``Send``/``Recv``, per peer direction;
- ``rank_skew``: one collective seen by several ranks (same communicator, collective and sequence
  number) takes ``max − min`` of their times longer on the slowest rank; per (communicator,
  collective): instances seen on two ranks or more, mean and worst skew, the rank slowest most often,
  and, with ``NCCL_INSPECTOR_DUMP_VERBOSE=1``, the spread of their start times (the last rank to arrive);
- :meth:`InspectorAnalysis.prometheus`: the tables as Prometheus text exposition (``nccl_collective_*``,
  ``nccl_bus_bandwidth_gbs`` as the plugin's ``NCCL_INSPECTOR_PROM_DUMP`` names them, plus counts, totals
  and skew), ready for a node exporter's textfile collector or a push gateway.

Times are µs; bandwidths GB/s (10⁹ B/s, as the plugin writes them).
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from my_utils.profiling.formats.nccl_inspector import InspectorOp, read_operations, size_bucket

TOP = 20


@dataclass(frozen=True)
class OperationRow:
    """One kind of operation (communicator, operation, size, peer for p2p) over every rank that ran it."""

    comm: str
    comm_name: str
    n_ranks: int
    op: str
    size: str
    peer: int | None
    count: int
    ranks: int
    total_us: float
    mean_us: float
    busbw_gmean_gbs: float
    busbw_min_gbs: float


@dataclass(frozen=True)
class SkewRow:
    """One collective kind of one communicator: how much longer its slowest rank takes, instance by instance."""

    comm: str
    comm_name: str
    op: str
    instances: int
    ranks: int
    mean_skew_us: float
    max_skew_us: float
    max_skew_seq: int | None
    slowest_rank: int | None
    slowest_count: int
    mean_start_spread_us: float
    last_to_start: int | None


@dataclass(frozen=True)
class InspectorAnalysis:
    """The tables of a job's Inspector logs (module docstring); ``files`` and ``operations`` say what was read."""

    files: tuple[str, ...]
    operations: int
    top_collectives: tuple[OperationRow, ...] = ()
    top_p2p: tuple[OperationRow, ...] = ()
    rank_skew: tuple[SkewRow, ...] = ()
    nan_bandwidths: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """Every table as JSON rows (``nccl_inspector_<table>``)."""
        def rows(xs: Iterable[Any]) -> list[dict[str, Any]]:
            return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(x).items()}
                    for x in xs]
        return {"nccl_inspector_collectives": rows(self.top_collectives), "nccl_inspector_p2p": rows(self.top_p2p),
                "nccl_inspector_rank_skew": rows(self.rank_skew)}

    def prometheus(self) -> str:
        """The analysis in Prometheus text exposition format (module docstring)."""
        out: list[str] = []
        _family(out, "nccl_collective_exec_time_microseconds", "gauge",
                "Mean time of one collective of this kind (all ranks)",
                [(_coll_labels(r), r.mean_us) for r in self.top_collectives])
        _family(out, "nccl_bus_bandwidth_gbs", "gauge", "Geometric mean bus bandwidth (GB/s) of this kind",
                [(_coll_labels(r), r.busbw_gmean_gbs) for r in self.top_collectives])
        _family(out, "nccl_collective_count", "gauge", "Collectives of this kind recorded (all ranks)",
                [(_coll_labels(r), r.count) for r in self.top_collectives])
        _family(out, "nccl_collective_exec_time_microseconds_total", "gauge",
                "Summed time of the collectives of this kind (all ranks)",
                [(_coll_labels(r), r.total_us) for r in self.top_collectives])
        _family(out, "nccl_p2p_exec_time_microseconds", "gauge", "Mean time of one point-to-point operation",
                [(_coll_labels(r), r.mean_us) for r in self.top_p2p])
        _family(out, "nccl_p2p_bus_bandwidth_gbs", "gauge", "Geometric mean bus bandwidth (GB/s), point-to-point",
                [(_coll_labels(r), r.busbw_gmean_gbs) for r in self.top_p2p])
        _family(out, "nccl_collective_rank_skew_microseconds", "gauge",
                "Mean time the slowest rank of one collective takes beyond the fastest",
                [({"comm_name": r.comm_name or r.comm, "coll": r.op}, r.mean_skew_us) for r in self.rank_skew])
        _family(out, "nccl_collective_rank_skew_max_microseconds", "gauge", "Worst rank skew of one collective",
                [({"comm_name": r.comm_name or r.comm, "coll": r.op}, r.max_skew_us) for r in self.rank_skew])
        return "\n".join(out) + ("\n" if out else "")


def _coll_labels(r: OperationRow) -> dict[str, Any]:
    labels: dict[str, Any] = {"comm_name": r.comm_name or r.comm, "n_ranks": r.n_ranks, "coll": r.op,
                              "message_size": r.size}
    if r.peer is not None:
        labels["peer"] = r.peer
    return labels


def escape_label(value: object) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped (the exposition format's rules)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(out: list[str], name: str, kind: str, help_text: str, samples: Sequence[tuple[dict[str, Any], float]]) -> None:
    kept = [(labels, v) for labels, v in samples if isinstance(v, (int, float)) and math.isfinite(v)]
    if not kept:
        return
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")
    for labels, value in kept:
        text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
        out.append(f"{name}{{{text}}} {value:.6g}")


def _gmean(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.fmean(math.log(v) for v in positive)) if positive else math.nan


def _operation_rows(ops: Sequence[InspectorOp], top: int) -> list[OperationRow]:
    groups: dict[tuple[str, str, str, int | None], list[InspectorOp]] = {}
    for o in ops:
        groups.setdefault((o.comm, o.op, size_bucket(o.size), o.peer if o.kind == "p2p" else None), []).append(o)
    rows = []
    for (comm, op, size, peer), own in groups.items():
        total = sum(o.exec_us for o in own)
        bws = [o.busbw for o in own if o.busbw is not None and not math.isnan(o.busbw)]
        rows.append(OperationRow(comm, own[0].comm_name, own[0].n_ranks, op, size, peer, len(own),
                                 len({o.rank for o in own}), total, total / len(own), _gmean(bws),
                                 min(bws) if bws else math.nan))
    rows.sort(key=lambda r: (-r.total_us, r.op, r.size))
    return rows[:top]


def _skew_rows(ops: Sequence[InspectorOp]) -> list[SkewRow]:
    instances: dict[tuple[str, str, int], dict[int | None, InspectorOp]] = {}
    for o in ops:
        if o.kind == "coll" and o.seq is not None:
            instances.setdefault((o.comm, o.op, o.seq), {})[o.comm_rank] = o
    kinds: dict[tuple[str, str], list[tuple[int, dict[int | None, InspectorOp]]]] = {}
    for (comm, op, seq), by_rank in instances.items():
        if len(by_rank) >= 2:
            kinds.setdefault((comm, op), []).append((seq, by_rank))
    rows = []
    for (comm, op), seen in kinds.items():
        skews, slowest, spreads, last = [], Counter[Any](), [], Counter[Any]()
        worst: tuple[float, int | None] = (-1.0, None)
        for seq, by_rank in seen:
            times = {r: o.exec_us for r, o in by_rank.items()}
            skew = max(times.values()) - min(times.values())
            skews.append(skew)
            if skew > worst[0]:
                worst = (skew, seq)
            slow = max(times, key=lambda r: (times[r], -(r or 0)))
            slowest[by_rank[slow].rank] += 1
            starts = {r: o.start_us for r, o in by_rank.items() if o.start_us is not None}
            if len(starts) >= 2:
                spreads.append(float(max(starts.values()) - min(starts.values())))
                late = max(starts, key=lambda r: starts[r])
                last[by_rank[late].rank] += 1
        top_rank, top_n = slowest.most_common(1)[0]
        first = seen[0][1]
        any_op = next(iter(first.values()))
        rows.append(SkewRow(comm, any_op.comm_name, op, len(seen), len({r for _s, b in seen for r in b}),
                            statistics.fmean(skews), worst[0], worst[1], top_rank, top_n,
                            statistics.fmean(spreads) if spreads else math.nan,
                            last.most_common(1)[0][0] if last else None))
    rows.sort(key=lambda r: (-r.mean_skew_us * r.instances, r.op))
    return rows


def analyze_operations(ops: Sequence[InspectorOp], files: Sequence[str] = (), top: int = TOP) -> InspectorAnalysis:
    """The analysis of operations already read (module docstring)."""
    notes = []
    nan = sum(1 for o in ops if o.busbw is not None and math.isnan(o.busbw))
    if nan:
        notes.append(f"{nan} operation(s) without a bandwidth (the plugin wrote nan): left out of the means")
    return InspectorAnalysis(tuple(files), len(ops), tuple(_operation_rows([o for o in ops if o.kind == "coll"], top)),
                             tuple(_operation_rows([o for o in ops if o.kind == "p2p"], top)),
                             tuple(_skew_rows(ops)), nan, tuple(notes))


def analyze_inspector(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], top: int = TOP) -> InspectorAnalysis:
    """Read every Inspector log under ``paths`` (files or folders of ``*.log``) once and analyse them together."""
    from my_utils.profiling.formats._files import find_inputs

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in paths:
        files.extend(find_inputs(Path(p), ("*.log", "*.jsonl", "*.json"), "NCCL Inspector log"))
    ops = [o for f in files for o in read_operations(f)]
    return analyze_operations(ops, [f.name for f in files], top)
