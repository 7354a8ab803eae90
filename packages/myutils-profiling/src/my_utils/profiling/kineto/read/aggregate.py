"""Turn a stream of Kineto trace events into a few thousand aggregated metric events.

Events are never kept as dicts: each relevant one leaves a handful of numbers in typed
``array`` columns (name interned to an int), and everything is grouped at the end. Step
assignment follows the launch: a GPU kernel belongs to the ``ProfilerStep#N`` whose CPU span
contains the runtime call that launched it (joined on ``correlation``), not to the span that
happens to contain its GPU start, which lags the CPU.

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
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.core.safe_io import utf8_text
from my_utils.profiling.kineto.read import events as trace_events
from my_utils.profiling.kineto.read.events import as_dict
from my_utils.profiling.kineto.read.scan import ScannedRun, finish_helpers, scan_function

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


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _correlation(args: Any) -> int:
    """``args.correlation`` of an event: -1 when absent or null; a ``ValueError`` unless an integer within 64 bits.

    Strict because batches are read by orjson, which reads an integer beyond 64 bits as a float:
    a float (or any other type) is refused like the integer itself, wherever in the file it sits.
    """
    corr = args.get("correlation") if isinstance(args, dict) else None
    if corr is None:
        return -1
    if corr.__class__ is not int or not _INT64[0] <= corr <= _INT64[1]:
        raise ValueError("correlation")
    return corr


def field_at_fault(ev: dict[str, Any], cat: Any, exc: BaseException) -> str:
    """What an event that ``add`` could not take holds where a number was read: the field and its value."""
    def number(v: Any) -> bool:
        return v.__class__ in (int, float) and (v.__class__ is int or v - v == 0.0)

    def shown(v: Any) -> str:
        text = repr(v)
        text = text if len(text) <= 40 else text[:37] + "..."
        # orjson reads an integer beyond 64 bits as a float: say what it was in the file
        return f"a number beyond 64 bits ({text})" if v.__class__ in (int, float) and abs(v) >= 2**63 else text

    on = f"on a {cat!r} event"
    if "ts" not in ev:
        return f"'ts' {on} as a finite number (µs); found none"
    raw_args = ev.get("args")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    checks: list[tuple[str, Any, bool, str]] = [
        ("ts", ev.get("ts"), number(ev.get("ts")), "a finite number (µs)"),
        ("dur", ev.get("dur", 0), number(ev.get("dur", 0)), "a finite number (µs)"),
        ("args.correlation", args.get("correlation"),
         args.get("correlation") is None or (args.get("correlation").__class__ is int
                                             and _INT64[0] <= args["correlation"] <= _INT64[1]),
         "an integer within 64 bits"),
        ("args.Total Allocated", args.get("Total Allocated", 0), number(args.get("Total Allocated", 0)),
         "a finite number"),
        ("args.Total Reserved", args.get("Total Reserved", 0) or 0, number(args.get("Total Reserved", 0) or 0),
         "a finite number"),
        ("args.Device Type", args.get("Device Type", -1), _device_type(args.get("Device Type", -1)),
         "an integer from -128 to 127"),
    ]
    for field, value, ok, expected in checks:
        if not ok:
            return f"'{field}' {on} as {expected}; found {shown(value)}"
    return f"numbers where the fields are read {on} ({type(exc).__name__}: {exc})"


def _device_type(value: Any) -> bool:
    try:
        return -128 <= int(value) <= 127
    except (TypeError, ValueError, OverflowError):
        return False


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
                    corr = _correlation(ev.get("args"))
                    if corr != -1:
                        self.rt_corr.append(corr)
                        self.rt_ts.append(ts)
                elif group in _DEVICE_GROUPS:
                    corr = _correlation(ev.get("args"))
                    d = self.dev
                    d[2].append(ts)
                    d[3].append(dur)
                    d[4].append(corr)
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
            # arrays reject non-numbers by themselves; the field at fault is found again for the message
            raise InputError(self.path, f"traceEvents[{index}]", field_at_fault(ev, cat, exc)) from None

    def scanner(self) -> Callable[[str | bytearray, int, int], ScannedRun | None] | None:
        """``scan(text, start, end)``: the run of events ``text[start:end]`` (a str, or bytes) read by the compiled scanner, or None.

        None when the scanner is not there or switched off (``trace_scan``). ``scan`` itself
        returns None for a run it declines: then no name it met stays interned, and the run is
        read the typed way.
        """
        scan = scan_function()
        if scan is None:
            return None
        codes, code_of, names, name_list = self._codes, self._code, self.names, self.name_list

        def scan_run(text: str | bytearray, start: int, end: int) -> ScannedRun | None:
            known = len(name_list)
            got = None
            try:
                got = scan(text, start, end, codes, code_of, names, name_list)
            finally:
                if got is None:  # declined (or failed): the names it interned go, their ids are reused
                    for name in name_list[known:]:
                        del names[name]
                    del name_list[known:]
            return None if got is None else ScannedRun(got)

        return scan_run

    def _add_scanned(self, run: ScannedRun) -> None:
        """The columns of a scanned run, in the order ``add`` appends them (the names are interned already)."""
        (count, cats, dg, dn, dts, ddur, dcorr, hg, hn, hts, hdur, rt_corr, rt_ts, steps,
         m_ts, m_alloc, m_res, m_dev) = run.columns
        self.count += count
        self.cats.update(cats)  # None: no category, merged into "(none)" in finish
        columns: tuple[array[Any], ...] = (*self.dev, *self.host, self.rt_corr, self.rt_ts, *self.mem)
        for column, data in zip(columns,
                                (dg, dn, dts, ddur, dcorr, hg, hn, hts, hdur, rt_corr, rt_ts, m_ts, m_alloc, m_res, m_dev),
                                strict=True):
            column.frombytes(data)
        self.steps.extend(steps)

    def add_batch(self, events: list[Any] | ScannedRun) -> None:
        """Account for a run of typed events (``trace_events.KinetoEvent``): what ``add`` does for each.

        A :class:`~trace_scan.ScannedRun` (from :meth:`scanner`) brings its columns ready.

        The same appends in the same order as ``add``; the schema already guarantees the types
        ``add`` checks (finite float times, integer correlations, string names). What remains
        (a missing ``ts``, a correlation beyond 64 bits, a step number beyond int's digits) is
        handed to ``add`` with the event's fields, so the error and its place are ``add``'s own.
        """
        if isinstance(events, ScannedRun):
            self._add_scanned(events)
            return
        base = self.count
        self.count += len(events)
        self.cats.update(map(_CAT, events))  # None ("cat" absent or null) is "(none)": merged in finish
        codes = self._codes
        dg, dn, dts, ddur, dcorr = self.dev
        hg, hn, hts, hdur = self.host
        rt_corr, rt_ts = self.rt_corr, self.rt_ts
        names = self.names
        step_name = _STEP_NAME.match
        unset = trace_events.UNSET  # typed events: msgspec is imported
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
                    if args.total_allocated is not unset:
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
        """Group everything and return the metric events of this file.

        No numpy: importing numpy alone costs a one-file command ~0.1 s of CPU, more than
        grouping the ~100k kept rows takes. The sums are numpy's, digit for digit
        (:func:`_reduceat_sum`), so no figure moved when numpy left this path. The grouping runs
        in the compiled helpers when they are there (``trace_scan.finish_helpers``), in plain
        Python otherwise: the same figures either way (the tests compare both).
        """
        fast = finish_helpers()
        base_ns = metadata.get("baseTimeNanoseconds")
        base_s = float(base_ns) / 1e9 if isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool) else None

        def unix(ts_us: float) -> float | None:
            if base_s is not None:
                return base_s + ts_us / 1e6
            return ts_us / 1e6 if ts_us >= _EPOCH_US_MIN else None

        common_attrs = {"file": utf8_text(self.path.name), "rank_source": rank_source}
        out: list[MetricEvent] = []

        def emit(name: str, value: float, kind: str, unit: str, step: int | None,
                 ts: float | None, **attrs: Any) -> None:
            out.append(MetricEvent(
                name=name, value=float(value), kind=kind, unit=unit, source="torch_profiler",
                rank=rank, step=step, ts=ts, attrs={**common_attrs, **attrs},
            ))

        steps = sorted(set(self.steps))
        starts = [s[0] for s in steps]
        ends = [s[0] + s[1] for s in steps]
        step_no = [s[2] for s in steps]
        step_ts = [unix(s[0]) for s in steps]
        for (_t0, dur, n), ts in zip(steps, step_ts, strict=True):
            emit("step_time", dur / 1e3, "duration", "ms", n, ts, span=f"ProfilerStep#{n}")

        def step_index(times: Sequence[float]) -> Sequence[int]:
            """Index into ``steps`` of the span holding each time, -1 when outside every step span."""
            if not steps:
                return array("i", [-1]) * len(times) if fast is not None else [-1] * len(times)
            if fast is not None:  # int32 in a memoryview: iterable, and a buffer for group_rows and peak_rows
                return memoryview(fast.step_index(starts_col, ends_col, times)).cast("i")
            find = bisect_right
            return [i if (i := find(starts, t) - 1) >= 0 and t < ends[i] else -1 for t in times]

        starts_col, ends_col = array("d", starts), array("d", ends)

        def step_of(si: int) -> tuple[int | None, float | None]:
            return (None, None) if si < 0 else (step_no[si], step_ts[si])

        # device events: step of the launching runtime call (its first one in file order) when known
        dg, dn, dts, ddur, dcorr = self.dev
        if fast is not None:
            dsi = step_index(memoryview(fast.launch_times(dcorr, dts, self.rt_corr, self.rt_ts)).cast("d"))
        else:
            launched: dict[int, float] = {}
            for corr, t in zip(self.rt_corr, self.rt_ts, strict=True):
                if corr not in launched:
                    launched[corr] = t
            if launched:
                get = launched.get
                dsi = step_index([get(c, t) if c >= 0 else t for c, t in zip(dcorr, dts, strict=True)])
            else:
                dsi = step_index(dts)
        hg, hn, hts, hdur = self.host
        hsi = step_index(hts)

        groups = _DEVICE_GROUPS + _HOST_GROUPS
        # a name holding a lone surrogate ("k\\ud800x" is valid JSON: a truncated C++ string) keeps its event; the
        # code point is written as text (\\ud800), as a non-UTF-8 file name's byte is (\\xNN): no UTF-8 writer
        # could write it as it is
        names = [n if n.isascii() else utf8_text(n) for n in self.name_list]
        comm_ids = {i for i, nm in enumerate(names) if _COMM.search(nm)}

        for g_arr, n_arr, dur_arr, si_arr in ((dg, dn, ddur, dsi), (hg, hn, hdur, hsi)):
            if fast is not None:
                grouped = fast.group_rows(g_arr, n_arr, si_arr, dur_arr)
            else:
                grouped = _group_rows(g_arr, n_arr, si_arr, dur_arr)
            totals: dict[tuple[str, int], list[float]] = {}
            for gid, nid, si, total, cnt, longest, shortest in grouped:
                group = groups[gid]
                step, ts = step_of(si)
                emit(f"{group}:{names[nid]}", total / 1e3, "duration", "ms", step, ts,
                     category=group, op=names[nid], count=cnt, mean_ms=total / cnt / 1e3,
                     max_ms=longest / 1e3, min_ms=shortest / 1e3)
                acc = totals.setdefault((group, si), [0.0, 0, 0.0])
                acc[0] += total
                acc[1] += cnt
                if group == "kernel" and nid in comm_ids:
                    acc[2] += total
            for (group, si), (total, count, comm) in sorted(totals.items()):
                step, ts = step_of(si)
                if group in ("kernel", "memcpy", "memset"):
                    emit(f"gpu.{group}_time", total / 1e3, "duration", "ms", step, ts, count=count)
                if group == "kernel":
                    emit("gpu.kernel_count", count, "counter", "count", step, ts)
                    emit("gpu.comm_time", comm / 1e3, "duration", "ms", step, ts)
                elif group == "device_op":
                    emit("device.op_time", total / 1e3, "duration", "ms", step, ts, count=count)

        mts, malloc, mres, mdev = self.mem
        msi = step_index(mts)
        if fast is not None:  # the 54 MB real trace's 28,000 memory rows: ~12 ms in the loop below
            peak_rows = fast.peak_rows(msi, mdev, malloc, mres)
        else:
            peak_rows = _peak_rows(msi, mdev, malloc, mres)
        for si, dev, allocated, reserved in peak_rows:
            step, ts = step_of(si)
            emit("memory.allocated_peak", allocated, "gauge", "bytes", step, ts, device_type=dev)
            emit("memory.reserved_peak", reserved, "gauge", "bytes", step, ts, device_type=dev)

        cats = Counter({c: n for c, n in self.cats.items() if c is not None})
        if None in self.cats:  # typed events count a missing category as None
            cats["(none)"] += self.cats[None]
        for cat, cnt in sorted(cats.items()):
            emit("trace.events", cnt, "counter", "count", None, None, category=utf8_text(cat))
        return out


def _peak_rows(steps: Iterable[int], devices: Iterable[int], allocated: Iterable[float],
               reserved: Iterable[float]) -> list[tuple[int, int, float, float]]:
    """Per (step index, device type), sorted: the largest allocated and reserved bytes (the compiled
    ``peak_rows``' twin: a later value replaces the kept one only when it is greater)."""
    peaks: dict[tuple[int, int], list[float]] = {}
    for key, a, r in zip(zip(steps, devices, strict=True), allocated, reserved, strict=True):
        peak = peaks.get(key)
        if peak is None:
            peaks[key] = [a, r]
        else:
            if a > peak[0]:
                peak[0] = a
            if r > peak[1]:
                peak[1] = r
    return [(si, dev, a, r) for (si, dev), (a, r) in sorted(peaks.items())]


def _group_rows(g_arr: Sequence[int], n_arr: Sequence[int], si_arr: Sequence[int], dur_arr: Sequence[float]
                ) -> list[tuple[int, int, int, float, int, float, float]]:
    """(group, name, step index, total, count, max, min) per key, sorted: durations summed in file order.

    The Python twin of the compiled ``group_rows`` (``_kineto_scan.c``).
    """
    rows: dict[tuple[int, int, int], list[float]] = {}  # (group, name, step index): durations in file order
    for row_key, dur in zip(zip(g_arr, n_arr, si_arr, strict=True), dur_arr, strict=True):
        row = rows.get(row_key)
        if row is None:
            rows[row_key] = [dur]
        else:
            row.append(dur)
    return [(gid, nid, si, _reduceat_sum(durs), len(durs), max(durs), min(durs))
            for (gid, nid, si), durs in sorted(rows.items())]


def _pairwise(a: list[float], lo: int, n: int) -> float:
    """numpy's pairwise summation of ``a[lo:lo + n]``: 8 running sums per block of up to 128, halves above."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r = a[lo:lo + 8]
        end = lo + n - n % 8
        for i in range(lo + 8, end, 8):
            r[0] += a[i]
            r[1] += a[i + 1]
            r[2] += a[i + 2]
            r[3] += a[i + 3]
            r[4] += a[i + 4]
            r[5] += a[i + 5]
            r[6] += a[i + 6]
            r[7] += a[i + 7]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(end, lo + n):
            res += a[i]
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, lo, half) + _pairwise(a, lo + half, n - half)


def _reduceat_sum(a: list[float]) -> float:
    """The sum ``numpy.add.reduceat`` gives for one segment: its first value plus the pairwise sum of the rest.

    Kept bit for bit so the figures of this provider did not change when numpy left it (a plain
    ``sum`` differs in the last digits on long segments).
    """
    if len(a) < 2:
        return a[0]
    return a[0] + _pairwise(a, 1, len(a) - 1)
