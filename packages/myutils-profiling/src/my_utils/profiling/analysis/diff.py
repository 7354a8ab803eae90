"""Compare two runs: per-name count and duration deltas that rise above the run-to-run noise.

Both sides become one :class:`OpStats` per name: the count of occurrences and the mean and
spread (population std) of the per-step total. The inputs are either two analysis reports
(their ``operations`` table already holds those numbers, computed per step by the analyzer)
or two Kineto traces (streamed by the Kineto provider into per-step events, never held as
raw events, in one pass that also reads the trace's context and its call nesting).

Why per step: a slower operation shows up as a larger per-step total, and the steps of
one run give its spread for free. A change is *significant* only when both hold:

- it exceeds ``sigmas`` standard errors of the difference of the two means
  (``sqrt(std_a²/n_a + std_b²/n_b)``), so jitter that the steps themselves show is ignored;
- it exceeds ``min_pct`` % of the base mean, so a tiny but very stable change does not
  drown the real ones (one step each: only this test applies).

Names present on one side only are ``added`` / ``removed`` (significant when their
per-step time is at least ``min_pct`` % of the base step time, or always without it).

What a diff refuses (``InputError``, exit 2 in the CLI): a side with nothing to compare (no
operation and no step: an empty trace, a report whose ``operations`` table is empty), numbers
that are not finite or overflow a float, and reports that are not strict JSON. A regression
gate that sees no data must not pass, so the diff itself refuses it.

Context: the ``hardware`` of both sides (a report's, or each trace's ``deviceProperties`` and
``distributedInfo``, see ``providers.kineto_context``) is kept in the result, and a warning
names every field that differs (GPU model, device count, world size, CUDA/torch versions).
Nesting: for traces, each host range's dominant parent (``providers.kineto_nesting``) is kept,
so a renderer can fold ``aten::_local_scalar_dense`` under ``aten::item`` instead of counting
the same milliseconds twice (:meth:`DiffResult.folded`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, one_line
from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.model import REPORT_FILE_NAME, AnalysisReport
from my_utils.profiling.providers.kineto_context import PLACE_KEYS
from my_utils.profiling.providers.parallel import (
    pool_for,  # the one home of the rule (cli.analyze imports it here)
)

DIFF_SCHEMA_VERSION = "1.1"
STEP_TIME = "step_time"
#: A name is folded under its parent when at least this share of its time runs inside it.
FOLD_SHARE = 0.5
#: Deepest nesting accepted in a report file (a deeper one is not a report this package wrote).
MAX_REPORT_NESTING = 64
# aggregate names the Kineto provider emits beside the per-name ones: not operations
_TRACE_TOTALS = frozenset({"gpu.kernel_time", "gpu.kernel_count", "gpu.comm_time", "gpu.memcpy_time",
                           "gpu.memset_time", "device.op_time", "trace.events", "memory.allocated_peak",
                           "memory.reserved_peak"})
_FLOAT_MAX = 1.7976931348623157e308


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
    """How one name changed between base and target; ``status`` is changed/unchanged/added/removed.

    ``parent`` is the name under which most of its time runs (traces only), else None.
    """

    name: str
    status: str
    base: OpStats | None
    target: OpStats | None
    delta: float  # target mean - base mean, per step, in the unit
    delta_pct: float | None  # of the base mean; None when the base is absent or zero
    count_delta: float  # occurrences per step
    noise: float  # the smallest |delta| that would have been significant
    significant: bool
    parent: str | None = None

    @property
    def unit(self) -> str:
        """The unit of both sides' means."""
        side = self.base or self.target
        return side.unit if side is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON row of this change."""
        def side(s: OpStats | None) -> dict[str, Any] | None:
            return None if s is None else {"count": s.count, "steps": s.steps, "mean": s.mean, "std": s.std,
                                           "unit": s.unit, "source": s.source}

        return {"name": self.name, "status": self.status, "significant": self.significant, "delta": self.delta,
                "delta_pct": self.delta_pct, "count_delta": self.count_delta, "noise": self.noise,
                "parent": self.parent, "base": side(self.base), "target": side(self.target)}


@dataclass(frozen=True)
class GateResult:
    """The verdict of ``--fail-on-regression PCT``: the significant slow-downs of at least ``threshold`` %."""

    threshold: float
    regressions: tuple[OpChange, ...]

    @property
    def passed(self) -> bool:
        """True when no significant slow-down reaches the threshold (speed-ups never fail the gate)."""
        return not self.regressions

    def describe(self, limit: int = 5) -> str:
        """One line: ``passed`` or ``FAILED: name +12.3%, ...``."""
        if self.passed:
            return "passed"
        shown = ", ".join(f"{one_line(c.name)} {c.delta_pct:+.1f}%" if c.delta_pct is not None
                          else f"{one_line(c.name)} (new)" for c in self.regressions[:limit])
        more = f" and {len(self.regressions) - limit} more" if len(self.regressions) > limit else ""
        return f"FAILED: {shown}{more}"


@dataclass(frozen=True)
class DiffResult:
    """Every name's change, the step-time change, both sides' hardware, and the warnings a reader must see first."""

    base: str
    target: str
    changes: list[OpChange]
    step_time: OpChange | None = None
    warnings: list[str] = field(default_factory=list)
    settings: dict[str, float] = field(default_factory=dict)
    base_hardware: dict[str, Any] = field(default_factory=dict)
    target_hardware: dict[str, Any] = field(default_factory=dict)
    kineto: list[dict[str, Any]] = field(default_factory=list)  # Kineto figures that changed (kineto.compare)

    @property
    def significant(self) -> list[OpChange]:
        """Significant changes, largest |delta| first."""
        return sorted((c for c in self.changes if c.significant), key=lambda c: -abs(c.delta))

    def regressions(self, pct: float) -> list[OpChange]:
        """Significant slow-downs of at least ``pct`` % (the step time first when it is one of them)."""
        step = self.step_time
        same = {step.name, *(s.name for s in (step.base, step.target) if s is not None)} if step else set()
        pool = ([step] if step else []) + [c for c in self.significant if c.name not in same]  # the step once
        return [c for c in pool if c.significant and c.delta > 0
                and (c.delta_pct is None or c.delta_pct >= pct)]

    def gate(self, pct: float) -> GateResult:
        """The regression gate at ``pct`` %: its regressions list nested names after the others.

        Refused (``InputError``) when nothing it gates was compared: reports with only Kineto
        tables carry no operation or step time, and a gate that sees no data must not pass.
        """
        if not self.changes and self.step_time is None:
            raise InputError(f"{self.base} vs {self.target}", None,
                             "operations or step times for the regression gate; found only Kineto analysis "
                             "figures, which the gate does not judge (drop --fail-on-regression, or compare "
                             "reports with an operations table or steps)")
        folded = self.folded()
        found = self.regressions(pct)
        return GateResult(pct, tuple(sorted(found, key=lambda c: c.name in folded)))

    def folded(self) -> dict[str, str]:
        """Significant names that run inside another significant name changing the same way: name → that ancestor.

        The ancestor's inclusive time already holds the name's change; a renderer lists
        the name under it (and counts it once). Follows the dominant-parent chain.
        """
        sig = {c.name: c for c in self.changes if c.significant}
        parents = {c.name: c.parent for c in self.changes if c.parent}
        out: dict[str, str] = {}
        for name, change in sig.items():
            seen = {name}
            up = parents.get(name)
            while up is not None and up not in seen:
                seen.add(up)
                ancestor = sig.get(up)
                if ancestor is not None and (ancestor.delta > 0) == (change.delta > 0):
                    out[name] = up
                    break
                up = parents.get(up)
        return out

    def to_dict(self, fail_on_regression: float | None = None) -> dict[str, Any]:
        """The JSON object written by ``myutils-profile diff --output`` (with the gate's verdict when asked)."""
        counts: dict[str, int] = defaultdict(int)
        for c in self.changes:
            counts[c.status] += 1
        folded = self.folded()
        out: dict[str, Any] = {
            "schema_version": DIFF_SCHEMA_VERSION, "base": self.base, "target": self.target,
            "settings": dict(self.settings), "warnings": list(self.warnings),
            "hardware": {"base": dict(self.base_hardware), "target": dict(self.target_hardware)},
            "step_time": None if self.step_time is None else self.step_time.to_dict(),
            "summary": {"names": len(self.changes), "significant": len(self.significant),
                        "folded": len(folded), **counts},
            "changes": [{**c.to_dict(), "folded_into": folded.get(c.name)} for c in self.changes],
            "kineto": [dict(k) for k in self.kineto]}
        if fail_on_regression is not None:
            gate = self.gate(fail_on_regression)
            out["gate"] = {"threshold_pct": fail_on_regression, "passed": gate.passed,
                           "regressions": [c.name for c in gate.regressions]}
        return out


def _finite(value: float, where: str, name: str, what: str) -> float:
    if not math.isfinite(value):
        raise InputError(where, f"name {name!r}", f"{what} within the range of a 64-bit float (got {value}); "
                                                  "a duration this large is not a measurement")
    return value


def _spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population std without overflow (``hypot`` scales; squares of 1e200 would not fit)."""
    mean = math.fsum(values) / len(values)
    if not math.isfinite(mean):
        return mean, math.nan
    return mean, math.hypot(*(v - mean for v in values)) / math.sqrt(len(values))


def compare(base: Mapping[str, OpStats], target: Mapping[str, OpStats], *, sigmas: float = 3.0,
            min_pct: float = 5.0, base_step_mean: float | None = None,
            parents: Mapping[str, str] | None = None, where: str = "<diff>") -> list[OpChange]:
    """One :class:`OpChange` per name of either side, sorted by name (see the module doc for the test).

    Numbers too large to compare (a delta or noise that overflows) raise ``InputError``
    naming ``where`` and the name.
    """
    out: list[OpChange] = []
    parents = parents or {}
    floor = base_step_mean * min_pct / 100 if base_step_mean else 0.0
    for name in sorted(set(base) | set(target)):
        a, b = base.get(name), target.get(name)
        if a is not None and b is not None:
            delta = b.mean - a.mean
            se = math.hypot(a.std / math.sqrt(max(a.steps, 1)), b.std / math.sqrt(max(b.steps, 1)))
            noise = max(sigmas * se, abs(a.mean) * min_pct / 100)
            pct = delta / a.mean * 100 if a.mean else None
            for value, what in ((delta, "a delta"), (noise, "a noise level"), (pct or 0.0, "a percentage")):
                _finite(value, where, name, what)
            significant = abs(delta) > noise
            out.append(OpChange(name, "changed" if significant else "unchanged", a, b, delta, pct,
                                b.count_per_step - a.count_per_step, noise, significant, parents.get(name)))
        else:
            only = a if a is not None else b
            assert only is not None  # one side holds every name of the union
            sign = 1.0 if b is not None else -1.0
            out.append(OpChange(name, "added" if b is not None else "removed", a, b, sign * only.mean, None,
                                sign * only.count_per_step, floor, abs(only.mean) >= floor, parents.get(name)))
    return out


# -- reports -------------------------------------------------------------------------------


def _bad_number(text: str) -> Any:
    raise _NotStrict(text)


class _NotStrict(ValueError):
    """A bare NaN/Infinity in a report: strict JSON has none, and this package never writes one."""


def _walk_numbers(data: Any, where: str) -> None:
    """Refuse non-finite or float-overflowing numbers, text that is not UTF-8 and nesting deeper than
    ``MAX_REPORT_NESTING`` (iteratively)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        obj, place, depth = stack.pop()
        if depth > MAX_REPORT_NESTING:
            raise InputError(where, place or None, f"a report nested at most {MAX_REPORT_NESTING} levels deep")
        if isinstance(obj, str):
            try:
                obj.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(where, place or None, "UTF-8 text; found a lone surrogate (a \\uDCxx escape "
                                                       "with no pair)") from None
        elif isinstance(obj, dict):
            for k in obj:
                stack.append((k, f"{place}.<key>" if place else "<key>", depth + 1))
            stack.extend((v, f"{place}.{k}" if place else str(k), depth + 1) for k, v in obj.items())
        elif isinstance(obj, list):
            stack.extend((v, f"{place}[{i}]", depth + 1) for i, v in enumerate(obj))
        elif isinstance(obj, float) and not math.isfinite(obj):
            raise InputError(where, place or None, f"a finite number; found {obj} (a number beyond the range "
                                                   "of a 64-bit float)")
        elif isinstance(obj, int) and not isinstance(obj, bool) and not -_FLOAT_MAX <= obj <= _FLOAT_MAX:
            raise InputError(where, place or None, f"a number within the range of a 64-bit float; found an "
                                                   f"integer of {len(str(abs(obj)))} digits")


def load_report(path: str | Path) -> AnalysisReport:
    """Read ``analysis_report.json`` (a file or a folder holding one) as strict JSON, for comparison.

    Beyond ``AnalysisReport.load``: a bare ``NaN``/``Infinity``, a number that overflows a
    float (``1e999``, a 400-digit integer) and nesting deeper than ``MAX_REPORT_NESTING``
    are refused as ``InputError`` naming the file and the key (never a traceback).
    """
    from my_utils.core.safe_io import open_regular

    source = Path(path)
    if source.is_dir():
        source = source / REPORT_FILE_NAME
    try:
        with open_regular(source, "r", encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(source), None, f"a readable UTF-8 analysis report ({exc})") from None
    where = str(source)
    try:
        data = json.loads(text, parse_constant=_bad_number)
    except _NotStrict as exc:
        raise InputError(where, None, f"strict JSON (no bare NaN or Infinity); found {exc}") from None
    except RecursionError:
        raise InputError(where, None, f"a report nested at most {MAX_REPORT_NESTING} levels deep") from None
    except json.JSONDecodeError as exc:
        raise InputError(where, f"line {exc.lineno}", f"valid JSON ({exc.msg})") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise InputError(where, None, f"valid JSON ({exc})") from None
    _walk_numbers(data, where)
    return AnalysisReport.from_dict(data, where)


def _real(value: Any) -> float:
    """A JSON number as a float; TypeError for anything else (a string, a bool, an object)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a number, got {type(value).__name__}")
    return float(value)


def _count(value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2 ** 53:
        raise ValueError(f"a count >= 0, got {value!r}")
    return float(value)


def _stats_from_rows(rows: Iterable[Mapping[str, Any]], where: str) -> dict[str, OpStats]:
    out: dict[str, OpStats] = {}
    for i, row in enumerate(rows):
        try:
            name = str(row["name"])
            raw_steps = row.get("steps", 1)
            raw_steps = 1 if raw_steps is None else raw_steps
            if isinstance(raw_steps, bool) or not isinstance(raw_steps, (int, float)) \
                    or raw_steps != int(raw_steps) or not 1 <= raw_steps <= 2 ** 53:
                raise ValueError(f"'steps' must be a whole number of steps >= 1, got {raw_steps!r}")
            steps = int(raw_steps)
            mean = _real(row["mean"]) if row.get("mean") is not None else _real(row["total"]) / steps
            std = _real(0.0 if row.get("std") is None else row["std"])
            if not (math.isfinite(mean) and math.isfinite(std) and std >= 0):
                raise ValueError(f"finite mean and std >= 0, got mean {mean!r}, std {std!r}")
            stats = OpStats(name, _count(row.get("count"), steps), steps, mean, std,
                            str(row.get("unit") or ""), str(row.get("source") or ""))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(where, f"tables.operations[{i}]",
                             f"a row with name, steps, mean (or total) and std ({type(exc).__name__}: {exc})") from None
        key = name if name not in out else f"{name} [{stats.source}]"
        out[key] = stats
    return out


def _step_stats(report: AnalysisReport) -> OpStats | None:
    name = str(report.summary.get("step_time_name") or STEP_TIME)
    values = [float(r["step_time"]) for r in report.tables.get("steps", [])
              if isinstance(r.get("step_time"), (int, float)) and not isinstance(r.get("step_time"), bool)]
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    mean, std = _spread(values)
    return OpStats(name, len(values), len(values), mean, std, str(report.summary.get("time_unit") or "ms"))


def hardware_warning(base: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """A warning naming the hardware/software fields that differ, or None.

    Unknown is not a difference (a field known on one side only proves nothing), and
    fields that say where a trace was taken (rank, host) are not compared.
    """
    if not base or not target:
        return None
    keys = [k for k in dict.fromkeys([*base, *target]) if k in base and k in target
            and k not in PLACE_KEYS and base[k] != target[k]]
    if not keys:
        return None
    parts = "; ".join(f"{k}: {base[k]!r} vs {target[k]!r}" for k in keys[:8])
    return f"the two runs used different hardware or software ({parts}): deltas mix code and machine effects"


def _nothing(where: str, what: str) -> InputError:
    return InputError(where, None, f"{what} to compare; found none, so a comparison (and a regression gate) "
                                   "would pass on no data")


def diff_reports(base: AnalysisReport, target: AnalysisReport, *, base_label: str = "base",
                 target_label: str = "target", sigmas: float = 3.0, min_pct: float = 5.0) -> DiffResult:
    """Compare the ``operations`` tables (and step times) of two analysis reports, matched by name.

    A report with neither an operation nor a step is refused (``InputError`` naming it).
    """
    from my_utils.profiling.analysis.kineto.compare import COMPARED, compare_kineto

    a = _stats_from_rows(base.tables.get("operations", []), base_label)
    b = _stats_from_rows(target.tables.get("operations", []), target_label)
    sa, sb = _step_stats(base), _step_stats(target)
    for report, stats, side_step, label in ((base, a, sa, base_label), (target, b, sb, target_label)):
        if not stats and side_step is None and not any(report.tables.get(t) for t in COMPARED):
            raise _nothing(label, "an operations table with rows, steps, or Kineto analysis tables")
    warnings: list[str] = []
    hw = hardware_warning(base.hardware, target.hardware)
    if hw:
        warnings.append(hw)
    if base.workload != target.workload:
        warnings.append(f"workload profiles differ ({base.workload!r} vs {target.workload!r}): findings may "
                        "differ by thresholds alone")
    if (not a or not b) and sa and sb:
        warnings.append(f"the {'base' if not a else 'target'} report has no operations table: only the step "
                        "time is compared")
    elif (not a or not b) and not (sa and sb):
        bare = [side for side, ops, st in (("base", a, sa), ("target", b, sb)) if not ops and st is None]
        if bare:
            have = "s have" if len(bare) > 1 else " has"
            warnings.append(f"the {' and '.join(bare)} report{have} neither operations nor steps: only the "
                            "Kineto analysis figures are compared for it")
        else:
            warnings.append("one report has operations and no steps, the other steps and no operations: every "
                            "name shows as added or removed, and the step time is not compared")
    where = f"{base_label} vs {target_label}"
    step = (compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct, where=where)[0]
            if sa and sb else None)
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct, base_step_mean=sa.mean if sa else None, where=where)
    return DiffResult(base_label, target_label, changes, step, warnings, {"sigmas": sigmas, "min_pct": min_pct},
                      dict(base.hardware), dict(target.hardware), compare_kineto(base.tables, target.tables))


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
        mean, std = _spread(values)
        out[name] = OpStats(name, counts[name], len(values), mean, std, "ms", "torch_profiler")
    step_stats = None
    if step_values:
        vals = list(step_values.values())
        m, s = _spread(vals)
        step_stats = OpStats(STEP_TIME, len(vals), len(vals), m, s, "ms", "torch_profiler")
    return out, step_stats


def _check_stats(stats: Mapping[str, OpStats], step: OpStats | None, where: str) -> None:
    for s in [*stats.values(), *([step] if step else [])]:
        _finite(s.mean, where, s.name, "a per-step total")
        _finite(s.std, where, s.name, "a per-step spread")


def _parents(reads: Sequence[Any]) -> dict[str, str]:
    """Each name's dominant parent when it holds at least ``FOLD_SHARE`` of the name's time in every trace."""
    found: dict[str, set[str]] = defaultdict(set)
    for read in reads:
        nesting = read.results[0] if read.results else {}
        for name, parent in nesting.items():
            found[name].add(parent.name if parent.share >= FOLD_SHARE else "")
    return {n: p.pop() for n, p in found.items() if len(p) == 1 and "" not in p}


def diff_traces(base: Sequence[str | Path], target: Sequence[str | Path], *, sigmas: float = 3.0,
                min_pct: float = 5.0, executor: Any = None) -> DiffResult:
    """Compare two runs' Kineto traces (one file per rank each), each read once by the Kineto provider.

    The same pass reads each trace's context (its ``hardware``) and call nesting. A side
    whose traces hold no operation and no step is refused (``InputError`` naming its files).
    """
    from my_utils.profiling.providers.kineto import read_trace
    from my_utils.profiling.providers.kineto_context import run_hardware
    from my_utils.profiling.providers.kineto_nesting import NestingPass
    from my_utils.profiling.providers.parallel import run_many

    files = [str(p) for p in base] + [str(p) for p in target]
    reads = run_many(read_trace, [(f, None, (NestingPass,)) for f in files], executor or pool_for(files))
    sides = []
    for label, side in ((_label(base), reads[:len(base)]), (_label(target), reads[len(base):])):
        stats, side_step = stats_from_events(e for r in side for e in r.events)
        if not stats and side_step is None:
            raise _nothing(label, "kernels, operators or ProfilerStep markers")
        _check_stats(stats, side_step, label)
        sides.append((stats, side_step, run_hardware([r.context for r in side])))
    (a, sa, hw_a), (b, sb, hw_b) = sides
    warnings = []
    hw = hardware_warning(hw_a, hw_b)
    if hw:
        warnings.append(hw)
    if not sa or not sb:
        warnings.append("a trace has no ProfilerStep markers: each trace counts as one step, so the spread "
                        "(noise) is unknown and only the --min-pct threshold applies")
    where = f"{_label(base)} vs {_label(target)}"
    parents = _parents(reads)
    step = (compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct, where=where)[0]
            if sa and sb else None)
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct, base_step_mean=sa.mean if sa else None,
                      parents=parents, where=where)
    return DiffResult(_label(base), _label(target), changes, step, warnings, {"sigmas": sigmas, "min_pct": min_pct},
                      hw_a, hw_b)


def _label(paths: Sequence[str | Path]) -> str:
    return ", ".join(Path(p).name for p in paths)
