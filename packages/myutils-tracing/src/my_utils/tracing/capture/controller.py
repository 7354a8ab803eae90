"""``CaptureController``: arms windows, matches hook events, starts and stops the backend.

A window's lifecycle goes through ``lifecycle.transition`` only. At most one window
captures at a time (a profiler backend is process-wide); others stay armed until their
start event comes or their start iteration passes. Every window that started is stopped
exactly once: by its stop condition, when its stop iteration passes, by ``close()``
(also as a context manager, when an exception escapes) or at interpreter exit.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import UsageError
from my_utils.tracing.capture import _exit
from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.config import Edge, StopPolicy
from my_utils.tracing.capture.control_file import ControlFileWatcher
from my_utils.tracing.capture.lifecycle import (
    CaptureState,
    Trigger,
    start_mismatch,
    stop_mismatch,
    transition,
)
from my_utils.tracing.capture.spec import (
    STEP_PROFILE_NAME,
    CaptureSpec,
    EventRecord,
    HookEvent,
    StopReason,
    WindowClosing,
    WindowInfo,
)
from my_utils.tracing.capture.step_clock import StepClock

_log = logging.getLogger("my_utils.tracing.capture")


class _Window:
    """The run state of one armed spec (mutable, private to the controller)."""

    __slots__ = ("depth", "info", "nvtx_token", "spec", "state", "trigger_name")

    def __init__(self, spec: CaptureSpec) -> None:
        self.spec = spec
        self.state = transition(CaptureState.IDLE, Trigger.ARM, spec.name)
        self.trigger_name = ""
        self.depth = 0
        self.info: WindowInfo | None = None
        self.nvtx_token: Any = None

    def move(self, trigger: Trigger) -> None:
        self.state = transition(self.state, trigger, self.spec.name)


def _ignore(*args: object) -> None:
    """Stands in for the optional backend hooks of duck-typed backends."""


class CaptureController:
    """Drives one backend from hook events: ``arm(spec)``, ``on_enter(event)``, ``on_exit(event)``.

    ``window_labeler`` (a labeler) wraps each window whose spec asks for it in an NVTX range
    named after the window. ``rank`` is used for events that carry none (default: ``RANK``).
    """

    def __init__(self, backend: CaptureBackend, logger: logging.Logger | Any = None,
                 window_labeler: Any = None, rank: int | None = None) -> None:
        if not (callable(getattr(backend, "start", None)) and callable(getattr(backend, "stop", None))):
            raise UsageError(f"CaptureController: backend {backend!r} has no start()/stop(); "
                             "pass a CaptureBackend instance")
        self.backend = backend
        self.logger: Any = logger if logger is not None else _log
        self.window_labeler = window_labeler
        self.rank = env_rank(0) if rank is None else rank
        self._armed: list[_Window] = []
        self._active: _Window | None = None
        self._lock = threading.RLock()
        self._iteration: int | None = None
        self._watcher: ControlFileWatcher | None = None
        self._watch_mb = 1
        self._backend_problems = 0
        self.completed: list[tuple[WindowInfo, WindowClosing]] = []
        self.steps = StepClock()  # each step's time and whether a window profiled it (WindowClosing.steps)

    # -- state -------------------------------------------------------------------------

    @property
    def state(self) -> CaptureState:
        """CAPTURING while a window is open, ARMED while any waits, else IDLE."""
        if self._active is not None:
            return CaptureState.CAPTURING
        return CaptureState.ARMED if self._armed else CaptureState.IDLE

    @property
    def armed(self) -> tuple[CaptureSpec, ...]:
        """Specs waiting for their start event."""
        return tuple(w.spec for w in self._armed)

    @property
    def active(self) -> WindowInfo | None:
        """The window being captured, if any."""
        return self._active.info if self._active is not None else None

    def _debug(self, spec: CaptureSpec, message: str, *args: Any) -> None:
        if spec.debug_watch:
            self.logger.info("[capture %s] " + message, spec.name, *args)

    # -- arming ------------------------------------------------------------------------

    def arm(self, spec: CaptureSpec) -> None:
        """Wait for ``spec``'s start event (arming the same window name twice keeps the first)."""
        if not isinstance(spec, CaptureSpec):
            raise UsageError(f"CaptureController.arm: expected a CaptureSpec, got {type(spec).__name__}; "
                             "build specs with ProfileManager.build_specs_to_arm_at_iter()")
        with self._lock:
            names = {w.spec.name for w in self._armed}
            if self._active is not None:
                names.add(self._active.spec.name)
            if spec.name in names:
                self._debug(spec, "already armed or capturing; arm ignored")
                return
            self._armed.append(_Window(spec))
            self._debug(spec, "armed: start at iter %s mb %s, stop at iter %s mb %s (%s)", spec.start_iter,
                        spec.start_mb, spec.stop_iter, spec.stop_mb, spec.stop_policy.value)

    def watch_control_file(self, path: str | os.PathLike[str], every_n_steps: int = 10, num_microbatches: int = 1,
                           default_stop_policy: StopPolicy = StopPolicy.ON_TRIGGER_FUNC_EXIT,
                           nvtx_window: bool = False, debug_watch: bool = False) -> ControlFileWatcher:
        """Arm the windows written to ``path`` while running (checked every ``every_n_steps`` steps).

        The file holds ``windows: [...]`` in the config's window format; ``start_iter`` and
        ``stop_iter`` may be ``"+N"`` (N steps after the step when the file is read).
        """
        watcher = ControlFileWatcher(Path(path), every_n_steps=every_n_steps,
                                     default_stop_policy=default_stop_policy, nvtx_window=nvtx_window,
                                     debug_watch=debug_watch, logger=self.logger)
        with self._lock:
            self._watcher = watcher
            self._watch_mb = num_microbatches
        return watcher

    # -- events ------------------------------------------------------------------------

    def on_enter(self, event: HookEvent) -> None:
        """A hooked region is being entered."""
        self._on_event(event, Edge.ENTER)

    def on_exit(self, event: HookEvent) -> None:
        """A hooked region was left."""
        self._on_event(event, Edge.EXIT)

    def on_step(self, step: int, role: str | None = None, rank: int | None = None) -> None:
        """Step ``step`` just ended and ``step + 1`` begins: step-boundary events for step windows."""
        self._on_event(HookEvent(STEP_PROFILE_NAME, {"iter": step}, role, rank), Edge.EXIT)
        self._on_event(HookEvent(STEP_PROFILE_NAME, {"iter": step + 1}, role, rank), Edge.ENTER)

    @contextmanager
    def region(self, profile_name: str, meta: Mapping[str, Any] | None = None, role: str | None = None,
               rank: int | None = None) -> Iterator[None]:
        """``on_enter`` now and ``on_exit`` when the body ends, also when it raises."""
        event = HookEvent(profile_name, dict(meta or {}), role, rank)
        self.on_enter(event)
        try:
            yield
        finally:
            self.on_exit(event)

    def _on_event(self, event: HookEvent, edge: Edge) -> None:
        it = event.iteration
        with self._lock:
            if it is not None and it != self._iteration:
                self._new_iteration(it)
            if not self._armed and self._active is None:
                return
            record = EventRecord(edge, event.profile_name, it, event.microbatch, event.role,
                                 self.rank if event.rank is None else event.rank)
            active = self._active
            if active is not None:
                self._check_stop(active, record)
            if self._active is None:
                self._check_starts(record)

    def _new_iteration(self, it: int) -> None:
        self._iteration = it
        self.steps.step_started(it, self._active is not None)
        if self._watcher is not None:
            for spec in self._watcher.poll(it, self._watch_mb):
                self.arm(spec)
        for window in list(self._armed):
            if it > window.spec.start_iter:
                window.move(Trigger.EXPIRE)
                self._armed.remove(window)
                self._debug(window.spec, "expired: iteration %s passed start_iter %s without a start event",
                            it, window.spec.start_iter)
        active = self._active
        if active is not None and it > active.spec.stop_iter:
            self.logger.warning("capture window %r %s (now at iteration %s, stop_iter %s); stopping it",
                                active.spec.name, StopReason.OVERRUN.value, it, active.spec.stop_iter)
            self._stop(active, StopReason.OVERRUN, None)
        active = self._active
        if active is not None:  # the backend may mark steps (torch_profiler: ProfilerStep#N)
            try:
                getattr(self.backend, "step_began", _ignore)(it)
            except Exception:
                self._backend_failed("step_began()", active)

    def _check_stop(self, window: _Window, record: EventRecord) -> None:
        if record.profile_name == window.trigger_name:
            window.depth += 1 if record.edge is Edge.ENTER else -1
            window.depth = max(window.depth, 0)
        why = stop_mismatch(window.spec, window.trigger_name, window.depth, record.edge, record.profile_name,
                            record.iteration, record.microbatch, record.role, record.rank)
        if why is None:
            self._stop(window, StopReason.CONDITION, record)
        else:
            self._debug(window.spec, "%s %r iter %s mb %s: no stop (%s)", record.edge.value, record.profile_name,
                        record.iteration, record.microbatch, why)

    def _check_starts(self, record: EventRecord) -> None:
        for window in self._armed:
            why = start_mismatch(window.spec, record.edge, record.profile_name, record.iteration,
                                 record.microbatch, record.role, record.rank)
            if why is None:
                self._armed.remove(window)
                self._start(window, record)
                return
            self._debug(window.spec, "%s %r iter %s mb %s: no start (%s)", record.edge.value, record.profile_name,
                        record.iteration, record.microbatch, why)

    # -- backend calls -----------------------------------------------------------------

    def _backend_failed(self, what: str, window: _Window) -> None:
        self._backend_problems += 1
        if self._backend_problems == 1:
            self.logger.exception("capture backend %r failed in %s for window %r; the run continues",
                                  type(self.backend).__name__, what, window.spec.name)
        else:
            self.logger.debug("capture backend %s failed again (window %r)", what, window.spec.name)

    def _start(self, window: _Window, record: EventRecord) -> None:
        spec = window.spec
        window.info = WindowInfo(spec.name, record.rank, spec.start_iter, spec.stop_iter, spec.role, spec.origin,
                                 record)
        window.trigger_name = record.profile_name
        window.depth = 1
        try:
            getattr(self.backend, "window_opening", _ignore)(window.info)
            self.backend.start()
        except Exception:
            self._backend_failed("start()", window)
            window.move(Trigger.FAIL)
            return
        window.move(Trigger.START)
        self._active = window
        self.steps.capture_changed()
        _exit.track(self)
        if spec.nvtx_window and self.window_labeler is not None:
            window.nvtx_token = self.window_labeler.start(spec.name)
        self._debug(spec, "START on %s %r iter %s mb %s", record.edge.value, record.profile_name,
                    record.iteration, record.microbatch)

    def _stop(self, window: _Window, reason: StopReason, record: EventRecord | None) -> None:
        info = window.info
        if info is None:  # cannot happen: _start sets it before START
            raise RuntimeError(f"capture window {window.spec.name!r} has no WindowInfo")
        # the state moves first: a failing or re-entrant stop can never stop twice
        window.move(Trigger.STOP)
        self._active = None
        _exit.untrack(self)
        if window.nvtx_token is not None and self.window_labeler is not None:
            self.window_labeler.stop(window.nvtx_token)
            window.nvtx_token = None
        self.steps.capture_changed()
        closing = WindowClosing(reason, record, self.steps.take())
        try:
            self.backend.stop()
        except Exception:
            self._backend_failed("stop()", window)
        try:
            getattr(self.backend, "window_closed", _ignore)(info, closing)
        except Exception:
            self._backend_failed("window_closed()", window)
        self.completed.append((info, closing))
        if record is not None:
            self._debug(window.spec, "STOP on %s %r iter %s mb %s", record.edge.value, record.profile_name,
                        record.iteration, record.microbatch)
        else:
            self._debug(window.spec, "STOP: %s", reason.value)

    # -- closing -----------------------------------------------------------------------

    def close(self, reason: StopReason = StopReason.CLOSED) -> None:
        """Stop the open window (exactly once) and drop the armed ones; safe to call again."""
        with self._lock:
            if self._active is not None:
                self._stop(self._active, reason, None)
            for window in self._armed:
                window.move(Trigger.CANCEL)
            self._armed.clear()

    def _close_at_exit(self) -> None:
        self.close(StopReason.INTERPRETER_EXIT)

    def __enter__(self) -> CaptureController:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(StopReason.EXCEPTION if exc_type is not None else StopReason.CLOSED)
