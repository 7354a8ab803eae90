"""The matrix-unit formulas (``kineto.ops.flops``) against an independent count.

Matrix products and convolutions are run for real on the CPU under torch.profiler (record_shapes)
and under ``torch.utils.flop_counter.FlopCounterMode``, on generated shapes; the model reads the
arguments the profiler recorded (through the project's own trace reader, as a real trace is read)
and must give FlopCounterMode's count, plus the bias terms PyTorch's counter leaves out. Attention
is checked against ``sdpa_flop_count`` / ``sdpa_backward_flop_count`` and, for causal masks, a
count of the kept query–key pairs made by brute force. Found on the way: FlopCounterMode counts
the weight gradient of a grouped convolution as if ungrouped (groups times the work), so grouped
backward counts are checked by hand instead. Argument positions are checked against
the installed torch's schemas.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import ops_recorded  # ops_recorded.py beside this file, registered by conftest.py
import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count  # noqa: E402

from my_utils.profiling.kineto.ops import flops as model  # noqa: E402
from my_utils.profiling.kineto.ops.args import OpArgs  # noqa: E402
from my_utils.profiling.kineto.ops.cost import op_cost  # noqa: E402


def _counted(run: Any) -> int:
    with FlopCounterMode(display=False) as fcm:
        run()
    return int(fcm.get_total_flops())


def _shapes(seed: int, n: int, dims: int, lo: int = 1, hi: int = 33) -> list[tuple[int, ...]]:
    rng = random.Random(seed)
    return [tuple(rng.randint(lo, hi) for _ in range(dims)) for _ in range(n)]


def test_matrix_products_match_flop_counter_mode(tmp_path: Path) -> None:
    """mm, bmm, addmm (+ the bias add), baddbmm (+ the bias add), matmul and linear on generated shapes."""
    cases, expected = [], []
    for (m, k, n), (b,) in zip(_shapes(1, 6, 3), _shapes(2, 6, 1, 1, 5), strict=True):
        x, w, xb, wb = torch.randn(m, k), torch.randn(k, n), torch.randn(b, m, k), torch.randn(b, k, n)
        bias, lin_w, c = torch.randn(n), torch.randn(n, k), torch.randn(b, m, n)
        for name, run, extra in (
                ("aten::mm", lambda x=x, w=w: torch.mm(x, w), 0),
                ("aten::bmm", lambda xb=xb, wb=wb: torch.bmm(xb, wb), 0),
                ("aten::addmm", lambda bias=bias, x=x, w=w: torch.addmm(bias, x, w), m * n),
                ("aten::baddbmm", lambda c=c, xb=xb, wb=wb: torch.baddbmm(c, xb, wb), b * m * n),
                ("aten::matmul", lambda xb=xb, w=w: torch.matmul(xb, w), 0),
                ("aten::linear", lambda x=x, lin_w=lin_w, bias=bias: torch.nn.functional.linear(x, lin_w, bias),
                 m * n)):
            cases.append(run)
            expected.append((name, _counted(run) + extra))
    _path, recorded = ops_recorded.record(tmp_path, cases)
    for (name, want), ops in zip(expected, recorded, strict=True):
        args = ops_recorded.first(ops, name)
        cost = op_cost(name, args)
        assert cost is not None and cost.flops_low == want, (name, args.dims, cost)
        assert cost.flops_high == cost.flops_low  # alpha and beta were recorded as 1: nothing assumed


@pytest.mark.parametrize("transposed", [False, True])
def test_convolutions_match_flop_counter_mode(tmp_path: Path, transposed: bool) -> None:
    """Every convolution op the profiler records for conv1d/2d/3d (and transposed) on generated geometry; forward
    and backward (the bias terms are what PyTorch's counter leaves out)."""
    rng = random.Random(7 + transposed)
    cases, expected = [], []
    for spatial, groups in itertools.product((1, 2, 3), (1, 2)):
        n, cin, cout = rng.randint(1, 3), 2 * rng.randint(1, 3), 2 * rng.randint(1, 3)
        size = [rng.randint(5, 9) for _ in range(spatial)]
        k = [rng.randint(1, 3) for _ in range(spatial)]
        stride, pad, dil = rng.randint(1, 2), rng.randint(0, 1), rng.randint(1, 2)
        x = torch.randn(n, cin, *size, requires_grad=True)
        w_shape = (cin, cout // groups, *k) if transposed else (cout, cin // groups, *k)
        w = torch.randn(*w_shape, requires_grad=True)
        bias = torch.randn(cout, requires_grad=True)
        fn = getattr(torch.nn.functional, f"conv{'_transpose' if transposed else ''}{spatial}d")
        kwargs = dict(stride=stride, padding=pad, dilation=dil, groups=groups)

        def forward(fn: Any = fn, x: Any = x, w: Any = w, bias: Any = bias, kwargs: Any = kwargs) -> Any:
            return fn(x, w, bias, **kwargs)

        out_shape = forward().shape
        grad = torch.randn(out_shape)

        def both(forward: Any = forward, grad: Any = grad) -> None:
            forward().backward(grad)

        fwd = _counted(forward)
        total = _counted(both)
        bias_terms = out_shape.numel()  # the bias add forward, the bias gradient backward: one per output
        # backward: the input and the weight gradient are each a convolution of the forward's size (by hand);
        # FlopCounterMode agrees without groups, but counts the weight gradient of a grouped convolution as if
        # ungrouped (groups times the work), so it is the reference only there
        by_hand = 2 * fwd + bias_terms
        if groups == 1:
            assert total - fwd + bias_terms == by_hand
        cases.append(both)
        expected.append((fwd + bias_terms, by_hand))
    for (want_fwd, want_bwd), ops in zip(expected, ops_recorded.record(tmp_path, cases)[1], strict=True):
        forward_ops = [(n, a) for n, a in ops if n in model._CONV_ARGS]
        assert forward_ops, [n for n, _a in ops]
        for name, args in forward_ops:  # conv2d, convolution, _convolution, the backend's own: all the same count
            cost = op_cost(name, args)
            assert cost is not None and cost.flops_low == want_fwd, (name, args.dims, cost)
        (bwd,) = [a for n, a in ops if n == "aten::convolution_backward"]
        cost = op_cost("aten::convolution_backward", bwd)
        assert cost is not None and cost.flops_low == cost.flops_high == want_bwd, (bwd.dims, bwd.concrete, cost)


def _attention_args(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...], causal: bool, at: int,
                    backward: bool = False) -> OpArgs:
    dims: list[Any] = ([list(q)] if backward else []) + [list(q), list(k), list(v)]
    concrete = [""] * max(at + 1, len(dims))
    concrete[at] = "True" if causal else "False"
    dims += [[]] * (len(concrete) - len(dims))
    return OpArgs(tuple(dims), tuple(["c10::BFloat16"] * (4 if backward else 3) + [""] * (len(dims) - (4 if backward
                                                                                                      else 3))),
                  None, tuple(concrete))


def _pairs_brute(length: int, keys: int, bottom_right: bool) -> int:
    shift = keys - length if bottom_right else 0
    return sum(1 for i in range(length) for j in range(keys) if j <= i + shift)


@pytest.mark.parametrize(("length", "keys"), [(1, 1), (7, 7), (5, 9), (9, 5), (16, 3)])
@pytest.mark.parametrize("bottom_right", [False, True])
def test_causal_pairs_equal_a_brute_force_count(length: int, keys: int, bottom_right: bool) -> None:
    assert model.causal_pairs(length, keys, bottom_right) == _pairs_brute(length, keys, bottom_right)


@pytest.mark.parametrize("shape", _shapes(11, 4, 4, 1, 12))
def test_attention_forward_and_backward(shape: tuple[int, ...]) -> None:
    """Non-causal: PyTorch's sdpa counts; causal: the kept pairs only; backward's high end adds the recomputed Q·Kᵀ."""
    b, h, length, e = shape
    keys = length + 3
    q, k, v = (b, h, length, e), (b, h, keys, e), (b, h, keys, e)
    fwd = op_cost("aten::_scaled_dot_product_flash_attention", _attention_args(q, k, v, False, 4))
    assert fwd is not None and fwd.flops_low == sdpa_flop_count(q, k, v)
    assert fwd.flops_high == fwd.flops_low + 5 * b * h * length * keys  # the softmax's FLOPs, high end only
    causal = op_cost("aten::_scaled_dot_product_efficient_attention", _attention_args(q, k, v, True, 6))
    assert causal is not None and causal.flops_low == 4 * b * h * e * _pairs_brute(length, keys, False)
    bwd = op_cost("aten::_scaled_dot_product_flash_attention_backward", _attention_args(q, k, v, False, 11, True))
    # low: dV, dP, dQ, dK, twice the forward; high: PyTorch's count (the recomputed Q·Kᵀ too) and the softmax
    assert bwd is not None and bwd.flops_low == 2 * sdpa_flop_count(q, k, v)
    assert bwd.flops_high == sdpa_backward_flop_count(q, q, k, v) + 5 * b * h * length * keys
    # the [B, L, H, E] layout of the flash kernels' own operator reads the same
    blhe = op_cost("aten::_flash_attention_forward", _attention_args((b, length, h, e), (b, keys, h, e),
                                                                      (b, keys, h, e), False, 8))
    assert blhe is not None and blhe.flops_low == fwd.flops_low


#: (operator, position) → the schema argument's name the models read there (``flops._CONV_ARGS`` / ``_ATTENTION``).
_NAMES = {"bias": "bias", "stride": "stride", "padding": "padding", "dilation": "dilation",
          "transposed": "transposed", "output_padding": "output_padding", "groups": "groups"}


@pytest.mark.parametrize("name", sorted(model._CONV_ARGS))
def test_convolution_argument_positions_follow_torch_schemas(name: str) -> None:
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"))
    schemas = [getattr(packet, o)._schema.arguments for o in packet.overloads()]
    positions = dict(zip(("bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups"),
                         model._CONV_ARGS[name], strict=True))
    assert any(all(at < 0 or (at < len(args) and args[at].name == _NAMES[what]) for what, at in positions.items())
               for args in schemas), (name, [[a.name for a in args] for args in schemas])


@pytest.mark.parametrize("name", sorted(model._ATTENTION))
def test_attention_argument_positions_follow_torch_schemas(name: str) -> None:
    qi, ki, vi, _layout, causal_at, _bwd, kind, cum_at, max_k_at = model._ATTENTION[name]
    args = getattr(torch.ops.aten, name.removeprefix("aten::")).default._schema.arguments
    assert (args[qi].name, args[ki].name, args[vi].name) == ("query", "key", "value")
    assert args[causal_at].name == ("is_causal" if kind == "flag" else "custom_mask_type")
    if cum_at >= 0:
        assert args[cum_at].name in ("cum_seq_q", "cu_seqlens_q") and args[max_k_at].name in ("max_k", "max_seqlen_k")


def test_a_shape_that_does_not_fit_is_not_modelled() -> None:
    assert op_cost("aten::mm", OpArgs(([2, 3], [4, 5, 6]), ("float", "float"))) is None
    assert op_cost("aten::convolution", OpArgs(([1, 3, 8, 8], [4, 3, 3, 3]), ("float", "float"))) is None  # no stride
    assert op_cost("aten::not_an_op", OpArgs(([2, 3],), ("float",))) is None
    assert json.dumps(op_cost("aten::mm", OpArgs(([2, 3], [3, 4]), ("float", "float"))).__dict__)  # plain values
