"""Compare two runs' nsys exports: the GPU-level before → after first, then per kernel, NVTX scope and category.

The GPU level (``analysis.diff_gpu``) comes from the built-in named queries each export
already answers (``gpu_busy_device``, ``gpu_idle_causes``, ``comm_compute_overlap``, and
``iterations`` per NVTX iteration), one lane per device. The per-name comparison is
:func:`my_utils.profiling.analysis.diff_model.compare` (the test of ``myutils-profile diff``:
only repeated samples are judged). Its samples:

``kernel:<name>``
    each launch's duration (mean and spread over launches; several ranks pooled).
``nvtx:<scope>``
    each NVTX range's duration, by *scope*: the range name without the per-call numbers
    PyTorch appends (``aten::mm, seq = 12, op_id = 345`` → ``aten::mm``), so the same
    operator matches across runs. When numbered scopes (``blocks.7``) cover different
    indices on the two sides, the capture windows differ: each family is one scope
    (``blocks.#``) and a warning says which indices each side covers.
``category:<kind>`` (only with NVTX iterations)
    GPU time per kind per iteration (its spread across iterations is the noise).
``iteration`` (the step time, with NVTX iterations)
    each iteration's CPU duration.

Iterations are the ``--iteration-range`` given, else the usual step ranges
(``nsys.iterations.DEFAULT_RANGES``); without them the GPU figures are one sample per
capture, descriptive, and a note says so. Every per-name aggregate is one ``GROUP BY`` in
SQLite (count, sum, sum of squares), so a side costs one pass per table, whatever its size.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.profiling.analysis.diff_gpu import IDLE_CAUSES, GpuSide, LaneFacts
from my_utils.profiling.analysis.diff_model import MIN_SAMPLES, STEP_TIME, DiffResult, OpStats, compare
from my_utils.profiling.formats.ranks import expand_inputs
from my_utils.profiling.nsys.schema import NsysExport

# what PyTorch's emit_nvtx and record_function append to a range name, per call
_PER_CALL = re.compile(r"(,\s*(seq|op_id|sizes|input_op_ids)\s*=\s*[^,]*)+$")


def nvtx_scope(name: str | None) -> str:
    """An NVTX range name without PyTorch's per-call suffixes (``, seq = 12, op_id = 345``)."""
    return _PER_CALL.sub("", name or "").strip()


class _Moments:
    __slots__ = ("n", "s", "ss")

    def __init__(self) -> None:
        self.n, self.s, self.ss = 0.0, 0.0, 0.0

    def add(self, n: float, s: float, ss: float) -> None:
        self.n += n
        self.s += s
        self.ss += ss

    def stats(self, name: str, scale: float = 1e-6, unit: str = "ms") -> OpStats:
        mean = self.s / self.n if self.n else 0.0
        var = max(self.ss / self.n - mean * mean, 0.0) if self.n else 0.0
        return OpStats(name, self.n, int(self.n), mean * scale, math.sqrt(var) * scale, unit, "nsys")


@dataclass
class _Side:
    """What one side's exports hold, before the two sides are compared."""

    kernels: dict[str, _Moments] = field(default_factory=lambda: defaultdict(_Moments))
    scopes: dict[str, _Moments] = field(default_factory=lambda: defaultdict(_Moments))
    per_iter: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    iterations: _Moments = field(default_factory=_Moments)
    iteration_names: set[str] = field(default_factory=set)
    lanes: list[LaneFacts] = field(default_factory=list)
    gpus: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    exports: int = 0


def _read_side(paths: Sequence[Path], iteration_range: str | None) -> _Side:
    side = _Side()
    with contextlib.ExitStack() as stack:
        for path in paths:
            db = stack.enter_context(NsysExport(path))
            db.ensure_views()
            side.exports += 1
            db.conn.create_function("nsys_scope", 1, nvtx_scope, deterministic=True)
            for name, n, s, ss in db.iterate(
                    "SELECT name, COUNT(*), SUM(dur), SUM(1.0 * dur * dur) FROM nsys_kernel GROUP BY name_id",
                    place="kernel statistics"):
                side.kernels[f"kernel:{name}"].add(n, s, ss)
            for name, n, s, ss in db.iterate(
                    "SELECT nsys_scope(name) AS scope, COUNT(*), SUM(dur), SUM(1.0 * dur * dur) FROM nsys_nvtx "
                    "GROUP BY scope", place="NVTX statistics"):
                side.scopes[f"nvtx:{name}"].add(n, s, ss)
            for gpu in db.gpus():
                side.gpus[gpu.name] += 1
            rows = _iteration_rows(db, iteration_range, side)
            side.lanes += _lanes(db, path, rows)
    return side


