"""Typed Kineto events: decode a run of trace events into small structs, skipping every other field.

With the optional ``msgspec`` (``pip install myutils-profiling[fast]``), a slice of the
``traceEvents`` list decodes straight into :class:`KinetoEvent` structs that hold only the
fields the providers read; the rest of each event (``args`` of kernels, shapes, ids...) is
skipped without building a dict. Measured on the 54 MB real trace: the stdlib or orjson
build every dict (~80 MB/s), the typed decode runs at ~400-500 MB/s.

The schema is strict on purpose: an event whose fields do not have the types below (a
string ``ts``, a ``NaN``, an ``args`` list, a boolean correlation...) makes the whole slice
fail, and the stream hands those events over as dicts instead (``TraceStream.items``), so
the dict path keeps deciding, and wording, what such an event means. A typed event is
therefore always one that the dict path would read the same way:

- ``ts`` / ``dur`` are finite floats (an integer is converted as ``float(int)`` does);
  a missing ``ts`` is ``NaN``, a missing ``dur`` is 0;
- ``cat`` / ``ph`` are strings or ``None`` (absent or ``null``), ``name`` a string (``""`` absent);
- ``pid`` / ``tid`` (:class:`KinetoLaneEvent` only) are JSON scalars, integers within 64 bits
  (``None`` absent);
- ``args`` holds ``correlation`` (a 64-bit integer, -1 absent), the memory counters of ``[memory]``
  instants; a missing ``args`` is an empty :class:`EventArgs`.

Set ``MYUTILS_TYPED_TRACE=0`` to read every event as a dict (the pure-Python path).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

try:
    import msgspec as _msgspec
except ImportError:  # the pure-Python path: TraceStream yields dicts only
    _msgspec = None  # type: ignore[assignment]

#: Environment variable: ``0`` turns the typed decoding off (every event is a dict).
ENV_SWITCH = "MYUTILS_TYPED_TRACE"

_FLOAT_MAX = 1.7976931348623157e308

if _msgspec is not None:
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

    # decoding pid/tid of every event costs ~8% of the decode: only passes that ask get them
    _DECODERS = {False: _msgspec.json.Decoder(list[KinetoEvent]).decode,
                 True: _msgspec.json.Decoder(list[KinetoLaneEvent]).decode}
    #: What a slice that is not a run of typed events raises: wrong types, JSON msgspec does not
    #: read (``NaN``, lone surrogates), or nesting deeper than its recursion allows.
    REFUSED: tuple[type[Exception], ...] = (_msgspec.ValidationError, _msgspec.DecodeError, RecursionError)
else:  # pragma: no cover - exercised by the tests that hide msgspec
    UNSET = None
    REFUSED = ()


def typed_decoder(lanes: bool = False) -> Any:
    """``decode(text) -> list[KinetoEvent]`` for a JSON list of events, or None when typed decoding is off.

    ``lanes``: :class:`KinetoLaneEvent` instead (``pid``/``tid`` too). Off when msgspec is not
    installed or ``MYUTILS_TYPED_TRACE=0``. ``decode`` raises one of :data:`REFUSED` for a
    slice that does not fit the schema.
    """
    if _msgspec is None or os.environ.get(ENV_SWITCH, "1").strip() == "0":
        return None
    return _DECODERS[lanes]


def as_dict(ev: Any) -> dict[str, Any]:
    """The fields of a typed event as the dict the JSON decoders would have given (defaults left out)."""
    out: dict[str, Any] = {}
    if ev.ph is not None:
        out["ph"] = ev.ph
    if ev.cat is not None:
        out["cat"] = ev.cat
    out["name"] = ev.name
    if ev.ts == ev.ts:
        out["ts"] = ev.ts
    out["dur"] = ev.dur
    for lane in ("pid", "tid"):
        if (value := getattr(ev, lane, None)) is not None:
            out[lane] = value
    a = ev.args
    args: dict[str, Any] = {}
    if a.correlation != -1:
        args["correlation"] = a.correlation
    if a.total_allocated is not UNSET:
        args["Total Allocated"] = a.total_allocated
        args["Total Reserved"] = a.total_reserved
    if a.device_type != -1:
        args["Device Type"] = a.device_type
    if args:
        out["args"] = args
    return out
