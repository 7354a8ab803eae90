"""``ModuleProfiler``: forward times of every leaf module of a model, from forward pre/post hooks.

Legacy path: ``from my_utils.moduleProfiler import ModuleProfiler`` (the same module).

Cost model: each call of a hooked module runs two tiny closures (one clock mark each and a
list append/pop); the statistics are computed only by ``summary()``. On the CPU the post hook
keeps the integer nanoseconds between the marks in an ``array('q')`` (no call, no float
division, no int object kept alive per call: with torch's own hook dispatch around them,
within a few percent of hooks that only read the clock, see ``bench/bench_hooks.py``); they
become milliseconds when read. CUDA events are read after one
synchronize in ``stop()``/``summary()``, never inside a hook (see ``timing``).
"""

from __future__ import annotations

import logging
import os
import sys
from array import array
from collections.abc import Callable, MutableSequence
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import UsageError
from my_utils.hooks.summary import module_stats, summary_frame, write_summary_csv
from my_utils.hooks.timing import ModuleClock, choose_clock

if TYPE_CHECKING:
    import pandas as pd

_log = logging.getLogger("my_utils.hooks")

__all__ = ["ModuleProfiler"]


def leaf_modules(model: Any) -> list[tuple[str, Any]]:
    """``(name, module)`` of every module without children; the model itself when it is a leaf.

    A module registered under two names is timed once, under its first name (torch's
    ``named_modules`` de-duplicates), so a shared layer's calls are not counted twice.
    """
    leaves = [(name, m) for name, m in model.named_modules() if next(m.children(), None) is None]
    return [(name or type(model).__name__, m) for name, m in leaves]


