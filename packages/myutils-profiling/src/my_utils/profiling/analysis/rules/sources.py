"""SourceChecksRule: what DCGM samples, NCCL logs and ``perf stat`` say outright, as findings.

Each check reads one kind of aggregated event (one cell per name, step and rank) and needs no
step times, so it works on a run that has only these inputs:

- GPU activity, whichever tool recorded it (``my_utils.core.metric_names``): the mean SM
  activity (``gpu.sm_active``: DCGM ``SMACT``, nsys's ``SMs Active``) over at least ``min_samples``
  samples is under ``sm_active_low`` percent: the GPU mostly waits. Where a rank has no SM
  activity, NVML's utilisation (``gpu.utilization``: the monitor, DCGM ``GPUTL``) under the same
  threshold says the same more weakly (it counts time with any kernel running, not SMs at work).
- ``nccl.check:socket_across_nodes`` (``nccl_log``): NCCL carries a multi-node job over TCP
  sockets (``Using network Socket`` with more than one node); the value is the log line.
- ``perf.ipc`` (``perf_stat``): the host retires fewer than ``ipc_low`` instructions per cycle.

NCCL Inspector figures (time, size, bandwidth per collective) have no link speed to be judged
against here; they are shown in the report's tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.core.metric_names import event_metric
from my_utils.profiling.analysis.rules._series import SeriesSource

_SOCKET_ADVICE = ("NCCL found no InfiniBand/RoCE device it could use, or was told not to: check NCCL_IB_DISABLE, "
                  "NCCL_NET and NCCL_SOCKET_IFNAME, and that the IB devices and driver are visible where the job "
                  "runs (containers need them passed in); over TCP, collectives between nodes are far slower")
_SM_ADVICE = ("The GPU's SMs are idle most of the time: find what it waits for (the data loader, host-side "
              "work, synchronisation, many tiny kernels) in a torch.profiler or nsys capture of the same run")
_IPC_ADVICE = ("The host code stalls on memory or branches: profile the host side (py-spy, perf record) where "
               "it feeds the GPU (data loading, collation, augmentation)")


_BUSY = ("gpu.sm_active", "gpu.utilization")  # the canonical metrics of GPU activity, strongest first


def _busy_metric(name: str, source: str | None) -> tuple[str, float] | None:
    """The canonical GPU-activity metric an event measures and its scale to %, or None."""
    found = event_metric(source, name)
    return (found[0].name, found[1]) if found is not None and found[0].name in _BUSY else None


def _checked(name: str, source: str | None) -> bool:
    """Whether ``source``'s metric ``name`` is one of the checked ones (the module docstring)."""
    return (_busy_metric(name, source) is not None
            or (source == "nccl_log" and name == "nccl.check:socket_across_nodes")
            or (source == "perf_stat" and name.startswith("perf.ipc")))


def _rank(rank: int | None) -> str:
    return f"rank {rank}" if rank is not None else "no rank"


@dataclass(frozen=True)
class _Fold:
    """One checked name on one rank (and step), over all its events: count, mean, lowest, highest."""

    name: str
    step: int | None
    rank: int | None
    unit: str
    source: str | None
    count: int
    mean: float
    low: float
    high: float

    @property
    def rank_key(self) -> str:
        return f"rank{self.rank}" if self.rank is not None else "norank"


