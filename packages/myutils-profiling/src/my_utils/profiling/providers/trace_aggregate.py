"""Turn a stream of Kineto trace events into a few thousand aggregated metric events.

Events are never kept as dicts: each relevant one leaves a handful of numbers in typed
``array`` columns (name interned to an int), and everything is grouped with numpy at the
end. Step assignment follows the launch: a GPU kernel belongs to the ``ProfilerStep#N``
whose CPU span contains the runtime call that launched it (joined on ``correlation``),
not to the span that happens to contain its GPU start, which lags the CPU.

Emitted names (unit ms unless said): ``step_time``; per step ``gpu.kernel_time``,
``gpu.kernel_count`` (counter), ``gpu.memcpy_time``, ``gpu.memset_time``,
``gpu.comm_time`` (NCCL/RCCL kernels), ``device.op_time`` (non-CUDA accelerators such
as MTIA); per step and name ``kernel:<name>``, ``memcpy:<name>``, ``memset:<name>``,
``device_op:<name>``, ``cpu_op:<name>`` (inclusive time), ``annotation:<name>``;
``memory.allocated_peak`` / ``memory.reserved_peak`` (bytes, per device type); and
``trace.events`` (counter, one per raw category, step None).
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Mapping
from operator import attrgetter
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.providers.trace_events import UNSET, as_dict

# raw category (every spelling seen in real traces, 2021 capitalised ones included) -> group
_GROUP_OF_CAT: dict[str, str] = {
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
    "mtia_ccp_events": "device_op",
    "cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "runtime", "mtia_runtime": "runtime",
    "cpu_op": "cpu_op", "Operator": "cpu_op",
    "user_annotation": "annotation",
    "cpu_instant_event": "instant", "memory": "instant",
}
_DEVICE_GROUPS = ("kernel", "memcpy", "memset", "device_op")
_HOST_GROUPS = ("cpu_op", "annotation")
_GROUP_ID = {g: i for i, g in enumerate(_DEVICE_GROUPS + _HOST_GROUPS)}
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
# add_batch's category codes: 0..5 the groups above (_GROUP_ID), then these; -1: not aggregated
_RUNTIME, _INSTANT, _SKIP = 6, 7, -1
_COMM = re.compile(r"nccl|rccl", re.IGNORECASE)
_CAT = attrgetter("cat")
_EPOCH_US_MIN = 1e15  # µs since 1970 later than 2001: the trace clock is already the unix epoch


def group_of(cat: object) -> str | None:
    """The aggregation group of a raw trace category (case-insensitive fallback)."""
    if not isinstance(cat, str):
        return None
    return _GROUP_OF_CAT.get(cat) or _GROUP_OF_CAT.get(cat.lower())


class TraceAggregator:
    """Accumulates one trace file; ``add`` per event, then ``finish`` once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.cats: Counter[str | None] = Counter()
        self.dev = (array("b"), array("i"), array("d"), array("d"), array("q"))  # group, name, ts, dur, corr
        self.host = (array("b"), array("i"), array("d"), array("d"))  # group, name, ts, dur
        self.rt_corr = array("q")
        self.rt_ts = array("d")
        self.steps: list[tuple[float, float, int]] = []
        self.mem = (array("d"), array("d"), array("d"), array("b"))  # ts, allocated, reserved, device type
        self.count = 0
        self._codes: dict[str | None, int] = {}

    def _code(self, cat: str | None) -> int:
        """The category code of a typed event's ``cat`` (cached per raw spelling)."""
        group = group_of(cat)
        other = _RUNTIME if group == "runtime" else _INSTANT if group == "instant" else _SKIP
        code = _GROUP_ID.get(group, other) if group is not None else _SKIP
        self._codes[cat] = code
        return code

    def _nid(self, name: Any) -> int:
        if not isinstance(name, str):
            name = str(name)
        nid = self.names.get(name)
        if nid is None:
            nid = self.names[name] = len(self.name_list)
            self.name_list.append(name)
        return nid

    def add(self, ev: dict[str, Any]) -> None:
        """Account for one trace event (a decoded JSON object)."""
        index = self.count
        self.count += 1
        cat = ev.get("cat")
        self.cats[cat if isinstance(cat, str) else "(none)"] += 1
        group = _GROUP_OF_CAT.get(cat) if isinstance(cat, str) else None
        if group is None:
            group = group_of(cat)
            if group is None:
                return
        ph = ev.get("ph")
        try:
            if ph == "X":
                ts = ev["ts"]
                dur = ev.get("dur", 0)
                if group == "runtime":
                    args = ev.get("args")
                    corr = args.get("correlation") if isinstance(args, dict) else None
                    if isinstance(corr, int):
                        self.rt_corr.append(corr)
                        self.rt_ts.append(ts)
                elif group in _DEVICE_GROUPS:
                    args = ev.get("args")
                    corr = args.get("correlation") if isinstance(args, dict) else None
                    d = self.dev
                    d[2].append(ts)
                    d[3].append(dur)
                    d[4].append(corr if isinstance(corr, int) else -1)
                    d[0].append(_GROUP_ID[group])
                    d[1].append(self._nid(ev.get("name", "")))
                elif group in _HOST_GROUPS:
                    name = ev.get("name", "")
                    m = _STEP_NAME.match(name) if isinstance(name, str) and name[:1] == "P" else None
                    if m is not None:
                        self.steps.append((float(ts), float(dur), int(m.group(1))))
                        return
                    h = self.host
                    h[2].append(ts)
                    h[3].append(dur)
                    h[0].append(_GROUP_ID[group])
                    h[1].append(self._nid(name))
            elif ph == "i" and group == "instant" and ev.get("name") == "[memory]":
                args = ev.get("args")
                if isinstance(args, dict) and "Total Allocated" in args:
                    m4 = self.mem
                    m4[0].append(ev["ts"])
                    m4[1].append(args.get("Total Allocated", 0))
                    m4[2].append(args.get("Total Reserved", 0) or 0)
                    m4[3].append(int(args.get("Device Type", -1)))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            # arrays reject non-numbers by themselves: one check covers ts, dur and args
            raise InputError(
                self.path, f"traceEvents[{index}]",
                f"numeric 'ts'/'dur' (µs) on a {cat!r} event ({type(exc).__name__}: {exc})",
            ) from None

    def add_batch(self, events: list[Any]) -> None:
        """Account for a run of typed events (``trace_events.KinetoEvent``): what ``add`` does for each.

        The same appends in the same order as ``add``; the schema already guarantees the types
        ``add`` checks (finite float times, integer correlations, string names). What remains
        (a missing ``ts``, a correlation beyond 64 bits, a step number beyond int's digits) is
        handed to ``add`` with the event's fields, so the error and its place are ``add``'s own.
        """
        base = self.count
        self.count += len(events)
        self.cats.update(map(_CAT, events))  # None ("cat" absent or null) is "(none)": merged in finish
        codes = self._codes
        dg, dn, dts, ddur, dcorr = self.dev
        hg, hn, hts, hdur = self.host
        rt_corr, rt_ts = self.rt_corr, self.rt_ts
        names = self.names
        step_name = _STEP_NAME.match
        ev = None
        try:
            for ev in events:
                cat = ev.cat
                code = codes.get(cat)
                if code is None:
                    code = self._code(cat)
                if code < 0:
                    continue
                ph = ev.ph
                if ph == "X":
                    ts = ev.ts
                    if ts != ts:  # absent: add() says so (KeyError 'ts')
                        raise KeyError("ts")
                    if code < 4:
                        dts.append(ts)
                        ddur.append(ev.dur)
                        dcorr.append(ev.args.correlation)
                        dg.append(code)
                        name = ev.name
                        nid = names.get(name)
                        if nid is None:
                            nid = self._nid(name)
                        dn.append(nid)
                    elif code == _RUNTIME:
                        corr = ev.args.correlation
                        if corr != -1:  # a -1 never matches a device event's correlation: leaving it out changes nothing
                            rt_corr.append(corr)
                            rt_ts.append(ts)
                    elif code < _RUNTIME:
                        name = ev.name
                        m = step_name(name) if name[:1] == "P" else None
                        if m is not None:
                            self.steps.append((ts, ev.dur, int(m.group(1))))
                            continue
                        hts.append(ts)
                        hdur.append(ev.dur)
                        hg.append(code)
                        nid = names.get(name)
                        if nid is None:
                            nid = self._nid(name)
                        hn.append(nid)
                elif ph == "i" and code == _INSTANT and ev.name == "[memory]":
                    args = ev.args
                    if args.total_allocated is not UNSET:
                        ts = ev.ts
                        if ts != ts:
                            raise KeyError("ts")
                        m4 = self.mem
                        m4[0].append(ts)
                        m4[1].append(args.total_allocated)
                        m4[2].append(args.total_reserved or 0)
                        m4[3].append(args.device_type)
        except (KeyError, TypeError, ValueError, OverflowError):
            at = next(i for i, x in enumerate(events) if x is ev)
            self.count = base + at
            self.add(as_dict(ev))  # raises the InputError add() gives for this event
            raise  # pragma: no cover - add() accepted what the typed path refused: a bug, not bad input

    # -- results ---------------------------------------------------------------------

    def finish(self, metadata: Mapping[str, Any], rank: int | None, rank_source: str) -> list[MetricEvent]:
        """Group everything and return the metric events of this file."""
        import numpy as np

        base_ns = metadata.get("baseTimeNanoseconds")
        base_s = float(base_ns) / 1e9 if isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool) else None

        def unix(ts_us: float) -> float | None:
            if base_s is not None:
                return base_s + ts_us / 1e6
            return ts_us / 1e6 if ts_us >= _EPOCH_US_MIN else None

        common_attrs = {"file": self.path.name, "rank_source": rank_source}
        out: list[MetricEvent] = []

        def emit(name: str, value: float, kind: str, unit: str, step: int | None,
                 ts: float | None, **attrs: Any) -> None:
            out.append(MetricEvent(
                name=name, value=float(value), kind=kind, unit=unit, source="torch_profiler",
                rank=rank, step=step, ts=ts, attrs={**common_attrs, **attrs},
            ))

        steps = sorted(set(self.steps))
        starts = np.array([s[0] for s in steps], dtype=np.float64)
        ends = np.array([s[0] + s[1] for s in steps], dtype=np.float64)
        step_no = [s[2] for s in steps]
        step_ts = [unix(s[0]) for s in steps]
        for (_t0, dur, n), ts in zip(steps, step_ts, strict=True):
            emit("step_time", dur / 1e3, "duration", "ms", n, ts, span=f"ProfilerStep#{n}")

        def step_index(t: Any) -> Any:
            """Index into ``steps`` for each time, -1 when outside every step span."""
            if not steps:
                return np.full(len(t), -1, dtype=np.int64)
            idx = np.searchsorted(starts, t, side="right") - 1
            ok = (idx >= 0) & (t < ends[np.clip(idx, 0, None)])
            return np.where(ok, idx, -1)

        # device events: step of the launching runtime call when it is known
        dg, dn, dts, ddur, dcorr = (np.frombuffer(a, dtype=a.typecode) if len(a) else np.zeros(0, a.typecode)
                                    for a in self.dev)
        when = dts.copy()
        if len(dts) and len(self.rt_corr):
            rc = np.frombuffer(self.rt_corr, dtype=np.int64)
            rt = np.frombuffer(self.rt_ts, dtype=np.float64)
            order = np.argsort(rc, kind="stable")
            rc, rt = rc[order], rt[order]
            pos = np.clip(np.searchsorted(rc, dcorr), 0, len(rc) - 1)
            found = (rc[pos] == dcorr) & (dcorr >= 0)
            when = np.where(found, rt[pos], dts)
        dsi = step_index(when)
        hg, hn, hts, hdur = (np.frombuffer(a, dtype=a.typecode) if len(a) else np.zeros(0, a.typecode)
                             for a in self.host)
        hsi = step_index(hts)

        groups = _DEVICE_GROUPS + _HOST_GROUPS
        names = self.name_list
        nsteps = len(steps) + 1
        comm_ids = {i for i, nm in enumerate(names) if _COMM.search(nm)}

        def step_of(si: int) -> tuple[int | None, float | None]:
            return (None, None) if si < 0 else (step_no[si], step_ts[si])

        for g_arr, n_arr, dur_arr, si_arr in ((dg, dn, ddur, dsi), (hg, hn, hdur, hsi)):
            if not len(g_arr):
                continue
            key = (g_arr.astype(np.int64) * len(names) + n_arr) * nsteps + (si_arr + 1)
            order = np.argsort(key, kind="stable")
            k = key[order]
            d = dur_arr[order].astype(np.float64)
            bounds = np.flatnonzero(np.diff(k)) + 1
            starts_i = np.concatenate(([0], bounds))
            sums = np.add.reduceat(d, starts_i)
            maxs = np.maximum.reduceat(d, starts_i)
            mins = np.minimum.reduceat(d, starts_i)
            counts = np.diff(np.concatenate((starts_i, [len(k)])))
            totals: dict[tuple[str, int], list[float]] = {}
            for key_v, total, mx, mn, cnt in zip(k[starts_i].tolist(), sums.tolist(), maxs.tolist(),
                                                  mins.tolist(), counts.tolist(), strict=True):
                si = key_v % nsteps - 1
                gn = key_v // nsteps
                gid, nid = divmod(gn, len(names))
                group = groups[gid]
                step, ts = step_of(si)
                emit(f"{group}:{names[nid]}", total / 1e3, "duration", "ms", step, ts,
                     category=group, op=names[nid], count=cnt, mean_ms=total / cnt / 1e3,
                     max_ms=mx / 1e3, min_ms=mn / 1e3)
                acc = totals.setdefault((group, si), [0.0, 0, 0.0])
                acc[0] += total
                acc[1] += cnt
                if group == "kernel" and nid in comm_ids:
                    acc[2] += total
            for (group, si), (total, cnt, comm) in sorted(totals.items()):
                step, ts = step_of(si)
                if group in ("kernel", "memcpy", "memset"):
                    emit(f"gpu.{group}_time", total / 1e3, "duration", "ms", step, ts, count=cnt)
                if group == "kernel":
                    emit("gpu.kernel_count", cnt, "counter", "count", step, ts)
                    emit("gpu.comm_time", comm / 1e3, "duration", "ms", step, ts)
                elif group == "device_op":
                    emit("device.op_time", total / 1e3, "duration", "ms", step, ts, count=cnt)

        mts, malloc, mres, mdev = (np.frombuffer(a, dtype=a.typecode) if len(a) else np.zeros(0, a.typecode)
                                   for a in self.mem)
        if len(mts):
            msi = step_index(mts)
            for si in np.unique(msi).tolist():
                for dev in np.unique(mdev[msi == si]).tolist():
                    sel = (msi == si) & (mdev == dev)
                    step, ts = step_of(si)
                    emit("memory.allocated_peak", float(malloc[sel].max()), "gauge", "bytes", step, ts,
                         device_type=dev)
                    emit("memory.reserved_peak", float(mres[sel].max()), "gauge", "bytes", step, ts,
                         device_type=dev)

        cats = Counter({c: n for c, n in self.cats.items() if c is not None})
        if None in self.cats:  # typed events count a missing category as None
            cats["(none)"] += self.cats[None]
        for cat, cnt in sorted(cats.items()):
            emit("trace.events", cnt, "counter", "count", None, None, category=cat)
        return out
