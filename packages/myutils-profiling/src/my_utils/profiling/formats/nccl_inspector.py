"""NcclInspectorProvider: the JSON lines NCCL's Inspector profiler plugin writes per collective.

The plugin (``NCCL_PROFILER_PLUGIN=libnccl-profiler-inspector.so``, ``NCCL_INSPECTOR_ENABLE=1``)
writes ``<host>-pid<pid>.log`` files, one JSON object per line and per completed operation:
``header`` (communicator ``id``, ``comm_name`` in newer versions, ``rank`` in it, ``n_ranks``,
``nnodes``), ``metadata`` (format version, ``dump_timestamp_us``, ``hostname``, ``pid``) and
either ``coll_perf`` (``coll``, ``coll_sn``, ``coll_msg_size_bytes``, ``coll_exec_time_us``,
``coll_timing_source``, ``coll_algobw_gbs``, ``coll_busbw_gbs``; with
``NCCL_INSPECTOR_DUMP_VERBOSE=1`` also ``event_trace_ts`` holding ``coll_start_ts``) or
``p2p_perf`` (the same with ``p2p_`` names and ``p2p_peer``). Objects printed over several
lines (as the plugin's README shows them) are read too.

Per operation: ``nccl:<coll>`` (duration, ms), ``nccl.bytes:<coll>`` (counter, B) and
``nccl.algbw:<coll>@<size>`` / ``nccl.busbw:<coll>@<size>`` (GB/s, averaged when aggregated:
kind ``ratio``), where ``<size>`` is the message size rounded up to a power of two (bandwidth
depends on it). The event's rank is the process's rank in its largest communicator (the
plugin records the rank inside each communicator, kept in ``attrs["comm_rank"]``); ``ts`` is
the collective's start when the verbose trace gives it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import rank_from_name
from my_utils.profiling.formats._text import TextLogProvider, inert, text_lines

_WHAT = "an NCCL Inspector log (JSON lines with header, metadata and coll_perf or p2p_perf)"
#: an object printed over more lines than this is not the plugin's output
_MAX_OBJECT_LINES = 200
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def size_bucket(size: int) -> str:
    """A message size rounded up to a power of two, as text: ``1000`` -> ``1KiB``, ``2**24`` -> ``16MiB``."""
    if size <= 1:
        return f"{max(size, 0)}B"
    power = (size - 1).bit_length()
    unit = min(power // 10, len(_UNITS) - 1)
    return f"{1 << (power - 10 * unit)}{_UNITS[unit]}"


@dataclass
class _Op:
    """One operation record, checked, waiting for its process's rank."""

    process: tuple[str, int]
    comm_ranks: int
    comm_rank: int
    kind: str  # "coll" or "p2p"
    op: str
    exec_us: float
    size: int
    algbw: float | None
    busbw: float | None
    ts: float | None
    attrs: dict[str, Any]


