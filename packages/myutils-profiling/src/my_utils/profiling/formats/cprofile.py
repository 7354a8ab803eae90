"""CProfileStatsProvider: ``cProfile`` / ``pstats`` dump files.

Each function becomes ``python:<file>:<line>(<function>)`` with its self time (ms) as
the value and cumulative time, call counts in ``attrs``; ``python.total_time`` is the
profile's total. Files written by another Python (Python 2 marshal data) are refused
with the reason instead of a ``bad marshal data`` traceback.
"""

from __future__ import annotations

import marshal
import pstats
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import FileProviderBase, rank_from_name


def _label(func: tuple[str, int, str]) -> str:
    file, line, name = func
    return name if file == "~" and line == 0 else f"{file}:{line}({name})"


_OTHER_FORMATS = (
    (b"\x1f\x8b", "this is a gzip file (a Kineto trace .json.gz? read it with the torch_profiler provider)"),
    (b"SQLite format 3\x00", "this is an SQLite database (an nsys export? read it with the nsys_sqlite provider)"),
    (b"PK\x03\x04", "this is a zip archive (a torch.save file?), not a pstats dump"),
)


def _other_format(head: bytes) -> str:
    """A hint naming the format the first bytes show (gzip, SQLite, zip, JSON), or ''."""
    for magic, hint in _OTHER_FORMATS:
        if head.startswith(magic):
            return hint
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] in (b"{", b"[") and stripped[1:2] in (b'"', b"\n", b" ", b"\r", b"{", b"[", b"]", b"}"):
        return "this is JSON text (a trace? read .json traces with the torch_profiler provider), not a pstats dump"
    return ""


def _what_it_is(head: bytes, exc: BaseException) -> str:
    """Why marshal could not load a file, with a hint that is true for what its first bytes show."""
    if head[:1] == b"{":
        # marshal's dict code without the reference flag (0x80) Python 3 sets: an old marshal version
        return (f"marshal data written by Python 2 or an old marshal version ({exc}); this Python cannot "
                "read it: re-profile with this interpreter")
    if head and all(32 <= b < 127 or b in b"\t\r\n" for b in head):
        return "this is text, not a pstats dump (write one with cProfile.Profile().dump_stats(path))"
    return f"not marshal data of this Python ({exc}); the file is corrupted or not a pstats dump"


def read_pstats(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Load one pstats file (through ``pstats.Stats``) into metric events."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
            other = _other_format(head)
            if other:  # marshal may "load" a few bytes of another format: say what it is instead
                raise UnsupportedInputError(path, None, f"unreadable pstats: {other}")
            fh.seek(0)
            raw = marshal.load(fh)
    except InputError:
        raise
    except (ValueError, EOFError, TypeError) as exc:
        raise UnsupportedInputError(path, None, f"unreadable pstats: {_what_it_is(head, exc)}") from None
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
    if not isinstance(raw, dict):
        raise UnsupportedInputError(path, None, f"pstats data (a marshalled dict); found {type(raw).__name__}")
    try:
        stats: Any = pstats.Stats(str(path))
    except Exception as exc:  # pstats raises bare TypeError/KeyError on foreign dicts
        raise UnsupportedInputError(path, None, f"pstats data ({type(exc).__name__}: {exc})") from None
    rank = rank if rank is not None else rank_from_name(path)
    out: list[MetricEvent] = []
    base = {"file": path.name}
    for func, entry in sorted(stats.stats.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], str(kv[0][2]))):
        try:
            cc, nc, tt, ct = (entry[0], entry[1], float(entry[2]), float(entry[3]))
        except (TypeError, ValueError, IndexError):
            raise InputError(path, f"entry {func!r}", "(primitive calls, calls, tottime, cumtime, callers)") from None
        label = _label(func)
        out.append(MetricEvent(
            name=f"python:{label}", value=tt * 1e3, kind="duration", unit="ms", source="cprofile", rank=rank,
            attrs={**base, "category": "python", "op": label, "count": int(nc), "primitive_calls": int(cc),
                   "cumulative_ms": ct * 1e3},
        ))
    out.append(MetricEvent(name="python.total_time", value=float(stats.total_tt) * 1e3, kind="duration",
                           unit="ms", source="cprofile", rank=rank,
                           attrs={**base, "functions": len(stats.stats), "calls": int(stats.total_calls)}))
    return out


class CProfileStatsProvider(FileProviderBase):
    """Metrics from cProfile dumps (a file, or a folder of ``.pstats``/``.prof`` files)."""

    name = "cprofile"
    patterns = ("*.pstats", "*.prof", "*.cprofile")
    what = "cProfile dump"

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            out.extend(read_pstats(f, self.rank))
        return out
