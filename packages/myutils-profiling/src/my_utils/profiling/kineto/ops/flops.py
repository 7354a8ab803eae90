"""FLOPs and bytes of the work that runs on matrix units: matrix products, convolutions, attention.

Derivations (a multiply-add is 2 FLOPs; bytes are what must cross DRAM, each operand read once
and each result written once unless a range says otherwise):

* **Matrix product** ``(M×K)·(K×N)``: each of the ``M·N`` outputs is a dot product of length ``K``,
  ``K`` multiplies and ``K`` adds (the first add is the accumulator's), so ``2·M·N·K``; bytes
  ``(M·K + K·N)·s_in + M·N·s_out``. NVIDIA, *Matrix Multiplication Background User's Guide*
  (docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication), "Math and
  Memory Bounds"; ``torch.utils.flop_counter.mm_flop`` counts the same. ``bmm``: ``B`` times that.
  ``addmm``/``baddbmm`` add ``β·C + α·(A·B)``: the bias add is ``M·N`` FLOPs more (PyTorch's
  counter leaves it out), and ``2·M·N`` more when α or β is not 1 (a multiply each) — the high end
  when the trace did not record them. A broadcast bias is read once (low) or once per row (high).
  ``linear`` is ``addmm`` over the flattened leading dimensions; ``matmul`` broadcasts batch
  dimensions (NumPy's rule). Grouped GEMMs (``_grouped_mm``): 2-D × 3-D groups along M
  (``2·ΣM·K·N``), 3-D × 2-D along N, 2-D × 2-D along K, 3-D × 3-D is a batch. ``_scaled_mm``
  (FP8) is a matrix product whose output type the trace does not record: 1 to 4 bytes per output.
* **Convolution** as implicit GEMM: ``M = N·∏out``, ``N = C_out``, ``K = (C_in/groups)·∏kernel``, so
  ``2·N·C_out·(C_in/g)·∏k·∏out`` (NVIDIA, *Convolutional Layers User's Guide*, "Convolution
  Algorithms"; ``torch.utils.flop_counter.conv_flop_count``), plus ``N·C_out·∏out`` for the bias.
  Output size ``⌊(i + 2p − d·(k−1) − 1)/s⌋ + 1`` (transposed: ``(i−1)·s − 2p + d·(k−1) + op + 1``,
  and the FLOPs count over the input's positions). Bytes: input, weight, bias, output once (low);
  an im2col lowering also writes and reads the unfolded input, ``C_in·∏k·N·∏out`` elements (high).
  Backward (``convolution_backward``): the input gradient and the weight gradient are each a
  convolution of the forward's size, the bias gradient a sum over ``N·∏out`` per channel; which
  ones ran is ``output_mask`` (unknown: the weight gradient alone is the low end, all three the high).
* **Attention** ``softmax(Q·Kᵀ·scale)·V`` with ``Q`` ``B×H×L×E``, ``K`` ``B×H×S×E``, ``V`` ``B×H×S×Eᵥ``:
  two matrix products, ``2·B·H·L·S·E + 2·B·H·L·S·Eᵥ`` (FlashAttention, Dao et al. 2022,
  arXiv:2205.14135, §3; ``torch.utils.flop_counter.sdpa_flop_count``). Causal masking keeps the
  ``Σᵢ min(i+1, S)`` pairs of a top-left mask (``custom_mask_type`` 2: bottom-right), about half.
  The softmax's ~5 FLOPs per score (max, subtract, exponent, sum, divide) are the high end only:
  they do not run on matrix units and counters leave them out. Backward: four products
  (dV, dP, dQ, dK), twice the forward, is the low end (the model-FLOPs convention); the fused
  kernels also recompute ``Q·Kᵀ`` (a fifth product, FlashAttention-2, Dao 2023, arXiv:2307.08691,
  §3.1.2: backward 2.5× forward; ``torch.utils.flop_counter.sdpa_backward_flop_count`` counts the
  five), plus the softmax's, for the high end. Bytes: Q, K, V, O (and the log-sum-exp) once
  for a fused kernel (low); an unfused one writes and reads the scores and probabilities,
  ``4·B·H·L·S`` elements more (high). Variable-length (packed) batches record the total tokens and
  the longest sequence only: equal lengths (low) to every sequence at the longest (high).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from my_utils.profiling.kineto.ops.args import OpArgs, broadcast, numel
from my_utils.profiling.kineto.ops.cost import Cost


def _gemm(a: OpArgs, flops: float, bias_adds: float, scaled: bool | None, nbytes: float, bias_low: float,
          bias_high: float, family: str, formula: str, dtype_at: int) -> Cost:
    """A matrix-product cost: ``flops`` + the bias add (and its scaling when ``scaled`` is not False)."""
    extra_low = bias_adds + (2 * bias_adds if scaled else 0.0)
    extra_high = bias_adds + (2 * bias_adds if scaled is not False else 0.0)
    return Cost(flops + extra_low, flops + extra_high, nbytes + bias_low, nbytes + bias_high,
                a.dtype(dtype_at) or "", True, family, formula)


def _scaled(a: OpArgs, beta: int, alpha: int) -> bool | None:
    """Whether α or β differ from 1 (True/False), None when the trace did not record them."""
    b, al = a.number(beta), a.number(alpha)
    if b is None or al is None:
        return None
    return b != 1 or al != 1


def mm(a: OpArgs) -> Cost | None:
    """``aten::mm(self, mat2)``."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or len(x) != 2 or len(w) != 2:
        return None
    (m, k), n = x, w[1]
    nbytes = m * k * (a.itemsize(0) or 0) + k * n * (a.itemsize(1) or 0) + m * n * (a.itemsize(0) or 0)
    return _gemm(a, 2.0 * m * k * n, 0.0, False, nbytes, 0.0, 0.0, "gemm", f"2·M·N·K, M={m} N={n} K={k}", 0)


