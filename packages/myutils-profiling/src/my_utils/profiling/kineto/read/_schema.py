"""The msgspec schema of typed Kineto events (see ``trace_events``): imported only when a run is decoded typed.

Kept apart so that a reading that never decodes typed -- the compiled scanner's, the dict
path's -- does not import msgspec (~6 ms of a start, ~2 MB per process).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec as _msgspec

_FLOAT_MAX = 1.7976931348623157e308

# finite only: `1e999` decodes to inf, which a constraint refuses (the dict path then names it)
_Finite = Annotated[float, _msgspec.Meta(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]
# beyond 64 bits orjson (the dict path's batches) reads an integer as a float: refused here, so
# such an event takes that same path
_Int64 = Annotated[int, _msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
_Scalar = _Int64 | float | str | None
UNSET: Any = _msgspec.UNSET

class EventArgs(_msgspec.Struct, frozen=True, gc=False):
    """The ``args`` fields a provider reads; every other key is skipped."""

    correlation: _Int64 = -1
    total_allocated: _Finite | _msgspec.UnsetType = _msgspec.field(default=_msgspec.UNSET,
                                                                     name="Total Allocated")
    total_reserved: _Finite | None = _msgspec.field(default=0.0, name="Total Reserved")
    device_type: _Int64 = _msgspec.field(default=-1, name="Device Type")

NO_ARGS = EventArgs()

class KinetoEvent(_msgspec.Struct, gc=False):
    """One trace event, the fields the provider's aggregation reads (see the module docstring)."""

    ph: str | None = None
    cat: str | None = None
    name: str = ""
    ts: _Finite = float("nan")
    dur: _Finite = 0.0
    args: EventArgs = NO_ARGS

class KinetoLaneEvent(KinetoEvent, gc=False):
    """A :class:`KinetoEvent` that also says its lane (``pid``, ``tid``): for passes that nest by thread."""

    pid: _Scalar = None
    tid: _Scalar = None

class ShapeArgs(EventArgs, frozen=True, gc=False):
    """:class:`EventArgs` and an operator's recorded arguments, as JSON values (for the operation model)."""

    input_dims: Any = _msgspec.field(default=None, name="Input Dims")
    input_type: Any = _msgspec.field(default=None, name="Input type")
    input_strides: Any = _msgspec.field(default=None, name="Input Strides")
    concrete_inputs: Any = _msgspec.field(default=None, name="Concrete Inputs")
    kernel_flop: Any = None
    kernel_num_gb: Any = None
    kernel_backend: Any = None
    kernel_hash: Any = None
    kernel_name: Any = None
    stream: Any = None

NO_SHAPE_ARGS = ShapeArgs()

class KinetoShapeEvent(KinetoLaneEvent, gc=False):
    """A :class:`KinetoLaneEvent` whose ``args`` also hold the recorded shapes (``shapes`` decoding only)."""

    args: ShapeArgs = NO_SHAPE_ARGS

#: decode(text) per lanes flag; decoding pid/tid of every event costs ~8% of the decode: only passes that ask get them;
#: "shapes" (a pass with ``needs_shapes``) adds the operators' recorded arguments
DECODERS = {False: _msgspec.json.Decoder(list[KinetoEvent]).decode,
             True: _msgspec.json.Decoder(list[KinetoLaneEvent]).decode,
             "shapes": _msgspec.json.Decoder(list[KinetoShapeEvent]).decode}
#: What a slice that is not a run of typed events raises: wrong types, JSON msgspec does not
#: read (``NaN``, lone surrogates), or nesting deeper than its recursion allows.
REFUSED: tuple[type[Exception], ...] = (_msgspec.ValidationError, _msgspec.DecodeError, RecursionError)
