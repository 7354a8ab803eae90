"""GPU-level facts of one side of a diff, and the step-time change accounted for by cause.

A diff answers "why did the step time change?", so it starts from the GPU, one *lane* per
GPU (a device of one trace or export): its span (first start to last end of any kernel,
copy or set), busy time (their union), idle time (span − busy) by cause, the union of
computation kernels, the union of communication kernels and the part of it under
computation. Kinds are the Kineto analyses' (``kineto.kinds``), idle causes those of the
device-level idle analysis (host wait, kernel wait, other).

Each *window* (a ``ProfilerStep``, an NVTX iteration, or the whole capture when there are
neither) splits into four parts that add up to it by construction: compute (time under a
computation kernel), exposed communication (communication under no computation), other GPU
work (copies, sets, other kernels under neither) and idle. The step-time change is therefore
the sum of the four parts' changes; what is left (the *remainder*) is the step time measured
elsewhere (the provider's ``ProfilerStep`` durations, the CPU iteration ranges) minus the
windows. A part's change is judged only from repeated windows (steps or iterations); a
capture is one window, so a diff of captures is descriptive and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.kinds import KINDS, KernelKind

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a lane is computed (in the worker that read the trace)
    np = lazy_module("numpy", __name__, "np")

#: The parts a window splits into, in display order, with their labels.
PARTS: dict[str, str] = {"compute": "compute", "exposed_communication": "exposed communication",
                         "other_gpu": "other GPU work", "idle": "GPU idle"}
#: Idle causes (the Kineto device-idle analysis' categories), with their labels.
IDLE_CAUSES: dict[str, str] = {"host_wait": "waiting for the host", "kernel_wait": "between kernels",
                               "other": "other (syncs, other streams)"}
#: What a window is, by source: the unit of the accounting is "ms per <window>".
WINDOWS = ("step", "iteration", "capture")
_COMP, _COMM = (KINDS.index(k) for k in (KernelKind.COMPUTATION, KernelKind.COMMUNICATION))


@dataclass(frozen=True)
class LaneFacts:
    """One GPU of one run: totals over its span (ms) and its windows split into :data:`PARTS` (ms each).

    ``windows[i]`` is ``(length, compute, exposed_communication, other_gpu, idle)``; the four
    parts add up to ``length``. ``window`` says what a window is (:data:`WINDOWS`).
    """

    label: str
    span_ms: float
    busy_ms: float
    compute_ms: float
    communication_ms: float
    overlap_ms: float
    idle_causes: tuple[tuple[str, float], ...]
    windows: tuple[tuple[float, float, float, float, float], ...]
    window: str = "capture"

    @property
    def idle_ms(self) -> float:
        """Span minus busy."""
        return self.span_ms - self.busy_ms


@dataclass(frozen=True)
class Moments:
    """Mean, population std and count of a set of samples."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Moments:
        """The moments of ``values`` (all zero for none)."""
        if not values:
            return cls(0.0, 0.0, 0)
        mean = math.fsum(values) / len(values)
        return cls(mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)), len(values))


