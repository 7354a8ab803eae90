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
would pair, for comparison. Each side's profile is read by ``ops.op_profile`` in the trace's one pass;
this module only pairs (no numpy: the diff's own process stays light).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