def addmm(a: OpArgs) -> Cost | None:
    """``aten::addmm(self, mat1, mat2, beta, alpha)``: the product plus the scaled bias."""
    c, x, w = a.shape(0), a.shape(1), a.shape(2)
    if c is None or x is None or w is None or len(x) != 2 or len(w) != 2:
        return None
    (m, k), n = x, w[1]
    s = a.itemsize(1) or 0
    nbytes = m * k * s + k * n * (a.itemsize(2) or 0) + m * n * s
    bias = numel(c) * (a.itemsize(0) or 0)
    return _gemm(a, 2.0 * m * k * n, float(m * n), _scaled(a, 3, 4), nbytes, bias, max(bias, m * n * s), "gemm",
                 f"2·M·N·K + M·N (bias), M={m} N={n} K={k}", 1)


def bmm(a: OpArgs) -> Cost | None:
    """``aten::bmm(self, mat2)``."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return None
    b, m, k = x
    n = w[2]
    s = a.itemsize(0) or 0
    nbytes = b * (m * k + m * n) * s + b * k * n * (a.itemsize(1) or 0)
    return _gemm(a, 2.0 * b * m * k * n, 0.0, False, nbytes, 0.0, 0.0, "gemm", f"2·B·M·N·K, B={b} M={m} N={n} K={k}",
                 0)


def baddbmm(a: OpArgs) -> Cost | None:
    """``aten::baddbmm(self, batch1, batch2, beta, alpha)``."""
    c, x, w = a.shape(0), a.shape(1), a.shape(2)
    if c is None or x is None or w is None or len(x) != 3 or len(w) != 3:
        return None
    b, m, k = x
    n = w[2]
    s = a.itemsize(1) or 0
    nbytes = b * (m * k + m * n) * s + b * k * n * (a.itemsize(2) or 0)
    bias = numel(c) * (a.itemsize(0) or 0)
    return _gemm(a, 2.0 * b * m * k * n, float(b * m * n), _scaled(a, 3, 4), nbytes, bias, max(bias, b * m * n * s),
                 "gemm", f"2·B·M·N·K + B·M·N (bias), B={b} M={m} N={n} K={k}", 1)


def linear(a: OpArgs) -> Cost | None:
    """``aten::linear(input, weight, bias)``: ``input @ weightᵀ + bias`` over the flattened leading dimensions."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or not x or len(w) != 2 or x[-1] != w[1]:
        return None
    rows, k, n = numel(x[:-1]), x[-1], w[0]
    s = a.itemsize(0) or 0
    nbytes = (rows * k + rows * n) * s + n * k * (a.itemsize(1) or 0)
    bias = a.shape(2)
    adds = float(rows * n) if bias is not None else 0.0
    bias_bytes = numel(bias) * (a.itemsize(2) or 0) if bias is not None else 0.0
    return _gemm(a, 2.0 * rows * k * n, adds, False, nbytes, bias_bytes, max(bias_bytes, adds * s), "gemm",
                 f"2·M·N·K{' + M·N (bias)' if bias is not None else ''}, M={rows} N={n} K={k}", 0)