@dataclass(frozen=True)
class GpuSide:
    """Every GPU lane of one side of a diff; totals are sums over lanes, per-window figures pool their windows."""

    lanes: tuple[LaneFacts, ...]
    notes: tuple[str, ...] = ()

    def total(self, key: str) -> float:
        """A span-level total summed over lanes: ``span_ms``, ``busy_ms``, ``idle_ms``, ``compute_ms``..."""
        return math.fsum(float(getattr(lane, key)) for lane in self.lanes)

    def idle_cause(self, cause: str) -> float:
        """Idle time of one cause, summed over lanes (ms)."""
        return math.fsum(ms for lane in self.lanes for c, ms in lane.idle_causes if c == cause)

    @property
    def window(self) -> str:
        """What a window is on this side; ``capture`` when lanes disagree (a mixed side is not per step)."""
        kinds = {lane.window for lane in self.lanes}
        return kinds.pop() if len(kinds) == 1 else "capture"

    @property
    def windows(self) -> int:
        """Windows over all lanes: the samples the per-window figures rest on (a capture is one)."""
        return 1 if self.window == "capture" and self.lanes else sum(len(lane.windows) for lane in self.lanes)

    def part(self, index: int) -> Moments:
        """Column ``index`` (0 the length, 1.. the :data:`PARTS`): moments over every step or iteration of every
        lane, or, for a capture, its one sample summed over the GPUs."""
        values = [w[index] for lane in self.lanes for w in lane.windows]
        if self.window == "capture":
            return Moments(math.fsum(values), 0.0, 1) if values else Moments.of([])
        return Moments.of(values)

    @property
    def measured(self) -> bool:
        """Whether the per-window figures rest on repeated windows (steps or iterations, at least 2)."""
        return self.window != "capture" and self.windows >= 2

    def to_dict(self) -> dict[str, Any]:
        """JSON of this side: totals, idle causes, per-window parts and the lanes."""
        parts = {name: _moments_dict(self.part(i + 1)) for i, name in enumerate(PARTS)}
        return {"window": self.window, "windows": self.windows, "measured": self.measured,
                "gpus": len(self.lanes), "span_ms": self.total("span_ms"), "busy_ms": self.total("busy_ms"),
                "idle_ms": self.total("idle_ms"), "compute_ms": self.total("compute_ms"),
                "communication_ms": self.total("communication_ms"), "overlap_ms": self.total("overlap_ms"),
                "idle_causes_ms": {c: self.idle_cause(c) for c in IDLE_CAUSES},
                "per_window": {"length": _moments_dict(self.part(0)), **parts},
                "lanes": [lane.label for lane in self.lanes], "notes": list(self.notes)}


def _moments_dict(m: Moments) -> dict[str, float | int]:
    return {"mean_ms": m.mean, "std_ms": m.std, "n": m.n}


# -- one lane from interval columns -------------------------------------------------------


def _covered(u: tuple[Any, Any], a: Any, b: Any) -> Any:
    """Length of the disjoint sorted intervals ``u`` inside each window ``[a[i], b[i])``."""
    s, e = u
    if not len(s):
        return np.zeros(len(a))
    cum = np.concatenate(([0.0], np.cumsum(e - s)))

    def upto(t: Any) -> Any:
        i = np.searchsorted(s, t, side="right")  # intervals starting at or before t
        j = np.maximum(i - 1, 0)
        part = np.where(i > 0, np.clip(np.minimum(t, e[j]) - s[j], 0.0, None), 0.0)
        return cum[j] + part

    return upto(np.asarray(b, dtype=np.float64)) - upto(np.asarray(a, dtype=np.float64))


