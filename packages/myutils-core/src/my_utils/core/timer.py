"""MyTimer: nested CPU (and CUDA-event) timing of named regions, written as START/END profile rows.

Hot path: ``start``/``stop`` read ``perf_counter_ns`` and append to a list; nothing is formatted
and nothing is logged until ``step()``, which synchronises CUDA once, packs the step into one
record appended to the GlobalLogger's step log with one write (durable: it survives a kill -9),
and calls the listeners. The CSV rows are rendered from that log off the training thread
(``step_log_writer``). A disabled timer's ``start``/``stop`` are empty functions.

Why the hot path is fast: while the timer is plain (no CUDA, no NVTX) or disabled, ``start`` and
``stop`` are per-timer functions stored on the instance (``timer_calls``), so a call skips the
method binding and the mode tests. A mode change retires them (a retired one forwards to the
methods below, so a ``timer.start`` fetched earlier stays correct) and installs new ones. A
subclass that overrides ``start`` or ``stop`` gets its own methods, never these functions.

One MyTimer belongs to one thread (its open-region stack is not shared); several timers may write
into the same GlobalLogger from several threads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter_ns as _perf_ns
from typing import Any

from my_utils.core.clock import unix_offset_ns
from my_utils.core.cuda_events import CudaEvents, default_cuda_events
from my_utils.core.errors import UsageError
from my_utils.core.logger import GlobalLogger
from my_utils.core.step_log import encode_timer_step, pack_names, regions_of, timer_head
from my_utils.core.timer_calls import disabled_calls, plain_calls, retire
from my_utils.core.timer_rows import format_step_rows

__all__ = ["Listener", "MyTimer", "TimedRegion", "global_timer"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TimedRegion:
    """One closed region of a step, as given to listeners.

    ``node_id`` numbers the regions of a step in start order (from 0); ``parent_id`` is the
    enclosing region's id (None at depth 0). ``start_ns``/``end_ns`` come from
    ``perf_counter_ns``; ``start_unix``/``end_unix`` are the wall-clock times written in the
    START/END rows (time-offset corrected). ``cuda_ms`` is None without CUDA timing.
    """

    name: str
    step: int
    node_id: int
    parent_id: int | None
    depth: int
    start_ns: int
    end_ns: int
    start_unix: float
    end_unix: float
    cpu_ms: float
    cuda_ms: float | None


Listener = Callable[[int, Sequence[TimedRegion]], None]

# A step is recorded as one flat list of events, not as region objects: start appends
# (name, perf_counter_ns) and stop appends ("", ~perf_counter_ns) (negative: a stop). Nothing
# the hot path allocates is tracked by the garbage collector, and step() packs the list with
# two slices. ``regions_of`` turns it into regions [name, depth, start_ns, end_ns, position]
# only where they are needed on this thread (listeners, CUDA times, the direct CSV path).


class MyTimer:
    """Hierarchical region timer (see the module docstring); ``step()`` writes the step's rows.

    ``use_cuda``: also time regions with CUDA event pairs (True, False, or ``"auto"``: only if
    the program already imported torch and a GPU is present; never a warning). When CUDA is
    not usable, the timer reports it once through logging and times on the CPU only.
    ``log_dir``: where to set up the GlobalLogger if nobody did. ``labeler``: an NVTX labeler
    (``start(name) -> token``, ``stop(token)``); each region is then also an NVTX range.
    ``cuda_events``: the CUDA seam (tests pass a fake).
    """

    def __init__(
        self,
        use_cuda: bool | str = False,
        tag: str = "",
        log_dir: str | os.PathLike[str] | None = None,
        labeler: Any = None,
        enabled: bool = True,
        *,
        cuda_events: CudaEvents | None = None,
    ) -> None:
        if use_cuda not in (True, False, "auto"):
            raise UsageError(f"MyTimer(use_cuda={use_cuda!r}): expected True, False or 'auto'")
        self.use_cuda = use_cuda
        self.tag = str(tag)
        self.log_dir = log_dir
        self.labeler = labeler
        self._cuda_seam = cuda_events
        self._cuda: CudaEvents | None = None
        self._cuda_resolved = False
        self._event_pool: list[Any] = []
        self._stack: list[str] = []  # names of the open regions, innermost last
        self._ev: list[Any] = []  # the step's events (see above); the fast calls hold this list
        self._extras: list[tuple[Any, Any, Any]] = []  # CUDA/NVTX path: (event0, event1, token) per open region
        self._cuda_at: dict[int, tuple[Any, Any]] = {}  # CUDA events by the start's position in _ev
        self._names_blob: tuple[list[Any], bytes] = ([], b"")  # last step's event names, packed
        self._step = 0
        self._listeners: list[Listener] = []
        self._logger: logging.Logger | None = None
        self._manager: GlobalLogger | None = None
        self._resolved: GlobalLogger | None = None  # the set-up GlobalLogger found by the last step()
        self._reported: set[str] = set()
        self._row_cache: dict[tuple[Any, ...], tuple[str, str, str, str]] = {}
        self._head: tuple[str, bytes] = ("", b"")  # (machine id, packed tag + machine id)
        self._enabled = bool(enabled)
        self._plain = False
        self._update_mode()

    # -- configuration -----------------------------------------------------------------

    def _update_mode(self) -> None:
        # the plain path (no CUDA, no NVTX) is inlined in start/stop; everything else goes slow
        wants_cuda = self.use_cuda is not False and (not self._cuda_resolved or self._cuda is not None)
        self._plain = self._enabled and not wants_cuda and self.labeler is None
        self._install_fast_calls()

    def _install_fast_calls(self) -> None:
        attrs = self.__dict__
        old = attrs.pop("_fast", None)
        if old is not None:
            retire(old, self, MyTimer.start, MyTimer.stop)
        cls = type(self)
        calls = None
        if cls.start is MyTimer.start and cls.stop is MyTimer.stop:
            if self._plain:
                calls = plain_calls(self, self._ev, self._stack, MyTimer.start, MyTimer.stop)
            elif not self._enabled:
                calls = disabled_calls(self, MyTimer.start, MyTimer.stop)
        if calls is None:
            attrs.pop("start", None)
            attrs.pop("stop", None)
        else:
            attrs["start"], attrs["stop"] = attrs["_fast"] = calls

    def __getstate__(self) -> dict[str, Any]:
        # the fast calls hold this instance's lists; a copy builds its own
        state = self.__dict__.copy()
        for key in ("start", "stop", "_fast"):
            state.pop(key, None)
        state["_resolved"] = None  # a cache of the process's GlobalLogger, found again by step()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._install_fast_calls()

    @property
    def enabled(self) -> bool:
        """Whether the timer records anything; setting it to False drops open regions."""
        return self._enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        self._enabled = bool(value)
        if not self._enabled:
            self._stack.clear()
            self._ev.clear()
            self._extras.clear()
            self._cuda_at.clear()
        self._update_mode()

    def set_step(self, step: int) -> None:
        """Set the step number written in the rows of the next ``step()``."""
        try:
            self._step = int(step)
        except (TypeError, ValueError):
            raise UsageError(f"{self._who()}.set_step({step!r}): expected an integer step number") from None

    @property
    def current_step(self) -> int:
        """The step number the next ``step()`` writes."""
        return self._step

    def set_logger(self, logger_or_manager: Any) -> None:
        """Use a ``logging.Logger`` for reports, or a ``GlobalLogger`` for rows and reports."""
        if isinstance(logger_or_manager, GlobalLogger):
            self._manager = logger_or_manager
            self._logger = logger_or_manager.get_logger()
        elif isinstance(logger_or_manager, (logging.Logger, logging.LoggerAdapter)):
            self._logger = logger_or_manager  # type: ignore[assignment]
        elif logger_or_manager is None:
            self._logger = None
        else:
            raise UsageError(
                f"{self._who()}.set_logger(): expected a logging.Logger or a GlobalLogger, "
                f"got {type(logger_or_manager).__name__}"
            )

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(step, regions)`` at the end of every ``step()`` (regions in start order)."""
        if not callable(fn):
            raise UsageError(f"{self._who()}.add_listener(): expected a callable, got {type(fn).__name__}")
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        """Stop calling ``fn``; removing an unknown listener does nothing."""
        if fn in self._listeners:
            self._listeners.remove(fn)

    # -- hot path ----------------------------------------------------------------------

    def start(self, name: str) -> None:
        """Open region ``name`` inside the innermost open one.

        (The generic path; a plain or disabled timer answers through faster functions, see timer_calls.)
        """
        if self._plain:
            ev = self._ev
            ev.append(name)
            ev.append(_perf_ns())
            self._stack.append(name)
        elif self._enabled:
            self._start_slow(name)

    def stop(self, name: str) -> None:
        """Close region ``name``; it must be the innermost open region."""
        if self._plain:
            now = _perf_ns()
            stack = self._stack
            if stack and stack[-1] == name:
                stack.pop()
                ev = self._ev
                ev.append("")
                ev.append(~now)
                return
            self._raise_bad_stop(name)
        elif self._enabled:
            self._stop_slow(name)

    def region(self, name: str) -> _RegionContext:
        """``with timer.region("forward"): ...`` == start/stop around the block."""
        return _RegionContext(self, name)

    # -- CUDA / NVTX path --------------------------------------------------------------

    def _start_slow(self, name: str) -> None:
        if not self._cuda_resolved and self.use_cuda is not False:
            self._resolve_cuda()
            if self._plain:
                self.start(name)
                return
        token = None
        if self.labeler is not None:
            try:
                token = self.labeler.start(name)
            except Exception as exc:
                self._drop_labeler(exc)
        ev0 = ev1 = None
        cuda = self._cuda
        if cuda is not None:
            try:
                pool = self._event_pool
                ev0 = pool.pop() if pool else cuda.new_event()
                ev1 = pool.pop() if pool else cuda.new_event()
                cuda.record(ev0)
            except Exception as exc:
                ev0 = ev1 = None
                self._drop_cuda(exc)
        ev = self._ev
        if ev0 is not None:
            self._cuda_at[len(ev)] = (ev0, ev1)
        self._extras.append((ev0, ev1, token))
        self._stack.append(name)
        ev.append(name)
        ev.append(_perf_ns())

    def _stop_slow(self, name: str) -> None:
        now = _perf_ns()
        stack = self._stack
        if not stack or stack[-1] != name:
            self._raise_bad_stop(name)
        # regions opened on the plain path (before a mode change) have no extras
        extra = self._extras.pop() if len(self._extras) == len(stack) else None
        stack.pop()
        self._ev.append("")
        self._ev.append(~now)
        if extra is not None:
            _, ev1, token = extra
            if ev1 is not None and self._cuda is not None:
                try:
                    self._cuda.record(ev1)
                except Exception as exc:
                    self._drop_cuda(exc)
            if token is not None and self.labeler is not None:
                try:
                    self.labeler.stop(token)
                except Exception as exc:
                    self._drop_labeler(exc)

    def _resolve_cuda(self) -> None:
        seam = self._cuda_seam or default_cuda_events(import_torch=self.use_cuda is True)
        try:
            reason = seam.unavailable_reason()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
        self._cuda_resolved = True
        if reason is None:
            self._cuda = seam
        elif self.use_cuda is True:
            self._report_once("cuda", "%s: CUDA timing requested but unavailable (%s); timing on the CPU only",
                              self._who(), reason)
        self._update_mode()

    def _drop_cuda(self, exc: BaseException) -> None:
        self._report_once("cuda-error", "%s: CUDA event timing failed (%s: %s); timing on the CPU only from now on",
                          self._who(), type(exc).__name__, exc)
        self._cuda = None
        self._update_mode()

    def _drop_labeler(self, exc: BaseException) -> None:
        self._report_once("nvtx", "%s: the NVTX labeler failed (%s: %s); NVTX ranges are off from now on",
                          self._who(), type(exc).__name__, exc)
        self.labeler = None
        self._update_mode()

    # -- step --------------------------------------------------------------------------

    def step(self) -> None:
        """Synchronise CUDA once, write the START/END rows of the step, call listeners, reset."""
        if not self._enabled:
            return
        if self._stack:
            open_names = " > ".join(repr(n) for n in self._stack)
            raise UsageError(
                f"{self._who()}.step() called at step {self._step} while regions are still open "
                f"({open_names}); stop them before step()"
            )
        ev = self._ev  # the same list for the timer's life: the fast calls hold it
        regions = regions_of(ev) if self._listeners or self._cuda_at else None
        cuda_ms = self._read_cuda(regions) if regions is not None and self._cuda_at else None
        manager = self._resolved
        if manager is None or manager is not GlobalLogger._instance:
            manager = self._resolved = self._resolve_manager()
        # one offset per process maps perf_counter_ns to unix time (clock.py): reading the wall
        # clock here, at every step, let a preemption between two reads overlap adjacent steps
        base_ns = unix_offset_ns()
        if manager is not None:
            base_ns += manager.time_offset_ns
            sink = manager._writer
            if sink is not None and ev:
                if sink.deferred:
                    head = self._head
                    if head[0] != manager.machine_id:
                        head = self._head = (manager.machine_id, timer_head(self.tag, manager.machine_id))
                    keys = ev[0::2]
                    names = self._names_blob
                    if keys != names[0]:  # a step shaped like the last one reuses its packed names
                        names = self._names_blob = (keys, pack_names(keys))
                    sink.append(encode_timer_step(ev, names[1], cuda_ms, self._step, base_ns, head[1]))
                else:
                    if len(self._row_cache) > 8192:
                        self._row_cache.clear()
                    sink.append_text(format_step_rows(
                        regions or regions_of(ev), cuda_ms, self._step, base_ns, manager.machine_id, self.tag,
                        self._row_cache))
        if self._listeners and regions is not None:
            self._notify(regions, cuda_ms, base_ns)
        ev.clear()
        self._extras.clear()

    def synchronize_and_log(self) -> None:
        """Same as ``step()`` (the seed's name); calls ``self.step()`` so subclasses see it."""
        self.step()

    def _read_cuda(self, regions: list[list[Any]]) -> list[float | None] | None:
        cuda = self._cuda
        events = self._cuda_at
        self._cuda_at = {}
        if cuda is None:
            return None
        pairs = [events.get(r[4]) for r in regions]
        try:
            cuda.synchronize()
            out: list[float | None] = [cuda.elapsed_ms(p[0], p[1]) if p is not None else None for p in pairs]
        except Exception as exc:
            self._drop_cuda(exc)
            return None
        pool = self._event_pool
        for p in events.values():
            pool.extend(p)
        return out

    def _notify(self, regions: list[list[Any]], cuda_ms: list[float | None] | None, base_ns: int) -> None:
        timed: list[TimedRegion] = []
        last_at_depth: list[int] = []
        step = self._step
        for i, r in enumerate(regions):
            depth = r[1]
            del last_at_depth[depth:]
            parent = last_at_depth[depth - 1] if depth else None
            last_at_depth.append(i)
            timed.append(TimedRegion(
                name=r[0], step=step, node_id=i, parent_id=parent, depth=depth, start_ns=r[2], end_ns=r[3],
                start_unix=(base_ns + r[2]) / 1e9, end_unix=(base_ns + r[3]) / 1e9,
                cpu_ms=(r[3] - r[2]) / 1e6, cuda_ms=cuda_ms[i] if cuda_ms is not None else None,
            ))
        frozen = tuple(timed)
        for fn in list(self._listeners):
            try:
                fn(step, frozen)
            except Exception as exc:
                self.remove_listener(fn)
                (self._logger or _log).error(
                    "%s: listener %r raised %s: %s at step %d; it is removed",
                    self._who(), fn, type(exc).__name__, exc, step,
                )

    def _resolve_manager(self) -> GlobalLogger | None:
        manager = self._manager
        if manager is None or manager is not GlobalLogger._instance:
            manager = GlobalLogger()
        if not manager.is_configured:
            if self.log_dir is None:
                self._report_once(
                    "no-sink", "%s: GlobalLogger is not set up and no log_dir was given: profile rows are "
                    "not written (call GlobalLogger().setup(log_dir) or pass MyTimer(log_dir=...))", self._who())
                return None
            manager.setup(self.log_dir)
            if not manager.is_configured:
                return None
        elif self.log_dir is not None and not manager.is_log_dir(self.log_dir):
            self._report_once("log-dir", "%s: log_dir %s differs from the GlobalLogger's %s; rows go to the latter",
                              self._who(), self.log_dir, manager.log_dir)
        return manager

    # -- errors and reports ------------------------------------------------------------

    def _who(self) -> str:
        return f"MyTimer(tag={self.tag!r})"

    def _raise_bad_stop(self, name: str) -> None:
        if not self._stack:
            raise UsageError(
                f"{self._who()}: stop({name!r}) called at step {self._step} but no region is open; "
                f"call start({name!r}) first"
            )
        inner = self._stack[-1]
        path = " > ".join(repr(n) for n in self._stack)
        raise UsageError(
            f"{self._who()}: stop({name!r}) called at step {self._step} while {inner!r} is the innermost "
            f"open region (open: {path}); stop {inner!r} first"
        )

    def _report_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._reported:
            self._reported.add(key)
            (self._logger or _log).warning(msg, *args)


class _RegionContext:
    __slots__ = ("_name", "_timer")

    def __init__(self, timer: MyTimer, name: str) -> None:
        self._timer = timer
        self._name = name

    def __enter__(self) -> None:
        self._timer.start(self._name)

    def __exit__(self, *exc: object) -> None:
        self._timer.stop(self._name)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


global_timer = MyTimer(use_cuda="auto", tag="global", enabled=_env_flag("ENABLE_TIMER"))
"""Process-wide timer, enabled by ``ENABLE_TIMER=1`` at import (a no-op otherwise)."""
