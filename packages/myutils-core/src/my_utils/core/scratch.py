"""Temporary files and folders that name the process owning them, so the next run can clean up after a killed one.

A command killed with SIGKILL runs no ``finally``: its scratch folder (spill files of
``trace``, a local Dask cluster's worker space) and the half-written temporary outputs stay
behind. Each one made here carries its owner in its name, ``<pid>-<start>`` (``start``:
the process's start time in clock ticks on Linux, so a recycled pid is not mistaken for
the owner; ``0`` where the OS does not say). :func:`sweep_scratch` and :func:`sweep_temp_files`
remove only what is ours (same user, our naming) *and* whose owner is gone; a folder of a
run still going is never touched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["ANY_SCRATCH", "create_temp_file", "make_scratch", "owner_alive", "owner_token", "sweep_scratch",
           "sweep_temp_files", "temp_name"]

_TOKEN = r"(?P<pid>\d+)-(?P<start>\d+)"


def _start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` (Linux clock ticks since boot); 0 when unknown here, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except (OSError, IndexError):
        return 0
    if fields and fields[0] in ("Z", "X"):  # a zombie: killed, not reaped yet
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return 0


_own: dict[int, str] = {}  # this process's token, by pid (a forked child has its own)


def owner_token(pid: int | None = None) -> str:
    """``<pid>-<start ticks>`` of this process (or ``pid``): what names its scratch."""
    if pid is None:  # asked at every atomic write: /proc is read once per process
        pid = os.getpid()
        if pid not in _own:
            _own[pid] = f"{pid}-{_start_ticks(pid) or 0}"
        return _own[pid]
    return f"{pid}-{_start_ticks(pid) or 0}"


def owner_alive(token: str) -> bool:
    """True while the process named by ``token`` runs (an unreadable token counts as alive: left alone)."""
    match = re.fullmatch(_TOKEN, token)
    if match is None:
        return True
    pid, start = int(match.group(1)), int(match.group(2))
    if pid == os.getpid():
        return True
    if os.path.isdir("/proc/self"):
        now = _start_ticks(pid)
        return now is not None and (start == 0 or now in (0, start))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


#: every scratch folder made here is ``myutils-<role>-<owner>-<random>``: any run removes those of killed runs
ANY_SCRATCH = "myutils-[a-z]+-"
_SCRATCH = re.compile(ANY_SCRATCH + _TOKEN + r"-[^/]+")
_TEMP_FILE = re.compile(r"\.(.+)\." + _TOKEN + r"\.[^.]+\.tmp")


def make_scratch(prefix: str) -> Path:
    """A fresh folder ``$TMPDIR/<prefix><owner>-<random>`` (the owner lets the next run remove it if we die).

    ``prefix`` is ``myutils-<role>-``. The folders of killed runs (any role) are removed first.
    """
    if re.fullmatch(ANY_SCRATCH, prefix) is None:
        raise ValueError(f"scratch prefix {prefix!r}: expected 'myutils-<lowercase role>-'")
    import tempfile  # here, as in sweep_scratch: an atomic write (every command's) needs neither it nor shutil

    sweep_scratch()
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner_token()}-"))


def _ours(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def _orphans(folder: str | Path, pattern: re.Pattern[str],
             wanted: Callable[[os.DirEntry[str], re.Match[str]], bool]) -> Iterator[os.DirEntry[str]]:
    """The entries of ``folder`` named by ``pattern`` (with the owner's ``pid`` and ``start``), ``wanted``, ours,
    and whose owner is gone."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not wanted(entry, match) or not _ours(Path(entry.path)):
            continue
        if not owner_alive(f"{match['pid']}-{match['start']}"):
            yield entry


def sweep_scratch(folder: str | Path | None = None) -> list[Path]:
    """Remove the scratch folders in ``folder`` ($TMPDIR) whose owner process is gone; returns them."""
    import shutil
    import tempfile

    root = folder if folder is not None else tempfile.gettempdir()
    removed: list[Path] = []
    for entry in _orphans(root, _SCRATCH, lambda entry, _match: entry.is_dir(follow_symlinks=False)):
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def temp_name(final: Path) -> str:
    """The prefix of a temporary file that becomes ``final``: ``.<name>.<owner>.``."""
    return f".{final.name}.{owner_token()}."


#: mkstemp's flags: a new file only (never one an attacker placed or linked), closed in children
_CREATE_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_BINARY", 0))


def create_temp_file(folder: str | Path, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file ``<folder>/<prefix><random><suffix>``, mode 0o600: its descriptor and absolute path.

    ``tempfile.mkstemp``'s contract without importing ``tempfile`` (its ``shutil``, ``bz2``, ``lzma``
    and ``random`` were ~3 ms of every command's start, for one file name). The random part is 12
    hexadecimal digits from ``os.urandom``; a name that exists is drawn again, 100 times at most.
    """
    folder = os.path.abspath(folder)
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, _CREATE_FLAGS, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no unused temporary file name in {folder} after 100 tries")


def sweep_temp_files(folder: Path, names: re.Pattern[str] | None = None) -> list[Path]:
    """Remove ``.<name>.<owner>.<random>.tmp`` files in ``folder`` whose ``<name>`` matches ``names`` (any
    name without it) and whose owner is gone (temporary outputs of a killed run); returns them."""
    removed: list[Path] = []
    for entry in _orphans(folder, _TEMP_FILE,
                          lambda _entry, match: names is None or names.fullmatch(match.group(1)) is not None):
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed
