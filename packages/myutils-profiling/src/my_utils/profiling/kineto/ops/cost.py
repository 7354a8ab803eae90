"""What one operator call costs: FLOPs and bytes (each a low–high range), its compute dtype, and the formula used.

:func:`op_cost` looks the operator up in one table, :data:`MODELS`, filled by ``ops.flops``
(matrix products, convolutions, attention: the work that runs on matrix units), ``ops.norms``
(normalisation, softmax, embeddings) and ``ops.traffic`` (elementwise, reductions, copies,
optimizer steps): the last two the work bounded by memory. Each module's docstring derives its formulas and cites
where they come from. A range is the honest answer where the cost rests on something the trace
cannot tell (a fused or unfused kernel, an operand cached or re-read, a recomputation); where
nothing is assumed, low equals high. ``None`` means "not modelled": an unknown operator, or one
whose recorded arguments do not fix its cost (no shapes, a shape that does not fit the schema).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from my_utils.profiling.kineto.ops.args import OpArgs


@dataclass(frozen=True)
class Cost:
    """The modelled cost of one call.

    ``matrix`` says the FLOPs run on matrix units (tensor cores) and are judged against the
    dtype's matrix peak; other work is judged against the fp32 vector peak. ``family`` is the
    operator family (``gemm``, ``conv``, ``attention``, ``norm``...), ``formula`` the formula in
    words, as a reader would check it.
    """

    flops_low: float
    flops_high: float
    bytes_low: float
    bytes_high: float
    dtype: str
    matrix: bool
    family: str
    formula: str

    @property
    def flops(self) -> float:
        """The central FLOP figure: the low end (the count FLOP counters such as FlopCounterMode report)."""
        return self.flops_low


def exact(flops: float, nbytes: float, dtype: str, matrix: bool, family: str, formula: str) -> Cost:
    """A cost with no assumption in it (low = high)."""
    return Cost(flops, flops, nbytes, nbytes, dtype, matrix, family, formula)


#: operator name → its model (filled by the model modules on first use).
MODELS: dict[str, Callable[[OpArgs], Cost | None]] = {}


def _load() -> None:
    if not MODELS:
        from my_utils.profiling.kineto.ops import flops, norms, traffic

        MODELS.update(flops.models())
        MODELS.update(norms.models())
        MODELS.update(traffic.models())


def op_cost(name: str, args: OpArgs | None) -> Cost | None:
    """The cost of one call of operator ``name`` with ``args``; None when it is not modelled."""
    _load()
    model = MODELS.get(name)
    if model is None or args is None:
        return None
    try:
        return model(args)
    except (IndexError, ValueError, ZeroDivisionError, TypeError):  # a recorded shape that does not fit the schema
        return None


def modelled(name: str) -> bool:
    """Whether operator ``name`` has a model (its cost still needs recorded shapes)."""
    _load()
    return name in MODELS
