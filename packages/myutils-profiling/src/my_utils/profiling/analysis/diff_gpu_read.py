"""Where a diff's GPU lanes come from for Kineto: a pass of the provider's read of a trace, or a report's tables.

:class:`GpuPass` is fed in the Kineto provider's own pass over a trace (``kineto.read.provider.read_trace``),
so a diff still reads each trace once; it keeps GPU activities, launches and ``ProfilerStep`` spans
as numbers and finishes into one :class:`~.diff_gpu.LaneFacts` per device, idle causes by the
Kineto device-idle analysis. :func:`side_from_tables` builds a side from an analysis report's
Kineto tables (one capture per rank: a report keeps no per-step GPU split). ``analysis.diff_nsys`` builds
its lanes from its own named queries.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.analysis.diff_gpu import IDLE_CAUSES, GpuSide, LaneFacts, lane_facts
from my_utils.profiling.kineto.kinds import KINDS, KernelKind, kind_of
from my_utils.profiling.kineto.read.aggregate import group_of

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a lane is computed (in the worker that read the trace)
    np = lazy_module("numpy", __name__, "np")

_MEM, _OTHER = (KINDS.index(k) for k in (KernelKind.MEMORY, KernelKind.OTHER))
_DEVICE_GROUPS = ("kernel", "memcpy", "memset", "device_op")
_HOST_GROUPS = ("cpu_op", "annotation")
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
_NO_STREAM = (-1, 4294967295)  # a cuda_sync on no stream: the host waiting, not GPU time


class GpuPass:
    """A ``kineto.read.provider.read_trace`` consumer: GPU activities, launches and steps → one :class:`LaneFacts` per device.

    Fed in the provider's own pass (typed events with lanes, or dicts), so the diff still
    reads each trace once. Times are kept relative to the first one kept (epoch µs would
    lose the sub-µs part of ``ts + dur``).
    """

    needs_lanes = True

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kind_by_name: dict[str, int] = {}
        self.devices: dict[Any, int] = {}
        self.ts, self.dur, self.corr = array("d"), array("d"), array("q")
        self.kind, self.device = array("b"), array("i")
        self.rt_ts, self.rt_corr = array("d"), array("q")
        self.steps: dict[int, tuple[float, float]] = {}
        self.base: float | None = None
        self._groups: dict[Any, str | None] = {}

    def _group(self, cat: Any) -> str | None:
        group = self._groups.get(cat, "")
        if group == "":
            group = self._groups[cat] = group_of(cat) if isinstance(cat, str) else None
            if group is None and cat == "cuda_sync":
                group = self._groups[cat] = "cuda_sync"
        return group

    def _rel(self, ts: float) -> float:
        if self.base is None:
            self.base = ts
        return ts - self.base

    def _keep(self, group: str, name: str, pid: Any, tid: Any, ts: float, dur: float, corr: int) -> None:
        if group in _DEVICE_GROUPS:
            if group == "kernel" or group == "device_op":
                kind = self.kind_by_name.get(name)
                if kind is None:
                    kind = self.kind_by_name[name] = KINDS.index(kind_of(name))
            else:
                kind = _MEM
        elif group == "cuda_sync":
            if tid is None or tid in _NO_STREAM:
                return
            kind = _OTHER
        elif group == "runtime":
            if corr != -1:
                self.rt_ts.append(self._rel(ts))
                self.rt_corr.append(corr)
            return
        elif group in _HOST_GROUPS:
            m = _STEP_NAME.match(name) if name[:1] == "P" else None
            if m is not None:
                n, t = int(m.group(1)), self._rel(ts)
                if dur > self.steps.get(n, (0.0, -1.0))[1]:
                    self.steps[n] = (t, dur)
            return
        else:
            return
        dev = self.devices.get(pid)
        if dev is None:
            dev = self.devices[pid] = len(self.devices)
        self.ts.append(self._rel(ts))
        self.dur.append(dur)
        self.corr.append(corr)
        self.kind.append(kind)
        self.device.append(dev)

    def add(self, ev: dict[str, Any]) -> None:
        """One decoded event (the provider's own pass refuses malformed times, naming the event)."""
        if ev.get("ph") != "X":
            return
        group = self._group(ev.get("cat"))
        ts, dur = ev.get("ts"), ev.get("dur", 0)
        if group is None or not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) \
                or isinstance(ts, bool) or ts != ts:
            return
        args = ev.get("args")
        args = args if isinstance(args, dict) else {}
        corr = args.get("correlation", -1)
        corr = corr if isinstance(corr, int) and not isinstance(corr, bool) and -2**63 <= corr < 2**63 else -1
        tid = args.get("stream", ev.get("tid")) if group == "cuda_sync" else ev.get("tid")
        name = ev.get("name", "")
        pid = ev.get("pid")
        if isinstance(pid, (list, dict)):
            pid = str(pid)
        self._keep(group, name if isinstance(name, str) else str(name), pid,
                   tid if isinstance(tid, (int, str)) or tid is None else str(tid), float(ts), float(dur), corr)

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for a run of typed events (``trace_events.KinetoLaneEvent``; a missing ``ts`` is NaN).

        Host ranges are most of a trace and only ``ProfilerStep#N`` among them matters: they
        are passed over before any call.
        """
        keep, groups, group_of_cat = self._keep, self._groups, self._group
        rt_ts, rt_corr, rel = self.rt_ts, self.rt_corr, self._rel
        for ev in events:
            if ev.ph != "X":
                continue
            cat = ev.cat
            group = groups.get(cat, "")
            if group == "":
                group = group_of_cat(cat)
            if group is None or ((group == "cpu_op" or group == "annotation") and ev.name[:1] != "P"):
                continue
            ts = ev.ts
            if ts != ts:
                continue
            if group == "runtime":
                corr = ev.args.correlation
                if corr != -1:
                    rt_ts.append(rel(ts))
                    rt_corr.append(corr)
                continue
            keep(group, ev.name, ev.pid, ev.tid, ts, ev.dur, ev.args.correlation)

    def finish(self, metadata: Mapping[str, Any], event_count: int, rank: int | None) -> list[LaneFacts]:
        """One :class:`LaneFacts` per device, windows the ``ProfilerStep`` spans (the capture without them)."""
        if not len(self.ts):
            return []
        ts = np.frombuffer(self.ts, dtype=np.float64)
        end = ts + np.frombuffer(self.dur, dtype=np.float64)
        kind = np.frombuffer(self.kind, dtype=np.int8)
        device = np.frombuffer(self.device, dtype=np.int32)
        steps = sorted(self.steps.values())
        windows = [(t, t + d) for t, d in steps]
        causes = _idle_causes(ts, end, device, np.frombuffer(self.corr, dtype=np.int64),
                              np.frombuffer(self.rt_ts, dtype=np.float64), np.frombuffer(self.rt_corr, dtype=np.int64))
        names = {v: k for k, v in self.devices.items()}
        who = f"rank {rank}" if rank is not None else self.path.name
        out = []
        for dev in sorted(names):
            on = device == dev
            out.append(lane_facts(f"{who} GPU {names[dev]}", ts[on], end[on], kind[on], windows,
                                  causes.get(dev, {}), "step" if windows else "capture"))
        return out


def _idle_causes(ts: Any, end: Any, device: Any, corr: Any, rt_ts: Any, rt_corr: Any) -> dict[int, dict[str, float]]:
    """Idle ms per device and cause, by the Kineto device-idle analysis (``kineto.idle.device_idle``)."""
    from my_utils.profiling.kineto.idle import device_idle
    from my_utils.profiling.kineto.rank_data import RankData

    order = np.argsort(ts, kind="stable")
    ts, end, device, corr = ts[order], end[order], device[order], corr[order]
    gpu_rt = np.full(len(ts), -1, dtype=np.int64)
    if len(rt_corr):
        by_corr = np.argsort(rt_corr, kind="stable")
        sorted_corr = rt_corr[by_corr]
        pos = np.clip(np.searchsorted(sorted_corr, corr), 0, len(sorted_corr) - 1)
        hit = (sorted_corr[pos] == corr) & (corr >= 0)
        gpu_rt = np.where(hit, by_corr[pos], -1)
    none = np.zeros(0)
    d = RankData(rank=None, names=[], gpu_stream=np.zeros(len(ts), np.int64), gpu_ts=ts, gpu_dur=end - ts,
                 gpu_end=end, gpu_name=np.zeros(len(ts), np.int64), gpu_kind=np.zeros(len(ts), np.int8),
                 gpu_corr=corr, gpu_rt=gpu_rt, gpu_sync=np.zeros(len(ts), bool), gpu_device=device.astype(np.int64),
                 rt_thread=none, rt_ts=rt_ts, rt_dur=none, rt_name=none, rt_corr=rt_corr, rt_has_gpu=none,
                 ann_thread=none, ann_ts=none, ann_end=none, ann_name=none, steps=[], lanes=[], empty_gpu_lanes=0)
    out: dict[int, dict[str, float]] = {}
    for row in device_idle(d):
        if row.device is not None:
            out.setdefault(row.device, {})[row.category] = row.idle_us / 1e3
    return out


def side_from_tables(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> GpuSide:
    """A side from an analysis report's Kineto tables (``kineto_temporal``, ``kineto_overlap``, ``kineto_idle_device``).

    One lane per rank, its capture the one window (a report keeps no per-step GPU split): the
    figures are the report's own, compared descriptively.
    """
    def num(value: Any) -> float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    overlap = {r.get("rank"): r for r in tables.get("kineto_overlap", ())}
    causes: dict[Any, dict[str, float]] = {}
    for r in tables.get("kineto_idle_device", ()):
        per = causes.setdefault(r.get("rank"), {})
        per[str(r.get("category"))] = per.get(str(r.get("category")), 0.0) + num(r.get("idle_us")) / 1e3
    lanes = []
    temporal = list(tables.get("kineto_temporal", ()))
    ranked = [r for r in temporal if r.get("rank") is not None]
    for row in ranked or temporal:  # a row with rank None covers all ranks when others exist: not a lane
        rank = row.get("rank")
        span, idle, comp = num(row.get("span_us")), num(row.get("idle_us")), num(row.get("compute_us"))
        if span <= 0:
            continue
        o = overlap.get(rank, {})
        comm, both = num(o.get("communication_us")), num(o.get("overlap_us"))
        busy = span - idle
        window = (span / 1e3, comp / 1e3, (comm - both) / 1e3, (busy - comp - comm + both) / 1e3, idle / 1e3)
        lanes.append(LaneFacts(f"rank {rank}", span / 1e3, busy / 1e3, comp / 1e3, comm / 1e3, both / 1e3,
                               tuple((c, causes.get(rank, {}).get(c, 0.0)) for c in IDLE_CAUSES), (window,)))
    return GpuSide(tuple(lanes))
