"""``ProfileManager``: reads the capture configuration and says what to arm at each iteration."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError, UnknownPluginError
from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.config import CaptureConfig, load_yaml_config, parse_capture_config
from my_utils.tracing.capture.controller import CaptureController
from my_utils.tracing.capture.spec import CaptureSpec, SpecDefaults, build_spec

_log = logging.getLogger("my_utils.tracing.capture")


class ProfileManager:
    """The seed's window configuration: ``should_capture_this_iter`` and ``build_specs_to_arm_at_iter``.

    ``profile_cfg`` is a dict (e.g. from ``yaml.safe_load``), a path to a YAML file, or a
    ``CaptureConfig``. Invalid configurations raise ``ConfigError`` naming the key, the bad
    value and the allowed values.
    """

    def __init__(self, profile_cfg: Mapping[str, Any] | str | os.PathLike[str] | CaptureConfig | None,
                 logger: logging.Logger | Any = None) -> None:
        if isinstance(profile_cfg, CaptureConfig):
            config = profile_cfg
        elif isinstance(profile_cfg, str | os.PathLike):
            config = parse_capture_config(load_yaml_config(profile_cfg), source=str(profile_cfg))
        else:
            config = parse_capture_config(profile_cfg)
        self.config = config
        self.logger: Any = logger if logger is not None else _log
        self._defaults = SpecDefaults(config.default_stop_policy, config.nvtx_window, config.debug_watch,
                                      config.source, "config")
        roles = config.schedule.roles
        for window in config.windows:
            if roles is not None and window.role is not None and window.role not in roles:
                self.logger.warning("capture window %r has role %r, not in capture.schedule.roles %s: "
                                    "it will never arm", window.name, window.role, list(roles))
            steps = config.schedule.steps
            if steps is not None and window.start_iter is not None and window.start_iter not in steps:
                self.logger.warning("capture window %r starts at iteration %s, not in capture.schedule.steps %s: "
                                    "it will never arm", window.name, window.start_iter, list(steps))

    @property
    def enabled(self) -> bool:
        """``profile.enabled`` and ``features.capture.enabled``."""
        return self.config.enabled

    def _step_allowed(self, it: int) -> bool:
        steps = self.config.schedule.steps
        return steps is None or it in steps

    def _windows_at(self, it: int) -> list[tuple[int, Any]]:
        roles = self.config.schedule.roles
        found = []
        for i, window in enumerate(self.config.windows):
            if window.start_iter is not None and window.start_iter != it:
                continue
            if roles is not None and window.role is not None and window.role not in roles:
                continue
            found.append((i, window))
        return found

    def should_capture_this_iter(self, it: int) -> bool:
        """Whether some window arms at iteration ``it`` (capture enabled, step scheduled, a window starts)."""
        return self.config.enabled and self._step_allowed(it) and bool(self._windows_at(it))

    def build_specs_to_arm_at_iter(self, it: int, num_microbatches: int) -> list[CaptureSpec]:
        """The specs to arm at ``it``, at most ``max_windows_per_step``, microbatch selectors resolved."""
        if not self.should_capture_this_iter(it):
            return []
        found = self._windows_at(it)
        cap = self.config.schedule.max_windows_per_step
        if cap is not None and len(found) > cap:
            skipped = [w.name for _, w in found[cap:]]
            self.logger.warning("iteration %s: %d windows start but max_windows_per_step is %d; skipped %s",
                                it, len(found), cap, skipped)
            found = found[:cap]
        specs = [build_spec(w, it, num_microbatches, self._defaults, f"capture.windows[{i}]") for i, w in found]
        if self.config.debug_watch:
            for spec in specs:
                self.logger.info("[capture %s] built at iteration %s: %s", spec.name, it, spec)
        return specs

    def create_backend(self, **options: Any) -> CaptureBackend:
        """The backend named by ``features.capture.backend`` (a plugin), built with ``backend_options``."""
        from my_utils.core.plugin_types import PluginKind
        from my_utils.core.plugins import get_registry

        name = self.config.backend
        try:
            factory = get_registry().get(PluginKind.CAPTURE_BACKEND, name).load()
        except UnknownPluginError as exc:
            raise ConfigError(self.config.source, "key features.capture.backend",
                              f"got {name!r}; installed capture backends: {', '.join(sorted(exc.installed))}"
                              ) from None
        kwargs = {**self.config.backend_options, **options}
        # the signature decides what "options rejected" means: a TypeError raised inside the
        # constructor is the backend's own failure and propagates as such
        from my_utils.core.plugins import options_mismatch

        mismatch = options_mismatch(factory, **kwargs)
        if mismatch is not None:
            raise ConfigError(self.config.source, "key features.capture.backend_options",
                              f"got {sorted(kwargs)}; backend {name!r} rejected them ({mismatch})")
        backend: CaptureBackend = factory(**kwargs)
        return backend

    def create_controller(self, backend: CaptureBackend | None = None, window_labeler: Any = None,
                          rank: int | None = None, num_microbatches: int = 1) -> CaptureController:
        """A controller on ``backend`` (default: ``create_backend()``), watching the control file if set."""
        controller = CaptureController(backend if backend is not None else self.create_backend(),
                                       logger=self.logger, window_labeler=window_labeler, rank=rank)
        if self.config.control_file:
            controller.watch_control_file(Path(self.config.control_file), self.config.control_check_every,
                                          num_microbatches, self.config.default_stop_policy,
                                          self.config.nvtx_window, self.config.debug_watch)
        return controller
