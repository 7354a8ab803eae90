"""Compare two runs: per-name count and duration deltas that rise above the run-to-run noise.

Both sides become one :class:`OpStats` per name: the count of occurrences and the mean and
spread (population std) of the per-step total. The inputs are either two analysis reports
(their ``operations`` table already holds those numbers, computed per step by the analyzer)
or two Kineto traces (streamed by the Kineto provider into per-step events, never held as
raw events).

Why per step: a slower operation shows up as a larger per-step total, and the steps of
one run give its spread for free. A change is *significant* only when both hold:

- it exceeds ``sigmas`` standard errors of the difference of the two means
  (``sqrt(std_a²/n_a + std_b²/n_b)``), so jitter that the steps themselves show is ignored;
- it exceeds ``min_pct`` % of the base mean, so a tiny but very stable change does not
  drown the real ones (one step each: only this test applies).

Names present on one side only are ``added`` / ``removed`` (significant when their
per-step time is at least ``min_pct`` % of the base step time, or always without it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.model import AnalysisReport

DIFF_SCHEMA_VERSION = "1.0"
STEP_TIME = "step_time"
# aggregate names the Kineto provider emits beside the per-name ones: not operations
_TRACE_TOTALS = frozenset({"gpu.kernel_time", "gpu.kernel_count", "gpu.comm_time", "gpu.memcpy_time",
                           "gpu.memset_time", "device.op_time", "trace.events", "memory.allocated_peak",
                           "memory.reserved_peak"})


@dataclass(frozen=True)
class OpStats:
    """One name on one side: occurrences, steps seen and the per-step total's mean and std."""

    name: str
    count: float
    steps: int
    mean: float
    std: float
    unit: str = "ms"
    source: str = ""

    @property
    def count_per_step(self) -> float:
        """Occurrences per step (the count delta compares these: runs of different lengths stay comparable)."""
        return self.count / self.steps if self.steps else float(self.count)


