"""What ``myutils stragglers PATH...`` was given: a folder of MyTimer CSVs, or profiler files of several ranks.

Paths are files, folders (searched recursively, hidden entries skipped, sorted) and shell globs,
as ``myutils-profile analyze`` takes them. A folder holding ``profile_rank_<rank>.csv`` files
directly is a MyTimer run (the lockstep CSV analysis). Otherwise each file's kind is told by its
head (``my_utils.core.rank_timings.timing_file_kind``): Kineto traces and nsys SQLite exports
go to the installed rank-timings readers; a named file of no such kind is refused by name.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError, UsageError
from my_utils.core.rank_timings import timing_file_kind
from my_utils.core.safe_io import path_problem

__all__ = ["StragglerInputs", "classify_inputs"]

_RANK_CSV = "profile_rank_*.csv"
# the names a Kineto trace or an nsys export has; only these are opened to tell their kind beside a CSV run
# (a run of 1,000 ranks holds 1,000 CSVs that no profiler wrote)
_PROFILER_SUFFIXES = (".json", ".json.gz", ".sqlite", ".sqlite3", ".db")
#: What a PATH argument must hold (every refusal says it).
EXPECTED = ("a folder of profile_rank_<rank>.csv files, or Kineto traces (.json, .json.gz) / nsys SQLite exports "
            "(files, folders, globs)")


@dataclass(frozen=True)
class StragglerInputs:
    """Either ``csv_dir`` (a MyTimer run) or ``files`` (profiler files, with ``kinds`` of each: path -> kind).

    ``not_read``: with ``csv_dir``, the profiler files below that folder, which the CSV analysis does
    not read (the report says so, never silently).
    """

    csv_dir: Path | None
    files: tuple[Path, ...] = ()
    kinds: tuple[str, ...] = ()
    not_read: tuple[Path, ...] = ()


def _regular(path: Path) -> bool:
    """A regular file we may stat; an entry we may not (a socket, another user's folder) is skipped."""
    try:
        return path.is_file()
    except OSError:
        return False


def _expand(spec: str) -> list[tuple[Path, bool]]:
    """(file, named directly) for one PATH argument."""
    path = Path(spec)
    if path.is_file():
        return [(path, True)]
    if path.is_dir():
        return [(p, False) for p in sorted(path.rglob("*"))
                if _regular(p) and not any(part.startswith(".") for part in p.relative_to(path).parts)]
    if glob.has_magic(spec):
        matches = sorted(Path(p) for p in glob.glob(spec, recursive=True))
        if not matches:
            raise UsageError(f"{spec}: no file matches (expected {EXPECTED})")
        return [(p, True) for p in matches if p.is_file()]
    raise InputError(path, None, f"{EXPECTED} ({path_problem(path)})")


def classify_inputs(specs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> StragglerInputs:
    """The run the arguments name (module docstring); ``InputError`` / ``UsageError`` naming what is wrong."""
    # one path is one path (a str is also a sequence: of characters, the first of them "/")
    specs = [os.fspath(specs)] if isinstance(specs, (str, os.PathLike)) else [os.fspath(s) for s in specs]
    if not specs:
        raise UsageError(f"stragglers: no PATH given (expected {EXPECTED})")
    if len(specs) == 1 and Path(specs[0]).is_dir() and any(Path(specs[0]).glob(_RANK_CSV)):
        folder = Path(specs[0])
        return StragglerInputs(folder, not_read=tuple(p for p, _ in _expand(str(folder))
                                                      if p.name.endswith(_PROFILER_SUFFIXES) and timing_file_kind(p)))
    files: list[Path] = []
    kinds: list[str] = []
    seen: set[Path] = set()
    for spec in specs:
        for path, named in _expand(str(spec)):
            key = path.resolve()
            if key in seen:
                continue
            seen.add(key)
            kind = timing_file_kind(path)
            if kind is not None:
                files.append(path)
                kinds.append(kind)
            elif named and path.name.startswith("profile_rank_") and path.suffix == ".csv":
                raise UsageError(f"{path}: profile CSVs are read as a run: give their folder ({path.parent})")
            elif named:
                raise InputError(path, None, f"{EXPECTED}; this file is none of them")
    if not files:
        where = ", ".join(map(str, specs))
        raise InputError(where, None, f"{EXPECTED}; found none")
    return StragglerInputs(None, tuple(files), tuple(kinds))