def matmul(a: OpArgs) -> Cost | None:
    """``aten::matmul(self, other)``: 1-D operands are vectors, leading dimensions broadcast."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or not x or not w:
        return None
    xm = (1, x[0]) if len(x) == 1 else x
    wm = (w[0], 1) if len(w) == 1 else w
    batch = broadcast(xm[:-2], wm[:-2])
    if batch is None or xm[-1] != wm[-2]:
        return None
    b, m, k, n = numel(batch), xm[-2], xm[-1], wm[-1]
    nbytes = (numel(xm) + b * m * n) * (a.itemsize(0) or 0) + numel(wm) * (a.itemsize(1) or 0)
    return _gemm(a, 2.0 * b * m * k * n, 0.0, False, nbytes, 0.0, 0.0, "gemm",
                 f"2·B·M·N·K, B={b} M={m} N={n} K={k}", 0)


def grouped_mm(a: OpArgs) -> Cost | None:
    """``aten::_grouped_mm(mat_a, mat_b, offs, bias, out_dtype)``: groups along M, N or K, or a batch."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None:
        return None
    if len(x) == 2 and len(w) == 3:  # groups along M: (ΣM×K)·(G×K×N)
        flops, out = 2.0 * x[0] * x[1] * w[2], x[0] * w[2]
    elif len(x) == 3 and len(w) == 2:  # groups along N: (G×M×K)·(K×ΣN)
        flops, out = 2.0 * x[1] * x[2] * w[1], x[1] * w[1]
    elif len(x) == 2 and len(w) == 2:  # groups along K: one M×N output per group
        offs = a.shape(2)
        groups = offs[0] if offs else 1
        flops, out = 2.0 * x[0] * x[1] * w[1], groups * x[0] * w[1]
    elif len(x) == 3 and len(w) == 3:
        flops, out = 2.0 * x[0] * x[1] * x[2] * w[2], x[0] * x[1] * w[2]
    else:
        return None
    nbytes = numel(x) * (a.itemsize(0) or 0) + numel(w) * (a.itemsize(1) or 0)
    # the output type (out_dtype) is not a tensor argument: bf16 by default, 1 to 4 bytes in general
    return Cost(flops, flops, nbytes + out, nbytes + 4 * out, a.dtype(0) or "", True, "gemm",
                f"2·M·N·K summed over groups ({'×'.join(map(str, x))} by {'×'.join(map(str, w))})")


