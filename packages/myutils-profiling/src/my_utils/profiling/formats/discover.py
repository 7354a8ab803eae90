"""``PATH...`` arguments → the files they name: files, folders (searched below), globs and nsys templates.

A folder is searched recursively the way every provider searches one (hidden entries skipped,
sorted, regular files only). A glob (``*``, ``?``, ``[``) or an nsys output template
(``report_%q{RANK}.sqlite``: each ``%q{VAR}``, ``%h``, ``%p``, ``%n`` matches any text) names
the files it matches. A missing path, or a pattern that matches nothing, is bad input. Each
file is kept once (by its resolved path), in the order given; ``named`` says whether the user
named the file itself, which decides whether a file of a kind ``analyze`` cannot read is an
error (named) or a note (found in a folder).
"""

from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError, UsageError

__all__ = ["Found", "discover", "is_pattern"]

_TEMPLATE = re.compile(r"%q\{[A-Za-z_][A-Za-z0-9_]*\}|%[hpn]")


@dataclass(frozen=True)
class Found:
    """One file a ``PATH`` argument names: the file, the argument, and whether the user named the file itself."""

    path: Path
    spec: str
    named: bool


def is_pattern(spec: str) -> bool:
    """Whether ``spec`` is a glob or an nsys output template rather than a path."""
    return bool(_TEMPLATE.search(spec)) or any(c in spec for c in "*?[")


def discover(specs: Sequence[str | os.PathLike[str]], exclude: Iterable[Path] = ()) -> list[Found]:
    """The files ``specs`` name (module docstring); ``exclude`` lists files to leave out (a command's own outputs)."""
    from my_utils.profiling.formats._files import missing_reason

    skip = {p.resolve() for p in exclude}
    seen: set[Path] = set()
    out: list[Found] = []

    def keep(path: Path, spec: str, named: bool) -> None:
        key = path.resolve()
        if key not in seen and key not in skip:
            seen.add(key)
            out.append(Found(path, spec, named))

    for raw in specs:
        spec = os.fspath(raw)
        path = Path(spec)
        if path.is_file():
            keep(path, spec, True)
        elif path.is_dir():
            for f in _below(path):
                keep(f, spec, False)
        elif is_pattern(spec):
            matches = sorted(Path(p) for p in glob.glob(_TEMPLATE.sub("*", spec), recursive=True))
            files = [f for m in matches for f in ([m] if _regular(m) else _below(m) if m.is_dir() else [])]
            if not files:
                raise UsageError(f"{spec}: no file matches (give files, folders, globs or an nsys template such as "
                                 "report_%q{RANK}.sqlite)")
            for f in files:
                keep(f, spec, False)
        else:
            raise InputError(path, None, missing_reason(path))
    return out


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _below(folder: Path) -> list[Path]:
    """Regular files below ``folder``, hidden entries skipped, symlinked folders not followed, sorted."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root) / n for n in files if not n.startswith(".") and _regular(Path(root) / n)]
    return sorted(found)
