"""What a GPU activity's time is spent on: one category per kernel, copy or set, from its name and its operator.

The categories (:data:`CATEGORIES`) are the families a performance engineer fixes differently:
matrix products, attention, convolution, elementwise, reductions, normalisation, softmax,
embeddings, optimizer steps, communication, copies, other. A kernel's category is decided in
this order, first answer wins:

1. its kind (``kineto.kinds``, HTA's rules): communication, or a memory copy or set (``copy``);
2. a convolution or attention operator above it (cuDNN and the math attention path run plain
   GEMM, softmax and elementwise kernels for them: the work is still the convolution's);
3. its name (:data:`KERNEL_RULES`, one ordered table): cuBLAS/CUTLASS/``nvjet`` GEMMs, flash and
   fused attention, cuDNN convolutions, normalisation, softmax, FBGEMM embedding kernels, fused
   optimizers, reductions, copies, elementwise kernels, and Inductor's Triton kernels by prefix
   (``triton_poi_`` pointwise, ``triton_red_``/``triton_per_`` reductions, ``triton_tem_`` templated
   matrix products);
4. the operator that launched it (:data:`OPERATOR_RULES`), for a kernel whose name says nothing;
5. ``other``.

The name comes first because it says what ran: a copy kernel under ``aten::linear`` moves bytes,
and a kernel replayed from a CUDA graph has no operator at all, only its name.
"""

from __future__ import annotations

import re
from functools import lru_cache

from my_utils.profiling.kineto.kinds import KernelKind, kind_of

CATEGORIES = ("gemm", "attention", "conv", "elementwise", "reduction", "norm", "softmax", "embedding", "optimizer",
              "communication", "copy", "other")
#: How each category reads in a sentence ("GPU time: 31% elementwise and copies, 23% GEMM, ...").
LABELS = {"gemm": "GEMM", "attention": "attention", "conv": "convolution", "elementwise": "elementwise",
          "reduction": "reductions", "norm": "normalisation", "softmax": "softmax", "embedding": "embeddings",
          "optimizer": "optimizer", "communication": "communication", "copy": "copies", "other": "other"}
#: Families whose operator decides the category of every kernel under it.
STRUCTURAL = ("conv", "attention")

#: Kernel name → category, tried top to bottom (case-insensitive search).
KERNEL_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p, re.IGNORECASE)) for c, p in (
    ("attention", r"flash|fmha|attention|_attn|sdpa|cutlassF|cutlassB|xformers"),
    ("conv", r"(?<![a-z])conv(?!ert)|convolve|fprop|dgrad|wgrad|scudnn|winograd|im2col|col2im"),
    ("gemm", r"(?<!fb)gemm|gemv|splitKreduce|cublasLt|epilogue::impl|cutlass|nvjet|xmma|s1688|h1688|s16816|h16816|"
             r"triton_tem_|matmul"),
    ("norm", r"layer_?norm|batch_?norm|group_?norm|rms_?norm|GammaBeta|welford|instance_?norm|bn_fw|bn_bw"),
    ("softmax", r"softmax"),
    ("embedding", r"embedding|pooled_embs|EmbeddingBag"),
    ("optimizer", r"adam|sgd|lamb(?!da)|adagrad"),
    ("reduction", r"reduce|reduction|triton_red_|triton_per_|cub::Device(?:Reduce|Segmented|Scan)|scan_kernel"),
    ("copy", r"copy|CatArray|transpose"),
    ("elementwise", r"elementwise|triton_poi_|pointwise"),
))

#: Operator name → category, for kernels whose name says nothing (case-insensitive search on the name).
OPERATOR_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p, re.IGNORECASE)) for c, p in (
    ("communication", r"^c10d::|^nccl:|record_param_comms|all_?reduce|all_?gather|reduce_scatter|all_to_all"),
    ("attention", r"attention|sdpa"),
    ("conv", r"conv(?!ert)"),
    ("gemm", r"^aten::(?:mm|addmm|bmm|baddbmm|linear|matmul|_grouped_mm|_scaled_mm|addmv|mv|dot)$"),
    ("norm", r"(?:layer|batch|group|rms|instance)_norm"),
    ("softmax", r"softmax"),
    ("embedding", r"embedding|embs|bounds_check_indices"),
    ("optimizer", r"^aten::_fused_(?:adam|adamw|sgd|adagrad)|^Optimizer\.step"),
    ("copy", r"^aten::(?:copy_|_to_copy|to|clone|contiguous|cat|stack|index_select|gather|scatter|scatter_add|"
             r"_copy_from|narrow_copy|slice_scatter|select_scatter|index|index_put_|repeat|flip|roll)$"),
    ("reduction", r"^aten::(?:sum|mean|max|min|amax|amin|argmax|argmin|var|std|norm|linalg_vector_norm|prod|"
                  r"logsumexp|cumsum|all|any|sort|topk)$"),
))


@lru_cache(maxsize=65536)
def kernel_category(name: str) -> str | None:
    """The category of a GPU activity from its name alone (steps 1 and 3), None when the name says nothing."""
    kind = kind_of(name)
    if kind == KernelKind.COMMUNICATION:
        return "communication"
    if kind == KernelKind.MEMORY:
        return "copy"
    return name_category(name)


@lru_cache(maxsize=65536)
def name_category(name: str) -> str | None:
    """Step 3 alone: the first rule of :data:`KERNEL_RULES` that the kernel name matches."""
    line = name.split("\n", 1)[0]
    for category, pattern in KERNEL_RULES:
        if pattern.search(line):
            return category
    return None


@lru_cache(maxsize=65536)
def operator_category(name: str) -> str | None:
    """The category an operator name implies (:data:`OPERATOR_RULES`), None when it implies none."""
    for category, pattern in OPERATOR_RULES:
        if pattern.search(name):
            return category
    from my_utils.profiling.kineto.ops.traffic import ELEMENTWISE

    base = name.removeprefix("aten::").rstrip("_")
    if name.startswith("aten::") and (base in ELEMENTWISE or f"{base}_" in ELEMENTWISE):
        return "elementwise"
    return None


def category(kernel: str, launcher: str | None, structural: str | None) -> str:
    """The category of one GPU activity: ``kernel`` its name, ``launcher`` the innermost operator above it,
    ``structural`` a convolution or attention operator's category above it (module docstring's order)."""
    kind = kind_of(kernel)
    if kind == KernelKind.COMMUNICATION:
        return "communication"
    if kind == KernelKind.MEMORY:
        return "copy"
    if structural is not None:
        return structural
    return name_category(kernel) or (operator_category(launcher) if launcher else None) or "other"


def mix_text(shares: dict[str, float], limit: int = 5) -> str:
    """``31% elementwise and copies, 26% communication, 22% GEMM, ..., 7% other``: the largest shares, elementwise
    and copies together (the work a fusion or fewer copies removes), whole percents, the rest as ``other``."""
    merged = dict(shares)
    joined = merged.pop("elementwise", 0.0) + merged.pop("copy", 0.0)
    other = merged.pop("other", 0.0)
    parts = [("elementwise and copies", joined)] if joined > 0 else []
    parts += [(LABELS.get(c, c), v) for c, v in merged.items() if v > 0]
    parts.sort(key=lambda kv: -kv[1])
    rest = other + sum(v for _n, v in parts[limit:])
    text = ", ".join(f"{v:.0f}% {n}" for n, v in parts[:limit])
    return text + (f", {rest:.0f}% other" if rest >= 0.5 else "")