def _iteration_rows(db: NsysExport, pattern: str | None, side: _Side) -> list[dict[str, Any]]:
    """The per-(iteration, device) rows of the export's NVTX iterations (empty without), feeding the side's samples."""
    from my_utils.profiling.nsys.iterations import find_iterations

    its = find_iterations(db, pattern)
    if its is None:
        return []
    side.iteration_names.add(its.pattern)
    records = its.table.records()
    cpu: dict[tuple[object, object], int] = {}
    comm: dict[tuple[object, object], float] = defaultdict(float)
    comp: dict[tuple[object, object], float] = defaultdict(float)
    for r in records:
        key = (r["pid"], r["iteration"])
        cpu[key] = r["cpu_ns"]
        comm[key] += r["communication_ns"] or 0
        comp[key] += r["computation_ns"] or 0
    for key, t in cpu.items():
        side.iterations.add(1, t, float(t) * t)
        side.per_iter["communication"].append(comm[key])
        side.per_iter["computation"].append(comp[key])
    return records


def _lanes(db: NsysExport, path: Path, iterations: list[dict[str, Any]]) -> list[LaneFacts]:
    """One lane per device: span-level totals from the named queries, windows from the iterations (else the span)."""
    from my_utils.profiling.nsys.queries import run_builtin

    busy = {r[0]: r for r in run_builtin(db, "gpu_busy_device").rows}  # device, start, end, span, busy, ...
    overlap = {r[0]: r for r in run_builtin(db, "comm_compute_overlap").rows}  # device, comm, comp, overlap, ...
    causes: dict[Any, dict[str, float]] = defaultdict(dict)
    for device, category, _gaps, idle_ns, _share in run_builtin(db, "gpu_idle_causes").rows:
        causes[device][category] = (idle_ns or 0) / 1e6
    who = f"rank {db.rank}" if db.rank is not None else path.name
    out = []
    for device, row in sorted(busy.items(), key=lambda kv: (kv[0] is None, kv[0])):
        span, busy_ns = float(row[3] or 0), float(row[4] or 0)
        comm, comp, both = (float(x or 0) for x in overlap.get(device, (device, 0, 0, 0))[1:4])
        windows = [_window(r) for r in iterations if r["device"] == device and r["gpu_window_ns"] is not None]
        if not windows:
            windows = [_parts(span, busy_ns, comp, comm, both)]
        out.append(LaneFacts(f"{who} GPU {device}", span / 1e6, busy_ns / 1e6, comp / 1e6, comm / 1e6, both / 1e6,
                             tuple((c, causes[device].get(c, 0.0)) for c in IDLE_CAUSES), tuple(windows),
                             "iteration" if len(windows) > 1 or iterations else "capture"))
    return out


def _parts(window: float, busy: float, comp: float, comm: float, overlap: float) -> tuple[float, float, float,
                                                                                         float, float]:
    """A window (ns) split into (length, compute, exposed communication, other GPU work, idle), in ms."""
    exposed = comm - overlap
    return (window / 1e6, comp / 1e6, exposed / 1e6, (busy - comp - exposed) / 1e6, (window - busy) / 1e6)


def _window(r: dict[str, Any]) -> tuple[float, float, float, float, float]:
    return _parts(float(r["gpu_window_ns"]), float(r["busy_ns"] or 0), float(r["computation_ns"] or 0),
                  float(r["communication_ns"] or 0), float(r["overlap_ns"] or 0))


def _merge_families(a: dict[str, _Moments], b: dict[str, _Moments], families: Sequence[str]) -> None:
    """Fold each numbered scope of a differing family into one scope named by the family (both sides)."""
    from my_utils.profiling.analysis.diff_context import family_of

    wanted = set(families)
    for side in (a, b):
        for name in list(side):
            family = family_of(name)
            if family in wanted:
                m = side.pop(name)
                side[family].add(m.n, m.s, m.ss)


def _stats(side: _Side) -> tuple[dict[str, OpStats], OpStats | None]:
    out = {k: m.stats(k) for k, m in side.kernels.items()}
    out.update({k: m.stats(k) for k, m in side.scopes.items()})
    if side.per_iter:
        n = max(len(v) for v in side.per_iter.values())
        for kind, values in side.per_iter.items():
            values = values + [0.0] * (n - len(values))
            mean = sum(values) / n
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
            out[f"category:{kind}"] = OpStats(f"category:{kind}", n, n, mean / 1e6, std / 1e6, "ms", "nsys")
    step = side.iterations.stats(STEP_TIME) if side.iterations.n else None
    return out, step