class ModuleProfiler:
    """Times each call of every leaf module of ``model`` (``perf_counter_ns`` on the CPU, CUDA events on CUDA).

    Hooks are registered at construction and record at once; ``start()`` and ``stop()``
    bracket the forwards to time (after ``stop()`` nothing is recorded until the next
    ``start()``). A module called several times in one forward counts each call. A call that
    raises is not timed, and leaves nothing half-open (``failed_calls`` counts them).
    ``summary()`` gives the seed's table; ``cleanup()`` (or leaving the ``with`` block)
    removes every hook and keeps the statistics.

    ``use_cuda=None`` picks CUDA events when the model's parameters are on a CUDA device;
    ``use_cuda=True`` without a usable GPU warns once and times on the CPU. ``clock`` replaces
    that choice with any ``timing.ModuleClock`` (a seam for tests and other devices).
    """

    def __init__(self, model: Any, use_cuda: bool | None = None, *, clock: ModuleClock | None = None) -> None:
        if not all(callable(getattr(model, a, None)) for a in ("named_modules", "parameters", "buffers")):
            raise UsageError(f"ModuleProfiler(model={type(model).__name__}): expected a torch.nn.Module "
                             "(it registers forward hooks on the model's leaf modules)")
        self.model = model
        self._clock: ModuleClock = clock if clock is not None else choose_clock(model, use_cuda)
        self._recording = [True]  # a list: the hooks read it through their closure, not through self
        self._open: dict[str, list[Any]] = {}
        self._opened: list[list[Any]] = []  # the same lists: any() over them is one C loop in stop()
        self._pending: dict[str, list[tuple[Any, Any]]] = {}
        # per module: ms (a list), or integer ns in an array('q') when the clock's marks are ns
        # (``timing.ModuleClock.ns_marks``)
        self._durations: dict[str, MutableSequence[Any]] = {}
        self._ns = bool(getattr(self._clock, "ns_marks", False)) and not self._clock.deferred
        self._failed: dict[str, int] = {}
        self._handles: list[Any] = []
        self.runs = 0
        for name, module in leaf_modules(model):
            pre, post = self._hooks(name)
            self._handles.append(module.register_forward_pre_hook(pre))
            # always_call: the post hook also runs when forward raises, so no start mark dangles
            self._handles.append(module.register_forward_hook(post, always_call=True))

    def _hooks(self, name: str) -> tuple[Callable[..., None], Callable[..., None]]:
        """The pre and post hook of module ``name``: they touch only containers bound here (the hot path)."""
        opened: list[Any] = []
        pending: list[tuple[Any, Any]] = []
        durations: MutableSequence[Any] = array("q") if self._ns else []
        self._open[name] = opened
        self._opened.append(opened)
        self._pending[name] = pending
        self._durations[name] = durations
        recording = self._recording
        mark = self._clock.mark
        elapsed = self._clock.elapsed_ms
        # a deferred clock (CUDA) keeps the pair for stop(); the CPU clock converts at once, so
        # stop() has nothing to walk through (it ran once per forward over every module)
        done = pending.append if self._clock.deferred else None
        failed = self._failed
        exc_info = sys.exc_info

        # Locals and closure cells only (no `self.` chain). `opened.append(...)` as written is
        # CPython's specialised list append (3.11+), cheaper than calling a saved bound method.
        def pre(module: Any, args: Any) -> None:
            if recording[0]:
                opened.append(mark())

        if self._ns:
            # The ns differences go into an array('q'): 8 bytes per call and no int object kept
            # alive per call (a list of ints kept ~40 bytes per call, and the forwards paid for
            # that memory in the bench); the start mark waits in a list (a cheaper append/pop).
            keep = durations.append

            def post_ns(module: Any, args: Any, result: Any) -> None:
                end = mark()
                if opened:  # else: began while stopped, or dropped by start()
                    # torch calls always_call hooks from its `except` block with result None
                    if result is None and exc_info()[1] is not None:
                        opened.pop()
                        failed[name] = failed.get(name, 0) + 1
                    else:
                        keep(end - opened.pop())  # ns, an int: read as ms by _milliseconds()

            return pre, post_ns

        def post(module: Any, args: Any, result: Any) -> None:
            end = mark()
            if not opened:  # began while stopped, or dropped by start()
                return
            begin = opened.pop()
            # torch calls always_call hooks from its `except` block with result None
            if result is None and exc_info()[1] is not None:
                failed[name] = failed.get(name, 0) + 1
                return
            if done is None:
                durations.append(elapsed(begin, end))
            else:
                done((begin, end))

        return pre, post

    # -- control -------------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        """Whether the hooks are still registered (False after ``cleanup()``)."""
        return bool(self._handles)

    @property
    def recording(self) -> bool:
        """Whether module calls are being timed now."""
        return self._recording[0]

    @property
    def clock(self) -> str:
        """``"cpu"`` (perf_counter_ns) or ``"cuda"`` (CUDA events)."""
        return self._clock.name

    @property
    def module_names(self) -> list[str]:
        """The hooked leaf modules, in the model's order."""
        return list(self._durations)

    @property
    def failed_calls(self) -> dict[str, int]:
        """How many calls of each module raised (and were therefore not timed)."""
        return dict(self._failed)

    def start(self) -> None:
        """Begin timing (call before the forward); drops marks left open by an interrupted forward."""
        if not self._handles:
            raise UsageError("ModuleProfiler.start() after cleanup(): its hooks are removed; "
                             "create a new ModuleProfiler(model) to profile again")
        self._drop_open()
        self._recording[0] = True

    def stop(self) -> None:
        """End timing (call after the forward; on CUDA after the work you want counted is queued).

        Reads the run's CUDA events after one synchronize and adds them to the statistics.
        """
        self._recording[0] = False
        self._drop_open()
        self._settle()
        self.runs += 1

    def _drop_open(self) -> None:
        """Forget start marks whose post hook never came (a forward stopped by KeyboardInterrupt)."""
        if not any(self._opened):  # the usual case, checked without a Python loop (twice per forward)
            return
        for name, opened in self._open.items():
            if opened:
                _log.debug("ModuleProfiler: dropping %d unfinished call(s) of %s", len(opened), name)
                self._failed[name] = self._failed.get(name, 0) + len(opened)
                opened.clear()

    def _settle(self) -> None:
        """Turn every pending pair of marks into milliseconds (one device synchronize on CUDA)."""
        if not self._clock.deferred or not any(self._pending.values()):
            return
        self._clock.settle()
        elapsed = self._clock.elapsed_ms
        for name, pending in self._pending.items():
            if pending:
                self._durations[name].extend(elapsed(a, b) for a, b in pending)
                pending.clear()

    def _milliseconds(self) -> dict[str, list[float]]:
        """Every timed call per module in ms (new lists when kept in ns; pending CUDA events read first)."""
        self._settle()
        if self._ns:  # (end - begin) / 1e6: the same float CpuClock.elapsed_ms gives
            return {name: [v / 1e6 for v in values] for name, values in self._durations.items()}
        # on this path every value is a list of ms floats
        return self._durations  # type: ignore[return-value]

    def durations_ms(self) -> dict[str, list[float]]:
        """Every timed call per module, in ms (a copy; pending CUDA events are read first)."""
        return {name: list(values) for name, values in self._milliseconds().items()}

    def summary(self, output_path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
        """The seed's table: ``module_name, mean_ms, median_ms, std_ms, total_ms, run_count, percentage``.

        One row per module that ran, slowest (largest total) first; ``run_count`` counts
        calls. With ``output_path`` the table is also written there as CSV (atomically; a
        write error is logged and the DataFrame still returned).
        """
        frame = summary_frame(module_stats(self._milliseconds()))
        if output_path is not None:
            write_summary_csv(frame, output_path)
        return frame

    def cleanup(self) -> None:
        """Remove every hook (safe to call again); the statistics stay readable."""
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
        self._recording[0] = False
        self._drop_open()
        try:
            self._settle()
        except Exception as exc:  # a device error must not escape a `with` block's exit
            _log.error("ModuleProfiler.cleanup could not read pending CUDA timings: %s", exc)
            for pending in self._pending.values():
                pending.clear()

    def __enter__(self) -> ModuleProfiler:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "recording" if self.recording else ("stopped" if self.attached else "cleaned up")
        return f"ModuleProfiler({type(self.model).__name__}, {len(self._durations)} leaf modules, {self.clock}, {state})"
