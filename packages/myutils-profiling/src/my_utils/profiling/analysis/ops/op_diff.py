"""A diff that matches operations, not kernel names: operator + argument shapes + call stack, then looser keys.

Across GPU models or vendors the kernels of one operation have different names (``sm80_…`` against
``volta_…``, CUDA against ROCm), so a kernel-name diff pairs little of the work. The CPU dispatch
is the same on both sides: each GPU activity is tied to the operator that launched it
(``ops.attribution``), and each side becomes, per (operator, recorded shapes and types, call
stack), the GPU time per step, the calls per step and the roofline time of the modelled cost
(``ops.cost``, ``ops.roofline``). The call stack is the names of the operators and annotations
above the operator, ``ProfilerStep#N`` left out.

Pairing goes down a ladder of keys (:data:`LEVELS`), each level pairing what the previous ones
left: operator + shapes + stack, operator + stack (the same code at another batch size),
operator + shapes, operator alone, and last the annotated scope (the path down to the innermost
``record_function`` range above: ``## forward:over_arch ##``, ``Torch-Compiled Region: 0/1``):
kernels replayed from a CUDA graph have no operator (the capture is not in the trace,
``ops.attribution``), so one side's graph replay in a scope pairs with what the other side ran
there and nothing else paired, as a whole (a compiled and graphed module against the same module
run eagerly). Kernels launched
outside any operator pair by category; within one GPU model they pair by kernel name instead,
the only place kernel names are compared. ``paired_pct`` is the share of the base's GPU time
paired (``paired_pct_by_level`` per level); ``name_paired_pct`` the share a kernel-name match
would pair, for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from my_utils.profiling.analysis.kineto.call_stacks import ANNOTATION, OP
from my_utils.profiling.analysis.kineto.rank_data import RankData
from my_utils.profiling.analysis.ops.args import OpArgs
from my_utils.profiling.analysis.ops.attribution import attribute
from my_utils.profiling.analysis.ops.breakdown import inductor_cost
from my_utils.profiling.analysis.ops.categories import CATEGORIES
from my_utils.profiling.analysis.ops.cost import op_cost
from my_utils.profiling.analysis.ops.roofline import HOST_COPY, ceiling

LEVELS = ("operator, shapes and stack", "operator and stack", "operator and shapes", "operator", "annotated scope")
NO_OPERATOR = "(no operator)"
#: An operation's key: (operator, shapes, stack, annotated scope, kernel name for kernels without an operator).
Key = tuple[str, str, str, str, str]
TOP_ROWS = 40
GRAPH = "(CUDA graph replay)"


@dataclass
class OpProfile:
    """One trace's GPU work per operation key, small and picklable (what a worker sends back).

    ``ops``: :data:`Key` → [GPU µs, calls, roofline µs or -1 when not modelled];
    ``kernels``: kernel name → GPU µs; ``steps``: profiled steps (1 without any).
    """

    gpu: str
    steps: int
    total_us: float
    ops: dict[Key, list[float]] = field(default_factory=dict)
    kernels: dict[str, float] = field(default_factory=dict)


def _stacks_text(d: RankData, a: Any) -> dict[int, tuple[str, str]]:
    """Per operator row used: the call stack above it (operator and annotation names, top first, steps left out)
    and its annotated scope, the path down to the innermost annotation above it ("" when none)."""
    s = a.stacks
    memo: dict[int, tuple[str, str]] = {-1: ("", "")}
    kinds = s.kind
    out: dict[int, tuple[str, str]] = {}

    def walk(row: int) -> tuple[str, str]:
        chain = []
        while row not in memo:
            chain.append(row)
            row = int(s.parent[row])
        text, scope = memo[row]
        for r in reversed(chain):
            if kinds[r] in (OP, ANNOTATION):
                name = d.names[int(s.name[r])]
                text = f"{text} > {name}" if text else name
                if kinds[r] == ANNOTATION:
                    scope = text
            memo[r] = (text, scope)
        return text, scope

    for op in np.unique(a.op[a.op >= 0]).tolist():
        out[op] = walk(int(s.parent[op]))
    return out


def profile(d: RankData) -> OpProfile:
    """The :class:`OpProfile` of one rank's data."""
    steps = max(len({s[2] for s in d.step_events}), 1)
    gpu = str(d.context.get("gpu") or "")
    if not len(d.gpu_ts):
        return OpProfile(gpu, steps, 0.0)
    a = attribute(d)
    prof = OpProfile(gpu, steps, a.total_us)
    names = d.gpu_name[a.rows]
    per_kernel = np.bincount(names.astype(np.int64), weights=a.dur)
    for k in np.flatnonzero(per_kernel).tolist():
        prof.kernels[d.names[k]] = float(per_kernel[k])
    stacks = _stacks_text(d, a)
    costs: dict[tuple[int, int], Any] = {}
    seen: set[int] = set()
    for i in range(len(a.rows)):
        op = int(a.op[i])
        us = float(a.dur[i])
        roof_us = -1.0
        first_call = op >= 0 and op not in seen
        if op < 0 or a.graph[i]:
            kernel = d.names[int(names[i])]
            cat = CATEGORIES[int(a.category[i])]
            if op < 0:
                key: Key = (NO_OPERATOR, cat, "", "", kernel)
            else:  # a graph replay: keyed under the operator that launched the graph, in its scope
                above, scope = stacks.get(op, ("", ""))
                opname = d.names[int(d.op_name[op])]
                key = (GRAPH, cat, f"{above} > {opname}" if above else opname, scope, kernel)
            first_call = False
        else:
            nid = int(d.op_name[op])
            sid = int(d.op_sig[op]) if d.op_sig is not None else -1
            raw = d.sigs[sid] if sid >= 0 else {}
            above, scope = stacks.get(op, ("", ""))
            key = (d.names[nid], f"{raw.get('Input Dims', '')} {raw.get('Input type', '')}" if raw else "", above,
                   scope, "")
            if (nid, sid) not in costs:
                args = OpArgs.from_args(raw) if raw else None
                costs[(nid, sid)] = (inductor_cost(args, d.names[nid]) or op_cost(d.names[nid], args)) if args else None
            cost = costs[(nid, sid)]
            if cost is not None and first_call and not HOST_COPY.match(d.names[int(names[i])]):
                roof = ceiling(gpu, cost.dtype, cost.matrix)
                if not roof.missing and roof.flops and roof.bandwidth:
                    roof_us = 1e6 * max(cost.flops_low / roof.flops, cost.bytes_low / roof.bandwidth)
        entry = prof.ops.setdefault(key, [0.0, 0.0, 0.0])
        entry[0] += us
        if first_call:
            seen.add(op)
            entry[1] += 1
            entry[2] = entry[2] + roof_us if roof_us >= 0 and entry[2] >= 0 else -1.0
        elif op < 0 or a.graph[i]:
            entry[1] += 1
            entry[2] = -1.0
    return prof


