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
from importlib.util import find_spec
from typing import Any

#: Environment variable: ``0`` turns the typed decoding off (every event is a dict).
ENV_SWITCH = "MYUTILS_TYPED_TRACE"

#: the schema's names, defined in ``_trace_schema`` when msgspec is imported (first asked for)
_SCHEMA_NAMES = frozenset({"EventArgs", "KinetoEvent", "KinetoLaneEvent", "NO_ARGS", "UNSET", "REFUSED"})
_installed: bool | None = None


def _msgspec_installed() -> bool:
    global _installed
    if _installed is None:
        _installed = find_spec("msgspec") is not None
    return _installed


def __getattr__(name: str) -> Any:
    """The schema's names (``KinetoEvent``, ``UNSET``, ``REFUSED``...), importing msgspec on first use.

    Without msgspec, ``REFUSED`` is ``()`` and ``UNSET`` None (no typed event exists to hold them).
    """
    if name not in _SCHEMA_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _msgspec_installed():
        if name in ("REFUSED", "UNSET"):
            return () if name == "REFUSED" else None
        raise AttributeError(f"{__name__}.{name} needs msgspec (pip install myutils-profiling[fast])")
    from my_utils.profiling.kineto.read import _schema as _trace_schema

    return getattr(_trace_schema, name)


def typed_decoder(lanes: bool | str = False) -> Any:
    """``decode(text) -> list[KinetoEvent]`` for a JSON list of events, or None when typed decoding is off.

    ``lanes``: :class:`KinetoLaneEvent` instead (``pid``/``tid`` too); ``"shapes"``: ``KinetoShapeEvent``
    (the operators' recorded shapes too). Off when msgspec is not
    installed or ``MYUTILS_TYPED_TRACE=0``. ``decode`` raises one of :data:`REFUSED` for a
    slice that does not fit the schema.
    """
    if not typed_enabled():
        return None
    from my_utils.profiling.kineto.read._schema import DECODERS

    return DECODERS[lanes]


def typed_enabled() -> bool:
    """Whether runs can be decoded typed (msgspec installed, ``MYUTILS_TYPED_TRACE`` not 0), without importing msgspec."""
    return os.environ.get(ENV_SWITCH, "1").strip() != "0" and _msgspec_installed()


def lazy_typed_decoder(lanes: bool | str = False) -> Any:
    """:func:`typed_decoder`, but msgspec is imported at the first decode: for readers that may never need it."""
    if not typed_enabled():
        return None
    decode = None

    def first_use(text: str) -> Any:
        nonlocal decode
        if decode is None:
            decode = typed_decoder(lanes)
        return decode(text)

    return first_use


def as_dict(ev: Any) -> dict[str, Any]:
    """The fields of a typed event as the dict the JSON decoders would have given (defaults left out)."""
    from my_utils.profiling.kineto.read import (
        _schema as _trace_schema,  # a typed event exists: msgspec is imported
    )

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
    if a.total_allocated is not _trace_schema.UNSET:
        args["Total Allocated"] = a.total_allocated
        args["Total Reserved"] = a.total_reserved
    if a.device_type != -1:
        args["Device Type"] = a.device_type
    if args:
        out["args"] = args
    return out
