"""``TorchProfilerBackend``: one Kineto trace (``.json.gz``) per captured window.

Works on the CPU build of torch (CPU activities only); CUDA activities are added when a
device is visible. File names carry the rank and the window's step range, e.g.
``trace_rank0_steps5-7_forward_window.pt.trace.json.gz``.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.dist_env import env_rank
from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.spec import WindowClosing, WindowInfo

_log = logging.getLogger("my_utils.tracing.capture")

DEFAULT_OUTPUT_DIR = "profile_captures"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_file_part(text: str, limit: int = 80) -> str:
    """``text`` reduced to letters, digits, ``.``, ``_`` and ``-`` (never empty, never ``..``)."""
    cleaned = _UNSAFE.sub("_", text).strip("._")[:limit]
    return cleaned or "window"


def _complete_trace(doc: dict[str, Any], window: WindowInfo | None) -> None:
    """Name every process lane (Kineto leaves its ``Spans`` lane unnamed) and record the window."""
    events = doc.setdefault("traceEvents", [])
    named = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    used = {e.get("pid") for e in events if e.get("ph") != "M" and "pid" in e}
    for pid in sorted(used - named, key=str):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": str(pid)}})
    if window is not None:
        doc.setdefault("otherData", {})["myutils_capture"] = {
            "window": window.name, "rank": window.rank, "start_iter": window.start_iter,
            "stop_iter": window.stop_iter, "origin": window.origin}


def _torch_profiler_running() -> bool:
    import torch

    enabled = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    return bool(enabled()) if callable(enabled) else False


class TorchProfilerBackend(CaptureBackend):
    """``torch.profiler`` started and stopped by capture windows; one gzip'd trace each.

    Options are those of ``torch.profiler.profile`` that make sense per window. Export
    problems (disk full, unwritable directory) are logged and the run continues.
    """

    def __init__(self, output_dir: str | os.PathLike[str] = DEFAULT_OUTPUT_DIR, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, cuda: bool | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.cuda = cuda
        self.traces: list[Path] = []
        self._window: WindowInfo | None = None
        self._prof: Any = None

    def window_opening(self, window: WindowInfo) -> None:
        """Remember the window: its rank and steps name the trace file."""
        self._window = window

    def _activities(self) -> list[Any]:
        import torch
        from torch.profiler import ProfilerActivity

        activities = [ProfilerActivity.CPU]
        cuda = torch.cuda.is_available() if self.cuda is None else self.cuda
        if cuda:
            activities.append(ProfilerActivity.CUDA)
        return activities

    def start(self) -> None:
        """Start a new ``torch.profiler.profile``; refuse while another torch profiler runs.

        torch runs one profiler per process: a second ``start()`` is silently accepted and
        both sessions corrupt each other (torch crashes at exit). The controller logs the
        refusal and the window records nothing.
        """
        import torch.profiler

        if _torch_profiler_running():
            raise RuntimeError(
                "another torch.profiler session is already running in this process (torch runs one at "
                "a time); this window records nothing. Stop the other profiler or capture window first"
            )
        prof = torch.profiler.profile(activities=self._activities(), record_shapes=self.record_shapes,
                                      profile_memory=self.profile_memory, with_stack=self.with_stack)
        prof.start()
        self._prof = prof

    def trace_path(self, window: WindowInfo | None) -> Path:
        """Where the trace of ``window`` goes (a numbered suffix avoids overwriting an older one)."""
        if window is None:
            stem = f"trace_rank{env_rank(0)}_window"
        else:
            stem = (f"trace_rank{window.rank}_steps{window.start_iter}-{window.stop_iter}_"
                    f"{safe_file_part(window.name)}")
        path = self.output_dir / f"{stem}.pt.trace.json.gz"
        n = 2
        while path.exists():
            path = self.output_dir / f"{stem}_{n}.pt.trace.json.gz"
            n += 1
        return path

    def stop(self) -> None:
        """Stop the profiler and write the window's trace atomically."""
        prof, self._prof = self._prof, None
        if prof is None:
            return
        prof.stop()
        target = self.trace_path(self._window)
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.output_dir, prefix=".export-") as tmp:
                raw = Path(tmp) / "trace.json"
                prof.export_chrome_trace(str(raw))
                doc = json.loads(raw.read_text(encoding="utf-8"))
                _complete_trace(doc, self._window)
                with atomic_write(target, "wb") as dst, gzip.GzipFile(fileobj=dst, mode="wb", mtime=0) as gz:
                    gz.write(json.dumps(doc).encode("utf-8"))
        except OSError as exc:
            _log.error("TorchProfilerBackend could not write %s: %s", target, exc)
            return
        self.traces.append(target)
        _log.info("capture trace written: %s", target)

    def window_closed(self, window: WindowInfo, closing: WindowClosing) -> None:
        """Forget the window."""
        self._window = None