@dataclass(frozen=True)
class OpChange:
    """How one name changed between base and target; ``status`` is changed/unchanged/added/removed."""

    name: str
    status: str
    base: OpStats | None
    target: OpStats | None
    delta: float  # target mean - base mean, per step, in the unit
    delta_pct: float | None  # of the base mean; None when the base is absent or zero
    count_delta: float  # occurrences per step
    noise: float  # the smallest |delta| that would have been significant
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON row of this change."""
        def side(s: OpStats | None) -> dict[str, Any] | None:
            return None if s is None else {"count": s.count, "steps": s.steps, "mean": s.mean, "std": s.std,
                                           "unit": s.unit, "source": s.source}

        return {"name": self.name, "status": self.status, "significant": self.significant, "delta": self.delta,
                "delta_pct": self.delta_pct, "count_delta": self.count_delta, "noise": self.noise,
                "base": side(self.base), "target": side(self.target)}


@dataclass(frozen=True)
class DiffResult:
    """Every name's change, the step-time change, and the warnings a reader must see first."""

    base: str
    target: str
    changes: list[OpChange]
    step_time: OpChange | None = None
    warnings: list[str] = field(default_factory=list)
    settings: dict[str, float] = field(default_factory=dict)
    kineto: list[dict[str, Any]] = field(default_factory=list)  # Kineto figures that changed (kineto.compare)

    @property
    def significant(self) -> list[OpChange]:
        """Significant changes, largest |delta| first."""
        return sorted((c for c in self.changes if c.significant), key=lambda c: -abs(c.delta))

    def regressions(self, pct: float) -> list[OpChange]:
        """Significant slow-downs of at least ``pct`` % (the step time first when it is one of them)."""
        pool = ([self.step_time] if self.step_time else []) + self.significant
        return [c for c in pool if c.significant and c.delta > 0
                and (c.delta_pct is None or c.delta_pct >= pct)]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written by ``myutils-profile diff --output``."""
        counts: dict[str, int] = defaultdict(int)
        for c in self.changes:
            counts[c.status] += 1
        return {"schema_version": DIFF_SCHEMA_VERSION, "base": self.base, "target": self.target,
                "settings": dict(self.settings), "warnings": list(self.warnings),
                "step_time": None if self.step_time is None else self.step_time.to_dict(),
                "summary": {"names": len(self.changes), "significant": len(self.significant), **counts},
                "changes": [c.to_dict() for c in self.changes], "kineto": [dict(k) for k in self.kineto]}


def compare(base: Mapping[str, OpStats], target: Mapping[str, OpStats], *, sigmas: float = 3.0,
            min_pct: float = 5.0, base_step_mean: float | None = None) -> list[OpChange]:
    """One :class:`OpChange` per name of either side, sorted by name (see the module doc for the test)."""
    out: list[OpChange] = []
    floor = base_step_mean * min_pct / 100 if base_step_mean else 0.0
    for name in sorted(set(base) | set(target)):
        a, b = base.get(name), target.get(name)
        if a is not None and b is not None:
            delta = b.mean - a.mean
            se = math.sqrt(a.std ** 2 / max(a.steps, 1) + b.std ** 2 / max(b.steps, 1))
            noise = max(sigmas * se, abs(a.mean) * min_pct / 100)
            significant = abs(delta) > noise
            pct = delta / a.mean * 100 if a.mean else None
            out.append(OpChange(name, "changed" if significant else "unchanged", a, b, delta, pct,
                                b.count_per_step - a.count_per_step, noise, significant))
        else:
            only = a if a is not None else b
            assert only is not None  # one side holds every name of the union
            sign = 1.0 if b is not None else -1.0
            out.append(OpChange(name, "added" if b is not None else "removed", a, b, sign * only.mean, None,
                                sign * only.count_per_step, floor, abs(only.mean) >= floor))
    return out


def _stats_from_rows(rows: Iterable[Mapping[str, Any]], where: str) -> dict[str, OpStats]:
    out: dict[str, OpStats] = {}
    for i, row in enumerate(rows):
        try:
            name = str(row["name"])
            steps = int(row.get("steps") or 1)
            mean = float(row["mean"]) if row.get("mean") is not None else float(row["total"]) / steps
            stats = OpStats(name, float(row.get("count") or steps), steps, mean, float(row.get("std") or 0.0),
                            str(row.get("unit") or ""), str(row.get("source") or ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(where, f"tables.operations[{i}]",
                             f"a row with name, steps, mean (or total) and std ({type(exc).__name__}: {exc})") from None
        key = name if name not in out else f"{name} [{stats.source}]"
        out[key] = stats
    return out


def _step_stats(report: AnalysisReport) -> OpStats | None:
    name = str(report.summary.get("step_time_name") or STEP_TIME)
    values = [float(r["step_time"]) for r in report.tables.get("steps", [])
              if isinstance(r.get("step_time"), (int, float))]
    if not values:
        return None
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return OpStats(name, len(values), len(values), mean, std, str(report.summary.get("time_unit") or "ms"))


def hardware_warning(base: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """A warning naming the hardware fields that differ, or None (unknown hardware is not a difference)."""
    if not base or not target:
        return None
    keys = sorted(k for k in set(base) & set(target) if base[k] != target[k])
    if not keys:  # a field known on one side only proves nothing
        return None
    parts = "; ".join(f"{k}: {base[k]!r} vs {target[k]!r}" for k in keys[:6])
    return f"the two runs used different hardware ({parts}): deltas mix code and machine effects"


def diff_reports(base: AnalysisReport, target: AnalysisReport, *, base_label: str = "base",
                 target_label: str = "target", sigmas: float = 3.0, min_pct: float = 5.0) -> DiffResult:
    """Compare the ``operations`` tables of two analysis reports (matched by name)."""
    a = _stats_from_rows(base.tables.get("operations", []), base_label)
    b = _stats_from_rows(target.tables.get("operations", []), target_label)
    warnings: list[str] = []
    if not a and not b:
        warnings.append("neither report has an operations table: nothing to compare (analyse the runs with "
                        "this version of myutils-profile)")
    hw = hardware_warning(base.hardware, target.hardware)
    if hw:
        warnings.append(hw)
    if base.workload != target.workload:
        warnings.append(f"workload profiles differ ({base.workload!r} vs {target.workload!r}): findings may "
                        "differ by thresholds alone")
    sa, sb = _step_stats(base), _step_stats(target)
    step = compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct)[0] if sa and sb else None
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct, base_step_mean=sa.mean if sa else None)
    from my_utils.profiling.analysis.kineto.compare import compare_kineto

    return DiffResult(base_label, target_label, changes, step, warnings, {"sigmas": sigmas, "min_pct": min_pct},
                      compare_kineto(base.tables, target.tables))


def stats_from_events(events: Iterable[MetricEvent]) -> tuple[dict[str, OpStats], OpStats | None]:
    """Per-name stats from per-step duration events (one trace), and the step-time stats.

    Per-step totals are summed over ranks; a step where a name did not run counts as 0,
    and events outside every step form one extra bucket only when the trace has no steps.
    """
    totals: dict[str, dict[int | None, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, float] = defaultdict(float)
    steps: set[int] = set()
    step_values: dict[int, float] = defaultdict(float)
    for e in events:
        if e.kind != "duration" or e.name in _TRACE_TOTALS:
            continue
        if e.name == STEP_TIME:
            if e.step is not None:
                steps.add(e.step)
                step_values[e.step] += e.value
            continue
        totals[e.name][e.step] += e.value
        n = e.attrs.get("count", 1)
        counts[e.name] += n if isinstance(n, (int, float)) else 1
    buckets: list[int | None] = list(sorted(steps)) if steps else [None]
    out: dict[str, OpStats] = {}
    for name, per_step in totals.items():
        values = [per_step.get(s, 0.0) for s in buckets]
        if steps and None in per_step:  # outside every step: spread evenly, the total stays right
            values = [v + per_step[None] / len(values) for v in values]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        out[name] = OpStats(name, counts[name], len(values), mean, std, "ms", "torch_profiler")
    step_stats = None
    if step_values:
        vals = list(step_values.values())
        m = sum(vals) / len(vals)
        step_stats = OpStats(STEP_TIME, len(vals), len(vals), m,
                             math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals)), "ms", "torch_profiler")
    return out, step_stats


def diff_traces(base: Sequence[str | Path], target: Sequence[str | Path], *, sigmas: float = 3.0,
                min_pct: float = 5.0, executor: Any = None) -> DiffResult:
    """Compare two runs' Kineto traces (one file per rank each), through the Kineto provider's events."""
    from my_utils.profiling.providers.kineto import parse_trace_file
    from my_utils.profiling.providers.parallel import run_many

    files = [str(p) for p in base] + [str(p) for p in target]
    parsed = run_many(parse_trace_file, [(f, None) for f in files], executor)
    a, sa = stats_from_events(e for evs in parsed[:len(base)] for e in evs)
    b, sb = stats_from_events(e for evs in parsed[len(base):] for e in evs)
    warnings = []
    if not sa or not sb:
        warnings.append("a trace has no ProfilerStep markers: each trace counts as one step, so the spread "
                        "(noise) is unknown and only the --min-pct threshold applies")
    step = compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct)[0] if sa and sb else None
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct, base_step_mean=sa.mean if sa else None)
    return DiffResult(_label(base), _label(target), changes, step, warnings, {"sigmas": sigmas, "min_pct": min_pct})


def _label(paths: Sequence[str | Path]) -> str:
    return ", ".join(Path(p).name for p in paths)
