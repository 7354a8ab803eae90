"""FLOPs and bytes of elementwise operators, reductions, copies and optimizer steps: work bounded by memory.

Derivations (``n`` output elements, ``s`` bytes per element; an exponent, logarithm, square root,
``erf`` or ``tanh`` counts as one FLOP, as FLOP counters count them):

* **Elementwise**: the operator's formula counted per output element (:data:`ELEMENTWISE`: ``add``
  1, ``2`` with ``alpha ≠ 1``; ``sigmoid = 1/(1 + exp(−x))`` 4; ``gelu = x·Φ(x)`` with
  ``Φ = ½(1 + erf(x/√2))`` 5; ``silu = x·sigmoid(x)`` 5; ``sigmoid_backward = dy·y·(1 − y)`` 3;
  ``lerp = a + w·(b − a)`` 3; a comparison or select 1; ``fill``/``zero`` 0). The output is the
  inputs' broadcast shape (the first input for an in-place ``op_``). Bytes: every tensor input read
  and the output written; an input broadcast to a larger output is read once when it stays in
  cache (low) or once per output element (high). Williams, Waterman & Patterson, *Roofline* (CACM
  2009): arithmetic intensity = FLOPs / DRAM bytes.
* **Reductions** over ``n`` input elements: ``sum``/``mean``/``max``/``argmax`` 1 per element,
  ``norm`` 2 (square, add), ``var``/``std`` 3 (subtract, square, add) to 4 (a separate mean pass),
  ``logsumexp`` 4. Bytes: the input once, the output as the reduced dimensions (``dim`` from the
  recorded concrete inputs) leave it; unknown dimensions give one element (low) to ``n`` (high).
* **Copies and casts** (``copy_``, ``_to_copy``, ``clone``, ``cat``, ``index_select``, ``gather``): no
  FLOPs; the source read and the destination written at each side's element size (a host↔device
  copy crosses the host link instead: judged against it only when the table has the link).
* **Optimizer steps** (``_fused_adam_``/``_fused_adamw_`` over ``n`` parameters): ``m = β₁m + (1−β₁)g`` 3,
  ``v = β₂v + (1−β₂)g²`` 4, ``p −= lr·m̂/(√v̂ + ε)`` 6 = ``13n``; weight decay (+1 decoupled, +2 into
  the gradient) and ``amsgrad`` (+1) make the high end ``16n``. Reads ``p, g, m, v`` and writes
  ``p, m, v`` (``+v_max`` read and written with amsgrad). Kingma & Ba 2015 (arXiv:1412.6980,
  Algorithm 1), Loshchilov & Hutter 2019 (arXiv:1711.05101). ``_fused_sgd_``: ``p −= lr·g`` 2 to
  9 with momentum, dampening, weight decay and Nesterov. Tensor lists record no element type: 2
  (low) to 4 (high) bytes per element. ``_foreach_*`` operators are their elementwise operator
  over every tensor of the lists.
"""

from __future__ import annotations

from collections.abc import Callable

from my_utils.profiling.kineto.ops.args import OpArgs, broadcast, numel
from my_utils.profiling.kineto.ops.cost import Cost

#: elementwise operator (``aten::`` name without a trailing ``_``) → FLOPs per output element.
ELEMENTWISE: dict[str, int] = {
    **dict.fromkeys(("add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
                     "maximum", "minimum", "pow", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                     "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "neg", "abs", "relu", "clamp",
                     "clamp_min", "clamp_max", "hardtanh", "threshold", "threshold_backward", "exp", "exp2", "expm1",
                     "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "erf", "floor",
                     "ceil", "round", "trunc", "sign", "square", "where", "masked_fill", "hardtanh_backward",
                     "bernoulli", "isnan", "isinf", "_foreach_add", "_foreach_sub", "_foreach_mul", "_foreach_div",
                     "_foreach_neg", "_foreach_sqrt", "_foreach_maximum", "_foreach_abs", "_foreach_exp",
                     "_foreach_reciprocal", "_foreach_sign"), 1),
    **dict.fromkeys(("leaky_relu", "native_dropout", "dropout", "leaky_relu_backward", "native_dropout_backward",
                     "softplus_backward"), 2),
    **dict.fromkeys(("sigmoid_backward", "tanh_backward", "lerp", "addcmul", "addcdiv", "nan_to_num", "elu",
                     "softplus", "elu_backward", "_foreach_lerp", "_foreach_addcmul", "_foreach_addcdiv"), 3),
    "sigmoid": 4, "hardswish": 4, "hardsigmoid": 3, "gelu": 5, "silu": 5, "mish": 6, "silu_backward": 9,
    "gelu_backward": 11, "hardswish_backward": 4,
    **dict.fromkeys(("fill", "zero", "_foreach_zero", "_foreach_copy"), 0),
}
_COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "logical_and", "logical_or",
                      "logical_not"})
