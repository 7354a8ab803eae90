"""Reading snapshot pickles the user named: no code runs while loading, and the shape is checked.

A snapshot is a pickle, and unpickling can run arbitrary code; ``load_snapshot`` is only
ever called on a file the user names on the command line or in Python, and even then its
unpickler refuses every global except a few plain containers (a memory snapshot holds only
dicts, lists, tuples, strings and numbers). Anything else is an ``InputError`` naming the
file, the place and what was expected.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError

__all__ = ["iter_trace", "load_snapshot", "validate_snapshot"]

_ALLOWED = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset")}


class _PlainUnpickler(pickle.Unpickler):
    """Refuses every class and function: a snapshot needs none, so none may be imported."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to load {module}.{name} (a memory snapshot holds only plain data)")


def load_snapshot(path: str | Path) -> dict[str, Any]:
    """The snapshot dict in ``path`` (a ``_dump_snapshot`` / snapshotter pickle), checked."""
    p = Path(path)
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed below; OSError reported as input
    except OSError as exc:
        raise InputError(p, None, f"cannot open the snapshot ({exc.strerror or exc})") from None
    with fh:
        head = fh.read(2)
        if head[:1] != b"\x80":
            what = "a zip archive (torch.save); save the snapshot dict with pickle" if head == b"PK" else \
                "not a pickle"
            raise InputError(p, "byte 0", f"expected a pickled memory snapshot, found {what}")
        fh.seek(0)
        try:
            data = _PlainUnpickler(fh).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
            raise InputError(p, f"byte {fh.tell()}", f"expected a pickled memory snapshot ({exc})") from None
    validate_snapshot(data, p)
    return data


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
                    or not isinstance(entry.get("size", 0), int) or not isinstance(entry.get("time_us", 0), (int, float)):
                raise InputError(where, f"device_traces[{d}][{i}]",
                                 "expected a trace entry with 'action' (str), 'size' (int) and 'time_us' (number)")


def iter_trace(snapshot: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(device, entry) for every trace entry, device by device, in recorded order."""
    for device, trace in enumerate(snapshot.get("device_traces", [])):
        for entry in trace:
            yield device, entry
