"""How many rank files stragglers may hold open at once, decided before anything is read.

The lockstep merge holds one open file per rank. The common soft limit on open files is
1,024, so a run of ~1,000 ranks failed with "Too many open files" after reading for a
while. Before any work: raise the soft limit toward the hard one when the ranks do not fit
(a process may do so without privileges), then say how many ranks can stream directly; when
not all can, the caller spools each rank to a compact temporary file first and merges those
reopening one file at a time (``spool``); when not even that fits, it is a ``UsageError``
that names the limits and the fix.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from my_utils.core.errors import UsageError

__all__ = ["OpenFileBudget", "open_file_budget"]

_log = logging.getLogger(__name__)

#: Files kept free for everything else while ranks stream: stdio, the interpreter's own, a
#: temporary copy of a file that is not UTF-8, the step log a reader renders first.
RESERVE = 32
#: Files the spooled path needs at most at one time (a CSV, its copy, a spool file, slack).
SPOOL_NEEDS = 8


@dataclass(frozen=True, slots=True)
class OpenFileBudget:
    """``direct``: every rank may stream from its own open file; ``free``: files this process may still open."""

    direct: bool
    free: int
    soft: int
    hard: int


def _open_now() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 16  # no way to count here: assume a small process


def open_file_budget(ranks: int) -> OpenFileBudget:
    """Check (and raise toward the hard limit) the open-file limit for ``ranks`` rank files."""
    try:
        import resource
    except ImportError:  # not a POSIX system: no such limit to check here
        return OpenFileBudget(True, ranks + RESERVE, -1, -1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinite = resource.RLIM_INFINITY
    open_now = _open_now()
    need = open_now + ranks + RESERVE
    if soft != infinite and soft < need:
        target = need if hard == infinite else min(hard, need)
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                _log.debug("raised the soft open-file limit from %d to %d for %d ranks", soft, target, ranks)
                soft = target
            except (ValueError, OSError) as exc:  # a sandbox may refuse even that
                _log.debug("could not raise the open-file limit to %d: %s", target, exc)
    free = (need if soft == infinite else soft) - open_now
    if free >= ranks + RESERVE:
        return OpenFileBudget(True, free, soft, hard)
    if free >= SPOOL_NEEDS:
        return OpenFileBudget(False, free, soft, hard)
    raise UsageError(f"stragglers: the open-file limit is {soft} (hard {_shown(hard)}) and {open_now} files are "
                     f"open already; reading {ranks} ranks needs at least {open_now + SPOOL_NEEDS} (one rank at a "
                     f"time) and {need} to stream them all; raise it with `ulimit -n {need}`")


def _shown(limit: int) -> str:
    try:
        import resource

        return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
    except ImportError:
        return str(limit)