def lane_facts(label: str, ts: Any, end: Any, kind: Any, windows: Sequence[tuple[float, float]],
               idle_causes: Mapping[str, float], window: str, scale: float = 1e-3) -> LaneFacts:
    """One lane from its activities (start, end, kind index into ``KINDS``, in any order) and windows.

    Times are in any unit; ``scale`` turns them into ms (1e-3 for µs, 1e-6 for ns). Without
    windows the lane's span is its one window (``window`` is then ``capture``).
    """
    from my_utils.profiling.kineto import intervals

    ts = np.asarray(ts, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    kind = np.asarray(kind)
    comp, comm = kind == _COMP, kind == _COMM
    u_all = intervals.union(ts, end)
    u_comp = intervals.union(ts[comp], end[comp])
    u_comm = intervals.union(ts[comm], end[comm])
    both = comp | comm
    u_cc = intervals.union(ts[both], end[both])
    length = lambda u: float((u[1] - u[0]).sum())  # noqa: E731
    start, stop = (float(ts.min()), float(end.max())) if len(ts) else (0.0, 0.0)
    if not windows:
        windows, window = [(start, stop)], "capture"
    a = np.array([w[0] for w in windows], dtype=np.float64)
    b = np.array([w[1] for w in windows], dtype=np.float64)
    busy, cw, cc = _covered(u_all, a, b), _covered(u_comp, a, b), _covered(u_cc, a, b)
    rows = tuple((float(n) * scale, float(c) * scale, float(x - c) * scale, float(bz - x) * scale,
                  float(n - bz) * scale) for n, c, x, bz in zip((b - a).tolist(), cw.tolist(), cc.tolist(),
                                                                busy.tolist(), strict=True))
    comp_ms, comm_ms = length(u_comp) * scale, length(u_comm) * scale
    return LaneFacts(label, (stop - start) * scale, length(u_all) * scale, comp_ms, comm_ms,
                     comp_ms + comm_ms - length(u_cc) * scale,
                     tuple((c, float(idle_causes.get(c, 0.0))) for c in IDLE_CAUSES), rows, window)


# -- before -> after ----------------------------------------------------------------------


@dataclass(frozen=True)
class GpuRow:
    """One GPU-level figure before and after: ``share`` is of each side's GPU span (%), when it has one."""

    key: str
    label: str
    unit: str
    base: float | None
    target: float | None
    base_share: float | None = None
    target_share: float | None = None

    @property
    def delta(self) -> float | None:
        """Target minus base, None when a side lacks the figure."""
        return None if self.base is None or self.target is None else self.target - self.base

    def to_dict(self) -> dict[str, Any]:
        """JSON row."""
        return {"key": self.key, "label": self.label, "unit": self.unit, "base": self.base, "target": self.target,
                "delta": self.delta, "base_share_pct": self.base_share, "target_share_pct": self.target_share}


def _pct(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole > 0 else None


def gpu_rows(base: GpuSide, target: GpuSide, step: tuple[float, float] | None = None) -> list[GpuRow]:
    """The before → after table: step time, GPUs, span, busy, idle by cause, compute, communication, overlap.

    ``step`` is the step time measured elsewhere (base, target), else the mean window length.
    """
    sa, sb = base.total("span_ms"), target.total("span_ms")
    rows: list[GpuRow] = []
    if step is not None:
        rows.append(GpuRow("step_time", "step time", "ms", step[0], step[1]))
    elif base.measured and target.measured:
        rows.append(GpuRow("step_time", f"{base.window} time (GPU windows)", "ms", base.part(0).mean,
                           target.part(0).mean))
    rows.append(GpuRow("gpus", "GPUs", "", float(len(base.lanes)), float(len(target.lanes))))

    def add(key: str, label: str, a: float, b: float, share: bool = True) -> None:
        rows.append(GpuRow(key, label, "ms", a, b, _pct(a, sa) if share else None, _pct(b, sb) if share else None))

    add("span", "GPU span (first to last activity, summed over GPUs)", sa, sb, share=False)
    add("busy", "busy (kernels, copies, sets)", base.total("busy_ms"), target.total("busy_ms"))
    add("idle", "idle", base.total("idle_ms"), target.total("idle_ms"))
    for cause, label in IDLE_CAUSES.items():
        add(f"idle.{cause}", f"idle: {label}", base.idle_cause(cause), target.idle_cause(cause))
    add("compute", "compute (union of computation kernels)", base.total("compute_ms"), target.total("compute_ms"))
    add("communication", "communication (union)", base.total("communication_ms"), target.total("communication_ms"))
    ca, cb = base.total("communication_ms"), target.total("communication_ms")
    oa, ob = base.total("overlap_ms"), target.total("overlap_ms")
    rows.append(GpuRow("overlap", "communication under compute", "ms", oa, ob, _pct(oa, ca), _pct(ob, cb)))
    add("exposed_communication", "exposed communication", ca - oa, cb - ob)
    return rows


@dataclass(frozen=True)
class Cause:
    """One part of the step-time change: its per-window mean on each side, the change, and whether it is judged."""

    key: str
    label: str
    base: Moments
    target: Moments
    significant: bool
    noise: float | None

    @property
    def delta(self) -> float:
        """Target mean minus base mean (ms per window)."""
        return self.target.mean - self.base.mean

    def to_dict(self) -> dict[str, Any]:
        """JSON row."""
        return {"key": self.key, "label": self.label, "base_ms": self.base.mean, "target_ms": self.target.mean,
                "delta_ms": self.delta, "base_std_ms": self.base.std, "target_std_ms": self.target.std,
                "samples": [self.base.n, self.target.n], "significant": self.significant, "noise_ms": self.noise}


@dataclass(frozen=True)
class StepAccount:
    """The step-time change split into :data:`PARTS`; ``causes`` largest change first, plus the remainder.

    ``base``/``target`` are the step times (measured elsewhere when given, else the windows');
    ``remainder`` = their change minus the causes' sum. ``measured`` when both sides have
    repeated windows; otherwise the accounting is descriptive (one capture per side).
    """

    window: str
    base: float
    target: float
    causes: tuple[Cause, ...]
    remainder: float
    samples: tuple[int, int]
    measured: bool
    busy_pct: tuple[float | None, float | None] = (None, None)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def delta(self) -> float:
        """The step-time change (ms per window)."""
        return self.target - self.base

    @property
    def unit(self) -> str:
        """``ms/step``, ``ms/iteration`` or ``ms/capture``."""
        return f"ms/{self.window}"

    def to_dict(self) -> dict[str, Any]:
        """JSON of the accounting."""
        return {"window": self.window, "unit": self.unit, "base_ms": self.base, "target_ms": self.target,
                "delta_ms": self.delta, "causes": [c.to_dict() for c in self.causes],
                "remainder_ms": self.remainder, "samples": list(self.samples), "measured": self.measured,
                "busy_pct": list(self.busy_pct), "notes": list(self.notes)}


def account(base: GpuSide, target: GpuSide, step: tuple[float, float] | None = None, *, sigmas: float = 3.0,
            min_pct: float = 5.0) -> StepAccount | None:
    """The step-time change by cause, or None when a side has no GPU activity.

    ``step`` is the measured step time of each side (provider, CPU ranges); without it the
    mean window length stands in and the remainder is zero up to rounding. A cause is
    significant when both sides have repeated windows and its change exceeds ``sigmas``
    standard errors and ``min_pct`` % of the base step.
    """
    from my_utils.profiling.analysis.diff_model import standard_error

    if not base.lanes or not target.lanes:
        return None
    window = base.window if base.window == target.window else "capture"
    measured = window != "capture" and base.measured and target.measured
    wa, wb = base.part(0), target.part(0)
    sa, sb = step if step is not None else (wa.mean, wb.mean)
    floor = abs(sa) * min_pct / 100
    causes = []
    for i, (key, label) in enumerate(PARTS.items(), start=1):
        ma, mb = base.part(i), target.part(i)
        noise = None
        significant = False
        if measured:
            se = standard_error(ma.std, ma.n, mb.std, mb.n)
            noise = max(sigmas * se, floor)
            significant = abs(mb.mean - ma.mean) > noise
        causes.append(Cause(key, label, ma, mb, significant, noise))
    causes.sort(key=lambda c: -abs(c.delta))
    remainder = (sb - sa) - math.fsum(c.delta for c in causes)
    notes = []
    if base.window != target.window:
        notes.append(f"the sides' windows differ ({base.window} vs {target.window}): compared per capture")
    busy = (_pct(base.total("busy_ms"), base.total("span_ms")), _pct(target.total("busy_ms"), target.total("span_ms")))
    return StepAccount(window, sa, sb, tuple(causes), remainder, (wa.n, wb.n), measured, busy, tuple(notes))