def _field(path: Path, line: int, obj: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InputError(path, f"line {line}", f"{what} field {key!r} ({_type_name(kind)}); found {_shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(path, f"line {line}", f"{what} field {key!r} (a finite number); found {value}")
    return value


def _type_name(kind: type | tuple[type, ...]) -> str:
    if kind is str:
        return "text"
    if kind is int:
        return "an integer"
    return "a number"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _record(path: Path, line: int, obj: Any) -> _Op:
    if not isinstance(obj, dict):
        raise InputError(path, f"line {line}", f"{_WHAT}; found a JSON {type(obj).__name__}")
    header, meta = obj.get("header"), obj.get("metadata")
    kind = "coll" if "coll_perf" in obj else "p2p" if "p2p_perf" in obj else None
    if not isinstance(header, dict) or kind is None:
        keys = ", ".join(sorted(map(str, obj))[:6]) or "none"
        raise InputError(path, f"line {line}", f"{_WHAT}; this object has the keys {keys}")
    perf = obj[f"{kind}_perf"]
    if not isinstance(perf, dict):
        raise InputError(path, f"line {line}", f"{kind}_perf as an object; found {_shown(perf)}")
    meta = meta if isinstance(meta, dict) else {}
    n_ranks = _field(path, line, header, "n_ranks", int, "header")
    comm_rank = _field(path, line, header, "rank", int, "header")
    op = inert(str(_field(path, line, perf, kind, str, f"{kind}_perf")), 60)
    exec_us = float(_field(path, line, perf, f"{kind}_exec_time_us", (int, float), f"{kind}_perf"))
    size = _field(path, line, perf, f"{kind}_msg_size_bytes", int, f"{kind}_perf")
    if exec_us < 0 or size < 0:
        raise InputError(path, f"line {line}", f"a time and a message size of at least 0; found {exec_us} us, "
                         f"{size} B")
    bandwidth: dict[str, float | None] = {}
    for key in ("algobw", "busbw"):
        name = f"{kind}_{key}_gbs"
        if name not in perf:
            bandwidth[key] = None
        elif perf[name] == "nan":  # json.cc writes a NaN double as the string "nan": not measured, never 0
            bandwidth[key] = math.nan
        else:
            bandwidth[key] = float(_field(path, line, perf, name, (int, float), f"{kind}_perf"))
    host, pid = meta.get("hostname"), meta.get("pid")
    process = (inert(host, 100) if isinstance(host, str) else "", pid if isinstance(pid, int) else -1)
    attrs: dict[str, Any] = {"line": line, "comm": inert(str(header.get("id", "")), 40), "comm_rank": comm_rank,
                             "n_ranks": n_ranks, "msg_size_bytes": size}
    for key, out in (("comm_name", "comm_name"), ("nnodes", "nnodes")):
        if isinstance(header.get(key), (str, int)) and not isinstance(header.get(key), bool):
            attrs[out] = inert(header[key], 100) if isinstance(header[key], str) else header[key]
    for key in (f"{kind}_sn", "p2p_peer"):
        if isinstance(perf.get(key), int) and not isinstance(perf.get(key), bool):
            attrs[key.removeprefix(f"{kind}_")] = perf[key]
    if isinstance(perf.get(f"{kind}_timing_source"), str):
        attrs["timing_source"] = inert(perf[f"{kind}_timing_source"], 40)
    if process[0]:
        attrs["host"] = process[0]
    if process[1] >= 0:
        attrs["pid"] = process[1]
    if isinstance(meta.get("dump_timestamp_us"), int):
        attrs["dump_ts"] = meta["dump_timestamp_us"] / 1e6
    trace = perf.get("event_trace_ts")
    start = trace.get(f"{kind}_start_ts") if isinstance(trace, dict) else None
    ts = start / 1e6 if isinstance(start, int) and not isinstance(start, bool) and start > 0 else None
    return _Op(process, n_ranks, comm_rank, kind, op, exec_us, size, bandwidth["algobw"], bandwidth["busbw"], ts,
               attrs)


def _objects(path: Path) -> Any:
    """``(first line, decoded object)`` per record: one per line, or spread over several lines."""
    buffer: list[str] = []
    start = 0
    for number, line in text_lines(path, _WHAT):
        if not buffer:
            if not line.strip():
                continue
            if not line.lstrip().startswith("{"):
                raise InputError(path, f"line {number}", f"{_WHAT}; found {_shown(line.strip())}")
            try:
                yield number, json.loads(line)
                continue
            except json.JSONDecodeError as exc:
                if exc.pos < len(line.rstrip()):  # broken inside the line: not an object spread over lines
                    raise InputError(path, f"line {number}", f"one JSON object per line ({exc.msg})") from None
            except RecursionError:
                raise InputError(path, f"line {number}", "a JSON object nested a few levels deep") from None
            start = number
        buffer.append(line)
        if len(buffer) > _MAX_OBJECT_LINES:
            raise InputError(path, f"line {start}", f"a JSON object closed within {_MAX_OBJECT_LINES} lines")
        try:
            obj = json.loads("\n".join(buffer))
        except RecursionError:
            raise InputError(path, f"line {start}", "a JSON object nested a few levels deep") from None
        except json.JSONDecodeError as exc:
            if exc.pos < len("\n".join(buffer).rstrip()):
                raise InputError(path, f"line {start}", f"a JSON object ({exc.msg})") from None
            continue
        buffer = []
        yield start, obj
    if buffer:
        raise InputError(path, f"line {start}", "a complete JSON object; the file ends inside it")


@dataclass(frozen=True)
class InspectorOp:
    """One operation an Inspector log recorded, with the rank of its process (``nccl.inspector`` reads these)."""

    file: str
    line: int
    rank: int | None  # the process's rank in its largest communicator
    host: str
    pid: int
    comm: str
    comm_name: str
    comm_rank: int
    n_ranks: int
    nnodes: int | None
    kind: str  # "coll" or "p2p"
    op: str
    seq: int | None
    peer: int | None
    size: int
    exec_us: float
    algbw: float | None
    busbw: float | None
    start_us: int | None  # the verbose trace's start (µs on the epoch, as the plugin writes it)


def _operations(path: Path, rank: int | None) -> list[tuple[_Op, int | None]]:
    """Every record of one log with its process's rank (the file's rank when the records name no process)."""
    ops: list[_Op] = []
    largest: dict[tuple[str, int], tuple[int, int]] = {}  # process -> (n_ranks, rank) of its largest communicator
    for line, obj in _objects(path):
        op = _record(path, line, obj)
        ops.append(op)
        if op.process not in largest or op.comm_ranks > largest[op.process][0]:
            largest[op.process] = (op.comm_ranks, op.comm_rank)
    if not ops:
        raise UnsupportedInputError(path, None, f"{_WHAT}; the file holds no record")
    default = rank if rank is not None else rank_from_name(path)
    return [(op, largest[op.process][1] if op.process[0] or op.process[1] >= 0 else default) for op in ops]


def read_operations(path: str | Path, rank: int | None = None) -> list[InspectorOp]:
    """Every operation of one Inspector log, as :class:`InspectorOp` (the same checks as the provider)."""
    p = Path(path)
    out = []
    for op, r in _operations(p, rank):
        a = op.attrs
        out.append(InspectorOp(p.name, int(a["line"]), r, op.process[0], op.process[1], str(a["comm"]),
                               str(a.get("comm_name", "")), op.comm_rank, op.comm_ranks,
                               a.get("nnodes") if isinstance(a.get("nnodes"), int) else None, op.kind, op.op,
                               a.get("sn"), a.get("peer"), op.size, op.exec_us, op.algbw, op.busbw,
                               round(op.ts * 1e6) if op.ts is not None else None))
    return out


def read_nccl_inspector(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Parse one Inspector log into metric events (every operation of every communicator in it)."""
    base = {"file": path.name}
    out: list[MetricEvent] = []
    for op, r in _operations(path, rank):
        attrs = {**base, **op.attrs}

        def event(name: str, value: float, kind: str, unit: str, op: _Op = op, r: int | None = r,
                  attrs: dict[str, Any] = attrs) -> MetricEvent:
            return MetricEvent(name=name, value=value, kind=kind, unit=unit, source="nccl_inspector", rank=r,
                               ts=op.ts, attrs=attrs)

        out.append(event(f"nccl:{op.op}", op.exec_us / 1e3, "duration", "ms"))
        out.append(event(f"nccl.bytes:{op.op}", float(op.size), "counter", "B"))
        bucket = size_bucket(op.size)
        for key, value in (("algbw", op.algbw), ("busbw", op.busbw)):
            if value is not None:
                out.append(event(f"nccl.{key}:{op.op}@{bucket}", value, "ratio", "GB/s",
                                 attrs={**attrs, "status": "not measured (nan)"} if math.isnan(value) else attrs))
    return out


def looks_like_inspector(text: str) -> bool:
    """Whether ``text`` (the head of a file) holds an Inspector record."""
    return '"coll_perf"' in text or '"p2p_perf"' in text


class NcclInspectorProvider(TextLogProvider):
    """Per-collective time, size and bandwidth from NCCL Inspector plugin logs."""

    name = "nccl_inspector"
    patterns = ("*.log", "*.jsonl", "*.json")
    what = "NCCL Inspector log"
    expected = _WHAT

    def looks_like(self, head: str) -> bool:
        """An Inspector record."""
        return looks_like_inspector(head)

    def read(self, path: Path) -> list[MetricEvent]:
        """One file's events."""
        return read_nccl_inspector(path, self.rank)