#: reduction → (position of ``dim`` in its recorded inputs, FLOPs per input element low, high).
REDUCTIONS: dict[str, tuple[int, int, int]] = {
    "sum": (1, 1, 1), "mean": (1, 1, 1), "nansum": (1, 1, 1), "prod": (1, 1, 1), "amax": (1, 1, 1),
    "amin": (1, 1, 1), "max": (1, 1, 1), "min": (1, 1, 1), "argmax": (1, 1, 1), "argmin": (1, 1, 1),
    "all": (1, 1, 1), "any": (1, 1, 1), "var": (1, 3, 4), "std": (1, 3, 4), "var_mean": (1, 3, 4),
    "std_mean": (1, 3, 4), "norm": (2, 2, 2), "linalg_vector_norm": (2, 2, 2), "logsumexp": (1, 4, 4),
    "_foreach_norm": (-1, 2, 2),
}
#: torch ScalarType codes (``Concrete Inputs`` of a ``dtype`` argument) → bytes per element.
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 15: 2, 23: 1, 24: 1,
                     25: 1, 26: 1}


def _base(name: str) -> str:
    short = name.removeprefix("aten::")
    return short[:-1] if short.endswith("_") and short[:-1] in ELEMENTWISE else short


def elementwise(name: str) -> Callable[[OpArgs], Cost | None]:
    """The model of elementwise operator ``name`` (``aten::add``, ``aten::add_``...)."""
    base = _base(name)
    per = ELEMENTWISE[base]
    inplace = name.endswith("_")
    foreach = base.startswith("_foreach_")

    def model(a: OpArgs) -> Cost | None:
        if foreach:
            return _foreach(a, per, base)
        tensors = a.tensors()
        if not tensors:
            return None
        shapes = [a.shape(i) or () for i in tensors]
        out = shapes[0] if inplace else broadcast(*shapes)
        if out is None:
            return None
        n = numel(out)
        flops = per * n * (2 if base in ("add", "sub", "rsub") and (a.number(2) or 1.0) != 1.0 else 1)
        reads_low = sum(numel(sh) * (a.itemsize(i) or 0) for i, sh in zip(tensors, shapes, strict=True))
        reads_high = sum(max(numel(sh), n) * (a.itemsize(i) or 0) for i, sh in zip(tensors, shapes, strict=True))
        write = n * (1 if base in _COMPARE else a.itemsize(tensors[0]) or 0)
        if base in ("fill", "zero"):  # writes only: the value is a scalar or a 0-d tensor
            reads_low = reads_high = 0
        return Cost(float(flops), float(flops), float(reads_low + write), float(reads_high + write),
                    a.dtype(tensors[0]) or "", False, "elementwise",
                    f"{per} FLOP{'s' if per != 1 else ''} per element over {n} elements")

    return model


def _foreach(a: OpArgs, per: int, base: str) -> Cost | None:
    lists = [ts for i in range(len(a)) if (ts := a.tensor_list(i)) is not None]
    if not lists:
        return None
    n = sum(numel(sh) for sh in lists[0])
    reads = 0 if base == "_foreach_zero" else sum(sum(numel(sh) for sh in ts) for ts in lists)
    nbytes = reads + n  # every list read, one list written (in place or a new one)
    return Cost(float(per * n), float(per * n), 2.0 * nbytes, 4.0 * nbytes, "", False, "elementwise",
                f"{per} FLOP{'s' if per != 1 else ''} per element over {n} elements of {len(lists[0])} tensors "
                "(element type of tensor lists not recorded: 2 to 4 bytes)")


def reduction(name: str) -> Callable[[OpArgs], Cost | None]:
    """The model of reduction ``name``."""
    base = name.removeprefix("aten::")
    dim_at, per_low, per_high = REDUCTIONS[base]

    def model(a: OpArgs) -> Cost | None:
        if dim_at < 0:  # _foreach_norm: one value per tensor
            shapes = a.tensor_list(0)
            if not shapes:
                return None
            n = sum(numel(sh) for sh in shapes)
            return Cost(float(per_low * n), float(per_high * n), 2.0 * n, 4.0 * n, "", False, "reduction",
                        f"norm of {len(shapes)} tensors, {n} elements")
        x = a.shape(0)
        if x is None:
            return None
        if base in ("max", "min") and a.shape(1) is not None:  # max(a, b): the elementwise overload
            return elementwise(f"aten::{base}imum")(a)
        n, s = numel(x), a.itemsize(0) or 0
        dims = a.ints(dim_at) if len(a) > 2 or base in ("amax", "amin", "logsumexp") else []
        text = a.text(dim_at)
        if dims is None and text is not None and text.strip() in ("[]", "None"):
            dims = []
        if dims is None:
            out_low, out_high = 1, n
        elif not dims:
            out_low = out_high = 1
        else:
            kept = n
            for d in dims:
                kept //= max(x[d % len(x)], 1) if x else 1
            out_low = out_high = kept
        write = s if base not in ("argmax", "argmin") else 8
        return Cost(float(per_low * n), float(per_high * n), float(n * s + out_low * write),
                    float(n * s + out_high * write), a.dtype(0) or "", False, "reduction",
                    f"{per_low}{f'–{per_high}' if per_high != per_low else ''} FLOP per element over {n} elements")

    return model


