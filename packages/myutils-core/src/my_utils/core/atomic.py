"""Atomic file writes: readers see the old file or the complete new one, never half.

An error of the write itself names the file the caller asked for and what happened
("No space left on device writing out/report.json"), never the hidden temporary file beside
it, whose name means nothing to a user and which is removed anyway.

The temporary file names the process writing it (``.<name>.<pid>-<start>.<random>.tmp``,
:func:`~my_utils.core.scratch.temp_name`): a run killed with SIGKILL cannot remove its own, so
the first write of a later process into the same folder removes those whose owner is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_swept: set[str] = set()  # folders whose killed runs' temporaries this process already removed

# errors that, without a file name, can only come from writing: raised inside the caller's
# block they are taken as the write to our file failing (other errors are the caller's own)
_WRITE_ERRNOS = frozenset(e for e in (errno.ENOSPC, errno.EFBIG, errno.EROFS, getattr(errno, "EDQUOT", None))
                          if e is not None)


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    # elsewhere the only way is set-and-restore (a brief window other threads could see)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    The file gets the permissions a plain ``open()`` would give (``0o666`` less the
    umask), not the ``0o600`` of ``mkstemp``: outputs are shared with other users and tools.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _naming(exc, target, f" (creating the folder {exc.filename or target.parent})") from exc
    try:
        from my_utils.core.scratch import create_temp_file, temp_name

        _sweep_once(target.parent)
        fd, tmp = create_temp_file(target.parent, temp_name(target), ".tmp")
    except OSError as exc:
        raise _naming(exc, target) from exc
    binary = "b" in mode
    in_block = False  # an OSError raised by the caller's own code is not ours to rename
    try:
        try:
            os.chmod(tmp, 0o666 & ~_umask())
            fh = os.fdopen(fd, mode, encoding=None if binary else encoding)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        try:
            in_block = True
            try:
                yield fh
            except OSError as exc:
                if exc.filename is None and exc.errno in _WRITE_ERRNOS:  # writing our file failed
                    raise _naming(exc, target) from exc
                raise
            in_block = False
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
        except BaseException:
            # closing flushes what is buffered and fails again on a full disk: the first error is
            # the one to tell (the descriptor is closed either way)
            with contextlib.suppress(OSError):
                fh.close()
            raise
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if in_block or _names(exc, target):
            raise
        raise _naming(exc, target) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sweep_once(folder: Path) -> None:
    """Remove the temporaries of killed runs in ``folder``, once per process (a folder may take many writes)."""
    key = os.path.abspath(folder)
    if key in _swept:
        return
    from my_utils.core.scratch import sweep_temp_files

    sweep_temp_files(folder)
    _swept.add(key)


def _names(exc: OSError, target: Path) -> bool:
    """Whether ``exc`` already says it was writing ``target``."""
    return exc.filename is None and f" writing {target}" in (exc.strerror or "")


def _naming(exc: OSError, target: Path, detail: str = "") -> OSError:
    """The same kind of error, saying what happened while writing ``target`` (not its temporary file)."""
    what = f"{exc.strerror or exc} writing {target}{detail}"
    return type(exc)(what) if exc.errno is None else type(exc)(exc.errno, what)
