"""``myutils stragglers PATH...``: the CSV analysis for a MyTimer run, the rank-timings one for profiler files.

Profiler files are read only through core's rank-timings seam: when no reader is installed,
one line says which distribution to install (a ``UsageError``: exit 2, nothing written).
A reader that breaks is named with its distribution; files no reader took are said by name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from my_utils.core.errors import UsageError
from my_utils.core.plugin_errors import PluginLoadError
from my_utils.core.rank_timings import READER_DISTRIBUTION, read_rank_timings
from my_utils.distributed.stragglers.analysis import analyze_stragglers
from my_utils.distributed.stragglers.inputs import classify_inputs
from my_utils.distributed.stragglers.model import StragglerReport
from my_utils.distributed.stragglers.timings import analyze_rank_timings
from my_utils.distributed.stragglers.timings_model import TimingsReport

__all__ = ["not_read_note", "stragglers_of"]

#: Files named in a "not read" note at most (the rest are counted).
NAMED_FILES = 5


def not_read_note(folder: Path, files: Sequence[Path]) -> str:
    """The note of a CSV run whose folder also holds profiler files: which were not read, and how to read them."""
    shown = ", ".join(str(p.relative_to(folder)) for p in files[:NAMED_FILES])
    more = f" and {len(files) - NAMED_FILES} more" if len(files) > NAMED_FILES else ""
    return (f"read as a MyTimer run (its profile_rank_*.csv files); {len(files)} profiler file(s) below "
            f"{folder} were not read: {shown}{more}. To compare the ranks by them, give them as the PATHs "
            "(a folder holding them but no profile CSV, or the files)")


def stragglers_of(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, persistent_fraction: float = 0.5, min_slowdown: float = 1.2,
                  min_excess_ms: float = 20.0, executor: str | None = None, max_workers: int | None = None
                  ) -> StragglerReport | TimingsReport:
    """The straggler report of ``paths`` (a folder of profile CSVs, or Kineto traces / nsys exports)."""
    if not 0 < persistent_fraction <= 1 or not min_slowdown >= 1 or not min_excess_ms >= 0:
        # the CSV path checks these itself; said here first so that bad thresholds never cost a read
        raise UsageError(f"stragglers(persistent_fraction={persistent_fraction}, min_slowdown={min_slowdown}, "
                         f"min_excess_ms={min_excess_ms}): expected 0 < persistent_fraction <= 1, min_slowdown >= 1 "
                         "and min_excess_ms >= 0")
    paths = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
    inputs = classify_inputs(paths)
    if inputs.csv_dir is not None:
        csv_report = analyze_stragglers(inputs.csv_dir, persistent_fraction=persistent_fraction,
                                        min_slowdown=min_slowdown, min_excess_ms=min_excess_ms, executor=executor,
                                        max_workers=max_workers)
        if inputs.not_read:
            csv_report.notes.append(not_read_note(inputs.csv_dir, inputs.not_read))
        return csv_report
    if executor not in (None, "serial"):
        raise UsageError(f"--executor {executor}: only MyTimer CSV runs are parsed in a pool; Kineto traces and nsys "
                         "exports are read in this process (leave --executor out)")
    read = read_rank_timings(inputs.files)
    counts = ", ".join(f"{inputs.kinds.count(k)} {k}(s)" for k in sorted(set(inputs.kinds)))
    if read.readers == 0:
        if read.disabled:
            raise UsageError(f"{counts} given, and every installed reader of them is switched off: "
                             f"{'; '.join(read.disabled)}")
        raise UsageError(f"{counts} given, and no installed distribution reads them: pip install "
                         f"{READER_DISTRIBUTION}")
    broken = "; ".join(f"reader {f.name!r} ({f.distribution or 'no distribution'}): {f.reason}"
                       for f in read.failures)
    if not read.timings:
        if broken:
            raise PluginLoadError(f"{counts} given; the rank-timings reader failed: {broken}")
        raise UsageError(f"{counts} given; the installed readers took none of them")
    report = analyze_rank_timings(read.timings, [str(p) for p in paths], persistent_fraction=persistent_fraction,
                                  min_slowdown=min_slowdown, min_excess_ms=min_excess_ms)
    taken = {Path(t.source).resolve() for t in read.timings}
    missed = [str(p) for p in inputs.files if p.resolve() not in taken]
    if missed:
        report.notes.append(f"not read (no reader took them, or they hold no rank's times): {', '.join(missed)}")
    if broken:
        report.notes.append(f"a reader failed: {broken}")
    report.notes.extend(f"switched off: {line}" for line in read.disabled)
    return report
