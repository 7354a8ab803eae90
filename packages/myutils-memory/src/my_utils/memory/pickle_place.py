"""Where a pickle breaks: the byte offset of the opcode that fails, and why, for a one-line error.

The fast C unpickler reads protocol-4 pickles a frame (up to 64 KiB) at a time and reports
no offset, so after it fails the same bytes are read again, slowly, only to find the place:

1. a scan of the opcodes (``pickletools``' table of opcodes and argument readers) finds an
   unknown opcode, an argument that runs past the end, or a length that declares more bytes
   than the file holds (a 14-byte file can declare a 1 TiB string; the C unpickler allocates
   it before reading and fails with ``MemoryError``);
2. when every opcode is well formed, the pure-Python unpickler replays them, counting, and
   the failing opcode's offset comes from the scan (a refused class, a stack or memo error).

Both passes run only on a failure, and only on files up to ``EXACT_LIMIT`` bytes; a larger
file is placed at the frame where the C unpickler stopped.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from array import array
from collections.abc import Callable
from typing import Any

__all__ = ["EXACT_LIMIT", "locate_failure"]

EXACT_LIMIT = 256 << 20  # the slow passes take about a second per 10 MB


def _scan(data: bytes) -> tuple[array[int], tuple[int, str] | None]:
    """Offsets of the opcodes up to STOP, and the first malformed one (offset, reason), if any.

    A frame that declares more bytes than remain is noted and the scan goes on: when the data
    then ends before STOP, the file is truncated (placed at its end); when STOP comes first,
    the frame's length itself is corrupt (placed at the frame).
    """
    positions: array[int] = array("q")
    f = io.BytesIO(data)
    code2op = pickletools.code2op  # type: ignore[attr-defined]  # public table, not in the stubs
    short_frame: tuple[int, int] | None = None
    while True:
        pos = f.tell()
        code = f.read(1)
        if not code:
            frame = f" (the frame at byte {short_frame[0]} declares {short_frame[1]} bytes)" if short_frame else ""
            return positions, (pos, f"the data ends before the pickle does: the file is truncated{frame}")
        op = code2op.get(code.decode("latin-1"))
        if op is None:
            return positions, (pos, f"unknown opcode {code!r}")
        positions.append(pos)
        if op.arg is not None:
            try:
                arg = op.arg.reader(f)
            except ValueError as exc:  # pickletools' readers say what was expected and how much remains
                return positions, (pos, f"opcode {op.name}: {exc}")
            if op.name == "FRAME" and arg > len(data) - f.tell() and short_frame is None:
                short_frame = (pos, arg)  # the C unpickler would allocate it all before reading
        if op.name == "STOP":
            if short_frame is not None:
                return positions, (short_frame[0], f"opcode FRAME declares {short_frame[1]} bytes, more than the "
                                                   "file holds")
            return positions, None


class _Dispatch(dict[int, Callable[[Any], None]]):
    def __missing__(self, key: int) -> Callable[[Any], None]:
        raise pickle.UnpicklingError(f"unknown opcode {bytes([key])!r}")


class _CountingUnpickler(pickle._Unpickler):  # the pure-Python one
    """The pure-Python unpickler, counting opcodes; ``find_class`` is the caller's refusal."""

    def __init__(self, file: io.BytesIO, find_class: Callable[[str, str], Any]) -> None:
        super().__init__(file)
        self.ops = 0
        self._refuse = find_class
        counted = _Dispatch({key: self._counted(fn) for key, fn in pickle._Unpickler.dispatch.items()})
        self.dispatch = counted  # type: ignore[misc]  # load() reads self.dispatch: this instance's wins

    @staticmethod
    def _counted(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        def call(unpickler: Any) -> None:
            unpickler.ops += 1
            fn(unpickler)

        return call

    def find_class(self, module: str, name: str) -> Any:
        return self._refuse(module, name)


def locate_failure(data: bytes, find_class: Callable[[str, str], Any], fallback: int) -> tuple[str, str | None]:
    """(``"byte N"``, reason or None) for the first opcode of ``data`` that cannot be unpickled.

    ``find_class`` is the refusing hook the real load used; ``fallback`` is where the fast
    unpickler stopped, used for files over ``EXACT_LIMIT`` and when no pass fails (then the
    reason is None: the caller keeps the fast unpickler's).
    """
    if len(data) > EXACT_LIMIT:
        return f"byte {fallback} or the 64 KiB before it", None
    positions, bad = _scan(data)
    if bad is not None:
        return f"byte {bad[0]}", bad[1]
    unpickler = _CountingUnpickler(io.BytesIO(data), find_class)
    try:
        unpickler.load()
    except Exception as exc:  # any failure of the replay is the place we are looking for
        index = max(unpickler.ops - 1, 0)
        at = positions[index] if index < len(positions) else fallback
        return f"byte {at}", f"{exc}" or type(exc).__name__
    return f"byte {fallback}", None