class SourceChecksRule:
    """Findings read directly from DCGM, NCCL log and perf stat events (see the module docstring)."""

    name = "source_checks"

    def __init__(self, sm_active_low: float = 40.0, min_samples: int = 5, ipc_low: float = 1.0) -> None:
        self.sm_active_low = sm_active_low
        self.min_samples = max(1, min_samples)
        self.ipc_low = ipc_low

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per GPU that idles, per rank that uses sockets between nodes, per low-IPC block.

        Events are folded per (name, step, rank) first, so raw provider events and the analyzer's
        aggregated ones (``attrs`` with ``count``/``min``/``max``) give the same findings.
        """
        folded: dict[tuple[str, int | None, int | None, str, str | None], list[Any]] = {}
        # only the checked names: the analyzer's events build nothing for the others
        picked = events.named(_checked) if isinstance(events, SeriesSource) else events
        for e in picked:
            if e.value != e.value or not _checked(e.name, e.source):
                continue  # NaN is not measured; other names are not checked here
            # samples the event stands for: a provider's pre-aggregated mean (nsys GPU metrics) says so
            n = e.attrs.get("occurrences", e.attrs.get("count", 1))
            n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
            lo, hi = e.attrs.get("min", e.value), e.attrs.get("max", e.value)
            lo = lo if isinstance(lo, (int, float)) else e.value
            hi = hi if isinstance(hi, (int, float)) else e.value
            cell = folded.setdefault((e.name, e.step, e.rank, e.unit, e.source), [0, 0.0, lo, hi])
            cell[0] += n
            cell[1] += e.value * n
            cell[2], cell[3] = min(cell[2], lo), max(cell[3], hi)
        findings: list[dict[str, Any]] = []
        with_sm = {rank for (name, _s, rank, _u, source) in folded if (_busy_metric(name, source) or ("",))[0] ==
                   "gpu.sm_active"}
        for (name, step, rank, unit, source), (n, total, lo, hi) in folded.items():
            fold = _Fold(name, step, rank, unit, source, n, total / n, lo, hi)
            busy = _busy_metric(name, source)
            if busy is not None:
                if busy[0] == "gpu.utilization" and rank in with_sm:
                    continue  # the rank's SM activity says it better; one fact, one finding
                finding = self._sm_active(fold, *busy)
            elif name.startswith("nccl."):
                finding = self._socket(fold)
            else:
                finding = self._ipc(fold)
            if finding is not None:
                findings.append(finding)
        return sorted(findings, key=lambda f: f["id"])

    def _sm_active(self, f: _Fold, metric: str, scale: float) -> dict[str, Any] | None:
        mean, low, high = f.mean * scale, f.low * scale, f.high * scale
        if f.count < self.min_samples or mean >= self.sm_active_low:
            return None
        entity = f.name.split(":", 1)[1] if ":" in f.name else "GPU"
        sm = metric == "gpu.sm_active"
        what = "SMs active" if sm else "a kernel running (NVML utilisation: any kernel, not SMs at work)"
        tool = {"dcgm_dmon": "DCGM", "nsys_sqlite": "nsys GPU metrics", "memory_monitor": "NVML (monitor)"}.get(
            str(f.source), str(f.source))
        kind = "dcgm_sm_active" if sm and f.source == "dcgm_dmon" else f"{metric.split('.')[1]}_low"
        field = "dcgmi dmon field SMACT (1002)" if kind == "dcgm_sm_active" else f"{tool} {f.name} ({metric})"
        return {
            "id": f"source_checks:{kind}:{entity}:{f.rank_key}" if kind == "dcgm_sm_active" else
                  f"source_checks:{kind}:{f.source}:{entity}:{f.rank_key}",
            "category": "optimization", "severity": "warning",
            "title": f"{entity}: {what} {mean:.1f} % of the time on average over {f.count} {tool} samples "
                     f"({_rank(f.rank)})",
            "detail": (f"{field} averaged {mean:.1f} % (lowest {low:.1f}, highest "
                       f"{high:.1f}) over {f.count} samples, under the {self.sm_active_low:g} % this check flags"),
            "evidence": {"names": [f.name], "ranks": [f.rank], "samples": f.count, "mean": mean, "min": low,
                         "max": high, "threshold": self.sm_active_low, "unit": "%", "source": f.source,
                         "metric": metric},
            "suggestion": _SM_ADVICE,
            "advice": [{"text": _SM_ADVICE, "kind": kind, "facts": [],
                        "because": [{"table": "totals", "key": {"name": f.name, "rank": f.rank, "source": f.source},
                                     "values": {"mean": mean, "samples": f.count}}]}],
        }

    def _socket(self, f: _Fold) -> dict[str, Any]:
        where = f"line {f.low:.0f}" if f.low == f.high else f"lines {f.low:.0f}-{f.high:.0f}"
        return {
            "id": f"source_checks:nccl_socket:{f.rank_key}",
            "category": "optimization", "severity": "warning",
            "title": f"NCCL sends between nodes over TCP sockets on {_rank(f.rank)} (NCCL log {where})",
            "detail": (f"the NCCL_DEBUG=INFO log says 'Using network Socket' for {_rank(f.rank)} at {where}, in a "
                       "communicator that spans more than one node"),
            "evidence": {"names": [f.name], "ranks": [f.rank], "log_line": int(f.low), "source": "nccl_log"},
            "suggestion": _SOCKET_ADVICE,
            "advice": [{"text": _SOCKET_ADVICE, "kind": "nccl_socket", "facts": [],
                        "because": [{"table": "totals", "key": {"name": f.name, "rank": f.rank, "source": "nccl_log"},
                                     "values": {"line": int(f.low)}}]}],
        }

    def _ipc(self, f: _Fold) -> dict[str, Any] | None:
        if not 0 < f.mean < self.ipc_low:
            return None
        block = f"block {f.step}" if f.step is not None else "the run"
        return {
            "id": f"source_checks:perf_ipc:{f.name}:{f.rank_key}:step{f.step}",
            "category": "optimization", "severity": "info",
            "title": f"host code retires {f.mean:.2f} instructions per cycle ({f.name}, {block}, {_rank(f.rank)})",
            "detail": (f"perf stat instructions / cycles = {f.mean:.2f} on average over {f.count} measurement(s) "
                       f"(lowest {f.low:.2f}) in {block}, under the {self.ipc_low:g} this check flags"),
            "evidence": {"names": [f.name], "ranks": [f.rank], "steps": [f.step], "ipc": f.mean, "min": f.low,
                         "threshold": self.ipc_low, "source": "perf_stat"},
            "suggestion": _IPC_ADVICE,
        }
