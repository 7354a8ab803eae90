"""Metric events: the versioned record every provider emits (the `metrics_events.jsonl` contract).

One ``MetricEvent`` per line in ``metrics_events.jsonl``. The file is append-only and
flushed per batch, so a killed process loses at most the line being written; the reader
tolerates a torn last line and reports any other malformed line as ``file:line: ...``.
Fields this version does not know are kept in ``extra`` and written back unchanged.

Speed (a big run writes millions of lines): JSON goes through ``orjson`` when it is
installed (an optional speed-up, never a dependency: the stdlib ``json`` is the fallback
and the judge of anything orjson refuses), and a decoded line whose fields already have the
expected types is accepted with one ``type() is`` test per field; only a line that fails
those tests takes the slow path, which explains what is wrong. ``iter_event_rows`` yields
the validated objects themselves, for consumers that fold millions of events and have no
use for one ``MetricEvent`` each.
"""

from __future__ import annotations

import json
import math
import operator
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from my_utils.core.errors import InputError, UsageError

_orjson: Any
try:  # optional: ~10x faster JSON; every result it gives is also what the stdlib would give
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

SCHEMA_VERSION = 1
EVENTS_FILE_NAME = "metrics_events.jsonl"

_KNOWN = (
    "schema_version", "run_id", "source", "rank", "step", "name", "kind", "value", "unit",
    "ts", "attrs",
)
_KNOWN_SET = frozenset(_KNOWN)
#: Value types both JSON encoders write alike (orjson differs on Enums, datetimes, dataclasses...).
_PLAIN = frozenset({str, int, float, bool, type(None)})
#: Deepest nesting of objects/lists a line may hold (``attrs`` and unknown fields): deeper data is
#: refused at read time, where the line is known, rather than failing later in a writer's recursion
#: (so is text holding a lone surrogate, which no UTF-8 writer can write).
MAX_NESTING = 64
_INT64 = 1 << 63
_FLOAT_MAX = sys.float_info.max  # Python compares an int with a float exactly: 10**400 > _FLOAT_MAX


