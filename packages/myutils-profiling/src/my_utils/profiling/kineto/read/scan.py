"""The compiled scanner of Kineto trace text (``_kineto_scan``), when it was built.

``myutils-profiling`` compiles one small C module at install time when a C compiler and the
Python headers are there (``hatch_build.py``); without them the install goes on and nothing
changes but speed. The scanner reads a run of trace events straight from the JSON text into
``TraceAggregator``'s columns, with no Python object per event: on the 54 MB real trace
``read_trace`` took 0.10-0.12 s of CPU against 0.28 s for decoding typed structs and aggregating
them in Python (one machine, warm; ``bench/bench_parse.py`` measures whole commands). It
declines (returns None) any run it is not certain to read exactly as the typed decoder does
(see ``_kineto_scan.c``), and that run is decoded the typed way, so both readings always give
the same columns.

It serves ``read_trace`` when the provider's aggregation is the only pass (``myutils plugins
run``, ``ingest``); analyses that read every event's fields keep the typed structs.
``MYUTILS_TRACE_SCAN=0`` turns it off (``MYUTILS_TYPED_TRACE=0`` turns off both).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from my_utils.profiling.kineto.read.events import ENV_SWITCH as TYPED_SWITCH

#: the interface of ``_kineto_scan`` this module calls (its ``SCAN_ABI``)
ABI = 3

_compiled: Any
try:
    _compiled = importlib.import_module("my_utils.profiling.kineto.read._kineto_scan")
except ImportError:  # not built (no compiler at install): the typed decoder reads every run
    _compiled = None
if getattr(_compiled, "ABI", None) != ABI:  # not built, or built from another version's source: never called
    _compiled = None
_scan = None if _compiled is None else _compiled.scan

__all__ = ["ENV_SWITCH", "ScannedRun", "built_from", "compiled", "finish_helpers", "scan_function"]

#: Environment variable: ``0`` turns the compiled scanner off.
ENV_SWITCH = "MYUTILS_TRACE_SCAN"

#: ``scan(text, start, end, codes, code_of, names, name_list) -> tuple | None`` (see ``_kineto_scan.c``);
#: ``text`` is a str, or the file's bytes (a bytearray), read in place when ASCII.
Scan = Callable[[str | bytearray, int, int, dict[Any, int], Callable[[Any], int], dict[str, int], list[str]], Any]


class ScannedRun:
    """A run of trace events read by the scanner: its event count (``len``) and its columns.

    Passes other than the aggregator only count it (``len``), as they count a list of typed events.
    """

    __slots__ = ("columns", "count")

    def __init__(self, columns: tuple[Any, ...]) -> None:
        self.columns = columns
        self.count: int = columns[0]

    def __len__(self) -> int:
        return self.count


def compiled() -> bool:
    """True when the compiled scanner is installed (whatever the switches say)."""
    return _scan is not None


def built_from() -> str | None:
    """The sha256 of the C source the installed scanner was compiled from (``hatch_build.py`` records it).

    ``""`` for a module compiled without it (by hand, or by an older build hook); None when the
    scanner is not installed. The tests compare it with the source beside the module.
    """
    return None if _compiled is None else str(getattr(_compiled, "SOURCE_SHA256", ""))


def _switched_on() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip() != "0" and os.environ.get(TYPED_SWITCH, "1").strip() != "0"


def scan_function() -> Scan | None:
    """The compiled scan, or None: not built, ``MYUTILS_TRACE_SCAN=0`` or ``MYUTILS_TYPED_TRACE=0``."""
    return _scan if _scan is not None and _switched_on() else None


def finish_helpers() -> Any | None:
    """The compiled module for ``TraceAggregator.finish`` (``step_index``, ``launch_times``, ``group_rows``,
    ``peak_rows``), or None.

    Under the same switches as the scan: with either off, ``finish`` groups in Python, as it
    does when the module was not built; the results are the same digit for digit.
    """
    return _compiled if _compiled is not None and _switched_on() else None