def scaled_mm(a: OpArgs) -> Cost | None:
    """``aten::_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)``."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or len(x) != 2 or len(w) != 2:
        return None
    (m, k), n = x, w[1]
    nbytes = m * k * (a.itemsize(0) or 0) + k * n * (a.itemsize(1) or 0)
    adds = float(m * n) if a.shape(4) is not None else 0.0
    return Cost(2.0 * m * k * n + adds, 2.0 * m * k * n + adds, nbytes + m * n, nbytes + 4 * m * n,
                a.dtype(0) or "", True, "gemm", f"2·M·N·K, M={m} N={n} K={k} (output type not recorded)")


# -- convolution ---------------------------------------------------------------------------------

#: conv operator → positions of (bias, stride, padding, dilation, transposed, output_padding, groups); -1: absent.
_CONV_ARGS: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "aten::convolution": (2, 3, 4, 5, 6, 7, 8), "aten::_convolution": (2, 3, 4, 5, 6, 7, 8),
    "aten::conv1d": (2, 3, 4, 5, -1, -1, 6), "aten::conv2d": (2, 3, 4, 5, -1, -1, 6),
    "aten::conv3d": (2, 3, 4, 5, -1, -1, 6), "aten::cudnn_convolution": (-1, 3, 2, 4, -1, -1, 5),
    "aten::mkldnn_convolution": (2, 4, 3, 5, -1, -1, 6),
    "aten::cudnn_convolution_transpose": (-1, 4, 2, 5, -2, 3, 6),  # -2: transposed by name
    "aten::conv_transpose2d": (2, 3, 4, 7, -2, 5, 6), "aten::conv_transpose1d": (2, 3, 4, 7, -2, 5, 6),
    "aten::conv_transpose3d": (2, 3, 4, 7, -2, 5, 6),
}


def _per_dim(values: list[int] | None, spatial: int, default: int) -> list[int] | None:
    if values is None:
        return None
    if not values:
        return [default] * spatial
    return values * spatial if len(values) == 1 else values[:spatial]


def _conv_geometry(a: OpArgs, pos: tuple[int, ...], x: tuple[int, ...], w: tuple[int, ...]
                   ) -> tuple[list[int], bool, int] | None:
    """(output spatial size, transposed, groups), None when the trace lacks stride/padding/dilation."""
    _bias, st, pad, dil, tr, opad, grp = pos
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        return None
    padding_text = a.text(pad)
    stride = _per_dim(a.ints(st), spatial, 1)
    dilation = _per_dim(a.ints(dil), spatial, 1)
    if padding_text is not None and padding_text.strip().strip("'\"") in ("same", "valid"):
        same = padding_text.strip().strip("'\"") == "same"
        padding = [(dilation[i] * (w[2 + i] - 1)) // 2 if same and dilation else 0 for i in range(spatial)] \
            if dilation else None
    else:
        padding = _per_dim(a.ints(pad), spatial, 0)
    if stride is None or padding is None or dilation is None:
        return None
    transposed = tr == -2 or (tr >= 0 and bool(a.flag(tr)))
    groups = (a.ints(grp) or [1])[0] if grp >= 0 else 1
    if transposed:
        out_pad = _per_dim(a.ints(opad), spatial, 0) if opad >= 0 else [0] * spatial
        out_pad = out_pad or [0] * spatial
        out = [(x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w[2 + i] - 1) + out_pad[i] + 1
               for i in range(spatial)]
    else:
        out = [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(spatial)]
    if any(o <= 0 for o in out):
        return None
    return out, transposed, groups


def _conv_macs(x: tuple[int, ...], w: tuple[int, ...], out: list[int], transposed: bool) -> float:
    """Multiply-adds of one convolution (the weight's product already holds C_in/groups or C_out/groups)."""
    positions = math.prod(x[2:]) if transposed else math.prod(out)
    return float(x[0]) * math.prod(w) * positions


def conv_model(name: str) -> Callable[[OpArgs], Cost | None]:
    """The forward-convolution model of operator ``name`` (its argument positions from :data:`_CONV_ARGS`)."""
    pos = _CONV_ARGS[name]

    def conv(a: OpArgs) -> Cost | None:
        x, w = a.shape(0), a.shape(1)
        if x is None or w is None:
            return None
        geometry = _conv_geometry(a, pos, x, w)
        if geometry is None:
            return None
        out, transposed, groups = geometry
        c_out = w[1] * groups if transposed else w[0]
        macs = _conv_macs(x, w, out, transposed)
        out_elems = x[0] * c_out * math.prod(out)
        bias = a.shape(pos[0]) if pos[0] >= 0 else None
        bias_flops = float(out_elems) if bias is not None else 0.0
        s = a.itemsize(0) or 0
        nbytes = (numel(x) + out_elems) * s + numel(w) * (a.itemsize(1) or 0) + (numel(bias) * s if bias else 0)
        c_in = x[1]
        unfolded = c_in // max(groups, 1) * groups * math.prod(w[2:]) * x[0] * math.prod(out) * s
        return Cost(2 * macs + bias_flops, 2 * macs + bias_flops, nbytes, nbytes + 2 * unfolded, a.dtype(0) or "",
                    True, "conv", f"2·N·C_out·(C_in/g)·∏k·∏out{' + bias' if bias else ''}, "
                                  f"{'×'.join(map(str, x))} * {'×'.join(map(str, w))} → out {'×'.join(map(str, out))}")

    return conv


def convolution_backward(a: OpArgs) -> Cost | None:
    """``aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)``."""
    g, x, w = a.shape(0), a.shape(1), a.shape(2)
    if g is None or x is None or w is None:
        return None
    geometry = _conv_geometry(a, (3, 4, 5, 6, 7, 8, 9), x, w)
    if geometry is None:
        return None
    out, transposed, _groups = geometry
    macs = _conv_macs(x, w, out, transposed)
    mask = a.bools(10)
    s = a.itemsize(0) or 0
    parts_low = (mask[0], mask[1], mask[2]) if mask and len(mask) >= 3 else (False, True, False)
    parts_high = parts_low if mask and len(mask) >= 3 else (True, True, True)
    costs = []
    for di, dw, db in (parts_low, parts_high):
        flops = 2 * macs * (int(di) + int(dw)) + (numel(g) if db else 0)
        nbytes = numel(g) * s + (numel(w) * s + numel(x) * s if di else 0) + (numel(x) * s + numel(w) * s if dw else 0)
        nbytes += g[1] * s if db else 0
        costs.append((float(flops), float(nbytes)))
    return Cost(costs[0][0], costs[1][0], costs[0][1], costs[1][1], a.dtype(0) or "", True, "conv",
                "input and weight gradients 2·N·C_out·(C_in/g)·∏k·∏out each, bias gradient N·C_out·∏out"
                + ("" if mask else " (output_mask not recorded: weight gradient alone to all three)"))


# -- attention -----------------------------------------------------------------------------------

#: attention operator → (query, key, value positions, layout "bhle" or "blhe", causal flag position, backward,
#: causal kind "flag"/"mask_type", cumulative-sequence position or -1, max-key-length position or -1).
_ATTENTION: dict[str, tuple[int, int, int, str, int, bool, str, int, int]] = {
    "aten::scaled_dot_product_attention": (0, 1, 2, "bhle", 5, False, "flag", -1, -1),
    "aten::_scaled_dot_product_flash_attention": (0, 1, 2, "bhle", 4, False, "flag", -1, -1),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (0, 1, 2, "bhle", 4, False, "flag", -1, -1),
    "aten::_scaled_dot_product_efficient_attention": (0, 1, 2, "bhle", 6, False, "flag", -1, -1),
    "aten::_scaled_dot_product_cudnn_attention": (0, 1, 2, "bhle", 6, False, "flag", -1, -1),
    "aten::_flash_attention_forward": (0, 1, 2, "blhe", 8, False, "flag", 3, 6),
    "aten::_efficient_attention_forward": (0, 1, 2, "blhe", 9, False, "mask_type", 4, 7),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 2, 3, "bhle", 11, True, "flag", -1, -1),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": (1, 2, 3, "bhle", 7, True, "flag", -1, -1),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 2, 3, "bhle", 11, True, "flag", -1, -1),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 2, 3, "bhle", 14, True, "flag", -1, -1),
    "aten::_flash_attention_backward": (1, 2, 3, "blhe", 11, True, "flag", 6, 9),
    "aten::_efficient_attention_backward": (1, 2, 3, "blhe", 14, True, "mask_type", 6, 9),
}