#: The typed shape arguments (``providers._trace_schema.ShapeArgs``) and their keys in a trace's ``args``.
_SHAPE_FIELDS = (("input_dims", "Input Dims"), ("input_type", "Input type"), ("input_strides", "Input Strides"),
                 ("concrete_inputs", "Concrete Inputs"), ("kernel_flop", "kernel_flop"),
                 ("kernel_num_gb", "kernel_num_gb"), ("kernel_backend", "kernel_backend"),
                 ("kernel_name", "kernel_name"), ("stream", "stream"))


class OpsPass:
    """A ``providers.kineto.read_trace`` pass: the trace's operators and GPU work → its :class:`OpProfile`.

    It takes the typed runs with shapes (``needs_shapes``), so a diff keeps msgspec's fast decoding:
    each complete event (``ph`` X) is handed to the Kineto collector as the few keys it reads;
    metadata and instant events are not needed here (the GPU's name comes from ``deviceProperties``).
    """

    needs_lanes = True
    needs_shapes = True

    def __init__(self, path: Path) -> None:
        from my_utils.profiling.analysis.kineto.run import KinetoPass

        self.inner = KinetoPass(path, keep_ops=True)
        self.add = self.inner.add

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for a run of ``KinetoShapeEvent`` structs (a missing ``ts`` is NaN: such an event is skipped)."""
        add = self.add
        for ev in events:
            ts = ev.ts
            if ev.ph != "X" or ts != ts:
                continue
            a = ev.args
            if a.input_dims is not None or a.kernel_flop is not None:  # an operator with recorded arguments
                args: dict[str, Any] = {key: v for attr, key in _SHAPE_FIELDS if (v := getattr(a, attr)) is not None}
            else:
                args = {"correlation": a.correlation} if a.stream is None else {"correlation": a.correlation,
                                                                                "stream": a.stream}
            add({"ph": "X", "cat": ev.cat, "name": ev.name, "ts": ts, "dur": ev.dur, "pid": ev.pid, "tid": ev.tid,
                 "args": args})

    def finish(self, metadata: Any, event_count: int, rank: int | None) -> OpProfile:
        """The profile of the trace read."""
        from my_utils.profiling.analysis.kineto import call_stacks

        d, _source, _host = self.inner.columns(metadata, rank)
        try:
            # durations near 1e308 overflow to inf here: the diff refuses them itself, naming the kernel
            with np.errstate(over="ignore", invalid="ignore"):
                return profile(d)
        finally:
            call_stacks.forget()


@dataclass(frozen=True)
class OpPair:
    """One paired (or unpaired) operation: per-step GPU time and percent of the roofline on each side."""

    operator: str
    shapes: str
    stack: str
    level: str
    base_us: float | None
    target_us: float | None
    base_calls: float | None
    target_calls: float | None
    base_roofline_pct: float | None
    target_roofline_pct: float | None

    @property
    def delta_us(self) -> float:
        """Target minus base, µs per step (a missing side counts 0)."""
        return (self.target_us or 0.0) - (self.base_us or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this row."""
        return {"operator": self.operator, "shapes": self.shapes, "stack": self.stack, "level": self.level,
                "base_us_per_step": self.base_us, "target_us_per_step": self.target_us, "delta_us": self.delta_us,
                "base_calls_per_step": self.base_calls, "target_calls_per_step": self.target_calls,
                "base_roofline_pct": self.base_roofline_pct, "target_roofline_pct": self.target_roofline_pct}


