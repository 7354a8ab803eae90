"""``ProfilerWrapper``: the seed's context manager around ``torch.profiler``, with its charts and files.

Each ``with profiler:`` is one profiled window (a new ``torch.profiler.profile``). On exit
it records the window's operator time (``record_cuda_average_time``) and memory
(``record_cuda_mm``) when asked; ``leave()`` writes, under ``log_dir``:

- ``<prefix>_trace.json``: Chrome trace of the last window (earlier windows are not kept:
  one trace per step would fill the disk, the seed's own warning);
- ``<prefix>_cuda_time_plot.png`` and ``<prefix>_memory_usage_line_chart.png``;
- ``<prefix>_rank_<rank>.log``: the operator summary table and the per-window figures;
- under ``mem_dir``: ``<prefix>_mem_<timestamp>.pickle``, the CUDA allocator history of all
  windows (``profile_memory=True`` on a CUDA machine; it reuses ``my_utils.memory``).

Without CUDA every "CUDA" figure is the CPU equivalent (operator CPU time, process RSS) and
each output says so. Instrumentation problems (no profiler, a full disk, no matplotlib) are
reported once through the logger and never raised into the training loop; misuse (nested
``with``, ``leave()`` inside a window) raises :class:`~my_utils.core.errors.UsageError`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.dist_env import env_int, env_rank
from my_utils.core.errors import UsageError
from my_utils.legacy.line_chart import ChartUnavailable, line_chart_figure, write_line_chart
from my_utils.legacy.torch_session import cuda_available, export_trace, profiler_activities, time_basis

__all__ = ["LeaveResult", "MemoryRecord", "ProfilerWrapper", "TimeRecord"]

_log = logging.getLogger("my_utils.legacy")
MIB = float(1 << 20)


@dataclass(frozen=True)
class TimeRecord:
    """One window's operator time: summed self time of all operators (ms) and wall time (ms)."""

    window: int
    op_time_ms: float
    wall_ms: float


@dataclass(frozen=True)
class MemoryRecord:
    """One window's memory (MiB): CUDA allocated/peak/reserved, or process RSS/peak RSS on the CPU."""

    window: int
    current_mib: float
    peak_mib: float
    reserved_mib: float | None


@dataclass
class LeaveResult:
    """The files ``leave()`` wrote (None where an output was not asked for or could not be written)."""

    trace: Path | None = None
    cuda_time_plot: Path | None = None
    memory_chart: Path | None = None
    log: Path | None = None
    memory_pickle: Path | None = None
    problems: list[str] = field(default_factory=list)


