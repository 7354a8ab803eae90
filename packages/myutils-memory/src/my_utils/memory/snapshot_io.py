"""Reading snapshot files the user named: no code runs while loading, and the shape is checked.

A snapshot comes in two forms: ``torch.save``'s zip (the snapshotter's ``.pt``) and a plain
pickle (its ``.pickle`` sibling, torch's ``_dump_snapshot`` output). Unpickling can run
arbitrary code; ``load_snapshot`` is only ever called on a file the user names on the command
line or in Python, and even then it refuses every global except a few plain containers (a
memory snapshot holds only dicts, lists, tuples, strings and numbers): the zip through
``torch.load(weights_only=True)`` (torch imported only then), the pickle through a restricted
unpickler. Anything else is an ``InputError`` naming the file, the place and what was expected.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError

__all__ = ["block_addresses", "entry_time_us", "has_times", "iter_trace", "load_snapshot", "trace_origin_us",
           "validate_snapshot"]

_ALLOWED = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset")}


class _PlainUnpickler(pickle.Unpickler):
    """Refuses every class and function: a snapshot needs none, so none may be imported."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to load {module}.{name} (a memory snapshot holds only plain data)")


def load_snapshot(path: str | Path) -> dict[str, Any]:
    """The snapshot dict in ``path`` (a snapshotter ``.pt`` or ``.pickle``, a ``_dump_snapshot`` pickle), checked."""
    p = Path(path)
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed below; OSError reported as input
    except OSError as exc:
        raise InputError(p, None, f"cannot open the snapshot ({exc.strerror or exc})") from None
    with fh:
        head = fh.read(2)
        if head == b"PK":
            data = _load_torch_zip(p)
        elif head[:1] != b"\x80":
            raise InputError(p, "byte 0", "expected a memory snapshot (a torch.save zip or a pickle), "
                                          "found neither")
        else:
            fh.seek(0)
            try:
                data = _PlainUnpickler(fh).load()
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
                raise InputError(p, f"byte {fh.tell()}", f"expected a pickled memory snapshot ({exc})") from None
    validate_snapshot(data, p)
    return data


def _load_torch_zip(path: Path) -> Any:
    """A ``torch.save`` zip, loaded with ``weights_only=True``: plain data and tensors only, never code."""
    try:
        import torch  # only for this form: reading pickles needs no torch
    except ImportError:
        raise InputError(path, "byte 0", "a torch.save zip needs torch to read; install torch or open its "
                                         ".pickle sibling") from None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch reports refused globals and broken zips with several types
        raise InputError(path, "zip", f"expected a torch.save'd memory snapshot of plain data "
                                      f"({_torch_reason(exc)})") from None


def _torch_reason(exc: Exception) -> str:
    """The telling sentence of a ``torch.load`` error (not its advice to turn ``weights_only`` off)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "unsupported" in line.lower():
            return line.rstrip(".")
    return lines[0].split(". ")[0].rstrip(".") if lines else type(exc).__name__


def validate_snapshot(data: Any, where: str | Path) -> None:
    """Raise InputError unless ``data`` has the keys and types memory snapshots have."""
    if not isinstance(data, dict):
        raise InputError(where, "top level", f"expected a dict with 'segments' and 'device_traces', "
                                             f"got {type(data).__name__}")
    segments = data.get("segments")
    if not isinstance(segments, list):
        raise InputError(where, "key 'segments'", "expected a list of allocator segments")
    traces = data.get("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise InputError(where, "key 'device_traces'", "expected a list (one per device) of lists of trace entries")
    for d, trace in enumerate(traces):
        for i, entry in enumerate(trace):
            if not isinstance(entry, dict) or not isinstance(entry.get("action"), str) \
                    or not isinstance(entry.get("size", 0), int) \
                    or not isinstance(entry.get("time_us", 0), (int, float)):
                raise InputError(where, f"device_traces[{d}][{i}]",
                                 "expected a trace entry with 'action' (str), 'size' (int) and 'time_us' (number)")


def iter_trace(snapshot: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(device, entry) for every trace entry, device by device, in recorded order."""
    for device, trace in enumerate(snapshot.get("device_traces", [])):
        for entry in trace:
            yield device, entry


def has_times(snapshot: dict[str, Any]) -> bool:
    """Whether trace entries carry ``time_us`` (CUDA snapshots do; ones made from a CPU profile do not)."""
    return all("time_us" in t[0] for t in snapshot.get("device_traces", []) if t)


def entry_time_us(entry: dict[str, Any], index: int, timed: bool) -> float:
    """An entry's time in µs; without recorded times, its position in the trace (entry n at n s)."""
    return float(entry.get("time_us", 0)) if timed else index * 1e6


def trace_origin_us(snapshot: dict[str, Any]) -> float:
    """Time 0 of summaries and cuts: the first trace entry's time (µs), or 0 without recorded times."""
    if not has_times(snapshot):
        return 0.0
    firsts = [t[0]["time_us"] for t in snapshot.get("device_traces", []) if t]
    return float(min(firsts)) if firsts else 0.0


def block_addresses(segment: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(address, block) of a segment's blocks; blocks without an address follow each other from the segment's."""
    cursor = int(segment.get("address", 0))
    for block in segment.get("blocks", []):
        addr = int(block.get("address", cursor))
        yield addr, block
        cursor = addr + int(block.get("size", 0))