@dataclass(frozen=True)
class OpDiff:
    """The operation-matched diff of two sides (module docstring)."""

    paired_pct: float
    name_paired_pct: float
    by_level: dict[str, float]
    rows: tuple[OpPair, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The ``operations`` section of a diff's JSON."""
        return {"paired_pct": self.paired_pct, "name_paired_pct": self.name_paired_pct,
                "paired_pct_by_level": dict(self.by_level), "rows": [r.to_dict() for r in self.rows],
                "notes": list(self.notes)}


def merge(profiles: Sequence[OpProfile]) -> OpProfile:
    """One side's ranks as one profile: times per rank (summed over ranks, divided by their number) and per step."""
    n = max(len(profiles), 1)
    out = OpProfile(" / ".join(sorted({p.gpu for p in profiles if p.gpu})), 1, 0.0)
    for p in profiles:
        out.total_us += p.total_us / p.steps / n
        for k, (us, calls, roof) in p.ops.items():
            e = out.ops.setdefault(k, [0.0, 0.0, 0.0])
            e[0] += us / p.steps / n
            e[1] += calls / p.steps / n
            e[2] = e[2] + roof / p.steps / n if roof >= 0 and e[2] >= 0 else -1.0
        for name, us in p.kernels.items():
            out.kernels[name] = out.kernels.get(name, 0.0) + us / p.steps / n
    return out


def _level_key(key: Key, level: int) -> tuple[str, ...] | None:
    op, shapes, stack, scope, kernel = key
    if level == 4:
        return (scope,) if scope else None
    return ((op, shapes, stack, kernel), (op, stack, kernel), (op, shapes, kernel), (op, kernel))[level]


def op_diff(base: Sequence[OpProfile], target: Sequence[OpProfile], top: int = TOP_ROWS) -> OpDiff:
    """Pair the operations of ``base`` and ``target`` (per-rank profiles of each side) down the ladder of keys."""
    a, b = merge(base), merge(target)
    same_gpu = bool(a.gpu) and a.gpu == b.gpu
    left_a, left_b = _keyed(a, same_gpu), _keyed(b, same_gpu)
    pairs: list[OpPair] = []
    by_level: dict[str, float] = {}
    for level, label in enumerate(LEVELS):
        groups_a: dict[tuple[str, ...], list[Key]] = {}
        groups_b: dict[tuple[str, ...], list[Key]] = {}
        for side, groups in ((left_a, groups_a), (left_b, groups_b)):
            for k in side:
                lk = _level_key(k, level)
                if lk is not None:
                    groups.setdefault(lk, []).append(k)
        paired = 0.0
        for lk in sorted(groups_a.keys() & groups_b.keys()):
            first = groups_a[lk][0]
            ea = [left_a.pop(k) for k in groups_a[lk]]
            eb = [left_b.pop(k) for k in groups_b[lk]]
            paired += sum(e[0] for e in ea)
            op = first[0] if level < 4 else f"(the rest of {lk[0].rsplit(' > ', 1)[-1]})"
            pairs.append(OpPair(op, first[1] if level in (0, 2) else "", first[2] if level in (0, 1) else lk[0]
                                if level == 4 else "", label, sum(e[0] for e in ea), sum(e[0] for e in eb),
                                sum(e[1] for e in ea), sum(e[1] for e in eb), _roof_pct(ea), _roof_pct(eb)))
        by_level[label] = 100.0 * paired / a.total_us if a.total_us else 0.0
    for which, left in (("base", left_a), ("target", left_b)):
        for k, e in left.items():
            mine = which == "base"
            pairs.append(OpPair(k[0], k[1], k[2], f"{which} only", e[0] if mine else None, None if mine else e[0],
                                e[1] if mine else None, None if mine else e[1], _roof_pct([e]) if mine else None,
                                None if mine else _roof_pct([e])))
    name_total = sum(a.kernels.values())
    name_paired = sum(us for k, us in a.kernels.items() if k in b.kernels)
    notes = [f"GPU time per step per rank; the base's {a.total_us / 1e3:,.2f} ms per step is the denominator"]
    if any(k[0] == GRAPH for k in (*a.ops, *b.ops)):
        notes.append("kernels replayed from CUDA graphs have no operator in a trace: a replay pairs with what the "
                     "other side ran in the same annotated scope and nothing else paired, as a whole")
    if same_gpu:
        notes.append("one GPU model on both sides: kernels launched outside any operator pair by kernel name")
    elif a.gpu and b.gpu:
        notes.append(f"different GPUs ({a.gpu} → {b.gpu}): kernel names are not compared, operations are")
    pairs.sort(key=lambda p: -abs(p.delta_us))
    return OpDiff(sum(by_level.values()), 100.0 * name_paired / name_total if name_total else 0.0, by_level,
                  tuple(pairs[:top]), tuple(notes))


def _keyed(p: OpProfile, keep_kernels: bool) -> dict[Key, list[float]]:
    """``p``'s entries, kernel names dropped from the keys unless both sides ran on one GPU model."""
    if keep_kernels:
        return dict(p.ops)
    out: dict[Key, list[float]] = {}
    for (op, shapes, stack, scope, _kernel), (us, calls, roof) in p.ops.items():
        e = out.setdefault((op, shapes, stack, scope, ""), [0.0, 0.0, 0.0])
        e[0] += us
        e[1] += calls
        e[2] = e[2] + roof if roof >= 0 and e[2] >= 0 else -1.0
    return out


def _roof_pct(entries: list[list[float]]) -> float | None:
    """Percent of the roofline of paired entries: their roofline time over their GPU time, when all are modelled."""
    us = sum(e[0] for e in entries)
    if us <= 0 or any(e[2] < 0 for e in entries):
        return None
    return 100.0 * sum(e[2] for e in entries) / us
