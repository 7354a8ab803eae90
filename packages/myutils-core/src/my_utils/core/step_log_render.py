"""The helper process that renders a step log into its profile CSV while the training process runs.

    python -m my_utils.core.step_log_render LOG CSV PARENT_PID POLL_S

Started by ``StepLogWriter`` with a pipe on stdin. Every ``POLL_S`` seconds it renders what
the training process appended. When the pipe reaches EOF or the parent is gone (a clean
close, or a kill -9 of the training process), it renders the rest, removes the log if no
writer holds it any more, and exits. It runs in its own session, so a Ctrl-C aimed at the
training job does not cut a render short; SIGTERM makes it finish early in the same way.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import signal
import sys
from pathlib import Path
from types import FrameType

from my_utils.core.step_log import StepLogRenderer

_log = logging.getLogger("my_utils.core.step_log_render")
_stop = False


def _on_term(signum: int, frame: FrameType | None) -> None:
    global _stop
    _stop = True


def run(log_path: Path, csv_path: Path, parent: int, poll_s: float) -> int:
    """Render until the parent goes away; return the exit status."""
    try:
        renderer = StepLogRenderer(log_path, csv_path)
    except FileNotFoundError:
        return 0  # the writer closed (and removed the log) before we started: nothing to do
    stdin = sys.stdin.buffer
    failing = False
    try:
        while not _stop:
            ready, _, _ = select.select([stdin], [], [], poll_s)
            if ready and not os.read(stdin.fileno(), 4096):
                break  # EOF: the parent closed the pipe or died
            if os.getppid() != parent:
                break  # the pipe may be held open by a forked child of the parent
            try:
                if renderer.pending():
                    renderer.render()
            except OSError as exc:  # a full disk may empty again: report once, keep trying
                if not failing:
                    _log.error("cannot render %s into %s (%s); retrying, the steps stay in the log",
                               log_path, csv_path, exc.strerror or exc)
                failing = True
            else:
                if failing:
                    _log.warning("rendering %s works again", csv_path)
                failing = False
        renderer.render()
        _remove_if_unused(log_path, csv_path)
    finally:
        renderer.close()
    return 0


def _remove_if_unused(log_path: Path, csv_path: Path) -> None:
    """Remove the log when no writer holds it (their shared locks block our exclusive one)."""
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    try:
        st, own = os.stat(log_path), os.fstat(fd)
        if (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev):
            last = StepLogRenderer(log_path, csv_path)
            try:
                last.render()
                done = not last.pending()  # a record it cannot read keeps the log for a person
            finally:
                last.close()
            if done:
                log_path.unlink()
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``LOG CSV PARENT_PID POLL_S``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: python -m my_utils.core.step_log_render LOG CSV PARENT_PID POLL_S", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="my_utils profile CSV helper: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_term)
    try:
        return run(Path(args[0]), Path(args[1]), int(args[2]), float(args[3]))
    except OSError as exc:
        _log.error("cannot render %s into %s (%s); the steps stay in the log and are rendered when it is "
                   "next opened or read", args[0], args[1], exc.strerror or exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
