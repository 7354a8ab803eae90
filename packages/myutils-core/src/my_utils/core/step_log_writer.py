"""The training process's side of the step log: one ``os.write`` per record, rendering elsewhere.

``StepLogWriter`` appends encoded records (``step_log``) to ``profile_rank_<r>.steplog`` and
has them rendered into ``profile_rank_<r>.csv`` in one of four ways (``MYUTILS_PROFILE_CSV``):

* ``process`` (default): a helper process (``python -m my_utils.core.step_log_render``) polls
  the log and renders it. It holds no GIL of ours, and it outlives a kill -9 of the training
  process long enough to render every step that reached the log, then removes the log.
* ``thread``: a daemon thread of this process does the same (it competes for the GIL; kept
  because the bench measures that trade, and for hosts that cannot start a process).
* ``inline``: each append is rendered at once on the calling thread (the CSV is current when
  ``step()`` returns; the cost of today's path plus the log write).
* ``direct``: no log; rows are formatted and appended to the CSV (the path before the log).

Why a process by default: the rendering costs ~20x the packing (``bench/bench_timer.py`` prints
both), and a thread of ours would run it under our GIL, so the training thread would pay it
all the same (the bench's writer-thread figure is no better than formatting in ``step()``).
A process costs one idle interpreter per rank and renders on a core the step does not use.

Liveness: every writer holds a shared ``flock`` on the log for its lifetime; whoever finds no
writer left (an exclusive lock succeeds) renders the rest and removes the log. An opener that
finds a log without writers renders what a killed run left and starts the log afresh.

Environment failures never raise into the caller: the first is reported, later appends are
dropped (and counted) until writing works again.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import my_utils
from my_utils.core.profile_csv_writer import ProfileCsvWriter
from my_utils.core.step_log import HEADER_SIZE, MAGIC, StepLogRenderer, encode_text, new_header, steplog_path

try:
    import fcntl
except ImportError:  # no flock (Windows): GlobalLogger writes the CSV directly (mode "direct")
    fcntl = None  # type: ignore[assignment]

__all__ = ["MODES", "StepLogWriter", "default_mode"]

_log = logging.getLogger(__name__)

MODES = ("process", "thread", "inline", "direct")
POLL_S = 0.02  # how far the CSV trails the log while a run goes on
_CHECK_HELPER_EVERY = 256  # appends between liveness checks of the helper process
_LOCK_WAIT_S = 10.0
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


def default_mode() -> str:
    """``MYUTILS_PROFILE_CSV`` if it names a mode, else ``process``."""
    if fcntl is None:
        return "direct"
    value = os.environ.get("MYUTILS_PROFILE_CSV", "").strip().lower()
    return value if value in MODES else "process"


class StepLogWriter:
    """Appends step records for ``csv_path`` and keeps the CSV rendered (see the module docstring)."""

    def __init__(self, csv_path: str | os.PathLike[str], mode: str | None = None) -> None:
        self.csv_path = Path(csv_path)
        self.log_path = steplog_path(self.csv_path)
        self.mode = mode or default_mode()
        if fcntl is None:
            self.mode = "direct"
        if self.mode not in MODES:
            raise ValueError(f"StepLogWriter(mode={mode!r}): expected one of {', '.join(MODES)}")
        self.deferred = self.mode != "direct"
        self.dropped = 0
        self._fd: int | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()  # the descriptor and the in-process renderer
        self._start_lock = threading.Lock()  # one helper (or thread) even when threads race to start it
        self._direct: ProfileCsvWriter | None = None
        self._renderer: StepLogRenderer | None = None
        self._helper: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._appends = 0
        self._failed = False
        self._retry_at = 0.0
        self._reported: set[str] = set()

    # -- opening -----------------------------------------------------------------------

    def open(self) -> bool:
        """Create the CSV (with its header) and the log now; render what a killed run left. False on OSError."""
        if not self.deferred:
            self._direct = ProfileCsvWriter(self.csv_path)
            return self._direct.open()
        try:
            self._fd = self._open_log()
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                # e.g. an NFS mount without lock support: the rows still reach the CSV, on this thread
                _log.warning("%s: file locks are not supported here (%s); profile rows are formatted and "
                             "written directly (MYUTILS_PROFILE_CSV=direct)", self.log_path.parent,
                             exc.strerror or exc)
                self.mode, self.deferred = "direct", False
                self._direct = ProfileCsvWriter(self.csv_path)
                return self._direct.open()
            self._report_failure(exc)
            return False
        return True

    def _open_log(self) -> int:
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                alone = _try_flock(fd, fcntl.LOCK_EX)
                if not alone and not _try_flock(fd, fcntl.LOCK_SH):
                    # a remover or a recovering opener holds it for a moment
                    if time.monotonic() > deadline:
                        raise OSError(errno.EWOULDBLOCK, f"{self.log_path} stays locked by another process")
                    os.close(fd)
                    time.sleep(0.01)
                    continue
                if not _same_file(fd, self.log_path):
                    os.close(fd)  # removed by its last user between our open and our lock
                    continue
                if alone:
                    self._recover_and_reset(fd)
                    fcntl.flock(fd, fcntl.LOCK_SH)
                return fd
            except BaseException:
                os.close(fd)
                raise

    def _recover_and_reset(self, fd: int) -> None:
        """Alone on the log: render what a killed run left, then start it afresh for this run."""
        size = os.fstat(fd).st_size
        if size >= HEADER_SIZE and os.pread(fd, 8, 0) == MAGIC:
            renderer = StepLogRenderer(self.log_path, self.csv_path)
            try:
                if renderer.pending():
                    _log.info("%s: rendering the steps a previous run left in %s", self.csv_path, self.log_path.name)
                renderer.render()
            finally:
                renderer.close()
        # the CSV exists with its header (a torn row of an older writer is cut) before the log restarts
        csv = ProfileCsvWriter(self.csv_path)
        opened = csv.open()
        csv.close()
        if not opened:
            raise OSError(errno.EIO, f"cannot open {self.csv_path}")
        csv_fd = os.open(self.csv_path, os.O_RDONLY)
        try:
            fcntl.flock(csv_fd, fcntl.LOCK_EX)  # no reader renders while the log restarts
            os.ftruncate(fd, 0)
            os.write(fd, new_header(os.fstat(csv_fd).st_size))
        finally:
            os.close(csv_fd)

    # -- appending ---------------------------------------------------------------------

    def append(self, data: bytes) -> None:
        """Append one encoded record in one write (never raises for an OS problem)."""
        fd = self._fd
        if fd is None:
            fd = self._reopen()
            if fd is None:
                self.dropped += 1
                return
        try:
            written = os.write(fd, data)
            if written != len(data):
                _write_rest(fd, data, written)
        except OSError as exc:
            self._write_failed(exc)
            return
        if self._failed:
            self._failed = False
            _log.warning("writing profile rows to %s works again", self.log_path)
        mode = self.mode
        if mode == "process":
            count = self._appends = self._appends + 1
            if count % _CHECK_HELPER_EVERY == 1:  # starts the helper at the first append
                self._check_helper()
        elif mode == "inline":
            self.flush()
        elif self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._start_thread()

    def append_text(self, text: str) -> None:
        """Append complete CSV lines (``log_profile_event``) in log order."""
        if not text:
            return
        if self._direct is not None:
            self._direct.write_text(text)
        else:
            self.append(encode_text(text))

    def _write_failed(self, exc: OSError) -> None:
        self.dropped += 1
        self._report_failure(exc)
        self._failed = True
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        self._retry_at = time.monotonic() + 1.0

    def _reopen(self) -> int | None:
        if self._direct is not None or time.monotonic() < self._retry_at:
            return None
        try:
            fd = self._open_log()
        except OSError as exc:
            self._report_failure(exc)
            self._retry_at = time.monotonic() + 1.0
            return None
        self._stop.clear()  # rows after close() reopen the log and its renderer
        self._appends = 0
        with self._lock:
            self._fd = fd
        return fd

    def _report_failure(self, exc: OSError) -> None:
        if not self._failed:
            self._failed = True
            _log.error("cannot write profile rows to %s (%s); rows are dropped until writing works again",
                       self.log_path, exc.strerror or exc)

    # -- rendering ---------------------------------------------------------------------

    def flush(self) -> None:
        """Render every record appended so far into the CSV, on this thread (never raises)."""
        if self._direct is not None or os.getpid() != self._pid:
            return
        with self._lock:
            try:
                if self._renderer is None:
                    self._renderer = StepLogRenderer(self.log_path, self.csv_path)
                self._renderer.render()
            except OSError as exc:
                self._report_once("render", "cannot render %s into %s (%s); the steps stay in the log",
                                  self.log_path, self.csv_path, exc.strerror or exc)

    def _check_helper(self) -> None:
        if os.getpid() != self._pid:
            return  # a forked child writes into its parent's log; the parent's helper renders it
        with self._start_lock:
            helper = self._helper
            if helper is None:
                if self.mode == "process":
                    self._start_helper()
            elif helper.poll() is not None:
                self._report_once("helper-died", "the profile CSV helper process of %s exited (status %s); "
                                  "rendering on this process's thread from now on", self.csv_path, helper.returncode)
                self._helper = None
                if helper.stdin is not None:
                    helper.stdin.close()
                self.mode = "thread"
                self._start_thread()

    def _start_helper(self) -> None:
        src = str(Path(my_utils.__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        cmd = [sys.executable or "python3", "-m", "my_utils.core.step_log_render",
               str(self.log_path), str(self.csv_path), str(os.getpid()), str(POLL_S)]
        try:
            self._helper = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
                                            start_new_session=True, close_fds=True)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._report_once("helper", "cannot start the profile CSV helper process (%s); rendering on a "
                              "thread of this process instead", getattr(exc, "strerror", None) or exc)
            self.mode = "thread"
            self._start_thread()

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._thread_loop, name="my_utils-profile-csv", daemon=True)
        self._thread = thread
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had: render on the caller's thread
            self._report_once("thread", "cannot start the profile CSV thread (%s); rendering in step() instead", exc)
            self._thread = None
            self.mode = "inline"

    def _thread_loop(self) -> None:
        while not self._stop.wait(POLL_S):
            self.flush()

    # -- closing -----------------------------------------------------------------------

    def close(self) -> None:
        """Render everything, stop the helper, remove the log when no other writer uses it."""
        if self._direct is not None:
            self._direct.close()
            return
        if os.getpid() != self._pid:  # a forked child: the parent owns the helper and the log
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            return
        if self._fd is None and self._helper is None and self._thread is None:
            # closed already (GlobalLogger.close() and then its atexit hook): the CSV is complete and
            # the log is gone, so there is nothing to render and nothing to report
            return
        self._stop.set()
        helper, self._helper = self._helper, None
        if helper is not None and helper.stdin is not None:
            try:
                helper.stdin.close()  # EOF: the helper renders what is left and exits
            except OSError:
                pass
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=30)
        self.flush()
        with self._lock:
            fd, self._fd = self._fd, None
            renderer, self._renderer = self._renderer, None
        if renderer is not None:
            renderer.close()
        if fd is not None:
            try:
                if _try_flock(fd, fcntl.LOCK_EX) and _same_file(fd, self.log_path) and self._final_render():
                    self.log_path.unlink()
            except OSError as exc:
                _log.debug("keeping %s (%s)", self.log_path, exc)
            finally:
                os.close(fd)
        if helper is not None:
            try:
                helper.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _log.warning("the profile CSV helper of %s is still running after 30 s; leaving it to finish",
                             self.csv_path)

    def _final_render(self) -> bool:
        """Render with a renderer of its own; True when nothing is left (the log may go)."""
        renderer = StepLogRenderer(self.log_path, self.csv_path)
        try:
            renderer.render()
            return not renderer.pending()
        finally:
            renderer.close()

    def _report_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._reported:
            self._reported.add(key)
            _log.warning(msg, *args)

    def __repr__(self) -> str:
        return f"StepLogWriter({str(self.csv_path)!r}, mode={self.mode!r})"


def _try_flock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev)


def _write_rest(fd: int, data: bytes, written: int) -> None:
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view):]
