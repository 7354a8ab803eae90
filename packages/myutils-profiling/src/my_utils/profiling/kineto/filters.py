"""Trace filters: keep part of one rank's trace (a time range, iterations, one side, names, under an operator).

Every Kineto analysis reads a :class:`~my_utils.profiling.kineto.rank_data.RankData`;
:meth:`TraceFilter.apply` returns a smaller one, so every analysis accepts a filtered trace
(``analyze_traces(..., trace_filter=TraceFilter(first_iteration=True))``). The criteria are
Holistic Trace Analysis' filters (``hta/common/trace_filter.py``, ``trace_stack_filter.py``),
applied in its order when combined: iteration → under operator → time range → device → name.

``time_range=(start, end)``
    events contained in the range: ``start <= ts`` and ``ts + dur <= end``, in the trace's own
    µs (the numbers written in the file), as HTA's ``TimeRangeFilter``.
``iterations=(551,)`` / ``iteration_index=(0,)`` / ``first_iteration=True``
    events of those ``ProfilerStep#N`` numbers, or of those positions among the iterations
    present (``IterationFilter`` / ``IterationIndexFilter`` / ``FirstIterationFilter``). A CPU
    event belongs to the step whose span holds its start (``step.ts <= ts < step.end``); a GPU
    activity to the step of the runtime call that launched it; an event of no step is dropped.
``device="gpu"`` / ``"cpu"``
    GPU activities (kernels, copies, sets, syncs on a stream, and the event/context syncs on no
    stream, which run on the device) or everything else (``GPUKernelFilter`` / ``CPUOperatorFilter``).
``name="^nccl"``
    events whose name matches the regular expression at its start (``re.match``, ``NameFilter``).
``hta_default=True``
    Holistic Trace Analysis' default cut, applied first: the CPU events that start before the last
    ``ProfilerStep`` starts and the GPU activities they launched (``step_scope.before_last_step``).
``under="## forward ##"`` (``under_position=0``, ``include_gpu_kernels=True``)
    the ``under_position``-th occurrence (by start; negative counts from the end) of the CPU
    operator or annotation of exactly that name; kept: the CPU events of any thread inside its
    span, and (``include_gpu_kernels``) the GPU activities they launched (``UnderOperatorFilter``).
    A name that does not occur keeps nothing.
``combined=CombinedOperatorFilter(root, preceding, following)``
    HTA's ``CombinedOperatorFilter``, applied before the others: in the first iteration, the CPU events
    under ``root``, after the last ``preceding`` and before the first ``following`` (``kineto.operator_filter``).

Filtering never re-reads the file: it selects rows of the columns the single pass kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from my_utils.core.errors import UsageError
from my_utils.profiling.kineto.rank_data import RankData

if TYPE_CHECKING:
    from my_utils.profiling.kineto.operator_filter import CombinedOperatorFilter

DEVICES = ("gpu", "cpu")
#: Names of the event syncs that run on the device though written on no stream (HTA's GPU filter keeps them).
DEVICE_SYNCS = frozenset({"Event Sync", "Context Sync"})


@dataclass(frozen=True)
class TraceFilter:
    """What to keep of a trace (module docstring); every field left at its default keeps everything."""

    time_range: tuple[float, float] | None = None
    iterations: tuple[int, ...] | None = None
    iteration_index: tuple[int, ...] | None = None
    first_iteration: bool = False
    device: str | None = None
    name: str | None = None
    under: str | None = None
    under_position: int = 0
    include_gpu_kernels: bool = True
    hta_default: bool = False
    combined: CombinedOperatorFilter | None = None

    def __post_init__(self) -> None:
        if self.time_range is not None:
            if len(self.time_range) != 2 or not all(isinstance(t, (int, float)) for t in self.time_range):
                raise UsageError(f"trace filter time_range={self.time_range!r}: expected (start, end) in trace µs")
            if self.time_range[0] > self.time_range[1]:
                raise UsageError(f"trace filter time_range={self.time_range!r}: the start is after the end")
        if self.device is not None and self.device not in DEVICES:
            raise UsageError(f"trace filter device={self.device!r}: expected one of {', '.join(DEVICES)}")
        if self.name is not None:
            try:
                re.compile(self.name)
            except re.error as exc:
                raise UsageError(f"trace filter name={self.name!r}: not a regular expression ({exc})") from None
        chosen = sum(x is not None and x is not False for x in (self.iterations, self.iteration_index,
                                                              self.first_iteration or None))
        if chosen > 1:
            raise UsageError("trace filter: give one of iterations, iteration_index, first_iteration")

    @classmethod
    def parse(cls, text: str) -> TraceFilter:
        """A filter from the CLI's ``--filter`` text: ``;``-separated criteria.

        ``first_iteration`` · ``iterations=551,552`` · ``iteration_index=0`` · ``time=START:END`` (trace µs) ·
        ``device=gpu`` / ``device=cpu`` · ``name=REGEX`` · ``under=NAME`` or ``under=NAME#POSITION`` ·
        ``hta_default`` (HTA's default: before the last ProfilerStep) ·
        ``no_gpu_kernels`` (with ``under``: leave out the GPU activities it launched) ·
        ``combined=ROOT|PRECEDING|FOLLOWING`` (HTA's ``CombinedOperatorFilter``; ``combined_gpu`` adds the
        GPU activities the kept calls launched). Example: ``--filter "first_iteration; under=## forward ##"``.
        """
        from my_utils.profiling.kineto.operator_filter import CombinedOperatorFilter

        fields: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(";")):
            if not part:
                continue
            key, sep, value = part.partition("=")
            key, value = key.strip(), value.strip()
            try:
                if key == "first_iteration" and not sep:
                    fields["first_iteration"] = True
                elif key == "hta_default" and not sep:
                    fields["hta_default"] = True
                elif key == "no_gpu_kernels" and not sep:
                    fields["include_gpu_kernels"] = False
                elif key == "combined" and sep and value.count("|") == 2:
                    root, preceding, following = (v.strip() for v in value.split("|"))
                    fields["combined"] = CombinedOperatorFilter(root, preceding, following,
                                                                fields.pop("_combined_gpu", False))
                elif key == "combined_gpu" and not sep:
                    if "combined" in fields:
                        fields["combined"] = replace(fields["combined"], include_gpu_kernels=True)
                    else:
                        fields["_combined_gpu"] = True
                elif key in ("iterations", "iteration_index") and sep:
                    fields[key] = tuple(int(v) for v in value.split(",") if v.strip())
                elif key == "time" and sep:
                    lo, _colon, hi = value.partition(":")
                    fields["time_range"] = (float(lo), float(hi))
                elif key in ("device", "name") and sep:
                    fields[key] = value
                elif key == "under" and sep:
                    name, hash_, pos = value.rpartition("#")
                    if hash_ and pos.strip().lstrip("-").isdigit():
                        fields["under"], fields["under_position"] = name, int(pos)
                    else:
                        fields["under"] = value
                else:
                    raise ValueError(part)
            except ValueError:
                raise UsageError(f"--filter {text!r}: cannot read {part!r}; expected hta_default, first_iteration, "
                                 "iterations=N[,N], iteration_index=I[,I], time=START:END, device=gpu|cpu, "
                                 "name=REGEX, under=NAME[#POSITION], no_gpu_kernels, "
                                 "combined=ROOT|PRECEDING|FOLLOWING, combined_gpu, separated by ';'") from None
        if fields.pop("_combined_gpu", False):
            raise UsageError(f"--filter {text!r}: combined_gpu needs combined=ROOT|PRECEDING|FOLLOWING")
        return cls(**fields)

    @property
    def active(self) -> bool:
        """Whether this filter drops anything at all."""
        return self != TraceFilter()

    def describe(self) -> str:
        """The filter in words, for reports (``"first iteration; under '## forward ##' #0"``)."""
        parts: list[str] = []
        if self.hta_default:
            parts.append("HTA's default (before the last ProfilerStep)")
        if self.combined is not None:
            parts.append(self.combined.describe())
        if self.first_iteration:
            parts.append("first iteration")
        if self.iterations is not None:
            parts.append("iterations " + ", ".join(map(str, self.iterations)))
        if self.iteration_index is not None:
            parts.append("iteration positions " + ", ".join(map(str, self.iteration_index)))
        if self.under is not None:
            parts.append(f"under {self.under!r} #{self.under_position}"
                         + (" with its GPU activities" if self.include_gpu_kernels else ""))
        if self.time_range is not None:
            parts.append(f"time range [{_us(self.time_range[0])}, {_us(self.time_range[1])}] µs")
        if self.device is not None:
            parts.append(f"{self.device.upper()} events only")
        if self.name is not None:
            parts.append(f"names matching {self.name!r}")
        return "; ".join(parts) or "no filter"

    def apply(self, d: RankData) -> RankData:
        """The part of ``d`` this filter keeps (``d`` itself when the filter keeps everything)."""
        if not self.active:
            return d
        # each criterion reads what the previous ones kept (HTA chains its filters the same way: the
        # first "forward" of the second iteration, not the first "forward" of the trace)
        if self.hta_default:  # HTA cuts at load, before any of its filters
            from my_utils.profiling.kineto.step_scope import before_last_step

            d = before_last_step(d).take(d)
        if self.combined is not None:
            d = self.combined.apply(d)
        if self.first_iteration or self.iterations is not None or self.iteration_index is not None:
            d = _by_iteration(d, self).take(d)
        if self.under is not None:
            d = _under(d, self.under, self.under_position, self.include_gpu_kernels).take(d)
        if self.time_range is not None:
            d = _in_range(d, self.time_range[0] - d.base_us, self.time_range[1] - d.base_us).take(d)
        if self.device is not None:
            d = _by_device(d, self.device).take(d)
        if self.name is not None:
            d = _by_name(d, re.compile(self.name)).take(d)
        return d


@dataclass
class Keep:
    """One boolean mask per table of a :class:`RankData` (GPU, runtime, operators, annotations, host syncs, steps)."""

    gpu: Any
    rt: Any
    op: Any
    ann: Any
    hsync: Any
    step: Any

    @classmethod
    def everything(cls, d: RankData) -> Keep:
        """A mask keeping every row."""
        return cls(np.ones(len(d.gpu_ts), bool), np.ones(len(d.rt_ts), bool), np.ones(_n(d.op_ts), bool),
                   np.ones(len(d.ann_ts), bool), np.ones(_n(d.hsync_ts), bool), np.ones(len(d.step_events), bool))

    def take(self, d: RankData) -> RankData:
        """``d`` with only the kept rows; launch links (``gpu_rt``) and per-row arguments follow their rows."""
        new_rt = np.full(len(d.rt_ts), -1, dtype=np.int64)
        new_rt[self.rt] = np.arange(int(self.rt.sum()))
        gpu_rt = d.gpu_rt[self.gpu]
        gpu_rt = np.where(gpu_rt >= 0, new_rt[np.clip(gpu_rt, 0, None)] if len(new_rt) else -1, -1)
        rt_has_gpu = np.zeros(int(self.rt.sum()), dtype=bool)
        rt_has_gpu[gpu_rt[gpu_rt >= 0]] = True
        kept_steps = [s for s, k in zip(d.step_events, self.step.tolist(), strict=True) if k]
        step_keys = {(s[0], s[1], s[2]) for s in kept_steps}
        return replace(
            d,
            gpu_stream=d.gpu_stream[self.gpu], gpu_ts=d.gpu_ts[self.gpu], gpu_dur=d.gpu_dur[self.gpu],
            gpu_end=d.gpu_end[self.gpu], gpu_name=d.gpu_name[self.gpu], gpu_kind=d.gpu_kind[self.gpu],
            gpu_corr=d.gpu_corr[self.gpu], gpu_rt=gpu_rt, gpu_sync=d.gpu_sync[self.gpu],
            gpu_device=d.gpu_device[self.gpu], gpu_index=_sel(d.gpu_index, self.gpu),
            gpu_args=_remap(d.gpu_args, self.gpu),
            rt_thread=d.rt_thread[self.rt], rt_ts=d.rt_ts[self.rt], rt_dur=d.rt_dur[self.rt],
            rt_name=d.rt_name[self.rt], rt_corr=d.rt_corr[self.rt], rt_has_gpu=rt_has_gpu,
            rt_index=_sel(d.rt_index, self.rt),
            op_thread=_sel(d.op_thread, self.op), op_ts=_sel(d.op_ts, self.op), op_dur=_sel(d.op_dur, self.op),
            op_end=_sel(d.op_end, self.op), op_name=_sel(d.op_name, self.op), op_index=_sel(d.op_index, self.op),
            op_args=_remap(d.op_args, self.op), op_sig=_sel(d.op_sig, self.op),
            ann_thread=d.ann_thread[self.ann], ann_ts=d.ann_ts[self.ann], ann_end=d.ann_end[self.ann],
            ann_name=d.ann_name[self.ann], ann_index=_sel(d.ann_index, self.ann),
            hsync_ts=_sel(d.hsync_ts, self.hsync), hsync_dur=_sel(d.hsync_dur, self.hsync),
            hsync_name=_sel(d.hsync_name, self.hsync), hsync_corr=_sel(d.hsync_corr, self.hsync),
            hsync_index=_sel(d.hsync_index, self.hsync), hsync_device=_sel(d.hsync_device, self.hsync),
            hsync_args=_remap(d.hsync_args, self.hsync),
            step_events=kept_steps, steps=[s for s in d.steps if s in step_keys],
            **_memory_kept(d, self.op),
        )


def _memory_kept(d: RankData, op: Any) -> dict[str, Any]:
    """The ``[memory]`` events inside the span of the operators kept (they belong to no other table)."""
    if d.mem_ts is None or not len(d.mem_ts):
        return {}
    if d.op_ts is None or not len(d.op_ts) or not op.any():
        keep = np.zeros(len(d.mem_ts), bool)
    else:
        keep = (d.mem_ts >= d.op_ts[op].min()) & (d.mem_ts <= d.op_end[op].max())
    return {k: getattr(d, k)[keep] for k in ("mem_ts", "mem_thread", "mem_bytes", "mem_total", "mem_reserved",
                                             "mem_device", "mem_addr", "mem_index")}


def _us(t: float) -> str:
    return f"{t:.0f}" if float(t).is_integer() else f"{t}"


def _n(column: Any) -> int:
    return 0 if column is None else len(column)


def _sel(column: Any, mask: Any) -> Any:
    return None if column is None else column[mask]


def _remap(args: dict[int, dict[str, Any]], mask: Any) -> dict[int, dict[str, Any]]:
    """Per-row arguments re-keyed to the rows kept by ``mask``."""
    if not args:
        return {}
    new = np.cumsum(mask) - 1
    return {int(new[k]): v for k, v in args.items() if mask[k]}


# -- the criteria ----------------------------------------------------------------------


def step_spans(d: RankData) -> list[tuple[float, float, int]]:
    """``(start, end, step number)`` of each ``ProfilerStep`` of ``d``, by start (relative µs)."""
    return sorted({(ts, ts + dur, step) for ts, dur, step, *_ in d.step_events})


def iteration_of(d: RankData) -> dict[str, Any]:
    """The step number of every row, per table (``-1``: in no step), as HTA assigns it (module docstring)."""
    spans = step_spans(d)
    starts = np.array([s for s, _e, _n in spans], dtype=np.float64)
    ends = np.array([e for _s, e, _n in spans], dtype=np.float64)
    numbers = np.array([n for _s, _e, n in spans], dtype=np.int64)

    def host(ts: Any) -> Any:
        if ts is None or not len(ts) or not len(spans):
            return np.full(_n(ts), -1, dtype=np.int64)
        # the last step starting at or before ts; steps of one trace do not overlap
        pos = np.searchsorted(starts, ts, side="right") - 1
        ok = (pos >= 0) & (ts < ends[np.clip(pos, 0, None)])
        return np.where(ok, numbers[np.clip(pos, 0, None)], -1)

    rt = host(d.rt_ts)
    gpu = np.where(d.gpu_rt >= 0, rt[np.clip(d.gpu_rt, 0, None)] if len(rt) else -1, -1)
    step = np.array([s[2] for s in d.step_events], dtype=np.int64)
    return {"gpu": gpu, "rt": rt, "op": host(d.op_ts), "ann": host(d.ann_ts), "hsync": host(d.hsync_ts),
            "step": step}


def _by_iteration(d: RankData, f: TraceFilter) -> Keep:
    it = iteration_of(d)
    present = sorted({n for _s, _e, n in step_spans(d)})
    if f.iterations is not None:
        wanted = set(f.iterations)
    else:
        positions = (0,) if f.first_iteration else tuple(f.iteration_index or ())
        wanted = {n for i, n in enumerate(present) if i in positions}
    w = np.array(sorted(wanted), dtype=np.int64)
    return Keep(**{k: np.isin(v, w) for k, v in it.items()})


def _in_range(d: RankData, lo: float, hi: float) -> Keep:
    def inside(ts: Any, end: Any) -> Any:
        return np.zeros(0, bool) if ts is None else (ts >= lo) & (end <= hi)

    steps = np.array([lo <= s[0] and s[0] + s[1] <= hi for s in d.step_events], dtype=bool)
    hsync_end = None if d.hsync_ts is None else d.hsync_ts + d.hsync_dur
    return Keep(inside(d.gpu_ts, d.gpu_end), inside(d.rt_ts, d.rt_ts + d.rt_dur), inside(d.op_ts, d.op_end),
                inside(d.ann_ts, d.ann_end), inside(d.hsync_ts, hsync_end), steps)


def _device_syncs(d: RankData) -> Any:
    ids = np.array([i for i, n in enumerate(d.names) if n in DEVICE_SYNCS] or [-1])
    return np.isin(d.hsync_name, ids) if _n(d.hsync_name) else np.zeros(0, bool)


def _by_device(d: RankData, device: str) -> Keep:
    every = Keep.everything(d)
    on_gpu = _device_syncs(d)
    if device == "gpu":
        return Keep(every.gpu, ~every.rt, ~every.op, ~every.ann, on_gpu, ~every.step)
    return Keep(~every.gpu, every.rt, every.op, every.ann, ~on_gpu, every.step)


def _by_name(d: RankData, pattern: re.Pattern[str]) -> Keep:
    hit = np.array([pattern.match(n) is not None for n in d.names] or [False], dtype=bool)

    def match(names: Any) -> Any:
        return np.zeros(0, bool) if names is None or not len(names) else hit[names]

    steps = np.array([bool(hit[s[5]]) for s in d.step_events], dtype=bool)
    return Keep(match(d.gpu_name), match(d.rt_name), match(d.op_name), match(d.ann_name), match(d.hsync_name), steps)


def find_occurrence(d: RankData, name: str, position: int = 0) -> tuple[float, float] | None:
    """``(start, end)`` of the ``position``-th CPU operator or annotation called exactly ``name`` (by start)."""
    nid = next((i for i, n in enumerate(d.names) if n == name), None)
    if nid is None:
        return None
    spans: list[tuple[float, float]] = []
    for ts, end, names in ((d.op_ts, d.op_end, d.op_name), (d.ann_ts, d.ann_end, d.ann_name)):
        if names is not None and len(names):
            sel = names == nid
            spans.extend(zip(ts[sel].tolist(), end[sel].tolist(), strict=True))
    spans.extend((s[0], s[0] + s[1]) for s in d.step_events if s[5] == nid)
    spans.sort()
    pos = position if position >= 0 else len(spans) + position
    return spans[pos] if 0 <= pos < len(spans) else None


def _under(d: RankData, name: str, position: int, include_gpu: bool) -> Keep:
    found = find_occurrence(d, name, position)
    every = Keep.everything(d)
    if found is None:
        return Keep(~every.gpu, ~every.rt, ~every.op, ~every.ann, ~every.hsync, ~every.step)
    lo, hi = found
    inside = _in_range(d, lo, hi)
    gpu = np.zeros(len(d.gpu_ts), bool)
    if include_gpu and len(d.gpu_ts):
        launched = d.gpu_rt >= 0
        gpu[launched] = inside.rt[d.gpu_rt[launched]]
    return Keep(gpu, inside.rt, inside.op, inside.ann, inside.hsync, inside.step)
