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

import contextlib
import io
import os
import pickle
import sys
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from my_utils.core.errors import InputError
from my_utils.core.safe_io import open_regular
from my_utils.memory.pickle_place import locate_failure
from my_utils.memory.snapshot_schema import item_budget, validate_snapshot

__all__ = ["block_addresses", "entry_time_us", "has_times", "iter_trace", "load_snapshot", "trace_origin_us",
           "validate_snapshot"]

_ALLOWED: dict[tuple[str, str], type] = {("collections", "OrderedDict"): OrderedDict, ("builtins", "set"): set,
                                         ("builtins", "frozenset"): frozenset}


def _refuse_code(module: str, name: str) -> Any:
    """The one ``find_class``: plain containers only (a snapshot needs no class or function)."""
    allowed = _ALLOWED.get((module, name))
    if allowed is None:
        raise pickle.UnpicklingError(f"refused to load {module}.{name} (a memory snapshot holds only plain data)")
    return allowed


class _PlainUnpickler(pickle.Unpickler):
    """Refuses every class and function: a snapshot needs none, so none may be imported."""

    def find_class(self, module: str, name: str) -> Any:
        return _refuse_code(module, name)


def load_snapshot(path: str | Path) -> dict[str, Any]:
    """The snapshot dict in ``path`` (a snapshotter ``.pt`` or ``.pickle``, a ``_dump_snapshot`` pickle), checked.

    Only regular files are opened (a FIFO would block). The structure is checked by
    ``validate_snapshot`` with a budget of the file's size, so shared references cannot make
    a small file expand into more entries than it could hold.
    """
    p = Path(path)
    try:
        fh = open_regular(p, "rb")
    except OSError as exc:
        raise InputError(p, None, f"cannot open the snapshot ({exc.strerror or exc})") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(2)
        fh.seek(0)
        if head == b"PK":
            data = _load_torch_zip(p, fh)
        elif head[:1] != b"\x80":
            raise InputError(p, "byte 0", "expected a memory snapshot (a torch.save zip or a pickle), "
                                          "found neither")
        else:
            data = _load_pickle(p, fh)
    validate_snapshot(data, p, budget=item_budget(size))
    return data


@contextlib.contextmanager
def _without_bytearray_noise() -> Iterator[None]:
    """Drop the line CPython prints when a pickle's BYTEARRAY8 declares more memory than exists.

    The C unpickler allocates the declared size first; when that fails, CPython (3.11, 3.12)
    frees the half-made bytearray, finds garbage in its export count and prints
    ``SystemError: deallocated bytearray object has exported buffers`` to ``sys.stderr``
    before the ``MemoryError`` we report. A bad file gets one line, so that one is dropped;
    anything else written meanwhile (another thread's) is passed on afterwards.
    """
    real, buffer = sys.stderr, io.StringIO()
    sys.stderr = buffer
    try:
        yield
    finally:
        sys.stderr = real
        rest = [line for line in buffer.getvalue().splitlines(keepends=True)
                if "deallocated bytearray object has exported buffers" not in line]
        if rest:
            real.write("".join(rest))


def _load_pickle(path: Path, fh: IO[bytes]) -> Any:
    """The plain pickle in ``fh`` (C unpickler); on failure, the byte where it breaks (``pickle_place``)."""
    try:
        with _without_bytearray_noise():
            return _PlainUnpickler(fh).load()
    except Exception as exc:  # no code runs while loading: every failure is the file's
        stopped = fh.tell()
        fh.seek(0)
        place, reason = locate_failure(fh.read(), _refuse_code, stopped)
        if reason is None:
            reason = f"{type(exc).__name__}: {exc}" if isinstance(exc, MemoryError) or not str(exc) else str(exc)
        raise InputError(path, place, f"expected a pickled memory snapshot ({reason})") from None


def _load_torch_zip(path: Path, fh: IO[bytes]) -> Any:
    """A ``torch.save`` zip, loaded with ``weights_only=True``: plain data and tensors only, never code."""
    try:
        import torch  # only for this form: reading pickles needs no torch
    except ImportError:
        raise InputError(path, "byte 0", "a torch.save zip needs torch to read; install torch or open its "
                                         ".pickle sibling") from None
    try:
        return torch.load(fh, map_location="cpu", weights_only=True)
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
