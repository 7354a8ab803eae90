"""``ForwardProfilerHook``: a profiler window counted in forwards of one module.

Legacy path: ``from my_utils import ForwardProfilerHook``. The hook turns each forward of
the module it is attached to into a pair of ``HookEvent``s (enter, exit) with the forward's
index as the iteration, and lets a ``CaptureController`` of myutils-tracing open and close
the window: the same matching, backend calls, NVTX window range and "stop exactly once"
guarantees as configured capture windows, with nothing re-implemented here.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import UsageError
from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.config import Edge, StopPolicy
from my_utils.tracing.capture.controller import CaptureController
from my_utils.tracing.capture.spec import CaptureSpec, HookEvent, StopReason, WindowClosing, WindowInfo

_log = logging.getLogger("my_utils.hooks")

__all__ = ["DEFAULT_BACKEND", "PROFILE_NAME", "ForwardProfilerHook"]

#: the capture backend the seed drives: cudaProfilerStart/Stop for ``nsys --capture-range=cudaProfilerApi``
DEFAULT_BACKEND = "cudaProfilerApi"
#: profile name of the hook's events (and its window's name when no ``nvtx_range`` is given)
PROFILE_NAME = "forward"


def _check_iter(value: object, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"ForwardProfilerHook({arg}={value!r}): expected a forward index >= 0 "
                         "(0 is the module's first forward)")
    return value


def _check_ranks(rank_only: int | Iterable[int] | None) -> frozenset[int] | None:
    if rank_only is None:
        return None
    ranks: list[object]
    if isinstance(rank_only, int):
        ranks = [rank_only]
    else:
        try:
            ranks = list(rank_only)
        except TypeError:
            ranks = [rank_only]
    bad = [r for r in ranks if isinstance(r, bool) or not isinstance(r, int) or r < 0]
    if bad or not ranks:
        raise UsageError(f"ForwardProfilerHook(rank_only={rank_only!r}): expected None (every rank) or a "
                         "non-empty list of ranks >= 0, e.g. rank_only=[0, 1]")
    return frozenset(r for r in ranks if isinstance(r, int))


def check_backend_name(name: str) -> None:
    """``UsageError`` listing the installed capture backends when none is called ``name`` (imports nothing)."""
    from my_utils.core.errors import PluginError
    from my_utils.core.plugin_types import PluginKind
    from my_utils.core.plugins import get_registry

    try:
        get_registry().get(PluginKind.CAPTURE_BACKEND, name)
    except PluginError as exc:
        raise UsageError(f"ForwardProfilerHook(backend={name!r}): {exc}") from None


def build_backend(backend: str | CaptureBackend, options: Mapping[str, Any] | None) -> CaptureBackend:
    """A backend instance: ``backend`` itself, or the registered capture backend of that name."""
    if not isinstance(backend, str):
        if options:
            raise UsageError("ForwardProfilerHook: backend_options apply to a backend given by name; "
                             f"configure the {type(backend).__name__} instance itself instead")
        return backend
    from my_utils.core.errors import PluginError
    from my_utils.core.plugin_types import PluginKind
    from my_utils.core.plugins import load_component

    try:
        factory = load_component(PluginKind.CAPTURE_BACKEND, backend)
    except PluginError as exc:
        raise UsageError(f"ForwardProfilerHook(backend={backend!r}): {exc}") from None
    try:
        built: CaptureBackend = factory(**dict(options or {}))
    except TypeError as exc:
        raise UsageError(f"ForwardProfilerHook(backend={backend!r}, backend_options={dict(options or {})!r}): "
                         f"the backend rejected them ({exc})") from None
    return built


class ForwardProfilerHook:
    """Captures forwards ``start_iter``..``stop_iter`` (both included; 0 is the first forward after ``attach``).

    ``attach(module)`` registers a forward pre-hook and an always-called forward hook. The
    window opens as forward ``start_iter`` begins and closes as forward ``stop_iter`` ends,
    so it holds those forwards and everything run between them (backward passes, optimizer
    steps); then the hook removes itself. A forward that raises while the window is open
    closes it at once (the exception propagates unchanged).

    ``backend`` is a capture backend name registered through the plugin registry
    (``cudaProfilerApi`` by default; ``myutils plugins list`` shows the others) or an instance.
    ``rank_only`` limits the capture to those ranks (``RANK``; other ranks attach nothing).
    ``nvtx_range`` wraps the window in an NVTX range of that name, emitted by ``labeler``
    or, when none is given, by ``create_labeler()`` (on only with ``ENABLE_NVTX=1``).
    """

    def __init__(self, start_iter: int, stop_iter: int, rank_only: int | Iterable[int] | None = None,
                 nvtx_range: str | None = None, labeler: Any = None, *,
                 backend: str | CaptureBackend = DEFAULT_BACKEND, backend_options: Mapping[str, Any] | None = None,
                 rank: int | None = None, logger: logging.Logger | None = None) -> None:
        self.start_iter = _check_iter(start_iter, "start_iter")
        self.stop_iter = _check_iter(stop_iter, "stop_iter")
        if self.stop_iter < self.start_iter:
            raise UsageError(f"ForwardProfilerHook(start_iter={start_iter}, stop_iter={stop_iter}): stop_iter is "
                             "before start_iter; pass stop_iter >= start_iter (both forwards are captured)")
        if nvtx_range is not None and (not isinstance(nvtx_range, str) or not nvtx_range):
            raise UsageError(f"ForwardProfilerHook(nvtx_range={nvtx_range!r}): expected a non-empty range name "
                             "or None")
        self.rank_only = _check_ranks(rank_only)
        self.nvtx_range = nvtx_range
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise UsageError(f"ForwardProfilerHook(rank={rank!r}): expected a rank >= 0, or None to read RANK")
        self.rank = env_rank(0) if rank is None else rank
        self.logger = logger if logger is not None else _log
        self.selected = self.rank_only is None or self.rank in self.rank_only
        self.labeler = labeler
        self.iteration = 0  # index of the next forward
        self._module: Any = None
        self._handles: list[Any] = []
        self._outer: list[BaseException | None] = []
        self._done = False
        self.controller: CaptureController | None = None
        if self.selected:
            if nvtx_range is not None and labeler is None:
                from my_utils.tracing.nvtx_utils import create_labeler

                self.labeler = create_labeler(enabled=None)
            self.controller = CaptureController(build_backend(backend, backend_options), logger=self.logger,
                                                window_labeler=self.labeler if nvtx_range else None,
                                                rank=self.rank)
            self.controller.arm(self._spec())
        elif isinstance(backend, str):
            check_backend_name(backend)  # a misspelt name fails on every rank, not only the profiled ones

    def _spec(self) -> CaptureSpec:
        return CaptureSpec(
            name=self.nvtx_range or PROFILE_NAME, start_iter=self.start_iter, start_mb=0, stop_iter=self.stop_iter,
            stop_mb=0, start_names=frozenset({PROFILE_NAME}), stop_names=frozenset({PROFILE_NAME}),
            stop_policy=StopPolicy.ON_TRIGGER_FUNC_EXIT, stop_edge=Edge.EXIT, ranks=self.rank_only,
            nvtx_window=self.nvtx_range is not None, origin="ForwardProfilerHook")

    # -- state -----------------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        """Whether the hooks are registered on a module now."""
        return bool(self._handles)

    @property
    def capturing(self) -> bool:
        """Whether the window is open."""
        return self.controller is not None and self.controller.active is not None

    @property
    def windows(self) -> list[tuple[WindowInfo, WindowClosing]]:
        """The completed window (at most one) and how it closed."""
        return list(self.controller.completed) if self.controller is not None else []

    # -- attaching -------------------------------------------------------------------------

    def attach(self, module: Any) -> ForwardProfilerHook:
        """Count the forwards of ``module`` from now on; returns the hook.

        On a rank outside ``rank_only`` nothing is registered (no cost per forward).
        """
        if not (callable(getattr(module, "register_forward_pre_hook", None))
                and callable(getattr(module, "register_forward_hook", None))):
            raise UsageError(f"ForwardProfilerHook.attach({type(module).__name__}): expected a torch.nn.Module")
        if self._handles:
            raise UsageError(f"ForwardProfilerHook.attach: already attached to {type(self._module).__name__}; "
                             "call detach() first, or use one hook per module")
        if self._done:
            raise UsageError("ForwardProfilerHook.attach: this hook's window is over (it ran once); "
                             "create a new ForwardProfilerHook for another window")
        self._module = module
        if not self.selected:
            _log.debug("ForwardProfilerHook: rank %s not in rank_only %s; not attached", self.rank,
                       sorted(self.rank_only or ()))
            return self
        self._handles = [module.register_forward_pre_hook(self._pre),
                         module.register_forward_hook(self._post, always_call=True)]
        return self

    def detach(self) -> None:
        """Remove the hooks; an open window is closed first (safe to call again)."""
        if self.controller is not None and self.controller.active is not None:
            self.controller.close(StopReason.CLOSED)
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    # -- the hooks -------------------------------------------------------------------------

    def _pre(self, module: Any, args: Any) -> None:
        if self.iteration < self.start_iter:  # the fast path until the window: nothing can match yet
            self._outer.append(None)
            return
        # the exception being handled around this forward, if any: only a new one means it raised
        self._outer.append(sys.exc_info()[1])
        if self.controller is not None:
            self.controller.on_enter(HookEvent(PROFILE_NAME, {"iter": self.iteration}, rank=self.rank))

    def _post(self, module: Any, args: Any, result: Any) -> None:
        outer = self._outer.pop() if self._outer else None
        it = self.iteration
        if not self._outer:  # only the outermost call of a re-entrant forward counts
            self.iteration += 1
        controller = self.controller
        if it < self.start_iter or controller is None:
            return
        raised = sys.exc_info()[1]
        if raised is not None and raised is not outer:
            if controller.active is not None:
                self.logger.warning("ForwardProfilerHook: forward %s raised %s inside the capture window; "
                                    "closing the window", it, type(raised).__name__)
                controller.close(StopReason.EXCEPTION)
                self._finish()
            return
        controller.on_exit(HookEvent(PROFILE_NAME, {"iter": it}, rank=self.rank))
        if controller.active is None:
            self._finish()

    def _finish(self) -> None:
        """The window is over (or can no longer open): remove the hooks."""
        self._done = True
        self.detach()