def copy(a: OpArgs) -> Cost | None:
    """``copy_(self, src, non_blocking)`` (and ``_copy_from(self, dst)``): read the source, write the destination."""
    dst, src = a.shape(0), a.shape(1)
    if dst is None or src is None:
        return None
    nbytes = numel(src) * (a.itemsize(1) or 0) + numel(dst) * (a.itemsize(0) or 0)
    return Cost(0.0, 0.0, float(nbytes), float(nbytes), a.dtype(1) or "", False, "copy",
                f"{numel(dst)} elements, {a.dtype(1)} → {a.dtype(0)}")


def to_copy(a: OpArgs) -> Cost | None:
    """``_to_copy(self, dtype, ...)`` / ``clone`` / ``contiguous``: a read and a write (the cast's type when recorded)."""
    x = a.shape(0)
    if x is None:
        return None
    n, s = numel(x), a.itemsize(0) or 0
    codes = a.ints(1) if len(a) > 1 else None
    out = SCALAR_TYPE_BYTES.get(codes[0], s) if codes else s
    return Cost(0.0, 0.0, float(n * (s + out)), float(n * (s + out)), a.dtype(0) or "", False, "copy",
                f"{n} elements read and written")


def cat(a: OpArgs) -> Cost | None:
    """``cat(tensors, dim)`` / ``stack``: every input read, the output written."""
    shapes = a.tensor_list(0)
    if not shapes:
        return None
    n = sum(numel(sh) for sh in shapes)
    return Cost(0.0, 0.0, 2.0 * n * 2, 2.0 * n * 4, "", False, "copy",
                f"{len(shapes)} tensors, {n} elements (element type of tensor lists not recorded: 2 to 4 bytes)")


def gather(a: OpArgs) -> Cost | None:
    """``gather(self, dim, index)`` / ``index_select(self, dim, index)``: the index read, the selected elements copied."""
    x, idx = a.shape(0), a.shape(2)
    if x is None or idx is None:
        return None
    s = a.itemsize(0) or 0
    if len(idx) <= 1 and len(x) > 1:  # index_select: whole slices along dim
        dim = (a.ints(1) or [0])[0] % len(x)
        out = numel(x) // max(x[dim], 1) * numel(idx)
    else:
        out = numel(idx)
    nbytes = numel(idx) * (a.itemsize(2) or 8) + 2 * out * s
    return Cost(0.0, 0.0, float(nbytes), float(nbytes), a.dtype(0) or "", False, "copy", f"{out} elements selected")


def fused_adam(a: OpArgs) -> Cost | None:
    """``_fused_adam_`` / ``_fused_adamw_`` (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
    beta1, beta2, weight_decay, eps, amsgrad, ...)."""
    params = a.tensor_list(0)
    if not params:
        return None
    n = sum(numel(sh) for sh in params)
    amsgrad, decay = a.flag(11), a.number(9)
    low = 13 + (1 if amsgrad else 0) + (1 if decay else 0)
    high = low if amsgrad is not None and decay is not None else 16
    streams_low, streams_high = (9, 9) if amsgrad else (7, 7) if amsgrad is False else (7, 9)
    return Cost(float(low * n), float(high * n), 2.0 * streams_low * n, 4.0 * streams_high * n, "", False, "optimizer",
                f"Adam over {n} parameters in {len(params)} tensors")


def fused_sgd(a: OpArgs) -> Cost | None:
    """``_fused_sgd_(params, grads, momentum_buffer_list, weight_decay, momentum, lr, ...)``."""
    params = a.tensor_list(0)
    if not params:
        return None
    n = sum(numel(sh) for sh in params)
    momentum = bool(a.tensor_list(2))
    streams = 5 if momentum else 3
    return Cost(2.0 * n, 9.0 * n, 2.0 * streams * n, 4.0 * streams * n, "", False, "optimizer",
                f"SGD over {n} parameters in {len(params)} tensors")


def models() -> dict[str, Callable[[OpArgs], Cost | None]]:
    """Operator name → model, for elementwise operators, reductions, copies and optimizer steps."""
    out: dict[str, Callable[[OpArgs], Cost | None]] = {}
    for base in ELEMENTWISE:
        out[f"aten::{base}"] = elementwise(f"aten::{base}")
        out[f"aten::{base}_"] = elementwise(f"aten::{base}_")
    for base in REDUCTIONS:
        out[f"aten::{base}"] = reduction(f"aten::{base}")
    out.update({"aten::copy_": copy, "aten::_to_copy": to_copy, "aten::clone": to_copy, "aten::contiguous": to_copy,
                "aten::cat": cat, "aten::stack": cat, "aten::gather": gather, "aten::index_select": gather,
                "aten::_fused_adam_": fused_adam, "aten::_fused_adamw_": fused_adam, "aten::_fused_sgd_": fused_sgd})
    return out
