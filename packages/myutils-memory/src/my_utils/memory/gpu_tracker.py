"""``GPU_Performance_Tracker``: a daemon thread sampling torch memory, NVML and host metrics.

The seed's monitor, kept by name and arguments. Every ``interval`` seconds it records torch's
allocated/reserved CUDA memory (when CUDA is in use), NVML utilisation, memory-bandwidth
utilisation, power and energy (``nvml_sampler``), and this process's RSS and CPU use
(psutil). Without NVML it says ``NVML unavailable: <reason>`` once and keeps sampling the
rest. Samples go, line by line, to ``<prefix>_rank<rank>_samples.jsonl`` (``samples_file``;
the ``memory_monitor`` metrics provider reads it); ``stop_monitoring()`` joins the thread
and writes the seed's two-panel ``<prefix>_rank<rank>_performance_profile.png`` and an
offline ``<prefix>_rank<rank>_performance_profile.html``.

A sampler error is reported once and sampling goes on; nothing here raises into training
for an environment problem. Misuse (starting twice) raises at once.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import UsageError
from my_utils.memory.host_sampler import HostSampler
from my_utils.memory.nvml_sampler import ENERGY_NONE, NvmlSampler
from my_utils.memory.samples_file import Sample, SamplesWriter, StepMark

__all__ = ["GPU_Performance_Tracker"]

_log = logging.getLogger("my_utils.memory")


def _torch_cuda() -> Any:
    """torch.cuda when the program already uses CUDA, else None (the monitor never imports torch itself)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda
    except Exception:
        pass
    return None


