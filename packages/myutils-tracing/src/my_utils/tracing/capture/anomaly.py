"""Anomaly-triggered capture: a slow step arms a window over the next K steps.

``arm_on_anomaly(timer, controller)`` listens to a ``MyTimer`` (its listener API): at the
end of every step it takes the step time (the sum of the top-level regions' CPU time), and
when it exceeds mean + sigma * std of the trailing window of step times it arms a step
window for the following ``next_steps`` steps. It also feeds the controller the step
boundaries (``controller.on_step``) that step windows start and stop on.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.tracing.capture.config import Edge, StopPolicy
from my_utils.tracing.capture.controller import CaptureController
from my_utils.tracing.capture.lifecycle import CaptureState
from my_utils.tracing.capture.spec import STEP_PROFILE_NAME, CaptureSpec

_log = logging.getLogger("my_utils.tracing.capture")


@dataclass(frozen=True)
class Anomaly:
    """A step whose time exceeded the threshold computed from the steps before it."""

    step: int
    step_ms: float
    mean_ms: float
    std_ms: float
    threshold_ms: float


class StepTimeAnomalyDetector:
    """Flags a step time above ``mean + sigma * std`` of the last ``window`` normal step times.

    Nothing is flagged before ``min_samples`` times are known. Flagged times are kept out of
    the trailing window, so one spike does not raise the bar for the next. ``min_excess_ms``
    also requires a step to exceed the mean by that many milliseconds: very steady short steps
    have a tiny σ, and scheduler jitter alone would otherwise open captures.
    """

    def __init__(self, window: int = 50, sigma: float = 3.0, min_samples: int = 10,
                 min_excess_ms: float = 0.0) -> None:
        if window < 2 or min_samples < 2 or min_samples > window:
            raise UsageError(f"StepTimeAnomalyDetector(window={window}, min_samples={min_samples}): "
                             "expected 2 <= min_samples <= window")
        if not sigma > 0:
            raise UsageError(f"StepTimeAnomalyDetector(sigma={sigma}): expected sigma > 0")
        if not min_excess_ms >= 0:
            raise UsageError(f"StepTimeAnomalyDetector(min_excess_ms={min_excess_ms}): expected >= 0")
        self.sigma = sigma
        self.min_samples = min_samples
        self.min_excess_ms = float(min_excess_ms)
        self._times: deque[float] = deque(maxlen=window)

    def threshold(self) -> tuple[float, float, float] | None:
        """(mean, std, threshold) of the trailing window, or None while too few samples are known."""
        n = len(self._times)
        if n < self.min_samples:
            return None
        mean = sum(self._times) / n
        std = math.sqrt(sum((t - mean) ** 2 for t in self._times) / (n - 1))
        return mean, std, max(mean + self.sigma * std, mean + self.min_excess_ms)

    def observe(self, step: int, step_ms: float, learn: bool = True) -> Anomaly | None:
        """Check ``step_ms``; return the ``Anomaly`` when it is one. ``learn=False`` only checks."""
        stats = self.threshold()
        if stats is not None and step_ms > stats[2]:
            return Anomaly(step, step_ms, *stats)
        if learn:
            self._times.append(step_ms)
        return None


def step_window_spec(name: str, first_step: int, last_step: int, nvtx_window: bool = False,
                     debug_watch: bool = False, origin: str = "anomaly") -> CaptureSpec:
    """A window from the start of ``first_step`` to the end of ``last_step`` (step-boundary events)."""
    return CaptureSpec(
        name=name, start_iter=first_step, start_mb=0, stop_iter=last_step, stop_mb=0,
        start_names=frozenset({STEP_PROFILE_NAME}), stop_names=frozenset({STEP_PROFILE_NAME}),
        stop_policy=StopPolicy.ON_TRIGGER_FUNC_EXIT, stop_edge=Edge.EXIT,
        nvtx_window=nvtx_window, debug_watch=debug_watch, origin=origin,
    )


def step_time_ms(regions: Sequence[Any]) -> float:
    """The step time: the sum of the CPU time of the top-level (depth 0) regions."""
    return float(sum(r.cpu_ms for r in regions if r.depth == 0))


class AnomalyTrigger:
    """The listener ``arm_on_anomaly`` installs; ``anomalies`` lists what fired, ``close()`` removes it."""

    def __init__(self, timer: Any, controller: CaptureController, detector: StepTimeAnomalyDetector,
                 next_steps: int, name: str, nvtx_window: bool, debug_watch: bool) -> None:
        self.timer = timer
        self.controller = controller
        self.detector = detector
        self.next_steps = next_steps
        self.name = name
        self.nvtx_window = nvtx_window
        self.debug_watch = debug_watch
        self.anomalies: list[Anomaly] = []

    def __call__(self, step: int, regions: Sequence[Any]) -> None:
        """MyTimer listener: check the step, arm when anomalous, then pass the step boundary on."""
        controller = self.controller
        busy = controller.state is not CaptureState.IDLE
        # steps captured (or about to be) carry profiler overhead: keep them out of the baseline
        anomaly = self.detector.observe(step, step_time_ms(regions), learn=not busy)
        if anomaly is not None and not busy:
            self.anomalies.append(anomaly)
            first, last = step + 1, step + self.next_steps
            _log.warning("step %d took %.3f ms (> mean %.3f + %.1f x std %.3f = %.3f ms): capturing steps %d-%d",
                         step, anomaly.step_ms, anomaly.mean_ms, self.detector.sigma, anomaly.std_ms,
                         anomaly.threshold_ms, first, last)
            controller.arm(step_window_spec(f"{self.name}_step{step}", first, last, self.nvtx_window,
                                            self.debug_watch))
        controller.on_step(step)

    def close(self) -> None:
        """Stop listening (an open window is left to the controller)."""
        self.timer.remove_listener(self)


def arm_on_anomaly(timer: Any, controller: CaptureController, next_steps: int = 3, window: int = 50,
                   sigma: float = 3.0, min_samples: int = 10, name: str = "anomaly", nvtx_window: bool = False,
                   debug_watch: bool = False, min_excess_ms: float = 0.0) -> AnomalyTrigger:
    """Capture the next ``next_steps`` steps whenever a step exceeds mean + ``sigma`` std of the last ``window``.

    ``timer`` is a ``MyTimer`` (anything with ``add_listener``/``remove_listener`` that calls
    ``fn(step, regions)`` at the end of each step). ``min_excess_ms`` is an absolute floor on
    how far above the mean a step must be. Returns the trigger; ``close()`` detaches it.
    """
    if isinstance(next_steps, bool) or not isinstance(next_steps, int) or next_steps < 1:
        raise UsageError(f"arm_on_anomaly(next_steps={next_steps!r}): expected an integer >= 1")
    if not callable(getattr(timer, "add_listener", None)):
        raise UsageError(f"arm_on_anomaly: {type(timer).__name__} has no add_listener(); pass a MyTimer")
    trigger = AnomalyTrigger(timer, controller, StepTimeAnomalyDetector(window, sigma, min_samples, min_excess_ms),
                             next_steps,
                             name, nvtx_window, debug_watch)
    timer.add_listener(trigger)
    return trigger
