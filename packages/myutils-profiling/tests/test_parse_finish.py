"""TraceAggregator.finish in plain Python gives what its numpy version gave, to the last digit.

The reference below is the numpy ``finish`` this provider had before numpy left its path
(importing numpy cost a one-file command ~0.1 s of CPU), kept verbatim. Compared on every real
Kineto trace and on generated rows (long segments, where the order of a sum shows).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent
from my_utils.profiling.kineto.read import aggregate as trace_aggregate
from my_utils.profiling.kineto.read.aggregate import TraceAggregator
from my_utils.profiling.kineto.read.stream import TraceStream

np = pytest.importorskip("numpy", reason="the reference grouping is numpy's (a dependency of myutils-profiling)")

_DEVICE_GROUPS = trace_aggregate._DEVICE_GROUPS
_HOST_GROUPS = trace_aggregate._HOST_GROUPS
_COMM = re.compile(r"nccl|rccl", re.IGNORECASE)
_EPOCH_US_MIN = 1e15


def _numpy_finish(self: TraceAggregator, metadata: Mapping[str, Any], rank: int | None,
                  rank_source: str) -> list[MetricEvent]:
    """TraceAggregator.finish as it was with numpy (commit cc0f194), verbatim (commit e5cb919): the reference."""
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


def _aggregated(path: Path) -> tuple[TraceAggregator, dict[str, Any]]:
    agg = TraceAggregator(path)
    stream = TraceStream(path)
    for item in stream.items():
        if isinstance(item, list):
            agg.add_batch(item)
        else:
            agg.add(item)
    return agg, stream.metadata


def _kineto_names() -> list[str]:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    registry = Path(__file__).resolve().parents[3] / "fixtures" / "registry.toml"
    return sorted(n for n in tomllib.loads(registry.read_text())["files"]
                  if n.startswith("kineto/") and not n.endswith("memory_timeline.raw.gz"))


@pytest.mark.parametrize("name", _kineto_names())
def test_parse_finish_equals_numpy_on_every_real_trace(name: str, real_fixtures: Any) -> None:
    agg, metadata = _aggregated(real_fixtures / name)
    mine = agg.finish(metadata, 3, "distributedInfo")
    reference = _numpy_finish(agg, metadata, 3, "distributedInfo")
    assert [repr(e) for e in mine] == [repr(e) for e in reference]  # repr: -0.0 and 0.0 told apart too


@pytest.mark.parametrize("seed", range(6))
def test_parse_finish_equals_numpy_on_generated_rows(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    agg = TraceAggregator(tmp_path / "t.json")
    steps = rng.choice([0, 1, 4])
    for n in range(steps):
        agg.add({"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{n}", "ts": n * 1000.0, "dur": 900.0})
    for _ in range(rng.choice([0, 50, 3000])):
        cat = rng.choice(["kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events", "cpu_op", "user_annotation",
                          "cuda_runtime"])
        ts = rng.uniform(-100, steps * 1000 + 100)
        dur = rng.choice([rng.uniform(0, 50), rng.random() * 1e-3, float(rng.randint(0, 9)), rng.uniform(0, 1e9)])
        corr = rng.randint(-1, 40)
        agg.add({"ph": "X", "cat": cat, "name": rng.choice(["a", "b", "nccl_x", "c"]), "ts": ts, "dur": dur,
                 "args": {"correlation": corr}})
    for _ in range(rng.choice([0, 30])):
        agg.add({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": rng.uniform(0, steps * 1000),
                 "args": {"Total Allocated": rng.randint(0, 10**9), "Total Reserved": rng.randint(0, 10**9),
                          "Device Type": rng.choice([0, 1])}})
    metadata = {"baseTimeNanoseconds": 1_700_000_000_000_000_000} if seed % 2 else {}
    assert [repr(e) for e in agg.finish(metadata, None, "unknown")] == \
        [repr(e) for e in _numpy_finish(agg, metadata, None, "unknown")]