def causal_pairs(length: int, keys: int, bottom_right: bool = False) -> int:
    """Query–key pairs a causal mask keeps: query ``i`` sees keys ``j ≤ i`` (top-left) or ``j ≤ i + S − L``.

    Row ``i`` keeps ``clamp(i + 1 + shift, 0, S)`` keys; summed in closed form: rows before
    ``a`` keep none, rows in ``[a, b)`` keep ``i + 1 + shift``, the rest keep all ``S``.
    """
    shift = keys - length if bottom_right else 0
    a = min(max(-shift, 0), length)
    b = min(max(keys - shift, a), length)
    return (b - a) * (a + b + 1 + 2 * shift) // 2 + (length - b) * keys


def attention_model(name: str) -> Callable[[OpArgs], Cost | None]:
    """The attention model of operator ``name`` (:data:`_ATTENTION`)."""
    qi, ki, vi, layout, causal_at, backward, causal_kind, cum_at, max_k_at = _ATTENTION[name]

    def attention(a: OpArgs) -> Cost | None:
        q, k, v = a.shape(qi), a.shape(ki), a.shape(vi)
        if q is None or k is None or v is None:
            return None
        varlen = len(q) == 3 and cum_at >= 0 and a.shape(cum_at) is not None
        pairs_low: float
        pairs_high: float
        if varlen:  # packed: T×H×E with cumulative sequence lengths
            batch = max(numel(a.shape(cum_at) or (2,)) - 1, 1)
            heads, e, ev = q[1], q[2], v[2]
            tq, tk = q[0], k[0]
            max_k = (a.ints(max_k_at) or [tk])[0] if max_k_at >= 0 else tk
            pairs_low, pairs_high = tq * tk / batch, tq * min(max_k, tk)
            causal: bool | None = a.flag(causal_at) if causal_kind == "flag" else None
            if causal:
                pairs_low, pairs_high = pairs_low / 2, pairs_high / 2
            shape_text = f"packed {tq} query / {tk} key tokens in {batch} sequences, H={heads} E={e}"
            qkvo = (numel(q) + numel(k) + numel(v) + tq * heads * ev)
            lse = tq * heads * 4
        else:
            if len(q) != 4 or len(k) != 4 or len(v) != 4:
                return None
            b, heads, length, e = q if layout == "bhle" else (q[0], q[2], q[1], q[3])
            keys = k[2] if layout == "bhle" else k[1]
            ev = v[3]
            if causal_kind == "flag":
                causal = a.flag(causal_at)
                pairs = causal_pairs(length, keys) if causal else length * keys
            else:
                mask_type = (a.ints(causal_at) or [0])[0]
                causal = mask_type in (1, 2)
                pairs = causal_pairs(length, keys, bottom_right=mask_type == 2) if causal else length * keys
            pairs_low = pairs_high = float(b * pairs)
            heads_b = heads
            shape_text = f"B={b} H={heads_b} L={length} S={keys} E={e}" + (" causal" if causal else "")
            qkvo = numel(q) + numel(k) + numel(v) + b * heads * length * ev
            lse = b * heads * length * 4
        s = a.itemsize(qi) or 0
        products = 2.0 * heads * (e + ev)  # per query-key pair: Q·Kᵀ and P·V
        softmax = 5.0 * heads
        if backward:
            # dV, dP, dQ, dK: 2·(Eᵥ + Eᵥ + E + E) per pair; the high end recomputes Q·Kᵀ (2·E more)
            low = 2.0 * heads * (2 * e + 2 * ev) * pairs_low
            high = (2.0 * heads * (3 * e + 2 * ev) + softmax) * pairs_high
            nbytes_low = 2 * qkvo * s + lse  # read Q K V O dO, write dQ dK dV
        else:
            low = products * pairs_low
            high = (products + softmax) * pairs_high
            nbytes_low = qkvo * s + lse
        scores = 4.0 * heads * pairs_high * s
        return Cost(low, high, float(nbytes_low), float(nbytes_low + scores), a.dtype(qi) or "", True, "attention",
                    ("backward: four products (five with the recomputed Q·Kᵀ)" if backward
                     else "2·B·H·L·S·(E + Eᵥ)") + f", {shape_text}")

    return attention


def models() -> dict[str, Callable[[OpArgs], Cost | None]]:
    """Operator name → model, for the matrix-unit families."""
    out: dict[str, Callable[[OpArgs], Cost | None]] = {
        "aten::mm": mm, "aten::addmm": addmm, "aten::bmm": bmm, "aten::baddbmm": baddbmm, "aten::linear": linear,
        "aten::matmul": matmul, "aten::_grouped_mm": grouped_mm, "aten::_scaled_mm": scaled_mm,
        "aten::_scaled_grouped_mm": grouped_mm, "aten::convolution_backward": convolution_backward,
    }
    out.update({name: conv_model(name) for name in _CONV_ARGS})
    out.update({name: attention_model(name) for name in _ATTENTION})
    return out