@dataclass(frozen=True, slots=True)
class MetricEvent:
    """One measurement: ``value`` in ``unit`` for ``name`` at ``step`` on ``rank``.

    ``kind`` says how to aggregate it: ``"duration"`` (a timed region), ``"counter"``,
    ``"gauge"`` (a level such as memory), ``"ratio"`` or ``"info"``. ``ts`` is unix
    seconds, already corrected by the rank's clock offset. ``attrs`` carries free-form
    context (kernel grid, stream, file of origin...).

    Fields are checked when the event is built (``UsageError`` naming the field), so the
    writer never writes what ``read_events`` refuses. Numbers of other types (numpy
    scalars, 0-d tensors) are converted to ``float``/``int``; bools are refused.
    """

    name: str
    value: float
    kind: str = "gauge"
    unit: str = ""
    source: str = ""
    rank: int | None = None
    step: int | None = None
    ts: float | None = None
    run_id: str = ""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Parsers build events in bulk (a Kineto trace: ~200k), so the common case is one
        # ``type() is`` test per field; the slow path (conversions, messages) is split off.
        v = self.value
        if (type(self.name) is not str or not self.name or (type(v) is not float and type(v) is not int)
                or type(self.kind) is not str or type(self.unit) is not str or type(self.source) is not str
                or type(self.run_id) is not str or type(self.schema_version) is not int
                or (self.rank is not None and type(self.rank) is not int)
                or (self.step is not None and type(self.step) is not int)
                or (self.ts is not None and type(self.ts) is not float and type(self.ts) is not int)
                or type(self.attrs) is not dict or type(self.extra) is not dict):
            _check_slow(self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written for this event (unknown fields from ``extra`` included)."""
        out: dict[str, Any] = dict(self.extra)
        out.update(
            schema_version=self.schema_version, run_id=self.run_id, source=self.source,
            rank=self.rank, step=self.step, name=self.name, kind=self.kind,
            value=self.value, unit=self.unit, ts=self.ts, attrs=dict(self.attrs),
        )
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "<event>", place: str | None = None) -> MetricEvent:
        """Validate one decoded JSON object; InputError names ``where``/``place`` and the field."""
        if not isinstance(data, Mapping):
            raise InputError(where, place, f"expected a JSON object (a metric event), got {type(data).__name__}")

        def bad(key: str, expected: str) -> InputError:
            return InputError(where, place, f"field {key!r} must be {expected}, got {_shown(data.get(key))}")

        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise bad("name", "a non-empty string")
        value = data.get("value")
        if value is None:  # a provider that could not measure writes null; read it as NaN
            value = math.nan
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("value", "a number or null")
        elif isinstance(value, int) and not -_FLOAT_MAX <= value <= _FLOAT_MAX:
            raise bad("value", "a number within the range of a 64-bit float")
        for key in ("rank", "step"):
            v = data.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise bad(key, "an integer or null")
            if v is not None and not -_INT64 <= v < _INT64:
                raise bad(key, "a 64-bit integer or null")
        ts = data.get("ts")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))
                               or not -_FLOAT_MAX <= ts <= _FLOAT_MAX):  # also NaN and infinities
            raise bad("ts", "a finite number (unix seconds) or null")
        attrs = data.get("attrs") or {}
        if not isinstance(attrs, Mapping):
            raise bad("attrs", "an object")
        version = data.get("schema_version", SCHEMA_VERSION)
        if isinstance(version, bool) or not isinstance(version, int):
            raise bad("schema_version", "an integer")
        for key in ("kind", "unit", "source", "run_id"):
            v = data.get(key, "")
            if not isinstance(v, str):
                raise bad(key, "a string")
        return cls(
            name=name, value=float(value), kind=data.get("kind") or "gauge", unit=data.get("unit", ""),
            source=data.get("source", ""), rank=data.get("rank"), step=data.get("step"),
            ts=None if ts is None else float(ts), run_id=data.get("run_id", ""), attrs=dict(attrs),
            schema_version=version, extra={k: v for k, v in data.items() if k not in _KNOWN},
        )


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a message quotes a 400-digit number or a long name in part."""
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return f"an integer of {len(str(abs(value)))} digits"  # str() itself refuses ~4,300 digits and more
    text = repr(value)  # nesting deeper than MAX_NESTING never gets here
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _tree_problem(data: Any, limit: int = MAX_NESTING) -> str | None:
    """What makes ``data`` unreadable downstream, or None: nesting deeper than ``limit``, or text that is not UTF-8.

    Walked without recursion. A lone surrogate (``"\\udce9"`` in the JSON) is valid JSON but
    no UTF-8 text: every writer of a report or trace would fail on it later, far from the line.
    """
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    while stack:
        obj, depth, key = stack.pop()
        if depth > limit:
            return f"a metric event nested at most {limit} levels deep (attrs and other fields)"
        if isinstance(obj, str):
            try:
                obj.encode("utf-8")
            except UnicodeEncodeError:
                where = f"field {key!r}" if key else "a field"
                return f"UTF-8 text; {where} holds a lone surrogate ({_shown(obj)})"
        elif isinstance(obj, dict):
            for k, v in obj.items():
                stack.append((k, depth + 1, key or str(k)))
                stack.append((v, depth + 1, key or str(k)))
        elif isinstance(obj, list):
            stack.extend((v, depth + 1, key) for v in obj)
    return None


def _bad_field(event: MetricEvent, key: str, expected: str) -> UsageError:
    value = getattr(event, key)
    return UsageError(
        f"MetricEvent(name={event.name!r}): field {key!r} must be {expected}, got {value!r} "
        f"({type(value).__name__}); read_events would refuse this event, so it is not built"
    )


def _number(event: MetricEvent, key: str, value: Any, integral: bool) -> Any:
    """``value`` as int (``integral``) or float when it is a number that is not a bool, else raise."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise _bad_field(event, key, "an integer" if integral else "a number")
    try:
        return operator.index(value) if integral else float(value)
    except (TypeError, ValueError):
        raise _bad_field(event, key, "an integer" if integral else "a number") from None


def _check_slow(event: MetricEvent) -> None:
    """Validate every field, converting foreign numbers (numpy scalars) in place; raise UsageError."""
    set_ = object.__setattr__  # frozen dataclass: conversions happen once, here, at build time
    if not isinstance(event.name, str) or not event.name:
        raise _bad_field(event, "name", "a non-empty string")
    if type(event.value) is not float and type(event.value) is not int:
        set_(event, "value", _number(event, "value", event.value, integral=False))
    for key in ("kind", "unit", "source", "run_id"):
        if not isinstance(getattr(event, key), str):
            raise _bad_field(event, key, "a string")
    for key in ("rank", "step", "schema_version"):
        v = getattr(event, key)
        if type(v) is not int and not (v is None and key != "schema_version"):
            set_(event, key, _number(event, key, v, integral=True))
    if event.ts is not None and type(event.ts) is not float and type(event.ts) is not int:
        set_(event, "ts", _number(event, "ts", event.ts, integral=False))
    for key in ("attrs", "extra"):
        if not isinstance(getattr(event, key), Mapping):
            raise _bad_field(event, key, "a mapping (dict)")


def _fast_row(data: Any) -> bool:
    """True when ``data`` is an event object whose known fields all have their usual types.

    Normalises in place what the slow path would (integer ``value``/``ts`` become floats, a
    null ``value`` NaN). False sends the object to ``MetricEvent.from_dict``, which either
    accepts it (a missing field, an empty ``kind``) or names what is wrong.
    """
    try:
        name = data["name"]
        value = data["value"]
        rank = data["rank"]
        step = data["step"]
        ts = data["ts"]
        if (type(name) is not str or not name or type(data["attrs"]) is not dict
                or type(data["kind"]) is not str or not data["kind"] or type(data["unit"]) is not str
                or type(data["source"]) is not str or type(data["run_id"]) is not str
                or type(data["schema_version"]) is not int
                or (rank is not None and type(rank) is not int) or (step is not None and type(step) is not int)):
            return False
    except (KeyError, TypeError, IndexError):  # not a dict, or a field is missing
        return False
    if type(value) is not float:
        if type(value) is int:
            data["value"] = float(value)
        elif value is None:
            data["value"] = math.nan
        else:
            return False
    if ts is not None and type(ts) is not float:
        if type(ts) is not int:
            return False
        data["ts"] = float(ts)
    return True


def _event_of(data: dict[str, Any]) -> MetricEvent:
    """The event of a ``_fast_row``-checked object."""
    extra = {k: v for k, v in data.items() if k not in _KNOWN_SET} if len(data) != 11 else {}
    return trusted_event(data["name"], data["value"], data["kind"], data["unit"], data["source"], data["rank"],
                         data["step"], data["ts"], data["run_id"], data["attrs"], data["schema_version"], extra)


def trusted_event(name: str, value: float, kind: str, unit: str, source: str, rank: int | None, step: int | None,
                  ts: float | None, run_id: str, attrs: dict[str, Any], schema_version: int = SCHEMA_VERSION,
                  extra: dict[str, Any] | None = None) -> MetricEvent:
    """A ``MetricEvent`` from fields the caller guarantees to have the checked types, unchecked.

    For code that rebuilds events in bulk from values it validated itself (the reader, the
    analyzer's aggregates): filling the slots directly (see ``_EventSlots``) costs about a fifth
    of the dataclass ``__init__`` plus ``__post_init__``. Anything else should call ``MetricEvent(...)``.
    """
    event = _new(_EventSlots)
    event.name = name
    event.value = value
    event.kind = kind
    event.unit = unit
    event.source = source
    event.rank = rank
    event.step = step
    event.ts = ts
    event.run_id = run_id
    event.attrs = attrs
    event.schema_version = schema_version
    event.extra = {} if extra is None else extra
    event.__class__ = MetricEvent  # type: ignore[assignment]
    return event  # type: ignore[return-value]


class _EventSlots:
    """The slots of ``MetricEvent`` without its frozen ``__setattr__``: how events are built in bulk.

    A frozen dataclass can only be filled through ``object.__setattr__`` or the slot
    descriptors' ``__set__``, a Python-level call per field (12 per event: half of a read).
    This class has the same slots, so CPython lets an instance of it become a ``MetricEvent``
    by ``__class__`` assignment once filled with plain attribute stores; the result is an
    ordinary, frozen ``MetricEvent`` (``type(e) is MetricEvent``, equal to the checked one).
    """

    __slots__ = MetricEvent.__slots__
    name: str
    value: float
    kind: str
    unit: str
    source: str
    rank: int | None
    step: int | None
    ts: float | None
    run_id: str
    attrs: Mapping[str, Any]
    schema_version: int
    extra: Mapping[str, Any]


_new = object.__new__


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN/Infinity float replaced by None (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _plain(mapping: Mapping[str, Any]) -> bool:
    """Only str keys and scalar values both encoders write alike (checked, not assumed)."""
    return all(type(k) is str and type(v) in _PLAIN for k, v in mapping.items())


def _dumps(event: MetricEvent) -> str:
    data = event.to_dict()
    value = event.value
    if (_orjson is not None and (type(value) is not float or value - value == 0.0)
            and _plain(event.attrs) and (not event.extra or _plain(event.extra))):
        # orjson writes a non-finite attrs float as null, as _finite below does; a non-finite
        # ``value`` needs ``value_text``, so it takes the stdlib path; an int beyond 64 bits
        # makes orjson raise, and the stdlib writes it
        try:
            return _orjson.dumps(data).decode()
        except (TypeError, _orjson.JSONEncodeError):  # e.g. a lone surrogate: the stdlib decides
            pass
    try:
        # strict JSON: other tools (jq, JavaScript, Go) refuse bare NaN/Infinity
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        pass
    value = data["value"]
    if isinstance(value, float) and math.isinf(value) and "value_text" not in data["attrs"]:
        # null reads back as NaN; keep the sign of an infinity as text beside it
        data["attrs"]["value_text"] = "inf" if value > 0 else "-inf"
    return json.dumps(_finite(data), separators=(",", ":"), ensure_ascii=False, default=str, allow_nan=False)


class EventLogWriter:
    """Append-only ``metrics_events.jsonl``: one ``write()`` and one flush per batch.

    The file is opened for each batch and closed again, so a writer that is never closed
    leaks nothing and a killed process keeps every finished batch.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, events: Iterable[MetricEvent]) -> int:
        """Append events as one write, flushed to the OS; return how many were written."""
        lines = [_dumps(e) for e in events]
        if not lines:
            return 0
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        return len(lines)

    def close(self) -> None:
        """Nothing to release (kept for symmetry with other sinks)."""

    def __enter__(self) -> EventLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_events(path: str | Path, events: Iterable[MetricEvent]) -> int:
    """Write a complete events file atomically (temp + rename); return the event count."""
    count = 0
    from my_utils.core.atomic import atomic_write  # here: tempfile costs ~2.5 MB to every reader

    with atomic_write(path) as fh:
        for event in events:
            fh.write(_dumps(event) + "\n")
            count += 1
    return count


def _open(path: str | Path) -> tuple[Path, BinaryIO]:
    p = Path(path)
    try:
        return p, open(p, "rb")  # the generators close it in their finally
    except OSError as exc:
        raise InputError(p, None, f"cannot open the events file ({exc.strerror or exc})") from None


def _refuse(token: str) -> Any:
    raise ValueError(f"{token} is not strict JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # 1e999: what orjson refuses, refused here too (the slow path decides)
        raise ValueError(f"{text} overflows a float")
    return value


def _int64(text: str) -> int:
    if len(text) > 18:  # possibly beyond 64 bits, as orjson would refuse: the slow path decides
        raise ValueError(f"{text[:20]}... may not fit 64 bits")
    return int(text)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]").search


def _strict_stdlib_loads(raw: bytes) -> Any:
    """The stdlib refusing, like orjson, NaN/Infinity, overflowing floats, long integers and surrogates (slow path)."""
    if _SURROGATE_ESCAPE(raw) is not None:  # orjson refuses lone surrogates; pairs are checked there too
        raise ValueError("a \\uD8xx-\\uDFxx escape: the strict checks decide")
    return json.loads(raw, parse_constant=_refuse, parse_float=_finite_float, parse_int=_int64)


# The fast decoder refuses what needs a closer look (non-finite or overflowing numbers, integers
# beyond 64 bits); such a line is decoded again by the stdlib and checked field by field.
_loads: Callable[[bytes], Any] = _orjson.loads if _orjson is not None else _strict_stdlib_loads
_long_number = re.compile(rb"\d{19}").search
_EXACT = frozenset({str, int, bool, type(None)})


def _as_stdlib(data: Any, raw: bytes) -> Any:
    """``data`` as the stdlib would have read ``raw`` (only a well-formed line gets here).

    orjson reads an integer beyond 64 bits as a float where the stdlib keeps it exact. That can
    only matter where a float may sit: the known numeric fields are floats anyway (``rank``
    or ``step`` as a float fails ``_fast_row`` and comes here), so only a row with unknown
    fields, a float or a container in ``attrs``, or a failed fast check is looked at, and
    re-read only when it has 19 digits in a row.
    """
    if _orjson is None or _long_number(raw) is None:
        return data
    return json.loads(raw)


def _exact(data: dict[str, Any]) -> bool:
    """True when orjson's reading of a ``_fast_row`` object is certainly the stdlib's."""
    if len(data) != 11:
        return False
    for v in data["attrs"].values():  # noqa: SIM110 - all() over a generator costs more than the test
        if type(v) not in _EXACT:
            return False
    return True
_BLANK = object()  # a blank line: skipped
_TORN = object()  # the torn last line of a killed writer: the end


def _slow_line(raw: bytes, fh: BinaryIO, p: Path, lineno: int) -> Any:
    """A line the fast decoder refused: the stdlib decides (NaN, huge ints, a BOM), else blank, torn or bad.

    What it returns goes to the strict checks (``_checked_event(..., strict=True)``): the
    numbers the fast decoder refused are exactly those that need them.
    """
    stripped = raw.strip()
    if not stripped:
        return _BLANK
    try:
        return json.loads(stripped)
    except RecursionError:
        raise InputError(p, f"line {lineno}", f"a metric event nested at most {MAX_NESTING} levels deep; "
                                              "found far deeper nesting") from None
    except (ValueError, UnicodeDecodeError):
        if not raw.endswith(b"\n") and fh.read(1) == b"":
            return _TORN
        raise InputError(p, f"line {lineno}", "expected one JSON object per line (a metric event)") from None


def _validated(data: Any, raw: bytes, where: str, lineno: int, strict: bool) -> tuple[Any, MetricEvent | None]:
    """``(row, None)`` for a row that passes the fast checks, else ``(None, event)`` checked field by field.

    ``strict``: the line came from the slow decoder (or holds long integers), so every
    field is checked (ranges, finite ``ts``). Either way nesting deeper than ``MAX_NESTING`` is refused.
    """
    if not strict and _fast_row(data) and _exact(data):
        return data, None
    if not strict:
        exact = _as_stdlib(data, raw)
        strict = exact is not data  # re-read for its long integers: check their ranges too
        data = exact
    problem = _tree_problem(data)
    if problem is not None:
        raise InputError(where, f"line {lineno}", problem)
    if not strict and _fast_row(data):
        return data, None
    return None, MetricEvent.from_dict(data, where, f"line {lineno}")


def _checked_event(data: Any, raw: bytes, where: str, lineno: int, strict: bool = False) -> MetricEvent:
    """The event of a decoded line that is not a plain well-formed one (see ``iter_events``), or InputError."""
    row, event = _validated(data, raw, where, lineno, strict)
    return event if event is not None else _event_of(row)


def _checked_row(data: Any, raw: bytes, where: str, lineno: int, strict: bool = False) -> dict[str, Any]:
    """The row of a decoded line that is not a plain well-formed one (see ``iter_event_rows``), or InputError."""
    row, event = _validated(data, raw, where, lineno, strict)
    if event is None:
        return row
    out = event.to_dict()
    out["value"] = event.value  # to_dict keeps NaN as NaN; only the writer turns it into null
    return out


def iter_events(path: str | Path) -> Iterator[MetricEvent]:
    """Stream the events of a ``metrics_events.jsonl`` file.

    A last line without its newline that does not parse is a torn write and is skipped;
    any other bad line raises InputError naming the file and line.
    """
    # The common line (the 11 known fields, each of its usual exact type, a float value,
    # scalars in attrs) is checked and built inline: a function call per line costs ~10 %
    # of a read. Every other line goes to ``_checked_event``: the same tests as ``_fast_row``
    # and ``_exact`` (which normalise ints and nulls), then the stdlib or ``from_dict``.
    p, fh = _open(path)
    where = str(p)
    loads = _loads
    exact = _EXACT
    new = _new
    slots = _EventSlots
    event_type = MetricEvent
    try:
        lineno = 0
        for raw in fh:  # one loop, no inner generator: a nested one cost ~10 % of a read
            lineno += 1
            try:
                data = loads(raw)
            except (ValueError, RecursionError):  # orjson's and json's errors; the stdlib's on deep nesting
                data = _slow_line(raw, fh, p, lineno)
                if data is _BLANK:
                    continue
                if data is _TORN:
                    return
                yield _checked_event(data, raw, where, lineno, strict=True)
                continue
            try:
                name = data["name"]
                value = data["value"]
                rank = data["rank"]
                step = data["step"]
                ts = data["ts"]
                attrs = data["attrs"]
                kind = data["kind"]
                unit = data["unit"]
                source = data["source"]
                run_id = data["run_id"]
                version = data["schema_version"]
            except (KeyError, TypeError, IndexError):  # not a dict, or a field is missing
                yield _checked_event(data, raw, where, lineno)
                continue
            if (type(value) is not float or type(name) is not str or not name or type(attrs) is not dict
                    or type(kind) is not str or not kind or type(unit) is not str or type(source) is not str
                    or type(run_id) is not str or type(version) is not int or len(data) != 11
                    or (rank is not None and type(rank) is not int) or (step is not None and type(step) is not int)
                    or (ts is not None and type(ts) is not float)):
                yield _checked_event(data, raw, where, lineno)
                continue
            for v in attrs.values():  # as in _exact: a float or container may hide a big int
                if type(v) not in exact:
                    break
            else:
                event = new(slots)  # as trusted_event, inline
                event.name = name
                event.value = value
                event.kind = kind
                event.unit = unit
                event.source = source
                event.rank = rank
                event.step = step
                event.ts = ts
                event.run_id = run_id
                event.attrs = attrs
                event.schema_version = version
                event.extra = {}
                event.__class__ = event_type  # type: ignore[assignment]
                yield event  # type: ignore[misc]
                continue
            yield _checked_event(data, raw, where, lineno)
    finally:
        fh.close()


def iter_event_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream the events of a file as validated JSON objects, without building ``MetricEvent``s.

    Each object holds every known field with the type ``MetricEvent`` gives it (``value`` a
    float, NaN for null; ``ts`` a float or None; ``attrs`` a dict) plus any unknown fields;
    the same lines are refused, with the same messages, as by ``iter_events``. The objects
    are fresh: the consumer may keep or change them.
    """
    p, fh = _open(path)
    where = str(p)
    loads = _loads
    exact = _EXACT
    try:
        lineno = 0
        for raw in fh:
            lineno += 1
            try:
                data = loads(raw)
            except (ValueError, RecursionError):
                data = _slow_line(raw, fh, p, lineno)
                if data is _BLANK:
                    continue
                if data is _TORN:
                    return
                yield _checked_row(data, raw, where, lineno, strict=True)
                continue
            try:  # the common line inline, as in iter_events
                name = data["name"]
                rank = data["rank"]
                step = data["step"]
                ts = data["ts"]
                attrs = data["attrs"]
                plain = not (type(data["value"]) is not float or type(name) is not str or not name
                             or type(attrs) is not dict or type(data["kind"]) is not str or not data["kind"]
                             or type(data["unit"]) is not str or type(data["source"]) is not str
                             or type(data["run_id"]) is not str or type(data["schema_version"]) is not int
                             or len(data) != 11 or (rank is not None and type(rank) is not int)
                             or (step is not None and type(step) is not int)
                             or (ts is not None and type(ts) is not float))
            except (KeyError, TypeError, IndexError):
                plain = False
            if plain:
                for v in attrs.values():  # as in _exact
                    if type(v) not in exact:
                        plain = False
                        break
            yield data if plain else _checked_row(data, raw, where, lineno)
    finally:
        fh.close()


def read_events(path: str | Path) -> list[MetricEvent]:
    """All events of a file (see ``iter_events``)."""
    return list(iter_events(path))


def events_path(output_dir: str | Path) -> Path:
    """Where a run's events live inside ``output_dir``."""
    return Path(os.fspath(output_dir)) / EVENTS_FILE_NAME
