"""One trace's operations as a small, picklable profile for the operation-matched diff (``ops.op_diff``).

:class:`OpsPass` is fed in the Kineto provider's own pass over a trace (``kineto.read.provider.read_trace``,
msgspec's typed runs with the operators' shapes), collects what the Kineto analyses collect and, at
the end, :func:`profile` ties every GPU activity to its operator (``ops.attribution``) and sums, per
operation key (operator, shapes and types, call stack, annotated scope), the GPU time, the calls and
the roofline time of the modelled cost; kernels without an operator and graph replays are keyed by
kernel name and category. Heavy modules (numpy, the call stacks) are imported when a trace is read,
in the worker that reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.profiling.kineto.ops.op_diff import GRAPH, NO_OPERATOR, Key, OpProfile

if TYPE_CHECKING:
    from my_utils.profiling.kineto.rank_data import RankData


def _stacks_text(d: RankData, a: Any) -> dict[int, tuple[str, str]]:
    """Per operator row used: the call stack above it (operator and annotation names, top first, steps left out)
    and its annotated scope, the path down to the innermost annotation above it ("" when none)."""
    import numpy as np

    from my_utils.profiling.kineto.call_stacks import ANNOTATION, OP

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
    """The :class:`OpProfile` of one rank's data (sums per operator row and per kernel name, vectorised)."""
    import numpy as np

    from my_utils.profiling.kineto.ops.args import OpArgs
    from my_utils.profiling.kineto.ops.attribution import attribute
    from my_utils.profiling.kineto.ops.breakdown import inductor_cost
    from my_utils.profiling.kineto.ops.categories import CATEGORIES
    from my_utils.profiling.kineto.ops.cost import op_cost
    from my_utils.profiling.kineto.ops.roofline import HOST_COPY, ceiling

    steps = max(len({s[2] for s in d.step_events}), 1)
    gpu = str(d.context.get("gpu") or "")
    if not len(d.gpu_ts):
        return OpProfile(gpu, steps, 0.0)
    a = attribute(d)
    prof = OpProfile(gpu, steps, a.total_us)
    names = d.gpu_name[a.rows].astype(np.int64)
    per_kernel = np.bincount(names, weights=a.dur)
    for k in np.flatnonzero(per_kernel).tolist():
        prof.kernels[d.names[k]] = float(per_kernel[k])
    stacks = _stacks_text(d, a)
    own = (a.op >= 0) & ~a.graph
    # kernels without an operator, and graph replays (under the operator that launched the graph): by kernel
    other = np.flatnonzero(~own)
    if len(other):
        combos, back = np.unique(np.stack([a.op[other], names[other], a.category[other].astype(np.int64)], axis=1),
                                 axis=0, return_inverse=True)
        us = np.bincount(back.reshape(-1), weights=a.dur[other])
        count = np.bincount(back.reshape(-1))
        for (op, kernel, cat), t, c in zip(combos.tolist(), us.tolist(), count.tolist(), strict=True):
            if op < 0:
                key: Key = (NO_OPERATOR, CATEGORIES[cat], "", "", d.names[kernel])
            else:  # a graph replay: keyed under the operator that launched the graph, in its scope
                above, scope = stacks.get(op, ("", ""))
                opname = d.names[int(d.op_name[op])]
                key = (GRAPH, CATEGORIES[cat], f"{above} > {opname}" if above else opname, scope, d.names[kernel])
            entry = prof.ops.setdefault(key, [0.0, 0.0, -1.0])
            entry[0] += t
            entry[1] += c
    # each operator's own kernels: summed per operator row, keyed by its name, shapes and stack
    ops = a.op[own]
    if len(ops):
        rows, back = np.unique(ops, return_inverse=True)
        us = np.bincount(back.reshape(-1), weights=a.dur[own])
        first = np.zeros(len(rows), np.int64)
        first[back.reshape(-1)[::-1]] = np.flatnonzero(own)[::-1]  # a kernel of each row: the first
        costs: dict[tuple[int, int], Any] = {}
        for row, t, g in zip(rows.tolist(), us.tolist(), first.tolist(), strict=True):
            nid = int(d.op_name[row])
            sid = int(d.op_sig[row]) if d.op_sig is not None else -1
            raw = d.sigs[sid] if sid >= 0 else {}
            above, scope = stacks.get(row, ("", ""))
            key = (d.names[nid], f"{raw.get('Input Dims', '')} {raw.get('Input type', '')}" if "Input Dims" in raw
                   else "", above, scope, "")
            if (nid, sid) not in costs:
                args = OpArgs.from_args(raw) if raw else None
                costs[(nid, sid)] = (inductor_cost(args, d.names[nid]) or op_cost(d.names[nid], args)) if args else None
            cost = costs[(nid, sid)]
            roof_us = -1.0
            if cost is not None and not HOST_COPY.match(d.names[int(names[g])]):
                roof = ceiling(gpu, cost.dtype, cost.matrix)
                if not roof.missing and roof.flops and roof.bandwidth:
                    roof_us = 1e6 * max(cost.flops_low / roof.flops, cost.bytes_low / roof.bandwidth)
            entry = prof.ops.setdefault(key, [0.0, 0.0, 0.0])
            entry[0] += t
            entry[1] += 1
            entry[2] = entry[2] + roof_us if roof_us >= 0 and entry[2] >= 0 else -1.0
    return prof


class OpsPass:
    """A ``kineto.read.provider.read_trace`` pass: the trace's operators and GPU work → its :class:`OpProfile`.

    It takes the typed runs with shapes (``needs_shapes``), so a diff keeps msgspec's fast decoding;
    the Kineto collector keeps them without a dict per event (``TraceCollector.add_typed``).
    """

    needs_lanes = True
    needs_shapes = True

    def __init__(self, path: Path) -> None:
        from my_utils.profiling.kineto.run import KinetoPass

        self.inner = KinetoPass(path, keep_ops=True)
        self.add = self.inner.add

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for a run of ``KinetoShapeEvent`` structs (``kineto.collect.TraceCollector.add_typed``)."""
        self.inner.collector.add_typed(events)

    def finish(self, metadata: Any, event_count: int, rank: int | None) -> OpProfile:
        """The profile of the trace read."""
        import numpy as np

        from my_utils.profiling.kineto import call_stacks

        d, _source, _host = self.inner.columns(metadata, rank)
        try:
            # durations near 1e308 overflow to inf here: the diff refuses them itself, naming the kernel
            with np.errstate(over="ignore", invalid="ignore"):
                return profile(d)
        finally:
            call_stacks.forget()


