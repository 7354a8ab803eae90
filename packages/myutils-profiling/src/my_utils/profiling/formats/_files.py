"""What every file-reading provider shares: input discovery, ranks from names, one-shot reads.

A file provider is built for a file or a folder (``from_input``). ``collect()`` returns the
events of every matching file not read before, so a folder that a running job keeps
filling (``tensorboard_trace_handler`` writes one file per cycle) yields each file once:
events are never repeated, and new files are never missed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePath
from typing import Any, ClassVar

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError, UsageError
from my_utils.core.events import MetricEvent
from my_utils.core.plugin_types import PluginDescription, PluginKind
from my_utils.core.providers import check_options


# what reading a damaged file raises from the standard library (OSError: unreadable file)
def damaged_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a reader's damaged input raises; csv's and sqlite3's only once a reader imported them.

    Importing csv and sqlite3 here for this tuple cost every Kineto analysis process
    ~3 MB of resident memory for modules it never uses.
    """
    loaded = tuple(getattr(sys.modules[m], n) for m, n in (("csv", "Error"), ("sqlite3", "DatabaseError"))
                   if m in sys.modules)
    return (UnicodeError, json.JSONDecodeError, EOFError, zlib.error, OSError, *loaded)

# "rank-34", "rank_1", "rank0", "RANK=3", "worker0" (tensorboard_trace_handler worker names)
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_=]?(\d+)(?![0-9])", re.IGNORECASE)


def rank_from_name(path: str | Path) -> int | None:
    """The rank written in a file name (``rank-34``, ``rank_1``, ``worker0``), or None.

    Only the file name is read, never the folders above it; when the name holds several
    candidates the last one wins (``job_rank3_worker0`` is ambiguous and gives 0).
    """
    matches = _RANK_IN_NAME.findall(Path(path).name)
    return int(matches[-1]) if matches else None


def find_inputs(path: Path, patterns: Sequence[str], what: str,
                accept: Callable[[Path], bool] | None = None) -> list[Path]:
    """The files to read for ``path``: the file itself, or the matching files in a folder.

    Every provider searches a folder the same way: recursively (runs keep ranks or cycles
    in subfolders), skipping hidden folders and files (``.git``, editor and temp files),
    sorted by path so output is stable. ``accept`` drops matches that are not this
    provider's input (checked by content, e.g. a ``.txt`` beside ncu exports).
    """
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted({
            p for pat in patterns for p in path.rglob(pat)
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        })
        if accept is not None:
            found = [p for p in found if accept(p)]
        if not found:
            raise UnsupportedInputError(path, None, f"folder holds no {what} (looked for {', '.join(patterns)}, "
                                        "subfolders included)")
        return found
    raise InputError(path, None, missing_reason(path))


def missing_reason(path: Path) -> str:
    """Why ``path`` is no input, naming what it is (``safe_io.path_problem``): absent, a link that loops or
    leads nowhere, a FIFO, socket or device. A pipe is never read: a provider would block on it or read it
    once and lose it."""
    from my_utils.core.safe_io import path_problem

    return path_problem(path)


def check_distinct_ranks(ranks: dict[Path, int | None], what: str) -> None:
    """Refuse to merge several files that claim the same rank (or carry none).

    Silently folding rank files into one rank would hide stragglers; the fix is to name
    the files by rank or to read them one at a time.
    """
    if len(ranks) < 2:
        return
    by_rank: dict[int | None, list[Path]] = {}
    for path, rank in ranks.items():
        by_rank.setdefault(rank, []).append(path)
    for rank, paths in by_rank.items():
        if len(paths) > 1:
            names = ", ".join(p.name for p in paths[:4]) + (" ..." if len(paths) > 4 else "")
            label = "no rank (no distributedInfo and no rank in the file name)" if rank is None else f"rank {rank}"
            raise InputError(
                paths[0].parent, None,
                f"{len(paths)} {what} files resolve to {label}: {names}; name each file by its rank "
                "(e.g. rank_3.json) or read them one at a time",
            )


