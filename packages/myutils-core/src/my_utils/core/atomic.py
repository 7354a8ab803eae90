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
import stat
from collections.abc import Iterator, Sequence
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


def replace_all(pairs: Sequence[tuple[str | Path, str | Path]]) -> None:
    """Rename each finished temporary over its target: all of them, or, when one rename fails, none.

    For the outputs a command writes as a set (the tables of ``--csv-dir``, a trace's parts, the
    reports): a failure half-way through the renames (a target that is a folder, a file system
    gone read-only) must not leave a mix of two runs. A target that is a folder is refused before
    any rename. Each existing target keeps a hard link (else a copy) under a temporary name until
    the end; on a failure the targets renamed so far get their old files back (or are removed when
    there was none) and the error names the target that failed. A process killed during the renames
    cannot undo them; its backups are removed by a later write to the folder.
    """
    from my_utils.core.scratch import temp_name

    moves = [(Path(tmp), Path(target)) for tmp, target in pairs]
    for _tmp, target in moves:
        try:
            info = os.stat(target)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"cannot write {target}: it is a folder")
    backups: list[Path | None] = []
    done = 0
    try:
        for _tmp, target in moves:
            backups.append(_backup(target, temp_name(target)))
        for tmp, target in moves:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot write {target}: {exc.strerror or exc}", str(target)) from None
            done += 1
    except BaseException:
        for (_tmp, target), backup in list(zip(moves, backups, strict=False))[:done][::-1]:
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, target)
                else:
                    os.unlink(target)
        raise
    finally:
        for backup in backups:
            if backup is not None:
                with contextlib.suppress(OSError):
                    os.unlink(backup)


def _backup(target: Path, prefix: str) -> Path | None:
    """A second name for ``target``'s file (a hard link, else a copy), or None when there is no such file."""
    if not os.path.lexists(target):
        return None
    backup = target.parent / f"{prefix}{os.urandom(6).hex()}.tmp"
    try:
        os.link(target, backup, follow_symlinks=False)
    except OSError:  # a file system without hard links
        import shutil

        shutil.copy2(target, backup, follow_symlinks=False)
    return backup


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
