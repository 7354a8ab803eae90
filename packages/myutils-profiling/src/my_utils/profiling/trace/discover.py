"""The torch traces the metric events name (``attrs.file``), found inside the events' folder — never elsewhere.

A name read from the events is data: it is matched as a name, never as a glob pattern
(``**/x**`` is a file called ``x**``, not a search), and it never leads outside the folder the
user pointed at: an absolute path or one climbing out with ``..`` is looked up by its last
component inside that folder. A trace outside it is merged only when the user names it on the
command line (``--torch-trace``). Lookup: the relative path inside the folder, else a file of
that name anywhere below it (symlinked folders are not followed). A named trace that is not
found, or found more than once below, is reported in one warning, never dropped silently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePath

__all__ = ["find_named_traces"]

_SHOWN = 5  # names listed in a warning


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


def find_named_traces(folder: Path, names: Iterable[str]) -> tuple[list[Path], list[str]]:
    """(the traces found, warnings) for the trace file ``names`` the events in ``folder`` carry."""
    found: list[Path] = []
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
            found.append(direct)
        else:
            pending.setdefault(rel.name, []).append(name)
    if pending:
        hits = _below(folder, set(pending))
        for file_name, asked in sorted(pending.items()):
            paths = sorted(hits.get(file_name, []))
            if len(paths) == 1:
                found.append(paths[0])
            elif paths:
                ambiguous += asked
            else:
                missing += asked
    warnings = []
    if missing:
        warnings.append(f"the events name {_names(missing)} that {'is' if len(missing) == 1 else 'are'} not in "
                        f"{folder} (nor below it), so {'it is' if len(missing) == 1 else 'they are'} not merged; "
                        "pass a trace with --torch-trace to merge it")
    if ambiguous:
        warnings.append(f"the events name {_names(ambiguous)} and several files below {folder} have "
                        f"{'that name' if len(ambiguous) == 1 else 'those names'}, so none is merged; pass the "
                        "right one with --torch-trace")
    return sorted(set(found)), warnings


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n if len(n) <= 80 else "..." + n[-77:]) for n in names[:_SHOWN])
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    noun = "torch trace" if len(names) == 1 else f"{len(names)} torch traces"
    return f"{noun} {shown}{more}"
