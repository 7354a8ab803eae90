"""One operator call's recorded arguments, read once into a typed view: shapes, dtypes, strides, scalars.

torch.profiler with ``record_shapes=True`` writes, per ``cpu_op`` event, ``Input Dims`` (one entry
per schema argument: a list of ints for a tensor, a list of such lists for a tensor list, ``[]``
for anything else), ``Input type`` (the tensor's element type as ATen names it: ``float``,
``c10::Half``, ``long int``...; ``Scalar``, ``ScalarList``, ``GenericList``, ``TensorList`` or ``""``
for the rest), and in newer torch ``Input Strides`` and ``Concrete Inputs`` (the scalar arguments'
values as text: ``"1"``, ``"[1, 1]"``, ``"True"``, ``""`` for a tensor). Every reader here answers
None when a trace did not record what it asks, so a formula can say "not modelled" instead of
guessing. Element types map to a short compute name (``fp32``, ``bf16``...) and a size in bytes in
one table, :data:`DTYPES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: ATen element-type names → (short name, bytes per element, torch dtype attribute).
DTYPES: dict[str, tuple[str, int, str]] = {
    "float": ("fp32", 4, "float32"), "double": ("fp64", 8, "float64"), "c10::Half": ("fp16", 2, "float16"),
    "c10::BFloat16": ("bf16", 2, "bfloat16"), "c10::Float8_e4m3fn": ("fp8", 1, "float8_e4m3fn"),
    "c10::Float8_e5m2": ("fp8", 1, "float8_e5m2"), "c10::Float8_e4m3fnuz": ("fp8", 1, "float8_e4m3fnuz"),
    "c10::Float8_e5m2fnuz": ("fp8", 1, "float8_e5m2fnuz"), "long int": ("int64", 8, "int64"),
    "long": ("int64", 8, "int64"), "int64_t": ("int64", 8, "int64"), "int": ("int32", 4, "int32"),
    "short": ("int16", 2, "int16"), "signed char": ("int8", 1, "int8"), "unsigned char": ("uint8", 1, "uint8"),
    "bool": ("bool", 1, "bool"), "c10::complex<float>": ("c64", 8, "complex64"),
    "c10::complex<double>": ("c128", 16, "complex128"), "c10::complex<c10::Half>": ("c32", 4, "complex32"),
}
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|-?inf|nan")


def _shape(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return None


@dataclass(frozen=True)
class OpArgs:
    """The recorded arguments of one call (``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``).

    ``kernel_flop`` / ``kernel_num_gb``: what Inductor wrote on a Triton launch's record
    (``torch._inductor`` with ``benchmark_kernel`` / ``profile_bandwidth``), None otherwise.
    """

    dims: tuple[Any, ...]
    types: tuple[str, ...]
    strides: tuple[Any, ...] | None = None
    concrete: tuple[str, ...] | None = None
    kernel_flop: float | None = None
    kernel_num_gb: float | None = None

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> OpArgs | None:
        """The view of a ``cpu_op`` event's ``args``; None when it holds neither shapes nor Inductor's figures."""
        dims, types = args.get("Input Dims"), args.get("Input type")
        flop, gb = args.get("kernel_flop"), args.get("kernel_num_gb")
        flop = float(flop) if isinstance(flop, (int, float)) and not isinstance(flop, bool) else None
        gb = float(gb) if isinstance(gb, (int, float)) and not isinstance(gb, bool) else None
        if not isinstance(dims, list) or not isinstance(types, list):
            return cls((), (), None, None, flop, gb) if flop is not None or gb is not None else None
        strides = args.get("Input Strides")
        concrete = args.get("Concrete Inputs")
        return cls(tuple(dims), tuple(str(t) for t in types),
                   tuple(strides) if isinstance(strides, list) else None,
                   tuple(str(c) for c in concrete) if isinstance(concrete, list) else None, flop, gb)

    def __len__(self) -> int:
        return len(self.dims)

    def shape(self, i: int) -> tuple[int, ...] | None:
        """The i-th argument's shape when it is a tensor (``()`` for a 0-d tensor), else None."""
        if i >= len(self.dims) or i >= len(self.types) or self.types[i] not in DTYPES:
            return None
        return _shape(self.dims[i])

    def stride(self, i: int) -> tuple[int, ...] | None:
        """The i-th tensor argument's strides, None when the trace has none."""
        if self.strides is None or i >= len(self.strides):
            return None
        return _shape(self.strides[i])

    def dtype(self, i: int) -> str | None:
        """The i-th argument's short element type (``fp32``...), None for a non-tensor or an unknown type."""
        got = DTYPES.get(self.types[i]) if i < len(self.types) else None
        return got[0] if got else None

    def itemsize(self, i: int) -> int | None:
        """Bytes per element of the i-th tensor argument."""
        got = DTYPES.get(self.types[i]) if i < len(self.types) else None
        return got[1] if got else None

    def tensors(self) -> list[int]:
        """Positions of the tensor arguments."""
        return [i for i in range(len(self.dims)) if self.shape(i) is not None]

    def tensor_list(self, i: int) -> list[tuple[int, ...]] | None:
        """The shapes of a tensor-list argument (``Input Dims`` a list of lists), None when it is not one."""
        if i >= len(self.dims):
            return None
        v = self.dims[i]
        if not isinstance(v, list) or not v or not all(isinstance(x, list) for x in v):
            return None
        shapes = [_shape(x) for x in v]
        return None if any(s is None for s in shapes) else [s for s in shapes if s is not None]

    def text(self, i: int) -> str | None:
        """The i-th concrete input as recorded, None when the trace has none or recorded it empty."""
        if self.concrete is None or i >= len(self.concrete) or self.concrete[i] == "":
            return None
        return self.concrete[i]

    def ints(self, i: int) -> list[int] | None:
        """The i-th concrete input as ints (``"[1, 1]"`` → ``[1, 1]``, ``"3"`` → ``[3]``), None when absent."""
        text = self.text(i)
        if text is None:
            return None
        nums = re.findall(r"-?\d+", text)
        return [int(n) for n in nums] if nums else None

    def number(self, i: int) -> float | None:
        """The i-th concrete input as one number, None when absent or not a number."""
        text = self.text(i)
        m = _NUMBER.fullmatch(text.strip()) if text is not None else None
        return float(m.group(0)) if m else None

    def flag(self, i: int) -> bool | None:
        """The i-th concrete input as a boolean (``True``/``1``), None when not recorded."""
        text = self.text(i)
        if text is None:
            return None
        return text.strip() in ("True", "true", "1")

    def bools(self, i: int) -> list[bool] | None:
        """A ``bool[]`` concrete input (``"[True, False, True]"``), None when absent."""
        text = self.text(i)
        if text is None:
            return None
        words = re.findall(r"True|False|true|false|1|0", text)
        return [w in ("True", "true", "1") for w in words] or None


def numel(shape: tuple[int, ...]) -> int:
    """Elements of a tensor of ``shape`` (1 for a 0-d tensor)."""
    n = 1
    for s in shape:
        n *= s
    return n


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast shape of ``shapes`` (NumPy's rule), None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
