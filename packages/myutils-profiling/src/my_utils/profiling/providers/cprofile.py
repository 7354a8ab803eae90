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
from my_utils.profiling.providers._files import FileProviderBase, rank_from_name


def _label(func: tuple[str, int, str]) -> str:
    file, line, name = func
    return name if file == "~" and line == 0 else f"{file}:{line}({name})"


def read_pstats(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Load one pstats file (through ``pstats.Stats``) into metric events."""
    try:
        with open(path, "rb") as fh:
            raw = marshal.load(fh)
    except (ValueError, EOFError, TypeError) as exc:
        raise UnsupportedInputError(
            path, None,
            f"unreadable pstats: not marshal data of this Python ({exc}); files written by Python 2 "
            "or corrupted files cannot be read: re-profile with this interpreter",
        ) from None
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
