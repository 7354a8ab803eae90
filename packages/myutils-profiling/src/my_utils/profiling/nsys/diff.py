"""Compare two runs' nsys exports per kernel, per NVTX scope and per category, above the noise.

The comparison is :func:`my_utils.profiling.analysis.diff.compare` (the same test as
``myutils-profile diff``): a change is significant when it exceeds ``sigmas`` standard
errors *and* ``min_pct`` % of the base. Here the samples are:

``kernel:<name>``
    each launch's duration (mean and spread over launches; several ranks pooled).
``nvtx:<scope>``
    each NVTX range's duration, by *scope*: the range name without the per-call numbers
    PyTorch appends (``aten::mm, seq = 12, op_id = 345`` → ``aten::mm``), so the same
    operator matches across runs.
``category:<kind>``
    GPU time per kind (computation, communication, memory = copies and sets, other), per
    iteration when an iteration range is known (its spread across iterations is the noise),
    else as milliseconds per second of the GPU span (captures of different lengths compare).
``iteration`` (the step time, when an iteration range is known)
    each iteration's CPU duration.

Every per-name aggregate is one ``GROUP BY`` in SQLite (count, sum, sum of squares), so a
side costs one pass per table, whatever its size.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from my_utils.profiling.analysis.diff import STEP_TIME, DiffResult, OpStats, compare
from my_utils.profiling.nsys.ranks import expand_inputs
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


def side_stats(paths: Sequence[Path], iteration_range: str | None = None) -> tuple[dict[str, OpStats], OpStats | None]:
    """Per-name statistics of one side (one or many exports) and its iteration-time statistics."""
    kernels: dict[str, _Moments] = defaultdict(_Moments)
    scopes: dict[str, _Moments] = defaultdict(_Moments)
    kinds: dict[str, float] = defaultdict(float)
    per_iter: dict[str, list[float]] = defaultdict(list)
    iter_moments = _Moments()
    span_ns = 0.0
    with contextlib.ExitStack() as stack:
        for path in paths:
            db = stack.enter_context(NsysExport(path))
            db.ensure_views()
            db.conn.create_function("nsys_scope", 1, nvtx_scope, deterministic=True)
            for name, n, s, ss in db.iterate(
                    "SELECT name, COUNT(*), SUM(dur), SUM(1.0 * dur * dur) FROM nsys_kernel GROUP BY name_id",
                    place="kernel statistics"):
                kernels[f"kernel:{name}"].add(n, s, ss)
            for name, n, s, ss in db.iterate(
                    "SELECT nsys_scope(name) AS scope, COUNT(*), SUM(dur), SUM(1.0 * dur * dur) FROM nsys_nvtx "
                    "GROUP BY scope", place="NVTX statistics"):
                scopes[f"nvtx:{name}"].add(n, s, ss)
            for kind, s in db.query("SELECT kind, SUM(dur) FROM nsys_gpu_op GROUP BY kind", place="kind totals"):
                kinds[kind] += s or 0
            for (span,) in db.query("SELECT MAX(end) - MIN(start) FROM nsys_gpu_op GROUP BY device",
                                    place="GPU span"):
                span_ns += span or 0
            if iteration_range:
                _iteration_kinds(db, iteration_range, per_iter, iter_moments)
    out = {k: m.stats(k) for k, m in kernels.items()}
    out.update({k: m.stats(k) for k, m in scopes.items()})
    if per_iter:
        n = max(len(v) for v in per_iter.values())
        for kind, values in per_iter.items():
            values = values + [0.0] * (n - len(values))
            mean = sum(values) / n
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
            out[f"category:{kind}"] = OpStats(f"category:{kind}", n, n, mean / 1e6, std / 1e6, "ms", "nsys")
    elif span_ns > 0:
        for kind, total in kinds.items():
            out[f"category:{kind}"] = OpStats(f"category:{kind}", 1, 1, total / span_ns * 1e3, 0.0, "ms/s", "nsys")
    step = iter_moments.stats(STEP_TIME) if iter_moments.n else None
    return out, step


def _iteration_kinds(db: NsysExport, pattern: str, per_iter: dict[str, list[float]], moments: _Moments) -> None:
    from my_utils.profiling.nsys.iterations import find_iterations

    its = find_iterations(db, pattern)
    if its is None:
        return
    cpu: dict[tuple[object, object], int] = {}
    comm: dict[tuple[object, object], float] = defaultdict(float)
    comp: dict[tuple[object, object], float] = defaultdict(float)
    for r in its.table.records():
        key = (r["pid"], r["iteration"])
        cpu[key] = r["cpu_ns"]
        comm[key] += r["communication_ns"] or 0
        comp[key] += r["computation_ns"] or 0
    for key, t in cpu.items():
        moments.add(1, t, float(t) * t)
        per_iter["communication"].append(comm[key])
        per_iter["computation"].append(comp[key])


def diff_exports(base: Sequence[str | Path], target: Sequence[str | Path], *, iteration_range: str | None = None,
                 sigmas: float = 3.0, min_pct: float = 5.0) -> DiffResult:
    """Compare two runs (each: exports, folders, globs or ``%q{RANK}`` templates); see the module doc."""
    a_paths = [i.path for i in expand_inputs(base)]
    b_paths = [i.path for i in expand_inputs(target)]
    a, sa = side_stats(a_paths, iteration_range)
    b, sb = side_stats(b_paths, iteration_range)
    warnings = []
    if iteration_range and (sa is None or sb is None):
        warnings.append(f"no NVTX range matches {iteration_range!r} on "
                        f"{'either side' if sa is None and sb is None else 'one side'}: categories are compared "
                        "as time per second of GPU span")
    if len(a_paths) != len(b_paths):
        warnings.append(f"the runs have {len(a_paths)} and {len(b_paths)} export(s): launches are pooled over ranks")
    step = compare({STEP_TIME: sa}, {STEP_TIME: sb}, sigmas=sigmas, min_pct=min_pct)[0] if sa and sb else None
    changes = compare(a, b, sigmas=sigmas, min_pct=min_pct)
    label = lambda ps: ", ".join(p.name for p in ps)  # noqa: E731
    return DiffResult(label(a_paths), label(b_paths), changes, step, warnings,
                      {"sigmas": sigmas, "min_pct": min_pct})
