"""FLOPs and bytes of normalisation, softmax and embedding lookups: row-wise work bounded by memory.

Derivations (``n`` elements of the input, ``s`` bytes per element; an exponent, square root or
other special function counts as one FLOP, as FLOP counters count it):

* **Layer, group, batch normalisation (training)**: statistics then ``(x − μ)·rstd``, then ``·γ + β``.
  One pass of ``Σx`` and ``Σx²`` is 3 FLOPs per element, Welford's update 6; normalising is 2:
  ``5n`` (low) to ``8n`` (high), ``+n`` for a weight and ``+n`` for a bias. Batch norm in
  evaluation uses the running statistics: ``2n`` (folded scale) to ``4n`` (+ the affine). Bytes:
  read ``x`` once and write ``y`` (low), read ``x`` twice when a row does not stay on chip (high),
  plus the weight, bias and the saved statistics (a mean and an rstd in fp32 per normalised row;
  the rstd alone for RMS norm).
  *Backward* (``g = dy·γ``, ``x̂ = (x − μ)·rstd``, ``dx = rstd·(g − mean(g) − x̂·mean(g·x̂))``):
  x̂ 2, two sums 2, the products 2, the combination 3 = ``9n`` for ``dx``, ``+n`` for ``g`` with a
  weight; ``dγ = Σ dy·x̂`` is ``2n`` and ``dβ = Σ dy`` is ``n``, each counted when ``output_mask``
  asks for it (not recorded: ``dx`` alone low, everything high). Bytes: ``dy`` and ``x`` read once
  (low) or twice (high), ``dx`` written. RMS norm: ``Σx²`` 2 and ``x·rstd`` 1 per element, ``+n``
  for the weight; backward ``7n`` (+ ``2n`` for ``dγ``). Ioffe & Szegedy 2015 (arXiv:1502.03167,
  Algorithm 1), Ba et al. 2016 (arXiv:1607.06450), Zhang & Sennrich 2019 (arXiv:1910.07467).
* **Softmax** ``exp(x − max)/Σ``: max, subtract, exponent, sum, divide = ``5n`` (log-softmax
  subtracts ``log Σ`` instead of dividing: also ``5n``). Bytes: one read and one write when the row
  stays on chip (low), three reads (max, sum, normalise) and a write otherwise (high). Backward
  ``dx = y·(dy − Σ dy·y)``: ``4n``, reading ``dy`` and ``y`` once (low) or twice (high).
* **Embedding** ``weight[indices]``: no FLOPs; reads the indices and ``n·D`` table elements (``D`` the
  row width) and writes ``n·D``. A row looked up twice may be read once: ``min(n, V)·D`` rows read
  (low, ``V`` the table's rows) to ``n·D`` (high). **Embedding bag** (``mode`` 0 sum, 1 mean, 2 max)
  adds ``n·D`` FLOPs (``(n − B)·D`` when the first row of each of the ``B`` bags is a copy: low), ``B·D``
  divides for the mean, ``n·D`` multiplies with per-sample weights; writes ``B·D``. The dense
  backward scatters ``n·D`` adds into the ``V×D`` gradient: touched rows only (low) to the whole
  table zero-filled and written (high).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from my_utils.profiling.kineto.ops.args import OpArgs, numel
from my_utils.profiling.kineto.ops.cost import Cost

_STATS_BYTES = 8  # a saved mean and rstd per normalised row, fp32


def _rows(x: tuple[int, ...], width: int) -> int:
    return numel(x) // width if width else 0


#: normaliser → (input position, weight position, normalised-width source: "shape" position or "channels",
#:               training position (-1: always training, -2: always evaluation), kind "norm"/"rms").
_FORWARD: dict[str, tuple[int, int, int, int, str]] = {
    "aten::layer_norm": (0, 2, 1, -1, "norm"), "aten::native_layer_norm": (0, 2, 1, -1, "norm"),
    "aten::group_norm": (0, 2, -1, -1, "norm"), "aten::native_group_norm": (0, 1, -1, -1, "norm"),
    "aten::batch_norm": (0, 1, -1, 5, "norm"), "aten::native_batch_norm": (0, 1, -1, 5, "norm"),
    "aten::_batch_norm_impl_index": (0, 1, -1, 5, "norm"), "aten::cudnn_batch_norm": (0, 1, -1, 5, "norm"),
    "aten::_native_batch_norm_legit": (0, 1, -1, 5, "norm"),
    "aten::_native_batch_norm_legit_no_training": (0, 1, -1, -2, "norm"),
    "aten::rms_norm": (0, 2, 1, -1, "rms"), "aten::_fused_rms_norm": (0, 2, 1, -1, "rms"),
}


def _norm_forward(name: str) -> Callable[[OpArgs], Cost | None]:
    xi, wi, shape_at, train_at, kind = _FORWARD[name]

    def forward(a: OpArgs) -> Cost | None:
        x = a.shape(xi)
        if x is None or not x:
            return None
        n = numel(x)
        s = a.itemsize(xi) or 0
        weight = a.shape(wi)
        bias = a.shape(wi + 1) if kind == "norm" else None
        affine = weight is not None
        extra = (numel(x) if weight is not None else 0) + (numel(x) if bias is not None else 0)
        if shape_at >= 0:
            dims = a.ints(shape_at)
            width = math.prod(dims) if dims else (numel(weight) if weight else 0)
            rows = _rows(x, width) if width else 0
        else:  # batch / group norm: statistics per channel (batch) or per group: few rows, no per-row width
            rows = x[1] if len(x) > 1 else 1
        training = True if train_at == -1 else False if train_at == -2 else a.flag(train_at)
        if kind == "rms":
            low = high = 3.0 * n + extra
        elif training is False:
            low, high = 2.0 * n, 4.0 * n
        else:
            low, high = 5.0 * n + extra, 8.0 * n + extra
            if training is None:  # batch norm without its flag recorded: evaluation is the low end
                low = 2.0 * n
        params = (numel(weight) + (numel(bias) if bias is not None else 0)) * (a.itemsize(wi) or s) if weight else 0
        stats = rows * (_STATS_BYTES // 2 if kind == "rms" else _STATS_BYTES) if training is not False else 0
        return Cost(low, high, 2.0 * n * s + params + stats, 3.0 * n * s + params + stats, a.dtype(xi) or "", False,
                    "norm", f"{'RMS' if kind == 'rms' else 'statistics + normalise'}"
                            f"{' + affine' if affine else ''} over {n} elements")

    return forward


#: backward normaliser → (grad position, input position, weight position, output_mask position, kind).
_BACKWARD: dict[str, tuple[int, int, int, int, str]] = {
    "aten::native_layer_norm_backward": (0, 1, 5, 7, "norm"),
    "aten::native_batch_norm_backward": (0, 1, 2, 9, "norm"),
    "aten::native_group_norm_backward": (0, 1, 4, 9, "norm"),
    "aten::cudnn_batch_norm_backward": (1, 0, 2, -1, "norm"),
    "aten::_fused_rms_norm_backward": (0, 1, 4, 5, "rms"),
}


def _norm_backward(name: str) -> Callable[[OpArgs], Cost | None]:
    gi, xi, wi, mask_at, kind = _BACKWARD[name]

    def backward(a: OpArgs) -> Cost | None:
        x, g = a.shape(xi), a.shape(gi)
        if x is None or g is None:
            return None
        n = numel(x)
        s = a.itemsize(xi) or 0
        weight = a.shape(wi)
        mask = a.bools(mask_at) if mask_at >= 0 else None
        dx = (7.0 if kind == "rms" else 9.0) * n + (n if weight else 0)
        dgamma, dbeta = 2.0 * n, (0.0 if kind == "rms" else 1.0 * n)
        if mask and len(mask) >= 2:
            low = high = dx * mask[0] + dgamma * mask[1] + (dbeta * mask[2] if len(mask) > 2 else 0.0)
        else:
            low, high = dx, dx + dgamma + dbeta
        params = 3 * numel(weight) * (a.itemsize(wi) or s) if weight else 0
        return Cost(low, high, 3.0 * n * s + params, 5.0 * n * s + params, a.dtype(xi) or "", False, "norm",
                    f"normalisation backward over {n} elements" + ("" if mask else " (output_mask not recorded)"))

    return backward


def softmax(a: OpArgs) -> Cost | None:
    """``_softmax`` / ``softmax`` / ``_log_softmax`` / ``log_softmax``: ``5n``."""
    x = a.shape(0)
    if x is None:
        return None
    n, s = numel(x), a.itemsize(0) or 0
    return Cost(5.0 * n, 5.0 * n, 2.0 * n * s, 4.0 * n * s, a.dtype(0) or "", False, "softmax",
                f"max, subtract, exponent, sum, divide over {n} elements")


def softmax_backward(a: OpArgs) -> Cost | None:
    """``_softmax_backward_data(grad_output, output, dim, input_dtype)`` (and the log-softmax one): ``4n``."""
    g = a.shape(0)
    if g is None:
        return None
    n, s = numel(g), a.itemsize(0) or 0
    return Cost(4.0 * n, 4.0 * n, 3.0 * n * s, 5.0 * n * s, a.dtype(0) or "", False, "softmax",
                f"y·(dy − Σ dy·y) over {n} elements")


def embedding(a: OpArgs) -> Cost | None:
    """``aten::embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)``."""
    w, idx = a.shape(0), a.shape(1)
    if w is None or idx is None or len(w) != 2:
        return None
    n, (rows, width) = numel(idx), w
    s, si = a.itemsize(0) or 0, a.itemsize(1) or 0
    base = n * si + n * width * s
    return Cost(0.0, 0.0, base + min(n, rows) * width * s, base + n * width * s, a.dtype(0) or "", False, "embedding",
                f"{n} lookups of {width}-wide rows in a {rows}-row table")


def embedding_bag(a: OpArgs) -> Cost | None:
    """``aten::embedding_bag`` / ``_embedding_bag`` (weight, indices, offsets, scale_grad_by_freq, mode, sparse,
    per_sample_weights, include_last_offset, padding_idx)."""
    w, idx, offsets = a.shape(0), a.shape(1), a.shape(2)
    if w is None or idx is None or offsets is None or len(w) != 2:
        return None
    rows, width = w
    n = numel(idx)
    bags = max(numel(offsets) - (1 if a.flag(7) else 0), 1)
    mode = (a.ints(4) or [0])[0]
    weighted = a.shape(6) is not None
    low = (n - bags) * width + (bags * width if mode == 1 else 0) + (n * width if weighted else 0)
    high = n * width + (bags * width if mode == 1 else 0) + (n * width if weighted else 0)
    s, si = a.itemsize(0) or 0, a.itemsize(1) or 0
    base = n * si + numel(offsets) * (a.itemsize(2) or 0) + bags * width * s + (n * s if weighted else 0)
    return Cost(float(max(low, 0)), float(high), base + min(n, rows) * width * s, base + n * width * s,
                a.dtype(0) or "", False, "embedding",
                f"{n} lookups into {bags} bags ({('sum', 'mean', 'max')[mode] if 0 <= mode < 3 else mode}), "
                f"{width}-wide rows")


def embedding_backward(a: OpArgs) -> Cost | None:
    """``aten::embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)``."""
    g, idx = a.shape(0), a.shape(1)
    if g is None or idx is None or not g:
        return None
    width, n = g[-1], numel(idx)
    rows = (a.ints(2) or [n])[0]
    s = a.itemsize(0) or 0
    base = n * width * s + n * (a.itemsize(1) or 0)
    return Cost(float(n * width), float(n * width), base + min(n, rows) * width * s, base + 2 * rows * width * s,
                a.dtype(0) or "", False, "embedding", f"{n} rows of width {width} added into a {rows}-row gradient")


def models() -> dict[str, Callable[[OpArgs], Cost | None]]:
    """Operator name → model, for normalisation, softmax and embeddings."""
    out: dict[str, Callable[[OpArgs], Cost | None]] = {name: _norm_forward(name) for name in _FORWARD}
    out.update({name: _norm_backward(name) for name in _BACKWARD})
    out.update({name: softmax for name in ("aten::_softmax", "aten::softmax", "aten::_log_softmax",
                                            "aten::log_softmax", "aten::_safe_softmax")})
    out.update({name: softmax_backward for name in ("aten::_softmax_backward_data",
                                                     "aten::_log_softmax_backward_data")})
    out.update({"aten::embedding": embedding, "aten::embedding_bag": embedding_bag,
                "aten::_embedding_bag": embedding_bag, "aten::_embedding_bag_forward_only": embedding_bag,
                "aten::embedding_dense_backward": embedding_backward, "aten::embedding_backward": embedding_backward})
    return out
