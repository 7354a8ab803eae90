"""The memory-bound formulas (``kineto.ops.norms``, ``kineto.ops.traffic``) against hand derivations.

Each case runs for real on the CPU under torch.profiler, so the model reads the arguments torch
2.13 records (positions, concrete scalars, tensor lists); the expected FLOPs and bytes are worked
out below by hand from the shapes, with the derivation beside each (``n`` elements, 4-byte floats).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ops_recorded  # ops_recorded.py beside this file, registered by conftest.py
import pytest

torch = pytest.importorskip("torch")

from my_utils.profiling.kineto.ops.args import OpArgs  # noqa: E402
from my_utils.profiling.kineto.ops.cost import op_cost  # noqa: E402

F = 4  # bytes per fp32 element
L = 8  # bytes per int64 index


def _x() -> Any:
    return torch.randn(4, 6, 8, requires_grad=True)  # n = 192 elements, 24 rows of 8


def _softmax_backward() -> None:
    torch.softmax(_x(), -1).sum().backward()


def _layer_norm_backward() -> None:
    torch.nn.functional.layer_norm(_x(), (8,), torch.ones(8), torch.zeros(8)).sum().backward()


def _adam() -> None:
    p = torch.nn.Parameter(torch.randn(10, 10))
    opt = torch.optim.Adam([p], fused=True)
    p.grad = torch.randn(10, 10)
    opt.step()


n = 192
#: (case, operator, (FLOPs low, FLOPs high, bytes low, bytes high)) — each figure derived by hand.
CASES: list[tuple[Any, str, tuple[float, float, float, float]]] = [
    # layer norm with weight and bias: stats 5n..8n, + n (·γ) + n (+β); bytes x read 1..2×, y written, γ and β,
    # and a mean and an rstd in fp32 for each of the 24 rows
    (lambda: torch.nn.functional.layer_norm(_x(), (8,), torch.ones(8), torch.zeros(8)), "aten::native_layer_norm",
     (5 * n + 2 * n, 8 * n + 2 * n, 2 * n * F + 16 * F + 24 * 8, 3 * n * F + 16 * F + 24 * 8)),
    # RMS norm: Σx² (2) and ·rstd (1) per element, + n for γ; an rstd per row
    (lambda: torch.rms_norm(_x(), (8,), torch.ones(8)), "aten::_fused_rms_norm",
     (3 * n + n, 3 * n + n, 2 * n * F + 8 * F + 24 * 4, 3 * n * F + 8 * F + 24 * 4)),
    # softmax: max, subtract, exp, sum, divide; one read and write, or three reads and a write
    (lambda: torch.softmax(_x(), -1), "aten::_softmax", (5 * n, 5 * n, 2 * n * F, 4 * n * F)),
    # softmax backward y·(dy − Σ dy·y): 4n; dy and y read once or twice, dx written
    (_softmax_backward, "aten::_softmax_backward_data", (4 * n, 4 * n, 3 * n * F, 5 * n * F)),
    # layer-norm backward with output_mask [True, False, False]: dx 9n, + n for g = dy·γ
    (_layer_norm_backward, "aten::native_layer_norm_backward",
     (10 * n, 10 * n, 3 * n * F + 3 * 8 * F, 5 * n * F + 3 * 8 * F)),
    # embedding bag, mode mean, 6 lookups into 2 bags of a 4×3 table: adds (6−2)·3 .. 6·3, + 2·3 divides;
    # indices and offsets (int64), rows read min(6, 4)·3 .. 6·3, bags written 2·3
    (lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 2, 3, 0, 1, 2]), torch.randn(4, 3),
                                               torch.tensor([0, 3]), mode="mean"), "aten::embedding_bag",
     (4 * 3 + 2 * 3, 6 * 3 + 2 * 3, 6 * L + 2 * L + 2 * 3 * F + 4 * 3 * F, 6 * L + 2 * L + 2 * 3 * F + 6 * 3 * F)),
    # broadcast add [4,1] + [1,5] → 20 outputs: the operands read once (4 + 5) or once per output (20 + 20)
    (lambda: torch.randn(4, 1) + torch.randn(1, 5), "aten::add", (20, 20, (4 + 5 + 20) * F, (20 + 20 + 20) * F)),
    # in place, alpha = 2: a multiply and an add per element
    (lambda: torch.randn(4, 5).add_(torch.randn(4, 5), alpha=2), "aten::add_", (40, 40, 60 * F, 60 * F)),
    # sigmoid 1/(1 + exp(−x)): 4 per element
    (lambda: torch.sigmoid(torch.randn(3, 4)), "aten::sigmoid", (48, 48, 24 * F, 24 * F)),
    # mean over the last dim, keepdim: n adds, 24 outputs
    (lambda: torch.randn(4, 6, 8).mean(dim=2, keepdim=True), "aten::mean", (n, n, n * F + 24 * F, n * F + 24 * F)),
    # full sum: one output
    (lambda: torch.randn(4, 6, 8).sum(), "aten::sum", (n, n, n * F + F, n * F + F)),
    # variance over dim 1 of 3×4×5: 3 to 4 per element, 15 outputs
    (lambda: torch.randn(3, 4, 5).var(dim=1), "aten::var", (180, 240, 60 * F + 15 * F, 60 * F + 15 * F)),
    # max(a, b): the elementwise overload
    (lambda: torch.max(torch.randn(7), torch.randn(7)), "aten::max", (7, 7, 21 * F, 21 * F)),
    # a cast fp32 → fp16 of 16 elements: read 4 bytes, write 2 each
    (lambda: torch.randn(4, 4).to(torch.float16), "aten::copy_", (0, 0, 16 * (4 + 2), 16 * (4 + 2))),
    (lambda: torch.randn(4, 4).to(torch.float16), "aten::_to_copy", (0, 0, 16 * (4 + 2), 16 * (4 + 2))),
    # cat of 6 + 12 elements: read and written once, 2 to 4 bytes (a tensor list records no type)
    (lambda: torch.cat([torch.randn(2, 3), torch.randn(4, 3)]), "aten::cat", (0, 0, 2 * 18 * 2, 2 * 18 * 4)),
    # index_select 2 rows of 5×3: the index read (int64), 6 elements read and written
    (lambda: torch.randn(5, 3).index_select(0, torch.tensor([0, 2])), "aten::index_select",
     (0, 0, 2 * L + 2 * 6 * F, 2 * L + 2 * 6 * F)),
    # fused Adam over 100 parameters, no weight decay, no amsgrad: 13 per parameter; p, g, m, v read and
    # p, m, v written at 2 to 4 bytes
    (_adam, "aten::_fused_adam_", (1300, 1300, 7 * 100 * 2, 7 * 100 * 4)),
]


def test_memory_bound_formulas_equal_hand_derivations(tmp_path: Path) -> None:
    _path, recorded = ops_recorded.record(tmp_path, [case for case, _name, _want in CASES])
    for (_case, name, want), ops in zip(CASES, recorded, strict=True):
        args = ops_recorded.first(ops, name)
        cost = op_cost(name, args)
        assert cost is not None, (name, args)
        got = (cost.flops_low, cost.flops_high, cost.bytes_low, cost.bytes_high)
        assert got == tuple(float(v) for v in want), (name, args.dims, args.concrete, got, cost.formula)


def test_batch_norm_in_evaluation_and_training() -> None:
    """The training flag (concrete input 5) picks the formula; not recorded, evaluation is the low end."""
    dims = ([2, 3, 4, 4], [3], [3], [3], [3], [], [], [])
    types = ("float",) * 5 + ("Scalar",) * 3
    n = 2 * 3 * 16
    train = op_cost("aten::native_batch_norm", OpArgs(dims, types, None, ("", "", "", "", "", "True", "0.1", "1e-5")))
    evaluate = op_cost("aten::native_batch_norm", OpArgs(dims, types, None, ("", "", "", "", "", "False", "0.1",
                                                                            "1e-5")))
    unknown = op_cost("aten::native_batch_norm", OpArgs(dims, types))
    assert train is not None and (train.flops_low, train.flops_high) == (7 * n, 10 * n)
    assert evaluate is not None and (evaluate.flops_low, evaluate.flops_high) == (2 * n, 4 * n)
    assert unknown is not None and (unknown.flops_low, unknown.flops_high) == (2 * n, 10 * n)


def test_no_model_for_unknown_operators_or_missing_shapes() -> None:
    assert op_cost("aten::add", None) is None
    assert op_cost("aten::add", OpArgs((), ())) is None
    assert op_cost("fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function", OpArgs(([2, 3],), ("float",))) \
        is None
