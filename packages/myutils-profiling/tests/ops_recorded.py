"""Calls recorded for real by torch.profiler on the CPU, read back through the project's trace reader.

The operation-model tests (``test_ops_*``) run each case inside its own ``case<i>`` range with
``record_shapes`` on, export the trace, read it with ``kineto.run.read_rank`` (as a user's trace is
read) and hand each test the operators recorded inside each case with their arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from my_utils.profiling.kineto.ops.args import OpArgs
from my_utils.profiling.kineto.run import read_rank


def record(tmp_path: Path, cases: Sequence[Callable[[], Any]], *, memory: bool = False,
           name: str = "trace.json") -> tuple[Path, list[list[tuple[str, OpArgs]]]]:
    """(the trace, per case every recorded operator with shapes, in order) of ``cases`` run under the profiler."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=memory) as prof:
        for i, run in enumerate(cases):
            with record_function(f"case{i}"):
                run()
    path = tmp_path / name
    prof.export_chrome_trace(str(path))
    d = read_rank(path).data
    ranges = {d.names[int(n)]: (float(t), float(e)) for n, t, e in zip(d.ann_name, d.ann_ts, d.ann_end, strict=True)}
    out: list[list[tuple[str, OpArgs]]] = []
    for i in range(len(cases)):
        start, end = ranges[f"case{i}"]
        ops = []
        for row in sorted(range(len(d.op_ts)), key=lambda r: float(d.op_ts[r])):
            if start <= d.op_ts[row] <= end and d.op_sig[row] >= 0:
                args = OpArgs.from_args(d.sigs[int(d.op_sig[row])])
                if args is not None:
                    ops.append((d.names[int(d.op_name[row])], args))
        out.append(ops)
    return path, out


def first(ops: list[tuple[str, OpArgs]], name: str) -> OpArgs:
    """The arguments of the first call of ``name`` in one case (AssertionError naming what was recorded)."""
    for n, a in ops:
        if n == name:
            return a
    raise AssertionError(f"{name} not recorded; recorded: {[n for n, _a in ops]}")