def _hardware(side: _Side) -> dict[str, Any]:
    if not side.gpus:
        return {}
    names = sorted(side.gpus)
    return {"gpu": names[0] if len(names) == 1 else ", ".join(names), "gpu_count": len(side.lanes) or None}


def diff_exports(base: Sequence[str | Path], target: Sequence[str | Path], *, iteration_range: str | None = None,
                 sigmas: float = 3.0, min_pct: float = 5.0) -> DiffResult:
    """Compare two runs (each: exports, folders, globs or ``%q{RANK}`` templates); see the module doc."""
    from my_utils.profiling.analysis.diff_context import context_warnings, window_difference

    a_paths = [i.path for i in expand_inputs(base)]
    b_paths = [i.path for i in expand_inputs(target)]
    sa_, sb_ = _read_side(a_paths, iteration_range), _read_side(b_paths, iteration_range)
    window = window_difference(sa_.scopes, sb_.scopes)
    if window is not None:
        _merge_families(sa_.scopes, sb_.scopes, window.families)
    (a, sa), (b, sb) = _stats(sa_), _stats(sb_)
    hw_a, hw_b = _hardware(sa_), _hardware(sb_)
    warnings, similarity, _ = context_warnings(a, b, hw_a, hw_b)
    if window is not None:
        warnings.append(window.describe())
    if len(a_paths) != len(b_paths):
        warnings.append(f"the runs have {len(a_paths)} and {len(b_paths)} export(s): launches are pooled over ranks")
    warnings += _range_warnings(iteration_range, sa, sb, sa_, sb_)
    notes = _notes(sa, sb, sigmas, min_pct)
    step = compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct)[0] if sa and sb else None
    # a name on one side only counts when its time over the capture is min_pct % of the base's GPU span
    span = GpuSide(tuple(sa_.lanes)).total("span_ms") or None
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct, base_step_mean=span, capture_totals=True)
    label = lambda ps: ", ".join(p.name for p in ps)  # noqa: E731
    return DiffResult(label(a_paths), label(b_paths), changes, step, warnings,
                      {"sigmas": sigmas, "min_pct": min_pct}, hw_a, hw_b,
                      gpu=(GpuSide(tuple(sa_.lanes)), GpuSide(tuple(sb_.lanes))), similarity=similarity,
                      window=window, notes=notes, sampling="per launch (kernels), per range (NVTX)")


def _range_warnings(given: str | None, sa: OpStats | None, sb: OpStats | None, side_a: _Side,
                    side_b: _Side) -> list[str]:
    """Iteration ranges found on one side only, or under different names: the sides are then sampled differently."""
    if sa is None and sb is None:
        return [f"no NVTX range matches {given!r} on either side: GPU figures are compared per capture"] if given \
            else []
    if sa is None or sb is None:
        missing = "base" if sa is None else "target"
        found = sorted((side_b if sa is None else side_a).iteration_names)
        return [f"the NVTX iteration range {given or ', '.join(found)!r} is on one side only (missing on the "
                f"{missing}): the iteration time is not compared and the GPU figures fall back to one sample per "
                "capture; the two sides are not sampled alike"]
    if side_a.iteration_names != side_b.iteration_names:
        return [f"the sides' iterations are different NVTX ranges ({', '.join(sorted(side_a.iteration_names))} vs "
                f"{', '.join(sorted(side_b.iteration_names))}): iteration times compare different spans"]
    return []


def _notes(sa: OpStats | None, sb: OpStats | None, sigmas: float, min_pct: float) -> list[str]:
    rule = f"significant above {sigmas:g} standard errors and {min_pct:g}% of the base"
    if sa is not None and sb is not None and sa.steps >= MIN_SAMPLES and sb.steps >= MIN_SAMPLES:
        return [f"samples: {sa.steps} and {sb.steps} NVTX iterations for the iteration time, the categories and "
                f"the GPU figures; each launch for kernels, each range for NVTX scopes; {rule}"]
    return ["no NVTX iterations on both sides (train_step, ProfilerStep#*, step, iteration, iter, or "
            "--iteration-range): the GPU figures are one capture per side, descriptive; kernels are judged per "
            f"launch and NVTX scopes per range ({rule}); a name seen once per side is not judged"]
