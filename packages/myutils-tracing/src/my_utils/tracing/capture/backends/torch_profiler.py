"""``TorchProfilerBackend``: one Kineto trace (``.json.gz``) per captured window.

Works on the CPU build of torch (CPU activities only); CUDA activities are added when a
device is visible. File names carry the rank and the steps the trace holds, e.g.
``trace_rank0_steps5-7_forward_window.pt.trace.json.gz``: not the window's configured range,
which can differ (a window stopped as step 8 begins holds steps 6 and 7, not 8). That is
known only once the controller says how the window closed, so the trace is written in
``window_closed``; a window cut short before its stop event (``close()``, an exception,
interpreter exit) is named ``steps<a>-upto<b>``: it began at step a and ended by step b.

Every step in a trace is marked ``ProfilerStep#<iteration>``, as ``prof.step()`` marks them
under a torch schedule, so the per-step analyses work on these traces: the window gives the
user no profiler to call ``step()`` on. The backend opens a ``record_function`` when the
window starts and replaces it whenever the controller sees a new iteration
(``step_began``); the first marker starts where the window started. The ranges are recorded
under a private name and renamed at export, so a loop that marks its own ``ProfilerStep#N``
keeps its markers and gets no second set. The profiler's own start-up lands in the first step
of a window: as ``schedule(warmup=N)`` does, the first ``warmup_steps`` steps of a window that
holds more run under the profiler but are not marked, so no per-step figure includes them.
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
from my_utils.tracing.capture.config import Edge
from my_utils.tracing.capture.spec import STEP_PROFILE_NAME, StopReason, WindowClosing, WindowInfo

_log = logging.getLogger("my_utils.tracing.capture")

DEFAULT_OUTPUT_DIR = "profile_captures"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: The name our step ranges are recorded under; ``ProfilerStep#N`` in the written trace.
STEP_MARK = "my_utils.capture.step#"


def safe_file_part(text: str, limit: int = 80) -> str:
    """``text`` reduced to letters, digits, ``.``, ``_`` and ``-`` (never empty, never ``..``)."""
    cleaned = _UNSAFE.sub("_", text).strip("._")[:limit]
    return cleaned or "window"


def held_steps(window: WindowInfo, closing: WindowClosing | None) -> tuple[int, int | None]:
    """The first and last step a window's trace holds; the last is None when no stop event says.

    A window starts as its start event enters, so its first step is that event's. A stop on an
    exit holds that step; a stop as a step begins (``__step__`` entered) holds the step before.
    An overrun stop comes at the first event after ``stop_iter``, so it holds ``stop_iter``.
    """
    first = window.started_by.iteration if window.started_by.iteration is not None else window.start_iter
    record = closing.stopped_by if closing is not None else None
    if record is None or record.iteration is None:
        if closing is not None and closing.reason is StopReason.OVERRUN:
            return first, max(first, window.stop_iter)
        return first, None
    last = record.iteration
    if record.edge is Edge.ENTER and record.profile_name == STEP_PROFILE_NAME:
        last -= 1
    return first, max(first, last)


def _complete_trace(doc: dict[str, Any], window: WindowInfo | None, closing: WindowClosing | None,
                    warmup: int = 0) -> None:
    """Name every process lane (Kineto leaves its ``Spans`` lane unnamed) and record the window."""
    events = doc.setdefault("traceEvents", [])
    named = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    # a global instant (Kineto's "Record Window End", pid "") belongs to no process, and Perfetto's
    # JSON parser fails on a process_name whose pid is "" (json_parser_failure)
    used = {e.get("pid") for e in events
            if e.get("ph") != "M" and e.get("pid") not in (None, "") and not (e.get("ph") in ("i", "I") and e.get("s") == "g")}
    for pid in sorted(used - named, key=str):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": str(pid)}})
    markers = _name_step_markers(events)
    if window is not None:
        first, last = held_steps(window, closing)
        stopped = closing.stopped_by if closing is not None else None
        doc.setdefault("otherData", {})["myutils_capture"] = {
            "window": window.name, "rank": window.rank, "start_iter": window.start_iter,
            "stop_iter": window.stop_iter, "origin": window.origin, "first_step": first, "last_step": last,
            "stop_reason": closing.reason.value if closing is not None else None, "step_markers": markers,
            "warmup_steps": warmup,
            # step times since the previous window: what profiling cost per step (profiling's capture.overhead)
            "steps": [s.to_json() for s in closing.steps] if closing is not None else [],
            "stopped_by": None if stopped is None else {
                "edge": stopped.edge.value, "profile_name": stopped.profile_name, "iteration": stopped.iteration}}


def _name_step_markers(events: list[Any]) -> str:
    """Turn our step ranges into ``ProfilerStep#N`` (or drop them when the loop marked its own steps).

    Returns who marked the steps: ``"backend"``, ``"user"`` or ``"none"``.
    """
    ours = [i for i, e in enumerate(events) if str(e.get("name", "")).startswith(STEP_MARK)]
    theirs = any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events)
    if theirs:
        for i in reversed(ours):
            del events[i]
        return "user"
    for i in ours:
        events[i]["name"] = "ProfilerStep#" + events[i]["name"][len(STEP_MARK):]
    return "backend" if ours else "none"


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
                 profile_memory: bool = False, with_stack: bool = False, cuda: bool | None = None,
                 warmup_steps: int = 1) -> None:
        if warmup_steps < 0:
            raise ValueError(f"TorchProfilerBackend(warmup_steps={warmup_steps!r}): expected 0 or more steps")
        self.warmup_steps = warmup_steps
        self.output_dir = Path(output_dir)
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.cuda = cuda
        self.traces: list[Path] = []
        self._window: WindowInfo | None = None
        self._prof: Any = None
        self._stopped: Any = None  # a stopped profiler whose trace waits for window_closed
        self._step_range: Any = None  # the open record_function of the current step
        self._step: int | None = None
        self._marked_from: int | None = None  # the first step this window marks (after its warm-up)

    def window_opening(self, window: WindowInfo) -> None:
        """Remember the window: its rank and the steps it holds name the trace file."""
        self._flush()
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
        if self._window is not None:
            first = held_steps(self._window, None)[0]
            warm = self.warmup_steps if self._window.stop_iter - first >= self.warmup_steps else 0
            self._marked_from = first + warm
            self._open_step(first)

    def step_began(self, iteration: int) -> None:
        """Close the current step's marker and open ``ProfilerStep#<iteration>`` (later iterations only)."""
        if self._prof is None or (self._step is not None and iteration <= self._step):
            return
        self._close_step()
        self._open_step(iteration)

    def _open_step(self, iteration: int) -> None:
        self._step = iteration
        if self._marked_from is not None and iteration < self._marked_from:
            return  # a warm-up step: profiled, not marked
        from torch.profiler import record_function

        marker = record_function(f"{STEP_MARK}{iteration}")
        marker.__enter__()
        self._step_range = marker

    def _close_step(self) -> None:
        marker, self._step_range = self._step_range, None
        if marker is not None:
            marker.__exit__(None, None, None)

    def trace_path(self, window: WindowInfo | None, closing: WindowClosing | None = None) -> Path:
        """Where the trace of ``window`` goes (a numbered suffix avoids overwriting an older one)."""
        if window is None:
            stem = f"trace_rank{env_rank(0)}_window"
        else:
            first, last = held_steps(window, closing)
            steps = f"{first}-{last}" if last is not None else f"{first}-upto{max(first, window.stop_iter)}"
            stem = f"trace_rank{window.rank}_steps{steps}_{safe_file_part(window.name)}"
        path = self.output_dir / f"{stem}.pt.trace.json.gz"
        n = 2
        while path.exists():
            path = self.output_dir / f"{stem}_{n}.pt.trace.json.gz"
            n += 1
        return path

    def stop(self) -> None:
        """Stop the profiler; the trace is written now without a window, else by ``window_closed``."""
        prof, self._prof = self._prof, None
        if prof is None:
            return
        try:
            self._close_step()
        finally:
            self._step = self._marked_from = None
        self._flush()
        prof.stop()
        self._stopped = prof
        if self._window is None:
            self._flush()

    def _flush(self, closing: WindowClosing | None = None) -> None:
        """Write the stopped profiler's trace, if one waits."""
        prof, self._stopped = self._stopped, None
        if prof is not None:
            self._export(prof, self._window, closing)

    def _export(self, prof: Any, window: WindowInfo | None, closing: WindowClosing | None) -> None:
        """Write ``prof``'s trace atomically; a disk problem is logged, never raised."""
        target = self.trace_path(window, closing)
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.output_dir, prefix=".export-") as tmp:
                raw = Path(tmp) / "trace.json"
                prof.export_chrome_trace(str(raw))
                doc = json.loads(raw.read_text(encoding="utf-8"))
                _complete_trace(doc, window, closing, self._exported_warmup(window))
                with atomic_write(target, "wb") as dst, gzip.GzipFile(fileobj=dst, mode="wb", mtime=0) as gz:
                    gz.write(json.dumps(doc).encode("utf-8"))
        except OSError as exc:
            _log.error("TorchProfilerBackend could not write %s: %s", target, exc)
            return
        self.traces.append(target)
        _log.info("capture trace written: %s", target)

    def _exported_warmup(self, window: WindowInfo | None) -> int:
        """The warm-up steps a window's trace left unmarked (none for a one-step window)."""
        if window is None:
            return 0
        first = held_steps(window, None)[0]
        return self.warmup_steps if window.stop_iter - first >= self.warmup_steps else 0

    def window_closed(self, window: WindowInfo, closing: WindowClosing) -> None:
        """Write the window's trace, named for the steps it holds, and forget the window."""
        self._window = window
        try:
            self._flush(closing)
        finally:
            self._window = None
