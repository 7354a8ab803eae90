"""GlobalLogger: the process-wide logger (``rank_<rank>.log``) and profile CSV (``profile_rank_<rank>.csv``).

Profile rows (MyTimer steps, ``log_profile_event``) are appended to ``profile_rank_<rank>.steplog``
in one write each and rendered into the CSV off the training thread (``step_log_writer``); the
CSV is complete after ``flush()``, ``close()`` and at exit, and the log is removed then.

``GlobalLogger()`` always returns the same object. ``setup()`` configures it once (later calls
are ignored); ``get_logger()`` may be called before ``setup()`` and returns the very logger that
``setup()`` later equips with its console and file handlers, so nothing is swallowed.

The logger is ``logging.getLogger("my_utils")``: messages of every my_utils module (children of
that logger) also land in ``rank_<rank>.log``. Tests reset the singleton with
``GlobalLogger._reset_for_tests()``.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import socket
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from my_utils.core.clock import unix_now_ns
from my_utils.core.dist_env import resolve_rank_info
from my_utils.core.errors import UsageError
from my_utils.core.profile_csv import format_metadata, format_profile_line
from my_utils.core.step_log_writer import StepLogWriter

__all__ = ["LOGGER_NAME", "GlobalLogger", "get_global_logger"]

LOGGER_NAME = "my_utils"

# Megatron-style parallel_info keys shown in the log prefix under a short name
_SHORT_NAMES = {
    "data_parallel": "dp",
    "tensor_model_parallel": "tp",
    "tensor_parallel": "tp",
    "pipeline_model_parallel": "pp",
    "pipeline_parallel": "pp",
    "context_parallel": "cp",
    "expert_model_parallel": "ep",
    "expert_parallel": "ep",
    "virtual_pipeline_model_parallel": "vpp",
}


def _parallel_prefix(info: Mapping[str, Any]) -> str:
    """``{"data_parallel_rank": 0, "data_parallel_world_size": 2}`` -> ``"dp=0/2"``."""
    parts: list[str] = []
    done: set[str] = set()
    for key in info:
        if key in done:
            continue
        if key.endswith("_rank"):
            base = key[: -len("_rank")]
            size_key = f"{base}_world_size" if f"{base}_world_size" in info else f"{base}_size"
            label = _SHORT_NAMES.get(base, base)
            if size_key in info:
                parts.append(f"{label}={info[key]}/{info[size_key]}")
                done.update((key, size_key))
                continue
        parts.append(f"{key}={info[key]}")
        done.add(key)
    return " ".join(parts)


class GlobalLogger:
    """Process-wide singleton: human-readable log and machine-readable profile CSV of this rank."""

    _instance: ClassVar[GlobalLogger | None] = None
    _instance_lock: ClassVar[threading.Lock] = threading.Lock()

    # instance state (set in _init_state)
    log_dir: Path | None
    rank: int
    world_size: int
    local_rank: int | None
    extra_log_label: str
    parallel_info: dict[str, Any]
    machine_id: str

    def __new__(cls) -> GlobalLogger:
        inst = cls._instance
        if inst is None:
            with cls._instance_lock:
                inst = cls._instance
                if inst is None:
                    inst = super().__new__(cls)
                    inst._init_state()
                    GlobalLogger._instance = inst
        return inst

    def _init_state(self) -> None:
        self._lock = threading.RLock()
        self._configured = False
        self.log_dir = None
        self.rank = 0
        self.world_size = 1
        self.local_rank = None
        self.extra_log_label = ""
        self.parallel_info = {}
        self.machine_id = f"{socket.gethostname()}_rank0"
        self._offset_ns = 0
        self._writer: StepLogWriter | None = None
        self._handlers: list[logging.Handler] = []
        self._dropped_reported = False

    # -- configuration -----------------------------------------------------------------

    def setup(
        self,
        log_dir: str | os.PathLike[str],
        rank: int | None = None,
        world_size: int | None = None,
        extra_log_label: str = "",
        **parallel_info: Any,
    ) -> GlobalLogger:
        """Configure once: ``rank_<rank>.log`` + console, and ``profile_rank_<rank>.csv`` in ``log_dir``.

        ``rank``/``world_size`` default to torchrun's RANK/WORLD_SIZE (then rank 0 of 1).
        ``parallel_info`` (e.g. ``data_parallel_rank=0, data_parallel_world_size=2``) is shown in
        the log prefix. Calls after the first are ignored (a differing one is reported).
        """
        with self._lock:
            if self._configured:
                if not self.is_log_dir(log_dir) or (rank is not None and rank != self.rank):
                    logging.getLogger(LOGGER_NAME).warning(
                        "GlobalLogger is already set up (log_dir=%s, rank=%d); ignoring setup(log_dir=%s, rank=%s)",
                        self.log_dir, self.rank, log_dir, rank,
                    )
                return self
            info = resolve_rank_info(rank, world_size)
            self.log_dir = Path(log_dir)
            self.rank, self.world_size, self.local_rank = info.rank, info.world_size, info.local_rank
            self.extra_log_label = str(extra_log_label)
            self.parallel_info = dict(parallel_info)
            self.machine_id = f"{socket.gethostname()}_rank{self.rank}"
            self._attach_handlers(self.log_dir)
            self._writer = StepLogWriter(self.log_dir / f"profile_rank_{self.rank}.csv")
            self._writer.open()  # the CSV exists (with its header) as soon as setup returns
            atexit.register(self.close)  # the CSV is complete when the program ends
            self._configured = True
        return self

    def _attach_handlers(self, log_dir: Path) -> None:
        prefix_parts = [self.extra_log_label] if self.extra_log_label else []
        prefix_parts.append(f"rank {self.rank}/{self.world_size}")
        if self.parallel_info:
            prefix_parts.append(_parallel_prefix(self.parallel_info))
        prefix = " ".join(prefix_parts).replace("%", "%%")
        formatter = logging.Formatter(f"%(asctime)s [{prefix}] %(levelname)s %(name)s: %(message)s")
        logger = logging.getLogger(LOGGER_NAME)
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(formatter)
        logger.addHandler(console)
        self._handlers = [console]
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        # our handlers print it; a root handler (e.g. basicConfig) would print it twice
        logger.propagate = False
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            file_handler = logging.FileHandler(log_dir / f"rank_{self.rank}.log", encoding="utf-8",
                                               errors="backslashreplace")
        except OSError as exc:
            logger.error("cannot open %s (%s); logging to the console only", log_dir, exc.strerror or exc)
            return
        file_handler.setFormatter(formatter)
        logger.addHandler(file_handler)
        self._handlers.append(file_handler)

    @property
    def is_configured(self) -> bool:
        """Whether ``setup()`` has run."""
        return self._configured

    def is_log_dir(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` names this logger's ``log_dir``."""
        if self.log_dir is None:
            return False
        try:
            return Path(path).resolve() == self.log_dir.resolve()
        except OSError:
            return Path(path) == self.log_dir

    def get_logger(self) -> logging.Logger:
        """The ``my_utils`` logger (usable before ``setup()``; ``setup()`` adds its handlers)."""
        return logging.getLogger(LOGGER_NAME)

    @property
    def csv_path(self) -> Path | None:
        """``<log_dir>/profile_rank_<rank>.csv`` once set up."""
        return self._writer.csv_path if self._writer is not None else None

    @property
    def profile_sink(self) -> StepLogWriter | None:
        """Where profile rows go once set up (MyTimer appends its packed steps here)."""
        return self._writer

    def flush(self) -> None:
        """Render every step and row written so far into the profile CSV before returning.

        Rows are durable as soon as ``step()``/``log_profile_event`` return (they are in
        ``profile_rank_<rank>.steplog``); a helper renders them into the CSV within tens of
        milliseconds. Call this to read the CSV from this very process at once.
        """
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Render everything into the CSV and stop the renderer (also runs at exit); later rows reopen it."""
        writer = self._writer
        if writer is None:
            return
        try:
            writer.close()
        except Exception as exc:  # at exit nothing may raise; the steps stay in the log for the next open
            logging.getLogger(LOGGER_NAME).error("GlobalLogger.close(): could not finish %s (%s: %s)",
                                                 writer.csv_path, type(exc).__name__, exc)

    @property
    def log_path(self) -> Path | None:
        """``<log_dir>/rank_<rank>.log`` once set up."""
        return self.log_dir / f"rank_{self.rank}.log" if self.log_dir is not None else None

    # -- clock offset ------------------------------------------------------------------

    def set_time_offset(self, offset_seconds: float) -> None:
        """Add ``offset_seconds`` to every later timestamp (align machines; see ClockSynchronizer)."""
        try:
            value = float(offset_seconds)
        except (TypeError, ValueError):
            raise UsageError(f"GlobalLogger.set_time_offset({offset_seconds!r}): expected seconds as a number") from None
        if not math.isfinite(value):
            raise UsageError(f"GlobalLogger.set_time_offset({offset_seconds!r}): expected a finite number of seconds")
        self._offset_ns = round(value * 1e9)

    @property
    def time_offset(self) -> float:
        """The current offset in seconds."""
        return self._offset_ns / 1e9

    @property
    def time_offset_ns(self) -> int:
        """The current offset in integer nanoseconds."""
        return self._offset_ns

    # -- profile rows ------------------------------------------------------------------

    def log_profile_event(
        self,
        step: int,
        event_name: str,
        event_type: str,
        duration_ms: float,
        metadata: str | Mapping[str, object] = "",
        timestamp: float | None = None,
    ) -> None:
        """Append one row; it is in the OS (it survives a kill of this process) when this returns.

        ``timestamp`` is unix seconds from this machine's clock (default: now); the time
        offset is added to it like to every timestamp. ``metadata`` is ``"k=v;k=v"`` or a dict.
        Before ``setup()`` the row is dropped and that is reported once.
        """
        if timestamp is None:
            unix_ns = unix_now_ns() + self._offset_ns  # MyTimer's time base: rows interleave in order
        else:
            unix_ns = round(float(timestamp) * 1e9) + self._offset_ns
        meta = metadata if isinstance(metadata, str) else format_metadata(metadata)
        try:
            dur = float(duration_ms)
            step_no = int(step)
        except (TypeError, ValueError):
            raise UsageError(
                f"GlobalLogger.log_profile_event(step={step!r}, duration_ms={duration_ms!r}): "
                "expected an integer step and a number of milliseconds"
            ) from None
        line = format_profile_line(unix_ns, self.machine_id, step_no, str(event_name), str(event_type), dur, meta)
        self.write_profile_text(line)

    def write_profile_text(self, text: str) -> None:
        """Append complete, formatted CSV lines in one write (MyTimer's per-step flush)."""
        writer = self._writer
        if writer is None:
            if not self._dropped_reported:
                self._dropped_reported = True
                logging.getLogger(LOGGER_NAME).warning(
                    "GlobalLogger: profile rows arrived before setup(); they are dropped. "
                    "Call GlobalLogger().setup(log_dir) first"
                )
            return
        writer.append_text(text)

    # -- tests -------------------------------------------------------------------------

    @classmethod
    def _reset_for_tests(cls) -> None:
        """Forget the singleton: close its files, remove its handlers, restore the logger.

        For tests only; a running program never needs it.
        """
        with cls._instance_lock:
            inst = cls._instance
            cls._instance = None
        if inst is None:
            return
        logger = logging.getLogger(LOGGER_NAME)
        for handler in inst._handlers:
            logger.removeHandler(handler)
            handler.close()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
        atexit.unregister(inst.close)
        if inst._writer is not None:
            inst._writer.close()


def get_global_logger() -> logging.Logger:
    """The GlobalLogger's logger (same object before and after ``setup()``)."""
    return GlobalLogger().get_logger()