class GPU_Performance_Tracker:
    """Samples every ``interval`` seconds between ``start_monitoring()`` and ``stop_monitoring()``.

    ``use_distributed`` takes the rank from ``torch.distributed`` when it is initialised
    (else ``RANK``); ``track_hardware_metrics`` turns NVML sampling on; ``output_dir``
    (default: the current directory) is where the files go; ``device_index`` is the GPU
    NVML reads (default ``LOCAL_RANK``, else 0).
    """

    def __init__(self, prefix: str, interval: float = 1, use_distributed: bool = False,
                 track_hardware_metrics: bool = True, *, output_dir: str | Path = ".",
                 device_index: int | None = None) -> None:
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not interval > 0:
            raise UsageError(f"GPU_Performance_Tracker(prefix={prefix!r}): interval must be a number of "
                             f"seconds > 0, got {interval!r}")
        self.prefix = prefix
        self.interval = float(interval)
        self.use_distributed = use_distributed
        self.track_hardware_metrics = track_hardware_metrics
        self.output_dir = Path(output_dir)
        local = os.environ.get("LOCAL_RANK", "").strip()
        self.device_index = device_index if device_index is not None else (int(local) if local.isdigit() else 0)
        self.samples: list[Sample] = []
        self.notes: list[str] = []
        self.step_marks: list[StepMark] = []
        self.nvml_status = "NVML not tracked (track_hardware_metrics=False)"
        self.energy_method = ENERGY_NONE
        self.png_path: Path | None = None
        self.html_path: Path | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._writer: SamplesWriter | None = None
        self._nvml: NvmlSampler | None = None
        self._host = HostSampler()
        self._reported_error = False
        self._t0 = 0.0

    # -- naming ------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """The rank in the file names."""
        if self.use_distributed:
            dist = getattr(sys.modules.get("torch"), "distributed", None)
            try:
                if dist is not None and dist.is_available() and dist.is_initialized():
                    return int(dist.get_rank())
            except Exception:
                pass
        return env_rank(0)

    def _path(self, suffix: str) -> Path:
        return self.output_dir / f"{self.prefix}_rank{self.rank}_{suffix}"

    @property
    def samples_path(self) -> Path:
        """``<output_dir>/<prefix>_rank<rank>_samples.jsonl``."""
        return self._path("samples.jsonl")

    # -- life cycle ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start_monitoring(self) -> None:
        """Open the samplers and the samples file, then start the daemon thread."""
        if self.running:
            raise UsageError(f"GPU_Performance_Tracker({self.prefix!r}).start_monitoring() called while it is "
                             "already monitoring; call stop_monitoring() first")
        self.samples, self.notes, self.step_marks = [], [], []
        if self.track_hardware_metrics:
            self._nvml = NvmlSampler(self.device_index)
            reason = self._nvml.open()
            if reason is not None:
                self._nvml = None
                self.nvml_status = f"NVML unavailable: {reason}"
                _log.warning("GPU_Performance_Tracker(%r): %s; sampling torch and host metrics only",
                             self.prefix, self.nvml_status)
            else:
                self.nvml_status = f"ok: {self._nvml.device_name}"
                self.energy_method = self._nvml.energy_method
        host_reason = self._host.open()
        header = {"prefix": self.prefix, "rank": self.rank, "interval_s": self.interval, "start_ts": time.time(),
                  "nvml": self.nvml_status, "energy_method": self.energy_method,
                  "host": "psutil" if host_reason is None else f"host metrics unavailable: {host_reason}"}
        try:
            self._writer = SamplesWriter(self.samples_path, header)
        except OSError as exc:  # an unwritable folder must not stop training: keep samples in memory
            self._note(f"samples file {self.samples_path} not written: {exc}")
            self._writer = None
        for note in (self._nvml.notes if self._nvml else []):
            self._note(note)
        self._t0 = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"GPU_Performance_Tracker[{self.prefix}]",
                                        daemon=True)
        self._thread.start()

    def stop_monitoring(self) -> None:
        """Stop and join the thread, then write the PNG and the HTML (a failure there is logged)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.plot_usage_graphs()
        self.write_html()

    def __enter__(self) -> GPU_Performance_Tracker:
        self.start_monitoring()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_monitoring()

    # -- sampling --------------------------------------------------------------------------

    def _note(self, text: str) -> None:
        self.notes.append(text)
        if self._writer is not None:
            try:
                self._writer.note(time.time(), text)
            except (OSError, ValueError):
                pass

    def _run(self) -> None:
        seen_notes = len(self._nvml.notes) if self._nvml else 0
        next_at = time.monotonic()
        while True:
            try:
                self.sample_once()
            except Exception as exc:  # report once; the next tick tries again
                if not self._reported_error:
                    self._reported_error = True
                    text = f"sampler error (reported once, sampling goes on): {type(exc).__name__}: {exc}"
                    _log.warning("GPU_Performance_Tracker(%r): %s", self.prefix, text)
                    self._note(text)
            if self._nvml is not None and len(self._nvml.notes) > seen_notes:
                for note in self._nvml.notes[seen_notes:]:
                    self._note(note)
                seen_notes = len(self._nvml.notes)
            next_at += self.interval
            # a fixed schedule (not sleep(interval)) so sampling time does not stretch the period
            if self._stop.wait(max(0.0, next_at - time.monotonic())):
                return

    def mark_step(self, step: int) -> None:
        """Training step ``step`` ends now: written to the samples file, so energy per step can be measured.

        Cheap (one line written, no sampling); never raises for a file that cannot be written.
        """
        now = time.time()
        self.step_marks.append(StepMark(now, int(step)))
        if self._writer is not None:
            try:
                self._writer.step(now, step)
            except (OSError, ValueError) as exc:
                if not self._reported_error:
                    self._reported_error = True
                    _log.warning("GPU_Performance_Tracker(%r): step end not written (%s)", self.prefix, exc)

    def follow(self, timer: Any) -> None:
        """Mark the end of every step of ``timer`` (a MyTimer): each ``timer.step()`` calls ``mark_step``."""
        timer.add_listener(lambda step, regions: self.mark_step(step))

    def sample_once(self) -> Sample:
        """Take one sample now, keep it and append it to the file."""
        now, t = time.time(), time.monotonic() - self._t0
        metrics: dict[str, float] = {}
        cuda = _torch_cuda()
        if cuda is not None:
            metrics["torch_allocated_bytes"] = float(cuda.memory_allocated())
            metrics["torch_reserved_bytes"] = float(cuda.memory_reserved())
        if self._nvml is not None:
            metrics.update(self._nvml.sample(t))
        metrics.update(self._host.sample())
        sample = Sample(now, t, metrics)
        self.samples.append(sample)
        if self._writer is not None:
            self._writer.sample(sample)
        return sample

    # -- outputs ---------------------------------------------------------------------------

    def plot_usage_graphs(self, output_path: str | Path | None = None) -> Path | None:
        """The seed's two-panel PNG (memory; utilisation and power); None when it cannot be drawn."""
        from my_utils.memory.charts import ChartUnavailable, write_png

        path = Path(output_path) if output_path is not None else self._path("performance_profile.png")
        try:
            self.png_path = write_png(path, self.samples, title=self._title(), nvml_status=self.nvml_status)
        except ChartUnavailable as exc:
            _log.warning("GPU_Performance_Tracker(%r): no PNG: %s", self.prefix, exc)
            return None
        except OSError as exc:
            _log.warning("GPU_Performance_Tracker(%r): writing %s failed: %s", self.prefix, path, exc)
            return None
        return self.png_path

    def write_html(self, output_path: str | Path | None = None) -> Path | None:
        """An interactive HTML page (plotly.js inlined once: works offline); None when it cannot be written."""
        from my_utils.memory.charts import ChartUnavailable, write_html

        path = Path(output_path) if output_path is not None else self._path("performance_profile.html")
        try:
            self.html_path = write_html(path, self.samples, title=self._title(), nvml_status=self.nvml_status)
        except ChartUnavailable as exc:
            _log.warning("GPU_Performance_Tracker(%r): no HTML: %s", self.prefix, exc)
            return None
        except OSError as exc:
            _log.warning("GPU_Performance_Tracker(%r): writing %s failed: %s", self.prefix, path, exc)
            return None
        return self.html_path

    def _title(self) -> str:
        return f"{self.prefix} rank {self.rank}: {len(self.samples)} samples every {self.interval:g} s"
