"""Replay of one operation (or the top N) as a standalone script: the trace's shapes, dtypes, strides and
concrete inputs, random data, none of the model's code or weights.

``replay_script(ops, source)`` writes the Python text; ``pick_ops(d, operator, top)`` chooses the
calls to replay from one rank's data (the operator and argument set with the most GPU time, or
CPU time in a trace without GPU work). The script needs only torch: it rebuilds each tensor with
``empty`` + ``as_strided`` at the recorded strides (floating point filled from a normal
distribution; integer and boolean tensors zero, which are valid indices and offsets), passes
each scalar as recorded, finds the operator's overload whose schema has as many arguments as
were recorded (keyword-only ones by name), and prints one JSON line per operation: its output
shapes and dtypes and the median time of ``--iters`` calls on ``--device`` (``cuda`` when
available). Everything read from the trace is embedded as one JSON string literal, never as
code. When the trace lacks strides (contiguous tensors are assumed) or concrete inputs (older
Kineto: scalars are left at their defaults), the script says so per operation, as does
:func:`~.breakdown.replay_readiness` in ``op_shapes``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from my_utils.profiling.kineto.ops.args import DTYPES, OpArgs
from my_utils.profiling.kineto.rank_data import RankData

_OP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ReplayOp:
    """One call to replay: the operator, its recorded arguments and the trace event it was read from."""

    name: str
    args: dict[str, Any]
    event_index: int
    gpu_us: float = 0.0
    calls: int = 1


def _literal(text: str | None) -> Any:
    """A recorded concrete input as a Python value: numbers, booleans, lists of them, strings; None when empty."""
    if text is None or text == "":
        return None
    t = text.strip()
    if t in ("True", "False"):
        return t == "True"
    if t in ("None", ""):
        return None
    try:
        return json.loads(t.replace("True", "true").replace("False", "false").replace("'", '"'))
    except ValueError:
        return t.strip("'\"")


def arg_specs(args: OpArgs) -> tuple[list[dict[str, Any]], list[str]]:
    """Each recorded input as a JSON spec for the script, and what had to be assumed."""
    specs: list[dict[str, Any]] = []
    notes: list[str] = []
    if args.strides is None:
        notes.append("no strides recorded: contiguous tensors assumed")
    if args.concrete is None:
        notes.append("no concrete inputs recorded: scalar arguments left at their defaults")
    for i in range(len(args.dims)):
        shape = args.shape(i)
        kind = args.types[i] if i < len(args.types) else ""
        if shape is not None:
            specs.append({"tensor": list(shape), "stride": list(args.stride(i) or []) or None,
                          "dtype": DTYPES[kind][2]})
        elif (shapes := args.tensor_list(i)) is not None:
            specs.append({"tensors": [list(s) for s in shapes], "dtype": "float32"})
            notes.append(f"argument {i}: a tensor list records no element type: float32 assumed")
        elif args.concrete is None:
            specs.append({"default": True})
        else:
            specs.append({"value": _literal(args.text(i))})
    return specs, notes


def pick_ops(d: RankData, operator: str | None = None, top: int = 1) -> list[ReplayOp]:
    """The calls to replay: per (operator, recorded arguments) the one with the most GPU time (CPU time without GPU
    work), the ``top`` largest, only operator ``operator`` when given (a name, ``aten::`` optional)."""
    if d.op_sig is None or not len(d.op_sig):
        return []
    want = None if operator is None else (operator if "::" in operator else f"aten::{operator}")
    rows = np.flatnonzero(d.shaped_ops())
    if want is not None:
        rows = rows[[d.names[int(n)] == want for n in d.op_name[rows].tolist()]]
    if not len(rows):
        return []
    weight = d.op_dur.astype(float).copy()
    if len(d.gpu_ts) and (d.gpu_rt >= 0).any():
        from my_utils.profiling.kineto.ops.attribution import attribute

        a = attribute(d)
        weight = np.bincount(a.op[a.op >= 0], weights=a.dur[a.op >= 0], minlength=len(d.op_ts))
    groups: dict[tuple[int, int], list[int]] = {}
    for r in rows.tolist():
        groups.setdefault((int(d.op_name[r]), int(d.op_sig[r])), []).append(r)
    ranked = sorted(groups.items(), key=lambda kv: -float(weight[kv[1]].sum()))
    out = []
    for (nid, sid), members in ranked:
        if not _OP_NAME.match(d.names[nid]):
            continue
        best = max(members, key=lambda r: float(weight[r]))
        out.append(ReplayOp(d.names[nid], d.sigs[sid], int(d.op_index[best]), float(weight[members].sum()),
                            len(members)))
        if len(out) >= top:
            break
    return out


def replay_script(ops: Sequence[ReplayOp], source: str) -> str:
    """The standalone script replaying ``ops`` (module docstring); ``source`` names the trace in its docstring."""
    payload = []
    for op in ops:
        if not _OP_NAME.match(op.name):
            raise ValueError(f"operator name {op.name!r} is not a 'namespace::name' torch operator")
        parsed = OpArgs.from_args(op.args)
        if parsed is None or not parsed.dims:
            raise ValueError(f"{op.name} (traceEvents[{op.event_index}]) has no recorded shapes: record the trace "
                             "with record_shapes=True")
        specs, notes = arg_specs(parsed)
        payload.append({"op": op.name, "event": op.event_index, "args": specs, "notes": notes})
    data = json.dumps(payload, separators=(",", ":"))
    names = ", ".join(sorted({op.name for op in ops}))
    return _TEMPLATE.replace("@SOURCE@", json.dumps(source)[1:-1].replace('"""', "'''")) \
        .replace("@NAMES@", names).replace("@DATA@", repr(data))