def _host_rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MiB (Linux; zeros where unreadable)."""
    try:
        import resource  # POSIX only

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    except (ImportError, OSError):
        peak = 0.0
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            current = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError, IndexError):
        current = peak
    return current, peak


class ProfilerWrapper:
    """Context manager profiling each ``with`` block with torch.profiler; ``leave()`` writes the outputs.

    ``is_st`` picks the file prefix (``st`` or ``mt``; ``prefix=`` overrides it). With
    ``WORLD_SIZE`` > 1 the rank is appended (``mt_r3``) so ranks sharing ``log_dir`` never
    overwrite each other's files. ``mem_dir`` defaults to ``log_dir``.
    """

    def __init__(self, is_st: bool = False, profile_memory: bool = False, log_dir: str | Path = "profiler_logs",
                 mem_dir: str | Path | None = None, enabled_record_cuda_average_time: bool = False,
                 enable_record_cuda_mm: bool = False, enable_print_summary: bool = False, *,
                 prefix: str | None = None, rank: int | None = None, cuda_memory: Any = None,
                 logger: logging.Logger | None = None) -> None:
        self.is_st = is_st
        self.profile_memory = profile_memory
        self.log_dir = Path(log_dir)
        self.mem_dir = Path(mem_dir) if mem_dir is not None else self.log_dir
        self.enabled_record_cuda_average_time = enabled_record_cuda_average_time
        self.enable_record_cuda_mm = enable_record_cuda_mm
        self.enable_print_summary = enable_print_summary
        self.rank = env_rank(0) if rank is None else rank
        if prefix is None:
            prefix = "st" if is_st else "mt"
            world = _safe_world_size()
            if world is not None and world > 1:
                prefix = f"{prefix}_r{self.rank}"
        self.prefix = prefix
        self.logger = logger or _log
        self.time_records: list[TimeRecord] = []
        self.memory_records: list[MemoryRecord] = []
        self._cuda_memory = cuda_memory
        self._use_cuda: bool | None = None
        self._prof: Any = None
        self._last_prof: Any = None
        self._open = False
        self._windows = 0
        self._wall_start = 0.0
        self._last_wall_ms = 0.0
        self._history_on = False
        self._reported: set[str] = set()

    # -- helpers -----------------------------------------------------------------------------
    def _report_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.logger.warning(message, *args)

    @property
    def use_cuda(self) -> bool:
        """Whether CUDA times and memory are recorded (decided at the first window)."""
        if self._use_cuda is None:
            self._use_cuda = cuda_available()
        return self._use_cuda

    def _memory_seam(self) -> Any:
        if self._cuda_memory is None:
            from my_utils.memory.cuda_memory import default_cuda_memory

            self._cuda_memory = default_cuda_memory()
        return self._cuda_memory

    def _start_history(self) -> None:
        seam = self._memory_seam()
        reason = seam.unavailable_reason()
        if reason is not None:
            self._report_once("history", "ProfilerWrapper: no memory pickle will be written: %s", reason)
            return
        try:
            seam.start_history(100_000)
            self._history_on = True
        except Exception as exc:  # an allocator error must not stop training
            self._report_once("history", "ProfilerWrapper: memory history could not start (%s); no pickle", exc)

    # -- the window --------------------------------------------------------------------------
    def __enter__(self) -> ProfilerWrapper:
        if self._open:
            raise UsageError("ProfilerWrapper: entered while a window is already open; "
                             "close the outer `with profiler:` before opening another")
        self._open = True
        self._windows += 1
        if self.profile_memory and not self._history_on and "history" not in self._reported:
            self._start_history()
        try:
            from torch.profiler import profile

            self._prof = profile(activities=profiler_activities(self.use_cuda), profile_memory=self.profile_memory,
                                 record_shapes=True)
            self._prof.__enter__()
        except Exception as exc:  # the window still runs, unprofiled
            self._prof = None
            self._report_once("start", "ProfilerWrapper: torch.profiler could not start (%s); windows run unprofiled",
                              exc)
        self._wall_start = time.perf_counter()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._open:
            raise UsageError("ProfilerWrapper: __exit__ without __enter__; use `with profiler:`")
        if self._prof is not None and self.use_cuda:
            self._synchronize()
        self._last_wall_ms = (time.perf_counter() - self._wall_start) * 1e3
        self._open = False
        if self._prof is not None:
            try:
                self._prof.__exit__(None, None, None)
                self._last_prof = self._prof
            except Exception as err:
                self._report_once("stop", "ProfilerWrapper: torch.profiler could not stop (%s)", err)
            self._prof = None
        if exc_type is not None:
            return  # the training error propagates unchanged; its window is not recorded
        if self.enabled_record_cuda_average_time:
            self.record_cuda_average_time()
        if self.enable_record_cuda_mm:
            self.record_cuda_mm()

    def _synchronize(self) -> None:
        import torch

        try:
            torch.cuda.synchronize()
        except Exception as exc:
            self._report_once("sync", "ProfilerWrapper: torch.cuda.synchronize failed (%s)", exc)

    # -- the seed's recorders -------------------------------------------------------------------
    def record_cuda_average_time(self) -> TimeRecord | None:
        """Record the last window's summed operator self time (CUDA, else CPU) in ms; return the record."""
        if self._last_prof is None:
            return None
        attr = "self_device_time_total" if self.use_cuda else "self_cpu_time_total"
        try:
            total_us = sum(float(getattr(evt, attr)) for evt in self._last_prof.key_averages())
        except Exception as exc:
            self._report_once("averages", "ProfilerWrapper: operator times unreadable (%s)", exc)
            return None
        record = TimeRecord(self._windows, total_us / 1e3, self._last_wall_ms)
        self.time_records.append(record)
        return record

    @property
    def average_time_ms(self) -> float | None:
        """Mean operator time per recorded window (ms), None before the first record."""
        if not self.time_records:
            return None
        return sum(r.op_time_ms for r in self.time_records) / len(self.time_records)

    def record_cuda_mm(self) -> MemoryRecord:
        """Record memory now: CUDA allocated / peak / reserved, or on the CPU the process RSS and peak RSS."""
        record: MemoryRecord | None = None
        if self.use_cuda:
            try:
                import torch

                record = MemoryRecord(self._windows, torch.cuda.memory_allocated() / MIB,
                                      torch.cuda.max_memory_allocated() / MIB, torch.cuda.memory_reserved() / MIB)
            except Exception as exc:
                self._report_once("mm", "ProfilerWrapper: CUDA memory unreadable (%s); recording process RSS", exc)
        if record is None:
            current, peak = _host_rss_mib()
            # ru_maxrss is the kernel's high-water mark, updated lazily: it can read below the RSS
            # just measured. The peak is the running maximum of everything seen.
            earlier = max((r.peak_mib for r in self.memory_records), default=0.0)
            record = MemoryRecord(self._windows, current, max(peak, current, earlier), None)
        self.memory_records.append(record)
        return record

    def _memory_basis(self) -> str:
        if self.use_cuda:
            return "CUDA memory (torch.cuda.memory_allocated / max_memory_allocated / memory_reserved)"
        return "no CUDA device: process RSS and peak RSS of the host"

    # -- charts --------------------------------------------------------------------------------
    def plot_cuda_time_line(self) -> Path | None:
        """Write ``<prefix>_cuda_time_plot.png`` (operator time per window); None when nothing was recorded."""
        if not self.time_records:
            return None
        kind = "CUDA" if self.use_cuda else "CPU"
        x = [r.window for r in self.time_records]
        series = [(f"{kind} operator self time", [r.op_time_ms for r in self.time_records]),
                  ("window wall time", [r.wall_ms for r in self.time_records])]
        return self._chart(self.log_dir / f"{self.prefix}_cuda_time_plot.png", x, series,
                           title=f"{kind} time per profiled window (rank {self.rank})", ylabel="time (ms)",
                           note=time_basis(self.use_cuda))

    def plot_memory_usage_line_chart(self) -> Path | None:
        """Write ``<prefix>_memory_usage_line_chart.png``; None when no memory was recorded."""
        if not self.memory_records:
            return None
        x, series = self.memory_chart_series()
        return self._chart(self.log_dir / f"{self.prefix}_memory_usage_line_chart.png", x, series,
                           title=f"memory per profiled window (rank {self.rank})", ylabel="MiB",
                           note=self._memory_basis())

    def memory_usage_figure(self) -> Any:
        """The matplotlib figure ``plot_memory_usage_line_chart`` saves (None without memory records)."""
        if not self.memory_records:
            return None
        x, series = self.memory_chart_series()
        return line_chart_figure(x, series, title=f"memory per profiled window (rank {self.rank})", xlabel="window",
                                 ylabel="MiB", note=self._memory_basis())

    def memory_chart_series(self) -> tuple[list[int], list[tuple[str, list[float]]]]:
        """(windows, [(label, MiB per window)]) of the memory chart: CUDA allocated/peak/reserved, or RSS/peak RSS."""
        x = [r.window for r in self.memory_records]
        if self.use_cuda:
            series = [("allocated", [r.current_mib for r in self.memory_records]),
                      ("peak allocated", [r.peak_mib for r in self.memory_records]),
                      ("reserved", [r.reserved_mib or 0.0 for r in self.memory_records])]
        else:
            series = [("process RSS", [r.current_mib for r in self.memory_records]),
                      ("peak RSS", [r.peak_mib for r in self.memory_records])]
        return x, series

    def _chart(self, path: Path, x: list[int], series: list[tuple[str, list[float]]], *, title: str,
               ylabel: str, note: str) -> Path | None:
        try:
            return write_line_chart(path, x, series, title=title, xlabel="window", ylabel=ylabel, note=note)
        except (ChartUnavailable, OSError) as exc:
            self._report_once(f"chart:{path.name}", "ProfilerWrapper: %s not written: %s", path, exc)
            return None

    # -- leave -----------------------------------------------------------------------------------
    def summary_table(self, row_limit: int = 30) -> str:
        """The last window's operator table (torch's ``key_averages().table``), sorted by CUDA or CPU time."""
        if self._last_prof is None:
            return "(no profiled window)"
        sort_by = "self_device_time_total" if self.use_cuda else "self_cpu_time_total"
        return str(self._last_prof.key_averages().table(sort_by=sort_by, row_limit=row_limit))

    def _log_text(self) -> str:
        lines = [f"ProfilerWrapper summary, rank {self.rank}, prefix {self.prefix}, {self._windows} window(s)",
                 time_basis(self.use_cuda), ""]
        if self.time_records:
            lines.append("window  op_time_ms  wall_ms")
            lines += [f"{r.window:6d}  {r.op_time_ms:10.3f}  {r.wall_ms:7.3f}" for r in self.time_records]
            lines += [f"average op time per window: {self.average_time_ms:.3f} ms", ""]
        if self.memory_records:
            lines += [self._memory_basis(), "window  current_mib  peak_mib  reserved_mib"]
            lines += [f"{r.window:6d}  {r.current_mib:11.1f}  {r.peak_mib:8.1f}  "
                      f"{'-' if r.reserved_mib is None else f'{r.reserved_mib:.1f}'}" for r in self.memory_records]
            lines.append("")
        lines += ["operators of the last window:", self.summary_table()]
        return "\n".join(lines) + "\n"

    def leave(self) -> LeaveResult:
        """Write the trace, charts, summary log and memory pickle; return their paths.

        An output that cannot be written is reported (``LeaveResult.problems``) and skipped.
        """
        if self._open:
            raise UsageError("ProfilerWrapper.leave() called inside `with profiler:`; call it after the loop")
        result = LeaveResult()
        if self._last_prof is not None:
            result.trace = self._attempt(result, "trace", lambda: export_trace(
                self._last_prof, self.log_dir / f"{self.prefix}_trace.json"))
        result.cuda_time_plot = self.plot_cuda_time_line()
        result.memory_chart = self.plot_memory_usage_line_chart()
        text = self._log_text()
        result.log = self._attempt(result, "log", lambda: self._write_text(
            self.log_dir / f"{self.prefix}_rank_{self.rank}.log", text))
        if self.enable_print_summary:
            print(text, end="", flush=True)
        if self._history_on:
            result.memory_pickle = self._attempt(result, "memory pickle", self._dump_history)
        return result

    def _attempt(self, result: LeaveResult, what: str, write: Any) -> Path | None:
        try:
            path: Path = write()
            return path
        except Exception as exc:  # a full disk or a profiler error must not crash the job
            result.problems.append(f"{what}: {exc}")
            self.logger.warning("ProfilerWrapper: %s not written (%s)", what, exc)
            return None

    @staticmethod
    def _write_text(path: Path, text: str) -> Path:
        with atomic_write(path) as fh:
            fh.write(text)
        return path

    def _dump_history(self) -> Path:
        from my_utils.memory.snapshot import save_snapshot

        seam = self._memory_seam()
        stamp = time.strftime("%Y%m%d_%H%M%S")
        try:
            path = save_snapshot(self.mem_dir / f"{self.prefix}_mem_{stamp}.pickle", seam.snapshot())
        finally:
            self._history_on = False
            seam.stop_history()
        return path


def _safe_world_size() -> int | None:
    try:
        return env_int("WORLD_SIZE")
    except Exception:  # a bad WORLD_SIZE is not this profiler's business: use no suffix
        return None
