"""Values exchanged by the manager, the controller and the backends: events, specs, windows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from my_utils.core.errors import ConfigError
from my_utils.tracing.capture.config import Edge, MbSelector, StopPolicy, WindowConfig
from my_utils.tracing.capture.step_clock import StepTime

#: profile name of the step-boundary events fired by ``CaptureController.on_step``
STEP_PROFILE_NAME = "__step__"


@dataclass(frozen=True)
class HookEvent:
    """A hook point being entered or left: ``HookEvent("model.forward", {"iter": 5, "mb": 0}, "generator", 0)``.

    The iteration is ``meta["iter"]``; the microbatch ``meta["mb"]`` (the seed's key) or
    ``meta["microbatch_index"]``. ``rank=None`` means the controller's own rank.
    """

    profile_name: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    role: str | None = None
    rank: int | None = None

    @property
    def iteration(self) -> int | None:
        """``meta["iter"]``, or None when absent."""
        value = self.meta.get("iter")
        return value if isinstance(value, int) else None

    @property
    def microbatch(self) -> int:
        """``meta["mb"]`` (or ``meta["microbatch_index"]``); 0 when absent."""
        value = self.meta.get("mb", self.meta.get("microbatch_index", 0))
        return value if isinstance(value, int) else 0


@dataclass(frozen=True)
class CaptureSpec:
    """One window resolved for arming: concrete iterations and microbatches.

    Empty ``start_names`` / ``stop_names`` match any profile name; ``role=None`` any role;
    ``ranks=None`` any rank.
    """

    name: str
    start_iter: int
    start_mb: int
    stop_iter: int
    stop_mb: int
    start_names: frozenset[str] = frozenset()
    stop_names: frozenset[str] = frozenset()
    stop_policy: StopPolicy = StopPolicy.ON_TRIGGER_FUNC_EXIT
    stop_edge: Edge = Edge.EXIT
    role: str | None = None
    ranks: frozenset[int] | None = None
    nvtx_window: bool = False
    debug_watch: bool = False
    origin: str = "config"


@dataclass(frozen=True)
class EventRecord:
    """Where a window started or stopped: the edge and the event's coordinates."""

    edge: Edge
    profile_name: str
    iteration: int | None
    microbatch: int
    role: str | None
    rank: int


class StopReason(str, Enum):
    """Why a window stopped."""

    CONDITION = "stop condition met"
    OVERRUN = "passed its stop iteration without a matching stop event"
    CLOSED = "controller closed"
    EXCEPTION = "an exception left the controller's scope"
    INTERPRETER_EXIT = "interpreter exit"


@dataclass(frozen=True)
class WindowInfo:
    """What a backend learns about the window it captures (``CaptureBackend.window_opening``)."""

    name: str
    rank: int
    start_iter: int
    stop_iter: int
    role: str | None
    origin: str
    started_by: EventRecord


@dataclass(frozen=True)
class WindowClosing:
    """How a window ended (``CaptureBackend.window_closed``); ``stopped_by`` is None unless an event did it.

    ``steps``: the steps finished since the previous window closed (``step_clock.StepTime``: the
    outside steps before this window, then its own), for a trace to carry what profiling cost.
    """

    reason: StopReason
    stopped_by: EventRecord | None
    steps: tuple[StepTime, ...] = ()


def resolve_selector(selector: MbSelector, num_microbatches: int, source: str, place: str) -> int:
    """``first`` -> 0, ``last`` -> ``num_microbatches - 1``, an index -> itself (checked)."""
    if selector == "first":
        return 0
    if selector == "last":
        return num_microbatches - 1
    if not isinstance(selector, int) or selector >= num_microbatches:
        raise ConfigError(source, place, f"got {selector!r}; expected first, last or a microbatch index "
                                         f"< num_microbatches ({num_microbatches})")
    return selector


@dataclass(frozen=True)
class SpecDefaults:
    """Settings that come from outside the window: the feature switches and the source."""

    default_stop_policy: StopPolicy = StopPolicy.ON_TRIGGER_FUNC_EXIT
    nvtx_window: bool = False
    debug_watch: bool = False
    source: str = "<dict>"
    origin: str = "config"


def build_spec(window: WindowConfig, arm_iter: int, num_microbatches: int, defaults: SpecDefaults,
               prefix: str = "capture.windows[?]") -> CaptureSpec:
    """Resolve ``window`` armed at ``arm_iter`` with ``num_microbatches`` into a ``CaptureSpec``."""
    if isinstance(num_microbatches, bool) or not isinstance(num_microbatches, int) or num_microbatches < 1:
        raise ConfigError(defaults.source, "argument num_microbatches",
                          f"got {num_microbatches!r}; expected an integer >= 1")
    start_iter = window.start_iter if window.start_iter is not None else arm_iter
    stop_iter = window.stop_iter if window.stop_iter is not None else start_iter
    start_mb = resolve_selector(window.start_mb_selector, num_microbatches, defaults.source,
                                f"key {prefix}.start_mb_selector")
    stop_selector = window.stop_mb_selector if window.stop_mb_selector is not None else window.start_mb_selector
    stop_mb = resolve_selector(stop_selector, num_microbatches, defaults.source, f"key {prefix}.stop_mb_selector")
    if stop_iter == start_iter and stop_mb < start_mb:
        raise ConfigError(defaults.source, f"key {prefix}.stop_mb_selector",
                          f"got {stop_selector!r} (microbatch {stop_mb}); expected a microbatch >= the start "
                          f"microbatch ({start_mb}) when the window starts and stops in iteration {start_iter}")
    return CaptureSpec(
        name=window.name,
        start_iter=start_iter,
        start_mb=start_mb,
        stop_iter=stop_iter,
        stop_mb=stop_mb,
        start_names=frozenset(window.start_profile_names),
        stop_names=frozenset(window.stop_profile_names or window.start_profile_names),
        stop_policy=window.stop_policy or defaults.default_stop_policy,
        stop_edge=window.stop_edge,
        role=window.role,
        ranks=frozenset(window.ranks_filter) if window.ranks_filter is not None else None,
        nvtx_window=defaults.nvtx_window and window.enable_nvtx_window,
        debug_watch=defaults.debug_watch,
        origin=defaults.origin,
    )