_TEMPLATE = '''#!/usr/bin/env python3
"""Replays @NAMES@ as recorded in "@SOURCE@", with random data.

Written by my_utils from the trace's shapes, dtypes, strides and concrete inputs: none of the
model's code or weights. Floating-point tensors hold normal random values; integer and boolean
tensors hold zeros (valid indices and offsets). Usage: python THIS.py [--device cuda|cpu] [--iters N]
Prints one JSON line per operation: its output shapes and dtypes and the median time per call.
"""
import argparse
import json
import statistics
import time

import torch

OPS = json.loads(@DATA@)
DTYPE_CODES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.float32,
               torch.float64, None, torch.complex64, torch.complex128, torch.bool, None, None, None, torch.bfloat16]


def tensor(spec, device):
    dtype = getattr(torch, spec["dtype"])
    shape = spec["tensor"]
    stride = spec.get("stride") or torch.empty(shape, device="meta").stride()
    size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    base = torch.empty(size, dtype=dtype, device=device)
    if dtype.is_floating_point or dtype.is_complex:
        base.normal_()
    else:
        base.zero_()
    return base.as_strided(shape, stride)


def value(spec, arg, device):
    if "tensor" in spec:
        return tensor(spec, device)
    if "tensors" in spec:
        return [tensor({"tensor": s, "dtype": spec["dtype"]}, device) for s in spec["tensors"]]
    v = spec.get("value")
    kind = str(arg.type)
    if v is None:
        return None
    if "Device" in kind:
        return torch.device(device)
    if "ScalarType" in kind and isinstance(v, int) and 0 <= v < len(DTYPE_CODES):
        return DTYPE_CODES[v]
    if "Layout" in kind or "MemoryFormat" in kind or "Generator" in kind:
        return None
    return v


def call(name, specs, device):
    namespace, op = name.split("::")
    packet = getattr(getattr(torch.ops, namespace), op)
    errors = []
    for overload in packet.overloads():
        fn = getattr(packet, overload)
        schema = fn._schema.arguments
        if len(schema) != len(specs):
            continue
        try:
            args, kwargs = [], {}
            for spec, arg in zip(specs, schema):
                if spec.get("default"):  # not recorded: the schema's default (None when it has none)
                    v = arg.default_value if arg.has_default_value() else None
                else:
                    v = value(spec, arg, device)
                if arg.kwarg_only:
                    kwargs[arg.name] = v
                else:
                    args.append(v)
            fn(*args, **kwargs)
            return lambda: fn(*args, **kwargs)
        except (RuntimeError, TypeError, ValueError) as exc:
            errors.append(f"{overload}: {exc}")
    raise SystemExit(f"{name}: no overload takes the recorded arguments ({'; '.join(errors) or 'none has '}"
                     f"{len(specs)} arguments)")


def describe(out):
    if isinstance(out, torch.Tensor):
        return [{"shape": list(out.shape), "dtype": str(out.dtype).removeprefix("torch.")}]
    if isinstance(out, (list, tuple)):
        return [d for o in out for d in describe(o)]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=20)
    options = parser.parse_args()
    sync = torch.cuda.synchronize if options.device.startswith("cuda") else (lambda: None)
    for entry in OPS:
        run = call(entry["op"], entry["args"], options.device)
        out = run()
        for _ in range(3):
            run()
        times = []
        for _ in range(max(options.iters, 1)):
            sync()
            start = time.perf_counter()
            run()
            sync()
            times.append((time.perf_counter() - start) * 1e6)
        print(json.dumps({"op": entry["op"], "event": entry["event"], "device": options.device,
                          "outputs": describe(out), "median_us": statistics.median(times), "iters": len(times),
                          "notes": entry["notes"]}))


if __name__ == "__main__":
    main()
'''


def replay_from_trace(path: str | Path, operator: str | None = None, top: int = 1) -> str:
    """The replay script of the ``top`` operations of one trace file (``operator`` only, when given).

    ``InputError`` names the trace and the fix when it holds no call to replay (no shapes recorded,
    or no call of ``operator``).
    """
    from my_utils.core.errors import InputError
    from my_utils.profiling.kineto.run import read_rank

    d = read_rank(path).data
    ops = pick_ops(d, operator, top)
    if not ops:
        shaped = sorted({d.names[int(n)] for n in d.op_name[d.shaped_ops()].tolist()}) if d.op_sig is not None else []
        if operator is None or not shaped:
            raise InputError(path, None, "an operator call with recorded shapes (record the trace with "
                                         "torch.profiler's record_shapes=True)")
        want = operator if "::" in operator else f"aten::{operator}"
        raise InputError(path, None, f"a call of {want} with recorded shapes; its operators with shapes are "
                                     f"{', '.join(shaped[:8])}{', ...' if len(shaped) > 8 else ''}")
    return replay_script(ops, Path(path).name)
