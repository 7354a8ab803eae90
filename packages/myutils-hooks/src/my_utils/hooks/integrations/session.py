"""``ProfilingSession``: the framework-neutral driver the plain loop and both trainer callbacks share.

A trainer only has to say where a step and its microbatches begin and end; the session turns
that into MyTimer regions (``train_step`` > ``microbatch``), capture-controller events
(``HookEvent("microbatch", {"iter": step, "mb": index})``, then ``on_step``), ModuleProfiler
runs (one per step) and the monitor's lifetime. Windows are armed from the config as each step
begins, with the number of microbatches per step, so ``start_mb_selector: last`` resolves to
the last microbatch of a gradient-accumulation step.

An environment problem (no myutils-memory for the monitor, a failing capture backend) is
reported once and the run goes on; misuse (a microbatch ended that never began) raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import UsageError
from my_utils.hooks.integrations.config import IntegrationConfig

__all__ = ["MICROBATCH_REGION", "STEP_REGION", "ProfilingSession"]

_log = logging.getLogger("my_utils.hooks.integrations")

#: the MyTimer region around one optimizer step, and the capture/timer name of one microbatch
STEP_REGION = "train_step"
MICROBATCH_REGION = "microbatch"


class ProfilingSession:
    """Drives every component named in ``config``; ``start(model)`` … ``close()`` (or a ``with`` block).

    ``backend`` replaces the capture backend the config names (tests, or a backend object built
    by hand). ``num_microbatches`` is the gradient-accumulation factor (microbatches per step).
    """

    def __init__(self, config: IntegrationConfig, *, backend: Any = None, num_microbatches: int = 1) -> None:
        if not isinstance(config, IntegrationConfig):
            raise UsageError(f"ProfilingSession(config={type(config).__name__}): expected an IntegrationConfig; "
                             "build one with IntegrationConfig.from_file(path) or .from_dict(mapping)")
        self.config = config
        self.num_microbatches = num_microbatches
        self.rank = config.rank if config.rank is not None else env_rank(0)
        self.timer: Any = None
        self.manager: Any = None
        self.controller: Any = None
        self.module_profiler: Any = None
        self.monitor: Any = None
        self.summary_path: Path | None = None
        self._backend = backend
        self._step: int | None = None  # the open step, None between steps
        self._mb: int | None = None  # the open microbatch
        self._started = False

    # -- lifetime ------------------------------------------------------------------------

    def start(self, model: Any = None) -> ProfilingSession:
        """Create the timer, capture controller, module profiler (when ``model`` is given) and monitor."""
        if self._started:
            raise UsageError("ProfilingSession.start() called twice; close() the session before starting again")
        self._started = True
        cfg = self.config
        cfg.output_dir.mkdir(parents=True, exist_ok=True)
        if cfg.timer.enabled:
            from my_utils.core.logger import GlobalLogger
            from my_utils.core.timer import MyTimer

            GlobalLogger().setup(cfg.output_dir, rank=self.rank)
            self.timer = MyTimer(use_cuda=cfg.timer.use_cuda, tag=cfg.run_id)
        from my_utils.tracing.capture.config import parse_capture_config
        from my_utils.tracing.capture.manager import ProfileManager

        self.manager = ProfileManager(parse_capture_config(cfg.capture, source=cfg.source), logger=_log)
        # no capture section: no controller (the tracing default would enable capture)
        if cfg.capture and self.manager.enabled:
            backend = self._backend
            if backend is None:
                options = {"output_dir": str(cfg.output_dir / "captures")} if self.manager.config.backend == \
                    "torch_profiler" and "output_dir" not in self.manager.config.backend_options else {}
                backend = self.manager.create_backend(**options)
            self.controller = self.manager.create_controller(backend, rank=self.rank,
                                                             num_microbatches=self.num_microbatches)
        if cfg.module_profiler.enabled and model is not None:
            from my_utils.hooks.module_profiler import ModuleProfiler

            self.module_profiler = ModuleProfiler(model)
            self.module_profiler.stop()  # time only inside steps; runs counts steps
            self.module_profiler.runs = 0
        if cfg.monitor.enabled:
            self._start_monitor()
        return self

    def _start_monitor(self) -> None:
        m = self.config.monitor
        try:
            from my_utils.memory.gpu_tracker import GPU_Performance_Tracker
        except ImportError as exc:
            _log.warning("monitor disabled: myutils-memory is not installed (%s); pip install myutils-memory", exc)
            return
        self.monitor = GPU_Performance_Tracker(m.prefix, interval=m.interval,
                                               track_hardware_metrics=m.track_hardware_metrics,
                                               output_dir=self.config.output_dir)
        self.monitor.start_monitoring()

    def close(self) -> None:
        """End an open step, stop capture, write the module summary, stop the monitor; safe to call again."""
        if not self._started:
            return
        self._started = False
        if self._step is not None:
            if self._mb is not None:
                self.end_microbatch(self._step, self._mb)
            self.end_step(self._step)
        if self.controller is not None:
            self.controller.close()
        if self.module_profiler is not None:
            if self.module_profiler.runs:
                self.summary_path = self.config.output_dir / f"module_summary_rank{self.rank}.csv"
                self.module_profiler.summary(self.summary_path)
            self.module_profiler.cleanup()
        if self.monitor is not None:
            try:
                self.monitor.stop_monitoring()
            except Exception:  # charts are an environment matter (missing extra, full disk)
                _log.exception("monitor: stop_monitoring failed; its samples file is kept")
        if self.timer is not None:
            from my_utils.core.logger import GlobalLogger

            GlobalLogger().flush()

    def __enter__(self) -> ProfilingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the training loop ---------------------------------------------------------------

    def begin_microbatch(self, step: int, mb: int) -> None:
        """Microbatch ``mb`` of optimizer step ``step`` begins (the first one also begins the step)."""
        if self._mb is not None:
            raise UsageError(f"ProfilingSession.begin_microbatch(step={step}, mb={mb}) while microbatch "
                             f"{self._mb} of step {self._step} is open; end_microbatch it first")
        if self._step is None:
            self._begin_step(step)
        elif step != self._step:
            raise UsageError(f"ProfilingSession.begin_microbatch(step={step}, mb={mb}) while step {self._step} "
                             f"is open; call end_step({self._step}) first")
        self._mb = mb
        if self.timer is not None:
            self.timer.start(MICROBATCH_REGION)
        if self.controller is not None:
            self.controller.on_enter(self._event(step, mb))

    def end_microbatch(self, step: int, mb: int) -> None:
        """Microbatch ``mb`` of step ``step`` ended (forward and backward done)."""
        if self._mb != mb or self._step != step:
            raise UsageError(f"ProfilingSession.end_microbatch(step={step}, mb={mb}): the open microbatch is "
                             f"{self._mb} of step {self._step}; end the one that began")
        self._mb = None
        if self.controller is not None:
            self.controller.on_exit(self._event(step, mb))
        if self.timer is not None:
            self.timer.stop(MICROBATCH_REGION)

    @contextmanager
    def microbatch(self, step: int, mb: int) -> Iterator[None]:
        """``begin_microbatch`` now and ``end_microbatch`` when the body ends (also when it raises)."""
        self.begin_microbatch(step, mb)
        try:
            yield
        finally:
            self.end_microbatch(step, mb)

    def end_step(self, step: int) -> None:
        """Optimizer step ``step`` is done: timer rows written, capture told, module run counted."""
        if self._step != step or self._mb is not None:
            raise UsageError(f"ProfilingSession.end_step({step}): the open step is {self._step} "
                             f"(microbatch open: {self._mb}); end its microbatch, then that step")
        self._step = None
        if self.module_profiler is not None:
            self.module_profiler.stop()
        if self.timer is not None:
            self.timer.stop(STEP_REGION)
            self.timer.set_step(step)
            self.timer.step()
        if self.controller is not None:
            self.controller.on_step(step)
        if self.monitor is not None:  # the step's end in the samples file: energy per step (myutils-memory)
            self.monitor.mark_step(step)

    def _begin_step(self, step: int) -> None:
        self._step = step
        if self.controller is not None and self.manager is not None:
            for spec in self.manager.build_specs_to_arm_at_iter(step, self.num_microbatches):
                self.controller.arm(spec)
        if self.module_profiler is not None:
            self.module_profiler.start()
        if self.timer is not None:
            self.timer.start(STEP_REGION)

    @staticmethod
    def _event(step: int, mb: int) -> Any:
        from my_utils.tracing.capture.spec import HookEvent

        return HookEvent(MICROBATCH_REGION, {"iter": step, "mb": mb})
