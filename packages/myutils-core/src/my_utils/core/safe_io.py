"""Small guards every command uses where data enters or leaves: the README's promises in code.

- ``open_regular``: read only regular files (a FIFO or a device named like an input would
  block a command forever, or read without end); ``path_problem`` says what a path that is
  neither a file nor a folder really is (a link that loops, a FIFO...).
- ``refuse_overwriting_inputs``: an output never replaces an input (also through a link,
  a hard link, or a sibling file the writer derives from the output's name).
- ``csv_text_cell`` / ``csv_text_value``: a text cell a spreadsheet would run as a formula
  is written with a leading apostrophe, and read back exactly (from :mod:`.csv_safe`, the one
  CSV writer).
- ``utf8_text``: a name that cannot be written as UTF-8 (a lone surrogate from
  ``os.fsdecode`` of a non-UTF-8 byte) keeps its information as a ``\\xNN`` escape.
- ``strict_json``: JSON without bare ``NaN``/``Infinity`` (other tools refuse them).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from my_utils.core.errors import InputError, UsageError

# -- reading ----------------------------------------------------------------------------


def open_regular(path: str | Path, mode: str = "rb", *, encoding: str | None = None,
                 errors: str | None = None, newline: str | None = None) -> IO[Any]:
    """Open ``path`` for reading, refusing anything that is not a regular file.

    The file is opened non-blocking first (opening a FIFO for reading blocks until a writer
    appears), checked with ``fstat`` on the descriptor (no race with a rename between check
    and open), then switched back to blocking reads. A missing file raises
    ``FileNotFoundError`` as ``open`` would; a FIFO, socket, device or folder raises
    ``InputError`` naming it.
    """
    if any(flag in mode for flag in "wax+"):
        raise UsageError(f"open_regular({str(path)!r}, {mode!r}) opens for reading only; use atomic_write to write")
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(path, None, f"a regular file (this is {_kind(info.st_mode)})")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        if "b" in mode:
            return os.fdopen(fd, mode)
        return os.fdopen(fd, mode, encoding=encoding or "utf-8", errors=errors, newline=newline)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def check_regular(path: str | Path) -> None:
    """Raise ``InputError`` when ``path`` exists and is not a regular file (without opening it)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise InputError(path, None, f"a regular file (this is {_kind(info.st_mode)})")


def path_problem(path: str | Path) -> str:
    """Why ``path`` is no input to read, said as what it is: absent, a symbolic link that loops or leads
    nowhere, a FIFO, socket or device, unreadable... (for a path that is neither a regular file nor a folder).

    ``Path.exists()`` is False for a loop and for a dangling link alike, and a FIFO is no "missing
    file": the one line a user gets names what the path really is.
    """
    import errno

    name = os.fspath(path)
    try:
        info = os.lstat(name)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "no such file or folder"
        if exc.errno == errno.ENOTDIR:
            return "no such file or folder (a part of the path above it is a file, not a folder)"
        return f"a path that cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(name)
        except OSError:
            target = "?"
        try:
            info = os.stat(name)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return f"a symbolic link in a loop (it points to {target!r}, which leads back to it); give a file or a folder"
            if exc.errno == errno.ENOENT:
                return f"a symbolic link to {target!r}, which does not exist"
            return f"a symbolic link to {target!r}, which cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return "a file or folder that cannot be read"
    return f"not a regular file or folder: {_kind(info.st_mode)} (a pipe, socket or device is not read); give a " \
           "file or a folder"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


# -- writing ----------------------------------------------------------------------------


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting_inputs(outputs: Iterable[str | Path], inputs: Iterable[str | Path], *,
                              what: str = "output") -> None:
    """Raise ``UsageError`` when any of ``outputs`` is (or would replace) one of ``inputs``.

    Compared by resolved path and, where both exist, by device and inode (a hard link or a
    symlink to an input is the input). Call it before any work, with every file the command
    will write (also the siblings it derives, e.g. ``x.pickle`` beside ``x.pt``).
    """
    ins = [Path(p) for p in inputs]
    resolved = {p.resolve(): p for p in ins}
    for out in (Path(p) for p in outputs):
        clash = resolved.get(out.resolve())
        if clash is None:
            clash = next((p for p in ins if _same_file(out, p)), None)
        if clash is not None:
            raise UsageError(f"{what} {out} is the input {clash}: writing it would replace the input; "
                             f"choose another {what} path")


# -- CSV --------------------------------------------------------------------------------
# one home for the formula guard, with the one CSV writer (csv_safe); kept importable from here

from my_utils.core.csv_safe import csv_text_cell as csv_text_cell  # noqa: E402
from my_utils.core.csv_safe import csv_text_value as csv_text_value  # noqa: E402

# -- text -------------------------------------------------------------------------------


def utf8_text(text: str) -> str:
    """``text`` unchanged when it encodes as UTF-8, else with each lone surrogate as ``\\xNN``/``\\udNNN``.

    ``os.fsdecode(b"layer_\\xe9")`` gives ``"layer_\\udce9"``: written as is, the file is
    invalid UTF-8 and every reader refuses all of it. The escape keeps the byte readable.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:  # the surrogates os.fsdecode makes: back to their bytes, shown as \xNN
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # other lone surrogates: \udNNN
            raw = text.encode("utf-8", "backslashreplace")
        return raw.decode("utf-8", "backslashreplace")
    return text


# -- JSON -------------------------------------------------------------------------------


def finite(obj: Any) -> Any:
    """``obj`` with every NaN/Infinity float replaced by ``None``, recursively (tuples become lists)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes bare ``NaN``/``Infinity`` (they become ``null``)."""
    kwargs.setdefault("ensure_ascii", False)
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, **kwargs)
