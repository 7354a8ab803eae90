"""Path arguments: every public function that takes a path accepts ``str`` and any ``os.PathLike``.

One place turns what a caller passed into :class:`~pathlib.Path` objects, so that a function
never calls ``.read_bytes()`` on a ``str`` nor iterates the characters of a single path given
where a list was expected (a lone path is a list of one).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeAlias

from my_utils.core.errors import UsageError

#: What a path parameter accepts: ``"run/trace.json"``, ``Path(...)``, any ``os.PathLike[str]``.
StrPath: TypeAlias = str | os.PathLike[str]


def as_path(value: StrPath, what: str = "path") -> Path:
    """``value`` as a Path; UsageError naming ``what`` when it is no path at all (bytes, None, a number)."""
    if isinstance(value, Path):
        return value
    try:
        text = os.fspath(value)
    except TypeError:
        raise UsageError(f"{what}: expected a str or os.PathLike path; got {type(value).__name__} {value!r:.80}")\
            from None
    if not isinstance(text, str):
        raise UsageError(f"{what}: expected a str path; got {type(text).__name__} {text!r:.80} (decode it first)")
    return Path(text)


def as_paths(value: StrPath | Iterable[StrPath], what: str = "paths") -> list[Path]:
    """One path or an iterable of them, as a list of Paths (a lone ``str`` is one path, not its characters)."""
    if isinstance(value, (str, os.PathLike)):
        return [as_path(value, what)]
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise UsageError(f"{what}: expected a path or a list of paths; got {type(value).__name__} {value!r:.80}")
    return [as_path(v, f"{what}[{i}]") for i, v in enumerate(value)]