class FileProviderBase:
    """Base of the file-reading providers: remembers which files it already returned.

    Subclasses set ``name``, ``patterns`` and ``what`` and implement ``_read_files``
    (all new files at once, so rank checks and parallel parsing see the whole batch).
    """

    name: ClassVar[str] = ""
    patterns: ClassVar[tuple[str, ...]] = ()
    what: ClassVar[str] = "input"

    def __init__(self, path: str | Path, *, rank: int | None = None, **options: Any) -> None:
        self.path = Path(path)
        self.rank = checked(type(self), {"rank": rank, **options})["rank"]
        self.options = options
        self._done: set[tuple[Path, int, int]] = set()
        if not (self.path.is_file() or self.path.is_dir()):
            raise InputError(self.path, None, missing_reason(self.path))
        self.validate()

    @classmethod
    def from_input(cls, path: Path, **options: Any) -> FileProviderBase:
        """Build the provider for a file or folder; unsupported or malformed input raises."""
        return cls(path, **options)

    def validate(self) -> None:
        """Check cheaply (header, magic bytes) that the input is this provider's kind."""
        for file in self.files():
            self.sniff(file)

    def files(self) -> list[Path]:
        """The input file, or the files of the input folder this provider reads (see ``find_inputs``)."""
        return find_inputs(self.path, self.patterns, self.what, self.in_folder if self.path.is_dir() else None)

    def in_folder(self, file: Path) -> bool:
        """Whether a folder file matching ``patterns`` is this provider's input (default: all are)."""
        return True

    def sniff(self, file: Path) -> None:
        """Raise UnsupportedInputError when ``file`` is clearly not this provider's input."""

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        """Events of the files not returned before (each file is read once)."""
        files = self.files()
        fresh: list[Path] = []
        for file in files:
            st = file.stat()
            key = (file.resolve(), st.st_size, st.st_mtime_ns)
            if key not in self._done:
                fresh.append(file)
        if not fresh:
            return []
        try:
            events = self._read_files(fresh)
        except MyUtilsError:
            raise
        except damaged_errors() as exc:
            # a reader that let a decoding error through: still bad input, said on one line
            where = fresh[0] if len(fresh) == 1 else self.path
            raise InputError(where, None, f"a readable {self.what} ({type(exc).__name__}: {exc})") from None
        for file in fresh:
            st = file.stat()
            self._done.add((file.resolve(), st.st_size, st.st_mtime_ns))
        return events

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        raise NotImplementedError


def checked(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of a provider class checked against its declared ones (one place: core ``check_options``).

    The same check runs for ``--option``, config files and Python keyword arguments, so a
    misspelled key or a wrong type is one line naming the provider, the key and the known keys.
    """
    name = getattr(cls, "name", "")
    # the table lives in the plugin module: plugin discovery must import nothing but that module (a test
    # checks), and a reader needs pluggy only when it checks options (an explicit ignore in the contract)
    from my_utils.profiling.plugin import PROVIDER_OPTIONS

    desc = PluginDescription(name=name, kind=PluginKind.METRICS_PROVIDER, factory="", summary="",
                             options=PROVIDER_OPTIONS.get(name, ()))
    return check_options(desc, options, f"{cls.__name__}()", place="")


def read_head(path: Path, size: int = 4096) -> bytes:
    """The first bytes of a file (gzip-decompressed when it is gzip); OSError becomes InputError."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(size)
        if head[:2] == b"\x1f\x8b":
            import gzip  # here: a plain file never needs it

            try:
                with gzip.open(path, "rb") as gz:
                    return gz.read(size)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(path, "gzip stream", f"a readable gzip file ({exc})") from None
        return head
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None


def map_events(func: Callable[[Path], list[MetricEvent]], files: Iterable[Path]) -> list[MetricEvent]:
    """Apply a per-file reader serially and concatenate the events."""
    out: list[MetricEvent] = []
    for file in files:
        out.extend(func(file))
    return out


def require_live(obj: object, attr: str, who: str, fix: str) -> None:
    """Misuse guard for live providers: the object must offer ``attr``."""
    if not hasattr(obj, attr):
        raise UsageError(f"{who}: {type(obj).__name__} has no {attr}(); {fix}")


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # missing, unreadable, or a name the OS cannot hold (NUL)
        return False


def _inside(name: str) -> PurePath | None:
    """``name`` as a path relative to the folder, or None when it is not a usable file name."""
    if not name or "\x00" in name:
        return None
    path = PurePath(name)
    if path.is_absolute() or ".." in path.parts:
        path = PurePath(path.name)  # never followed out of the folder: only its name is used
    if not path.name or path.name in (".", ".."):
        return None
    return path


def _below(folder: Path, wanted: set[str]) -> dict[str, list[Path]]:
    """Regular files below ``folder`` whose name is in ``wanted`` (symlinked folders not followed)."""
    hits: dict[str, list[Path]] = {}
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            if name in wanted and _is_regular(Path(root) / name):
                hits.setdefault(name, []).append(Path(root) / name)
    return hits

def locate_named(folder: Path, names: Iterable[str]) -> tuple[dict[str, Path], list[str], list[str]]:
    """Files that data names (``attrs.file`` of events), found inside ``folder`` only: (found, missing, ambiguous).

    A name read from data is a name, never a glob pattern (``**/x**`` is a file called ``x**``),
    and never leads outside ``folder``: an absolute path, or one climbing out with ``..``, is
    looked up by its last component. Lookup: the relative path inside the folder, else the one
    regular file of that name anywhere below it (symlinked folders are not followed); several
    files of that name make the name ambiguous. ``found`` maps each name to its file.
    """
    found: dict[str, Path] = {}
    missing: list[str] = []
    ambiguous: list[str] = []
    pending: dict[str, list[str]] = {}  # file name -> the names from the data that need a search
    for name in sorted(set(names)):
        rel = _inside(name)
        if rel is None:
            missing.append(name)
            continue
        direct = folder / rel
        if _is_regular(direct):
            found[name] = direct
        else:
            pending.setdefault(rel.name, []).append(name)
    if pending:
        hits = _below(folder, set(pending))
        for file_name, asked in sorted(pending.items()):
            paths = sorted(hits.get(file_name, []))
            if len(paths) == 1:
                found.update((n, paths[0]) for n in asked)
            elif paths:
                ambiguous += asked
            else:
                missing += asked
    return found, missing, ambiguous
