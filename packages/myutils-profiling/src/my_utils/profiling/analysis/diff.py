"""Compare two runs: read both sides (analysis reports or Kineto traces) into a :class:`DiffResult`.

What a change is and when it counts lives in ``diff_model`` (re-exported here); this module
reads the inputs. Both sides become one :class:`OpStats` per name: the count of occurrences
and the mean and spread (population std) of the per-step total, per rank. The inputs are
either two analysis reports (their ``operations`` table already holds those numbers,
computed per step by the analyzer) or two Kineto traces (streamed by the Kineto provider
into per-step events, never held as raw events, in one pass that also reads the trace's
context, its call nesting, its GPU timeline (``diff_gpu_read.GpuPass``) and, when asked for, its
operators (``ops.op_profile.OpsPass``: the operation-matched diff, ``DiffResult.operations``; opt-in,
for the diff's speed: see :func:`diff_traces`).

What a diff refuses (``InputError``, exit 2 in the CLI): a side with nothing to compare (no
operation and no step: an empty trace, a report whose ``operations`` table is empty), numbers
that are not finite or overflow a float, and reports that are not strict JSON. A regression
gate that sees no data must not pass, so the diff itself refuses it.

Context: the ``hardware`` of both sides (a report's, or each trace's ``deviceProperties`` and
``distributedInfo``, see ``kineto.read.context``) is kept in the result, and the
like-for-like checks of ``diff_context`` (GPU, world size, workload in common, dtype,
capture window) become warnings that say what each difference means for the numbers.
Nesting: for traces, each host range's dominant parent (``kineto.read.nesting``) is kept
with the share of its time inside it, so a renderer can list ``aten::_local_scalar_dense``
under ``aten::item`` instead of counting the same milliseconds twice (:meth:`DiffResult.folded`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.diff_model import (
    DIFF_SCHEMA_VERSION,
    FOLD_SHARE,
    MIN_SAMPLES,
    STEP_TIME,
    DiffResult,
    GateResult,
    OpChange,
    OpStats,
    compare,
    spread,
)
from my_utils.profiling.analysis.diff_model import _finite as _finite
from my_utils.profiling.analysis.energy import ENERGY_STEPS, STEP_ENERGY
from my_utils.profiling.formats.parallel import (
    pool_for,  # the one home of the rule (cli.analyze imports it here)
)
from my_utils.profiling.kineto.read.context import PLACE_KEYS
from my_utils.profiling.model.report import REPORT_FILE_NAME, AnalysisReport

__all__ = ["DIFF_SCHEMA_VERSION", "FOLD_SHARE", "MIN_SAMPLES", "STEP_TIME", "DiffResult", "GateResult", "OpChange",
           "OpStats", "compare", "diff_reports", "diff_traces", "hardware_warning", "load_report", "pool_for",
           "stats_from_events"]

#: Deepest nesting accepted in a report file (a deeper one is not a report this package wrote).
MAX_REPORT_NESTING = 64
# aggregate names the Kineto provider emits beside the per-name ones: not operations
_TRACE_TOTALS = frozenset({"gpu.kernel_time", "gpu.kernel_count", "gpu.comm_time", "gpu.memcpy_time",
                           "gpu.memset_time", "device.op_time", "trace.events", "memory.allocated_peak",
                           "memory.reserved_peak"})
_FLOAT_MAX = 1.7976931348623157e308
_spread = spread


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
    """A warning naming the hardware/software fields that differ and what that means for the numbers, or None.

    Unknown is not a difference (a field known on one side only proves nothing), and
    fields that say where a trace was taken (rank, host) are not compared.
    """
    from my_utils.profiling.analysis.diff_context import hardware_meanings

    if not base or not target:
        return None
    keys = [k for k in dict.fromkeys([*base, *target]) if k in base and k in target
            and k not in PLACE_KEYS and base[k] != target[k]]
    if not keys:
        return None
    parts = "; ".join(f"{k}: {base[k]!r} vs {target[k]!r}" for k in keys[:8])
    meaning = hardware_meanings(base, target, keys)
    return (f"the two runs used different hardware or software ({parts}): deltas mix code and machine effects"
            + (f" ({meaning})" if meaning else ""))


def _nothing(where: str, what: str) -> InputError:
    return InputError(where, None, f"{what} to compare; found none, so a comparison (and a regression gate) "
                                   "would pass on no data")


def diff_reports(base: AnalysisReport, target: AnalysisReport, *, base_label: str = "base",
                 target_label: str = "target", sigmas: float = 3.0, min_pct: float = 5.0) -> DiffResult:
    """Compare the ``operations`` tables (and step times) of two analysis reports, matched by name.

    A report with neither an operation nor a step is refused (``InputError`` naming it).
    """
    from my_utils.profiling.analysis.diff_gpu_read import side_from_tables
    from my_utils.profiling.kineto.compare import COMPARED, compare_kineto

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
    ea, eb = energy_stats(base), energy_stats(target)
    energy = compare({STEP_ENERGY: ea}, {STEP_ENERGY: eb}, sigmas=sigmas, min_pct=min_pct, where=where)[0] \
        if ea is not None and eb is not None else None
    gpu = (side_from_tables(base.tables), side_from_tables(target.tables))
    notes = []
    if gpu[0].lanes and gpu[1].lanes:
        notes.append("GPU level from the reports' Kineto tables: one capture per side, compared descriptively (a "
                     "report keeps no per-step GPU split; diff the traces for the step-time change by cause)")
    return DiffResult(base_label, target_label, changes, step, warnings, {"sigmas": sigmas, "min_pct": min_pct},
                      dict(base.hardware), dict(target.hardware), compare_kineto(base.tables, target.tables),
                      gpu=gpu if gpu[0].lanes and gpu[1].lanes else None, notes=notes, energy=energy)


def energy_stats(report: AnalysisReport) -> OpStats | None:
    """The GPU monitor's energy per step (the ``energy.per_step`` fact's spread), None when the run did not measure it."""
    fact = next((f for f in report.facts if f.id == "energy.per_step" and f.measured), None)
    row = next((e.values for e in fact.evidence if e.table == ENERGY_STEPS), None) if fact is not None else None
    if row is None:
        return None
    steps = int(row["steps"])
    return OpStats(STEP_ENERGY, float(steps), steps, _real(row["mean_j"]), _real(row["std_j"]), "J", "memory_monitor")


def stats_from_events(events: Iterable[MetricEvent]) -> tuple[dict[str, OpStats], OpStats | None]:
    """Per-name stats from per-step duration events (one side: one trace per rank), and the step-time stats.

    Per-step totals are per rank (the sum over the side's traces divided by their number),
    so the names and the step time share one scale whatever the rank count; the step time of
    a step is its mean over the ranks that recorded it. A step where a name did not run
    counts as 0, and events outside every step form one extra bucket only when the trace
    has no steps.
    """
    totals: dict[str, dict[int | None, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, float] = defaultdict(float)
    steps: set[int] = set()
    step_values: dict[int, list[float]] = defaultdict(list)
    files: set[Any] = set()
    for e in events:
        if e.kind != "duration" or e.name in _TRACE_TOTALS:
            continue
        files.add((e.attrs.get("file"), e.rank))
        if e.name == STEP_TIME:
            if e.step is not None:
                steps.add(e.step)
                step_values[e.step].append(e.value)
            continue
        totals[e.name][e.step] += e.value
        n = e.attrs.get("count", 1)
        counts[e.name] += n if isinstance(n, (int, float)) else 1
    ranks = max(len(files), 1)
    buckets: list[int | None] = list(sorted(steps)) if steps else [None]
    out: dict[str, OpStats] = {}
    for name, per_step in totals.items():
        values = [per_step.get(s, 0.0) / ranks for s in buckets]
        if steps and None in per_step:  # outside every step: spread evenly, the total stays right
            values = [v + per_step[None] / ranks / len(values) for v in values]
        mean, std = _spread(values)
        out[name] = OpStats(name, counts[name] / ranks, len(values), mean, std, "ms", "torch_profiler")
    step_stats = None
    if step_values:
        vals = [math.fsum(v) / len(v) for _, v in sorted(step_values.items())]
        m, s = _spread(vals)
        step_stats = OpStats(STEP_TIME, len(vals), len(vals), m, s, "ms", "torch_profiler")
    return out, step_stats


def _check_stats(stats: Mapping[str, OpStats], step: OpStats | None, where: str) -> None:
    for s in [*stats.values(), *([step] if step else [])]:
        _finite(s.mean, where, s.name, "a per-step total")
        _finite(s.std, where, s.name, "a per-step spread")


def _parents(reads: Sequence[Any]) -> dict[str, tuple[str, float]]:
    """Each name's dominant parent and the smallest share of its time inside it, when every trace names the same one."""
    found: dict[str, set[str]] = defaultdict(set)
    share: dict[str, float] = {}
    for read in reads:
        nesting = read.results[0] if read.results else {}
        for name, parent in nesting.items():
            found[name].add(parent.name)
            share[name] = min(share.get(name, 1.0), parent.share)
    return {n: (next(iter(p)), share[n]) for n, p in found.items() if len(p) == 1}


def diff_traces(base: Sequence[str | Path], target: Sequence[str | Path], *, sigmas: float = 3.0,
                min_pct: float = 5.0, executor: Any = None, operations: bool = False) -> DiffResult:
    """Compare two runs' Kineto traces (one file per rank each), each read once by the Kineto provider.

    The same pass reads each trace's context (its ``hardware``), call nesting and GPU
    timeline (``diff_gpu_read.GpuPass``) and, with ``operations``, its operators for the operation-matched
    section (``ops.op_profile.OpsPass``). That section is asked for (``diff --operations``): it needs the
    operators' shapes and call stacks, a second reading of each trace's CPU side that the speed goal of
    the diff (issue 34, ``bench/bench_diff_trace.py``) leaves no room for by default; when the GPUs differ
    and it was not asked for, a note says what it would add. A side whose traces hold no operation and
    no step is refused (``InputError`` naming its files).
    """
    from my_utils.profiling.analysis.diff_context import context_warnings, gpus_differ
    from my_utils.profiling.analysis.diff_gpu import GpuSide
    from my_utils.profiling.analysis.diff_gpu_read import GpuPass
    from my_utils.profiling.formats.parallel import run_many
    from my_utils.profiling.kineto.ops.op_diff import op_diff
    from my_utils.profiling.kineto.ops.op_profile import OpsPass
    from my_utils.profiling.kineto.read.context import run_hardware
    from my_utils.profiling.kineto.read.nesting import NestingPass
    from my_utils.profiling.kineto.read.provider import read_trace

    files = [str(p) for p in base] + [str(p) for p in target]
    passes: tuple[Any, ...] = (NestingPass, GpuPass, OpsPass) if operations else (NestingPass, GpuPass)
    reads = run_many(read_trace, [(f, None, passes) for f in files], executor or pool_for(files))
    sides = []
    for label, side in ((_label(base), reads[:len(base)]), (_label(target), reads[len(base):])):
        stats, side_step = stats_from_events(e for r in side for e in r.events)
        if not stats and side_step is None:
            raise _nothing(label, "kernels, operators or ProfilerStep markers")
        _check_stats(stats, side_step, label)
        gpu = GpuSide(tuple(lane for r in side for lane in r.results[1]))
        sides.append((stats, side_step, run_hardware([r.context for r in side]), gpu))
    (a, sa, hw_a, gpu_a), (b, sb, hw_b, gpu_b) = sides
    warnings, similarity, window = context_warnings(a, b, hw_a, hw_b)
    if bool(gpu_a.lanes) != bool(gpu_b.lanes):
        warnings.append(f"GPU activity on the {'base' if gpu_a.lanes else 'target'} side only: the other ran no "
                        "kernel, copy or set in its trace (a CPU run, or a capture without CUDA activities), so no "
                        "GPU-level figure compares and kernels show as added or removed")
    notes = []
    if not sa or not sb:
        which = "either trace" if not sa and not sb else "the base" if not sa else "the target"
        notes.append(f"no ProfilerStep markers in {which}: each side is one capture, one sample, so the diff is "
                     "descriptive (its changes are listed, not judged; record at least 2 steps to judge them)")
    elif sa.steps < MIN_SAMPLES or sb.steps < MIN_SAMPLES:
        notes.append(f"{sa.steps} and {sb.steps} step(s): a side with one step is one sample, with no spread, so the "
                     "changes are listed, not judged (descriptive)")
    else:
        notes.append(f"samples: {sa.steps} and {sb.steps} ProfilerSteps; a change is significant above "
                     f"{sigmas:g} standard errors of the per-step spread and {min_pct:g}% of the base")
    if not operations and gpus_differ(hw_a, hw_b, _kernel_names(a), _kernel_names(b)):
        notes.append(OPERATIONS_HINT)
    where = f"{_label(base)} vs {_label(target)}"
    parents = _parents(reads)
    step = (compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct, where=where)[0]
            if sa and sb else None)
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct, base_step_mean=sa.mean if sa else None,
                      parents=parents, where=where)
    matched = op_diff([r.results[2] for r in reads[:len(base)]], [r.results[2] for r in reads[len(base):]]) \
        if operations else None
    return DiffResult(_label(base), _label(target), changes, step, warnings, {"sigmas": sigmas, "min_pct": min_pct},
                      hw_a, hw_b, gpu=(gpu_a, gpu_b), similarity=similarity, window=window, notes=notes,
                      operations=matched)


#: The trace diff's note when the GPUs differ and the operation-matched section was not asked for.
OPERATIONS_HINT = ("the GPUs differ, and kernel names differ across GPUs (each architecture gets its own kernels), so "
                   "many kernels show as added or removed; --operations (operations=True) matches the work by "
                   "operator + shape + call stack instead")


def _kernel_names(stats: Mapping[str, Any]) -> list[str]:
    """The kernel names among a side's per-name stats (``kernel:`` names, the prefix removed)."""
    return [n[len("kernel:"):] for n in stats if n.startswith("kernel:")]


def _label(paths: Sequence[str | Path]) -> str:
    return ", ".join(Path(p).name for p in paths)
