"""Compare two forward traces layer by layer: where two runs first disagree, and by how much.

Calls are matched by (module name, call number). A call is ``same`` when every tensor has the
same MD5, dtype and shape and the module's parameters hash alike. Among the calls that differ,
the *origin* is where the disagreement starts: the call's inputs and parameters agree but
its outputs do not (``diverges_here``), or its parameters differ (``params``). Everything after
an origin usually differs because of it (``inherits``: its inputs already differed). Where both
runs saved a tensor's values the largest absolute and relative differences are measured on the
saved elements (the head only, when ``max_elements`` cut them: ``compared`` says how many).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.hooks.forward_trace import FORMAT, INDEX
from my_utils.hooks.trace_tensors import TensorMeta


@dataclass(frozen=True)
class TraceCall:
    """One recorded call, as the index holds it."""

    index: int
    module: str
    type: str
    call: int
    param_dtypes: dict[str, str]
    params_md5: str | None
    tensors: tuple[TensorMeta, ...]
    folder: str | None


@dataclass(frozen=True)
class Trace:
    """A trace folder: its header, its calls in the order they ran, and why it stopped early (if it did)."""

    path: Path
    header: dict[str, Any]
    calls: tuple[TraceCall, ...]
    stopped: str | None


def read_trace(folder: str | os.PathLike[str]) -> Trace:
    """Read ``<folder>/index.jsonl``; InputError naming the file and line when it is not a forward trace."""
    path = Path(folder)
    index = path / INDEX if path.is_dir() else path
    try:
        lines = index.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(index, None, f"a forward trace index written by ForwardTraceRecorder ({exc})") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if n == len(lines):  # a run killed mid-line loses that line only
                break
            raise InputError(index, f"line {n}", f"one JSON object per line ({exc.msg})") from None
        if not isinstance(row, dict):
            raise InputError(index, f"line {n}", "one JSON object per line")
        rows.append((n, row))
    if not rows or rows[0][1].get("format") != FORMAT:
        raise InputError(index, "line 1", f"a header with format {FORMAT!r}")
    calls, stopped = [], None
    for n, row in rows[1:]:
        if "stopped" in row:
            stopped = str(row["stopped"])
            continue
        try:
            calls.append(TraceCall(int(row["index"]), str(row["module"]), str(row["type"]), int(row["call"]),
                                   {str(k): str(v) for k, v in dict(row.get("param_dtypes") or {}).items()},
                                   row.get("params_md5"), tuple(TensorMeta.from_json(t) for t in row["tensors"]),
                                   row.get("folder")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(index, f"line {n}", f"a call record (index, module, type, call, tensors): {exc}") \
                from None
    return Trace(index.parent, rows[0][1], tuple(calls), stopped)


@dataclass(frozen=True)
class CallDiff:
    """One call of both runs (or of one): what differs and by how much."""

    module: str
    type: str
    call: int
    status: str  # same | diverges_here | params | inherits | only_a | only_b
    index_a: int | None
    index_b: int | None
    differing: tuple[str, ...] = ()  # tensor paths whose fingerprints differ
    dtype_changes: tuple[str, ...] = ()
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    compared: int = 0  # elements the differences were measured on

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class TraceComparison:
    """Every matched call in run A's order (then B's extra calls), and the origins of the differences."""

    a: Path
    b: Path
    rows: tuple[CallDiff, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def first_divergence(self) -> CallDiff | None:
        """The first call (in A's order) where the runs start to disagree, None when they agree everywhere."""
        return next((r for r in self.rows if r.status in ("diverges_here", "params")), None) or \
            next((r for r in self.rows if r.status != "same"), None)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        first = self.first_divergence
        return {"format": "my_utils.forward_trace_comparison", "schema_version": 1, "a": str(self.a),
                "b": str(self.b), "counts": self.counts(), "notes": list(self.notes),
                "first_divergence": first.to_json() if first is not None else None,
                "rows": [r.to_json() for r in self.rows]}

    def render(self, top: int = 20) -> str:
        """The text a terminal shows: the verdict, then the differing calls in execution order."""
        counts = self.counts()
        lines = [f"forward traces: A={self.a}  B={self.b}",
                 f"{len(self.rows)} calls: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))]
        lines += [f"note: {n}" for n in self.notes]
        first = self.first_divergence
        if first is None:
            lines.append("the runs agree on every recorded call (same MD5 for every tensor and parameter set)")
            return "\n".join(lines)
        lines.append(f"first divergence: {first.module or '<root>'} ({first.type}) call {first.call}: "
                     f"{_why(first)}")
        lines.append("")
        lines.append(f"{'#A':>5} {'module':<40} {'call':>4} {'status':<14} {'max|a-b|':>10} {'max rel':>9}  tensors")
        shown = [r for r in self.rows if r.status != "same"][:top]
        for r in shown:
            lines.append(f"{'-' if r.index_a is None else r.index_a:>5} {(r.module or '<root>')[:40]:<40} "
                         f"{r.call:>4} {r.status:<14} {_num(r.max_abs_diff):>10} {_num(r.max_rel_diff):>9}  "
                         f"{', '.join(r.differing[:4])}{' ...' if len(r.differing) > 4 else ''}")
        hidden = sum(1 for r in self.rows if r.status != "same") - len(shown)
        if hidden > 0:
            lines.append(f"... {hidden} more differing calls (--top, or --json for all)")
        return "\n".join(lines)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _why(r: CallDiff) -> str:
    if r.status == "params":
        return "its parameters differ" + (f" ({'; '.join(r.dtype_changes)})" if r.dtype_changes else "")
    if r.status == "diverges_here":
        return f"same inputs and parameters, different outputs ({', '.join(r.differing[:4])})"
    if r.status in ("only_a", "only_b"):
        return f"recorded in run {r.status[-1].upper()} only"
    return "its inputs already differed"


def _values(trace: Trace, call: TraceCall) -> dict[str, Any]:
    if call.folder is None:
        return {}
    from my_utils.core.artifacts import load_artifacts

    loaded = load_artifacts(trace.path / call.folder)
    return loaded if isinstance(loaded, dict) else {}


def _measure(ta: Trace, ca: TraceCall, tb: Trace, cb: TraceCall, paths: list[str]) -> tuple[float | None,
                                                                                              float | None, int]:
    va, vb = _values(ta, ca), _values(tb, cb)
    worst_abs: float | None = None
    worst_rel: float | None = None
    compared = 0
    for p in paths:
        x, y = va.get(p), vb.get(p)
        if x is None or y is None or x.dtype != y.dtype or x.is_complex() or x.numel() != y.numel():
            continue
        n = x.numel()
        if n == 0:
            continue
        xf = x.reshape(-1)[:n].double()
        yf = y.reshape(-1)[:n].double()
        diff = (xf - yf).abs()
        a = float(diff.max())
        r = float((diff / yf.abs().clamp_min(1e-12)).max())
        worst_abs = a if worst_abs is None else max(worst_abs, a)
        worst_rel = r if worst_rel is None else max(worst_rel, r)
        compared += n
    return worst_abs, worst_rel, compared


def compare_traces(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> TraceComparison:
    """Compare two traces written by ``ForwardTraceRecorder`` (see the module docstring)."""
    ta, tb = read_trace(a), read_trace(b)
    by_b = {(c.module, c.call): c for c in tb.calls}
    seen: set[tuple[str, int]] = set()
    rows: list[CallDiff] = []
    for ca in ta.calls:
        key = (ca.module, ca.call)
        cb = by_b.get(key)
        if cb is None:
            rows.append(CallDiff(ca.module, ca.type, ca.call, "only_a", ca.index, None))
            continue
        seen.add(key)
        rows.append(_diff(ta, ca, tb, cb))
    rows += [CallDiff(c.module, c.type, c.call, "only_b", None, c.index) for c in tb.calls
             if (c.module, c.call) not in seen]
    notes = tuple(f"run {label} stopped early: {t.stopped}" for label, t in (("A", ta), ("B", tb)) if t.stopped)
    if ta.header.get("sampling") != tb.header.get("sampling"):
        notes += (f"the runs sampled calls differently (A: {ta.header.get('sampling')}, "
                  f"B: {tb.header.get('sampling')}): unmatched calls are expected",)
    return TraceComparison(ta.path, tb.path, tuple(rows), notes)


def _diff(ta: Trace, ca: TraceCall, tb: Trace, cb: TraceCall) -> CallDiff:
    ma = {t.path: t for t in ca.tensors}
    mb = {t.path: t for t in cb.tensors}
    differing = sorted(p for p in set(ma) | set(mb)
                       if p not in ma or p not in mb or (ma[p].md5, ma[p].dtype, ma[p].shape) !=
                       (mb[p].md5, mb[p].dtype, mb[p].shape))
    changes = tuple(f"{n}: {ca.param_dtypes.get(n, '-')} -> {cb.param_dtypes.get(n, '-')}"
                    for n in sorted(set(ca.param_dtypes) | set(cb.param_dtypes))
                    if ca.param_dtypes.get(n) != cb.param_dtypes.get(n))
    params_differ = ca.params_md5 != cb.params_md5 or bool(changes)
    if not differing and not params_differ:
        return CallDiff(ca.module, ca.type, ca.call, "same", ca.index, cb.index)
    inputs_differ = any(not p.startswith("out") for p in differing)
    status = "params" if params_differ else ("inherits" if inputs_differ else "diverges_here")
    abs_d, rel_d, n = _measure(ta, ca, tb, cb, differing)
    return CallDiff(ca.module, ca.type, ca.call, status, ca.index, cb.index, tuple(differing), changes,
                    abs_d, rel_d, n)
