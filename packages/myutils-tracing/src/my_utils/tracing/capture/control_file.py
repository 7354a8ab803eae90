"""Re-arming a running job: windows written to a control file are armed without a restart.

The controller asks at most every N steps whether the file's modification time (or size)
changed: one ``os.stat`` per N steps, nothing else. A changed file is read with
``yaml.safe_load`` (JSON is YAML too); a bad file is reported once per version and ignored,
never raised into the training loop.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError
from my_utils.tracing.capture.config import StopPolicy, _Reader, load_yaml_config, parse_windows
from my_utils.tracing.capture.spec import CaptureSpec, SpecDefaults, build_spec

_log = logging.getLogger("my_utils.tracing.capture")

CONTROL_KEYS = frozenset({"windows"})


class ControlFileWatcher:
    """Polls one control file; ``poll(step, num_microbatches)`` returns the specs of a new version.

    Format (YAML or JSON)::

        windows:
          - name: look_now
            start_iter: "+1"      # "+N": N steps after the step at which the file is read
            stop_iter: "+3"

    Each version of the file is armed once; rewrite (or touch) it to arm again.
    """

    def __init__(self, path: str | os.PathLike[str], every_n_steps: int = 10,
                 default_stop_policy: StopPolicy = StopPolicy.ON_TRIGGER_FUNC_EXIT, nvtx_window: bool = False,
                 debug_watch: bool = False, logger: Any = None) -> None:
        if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ConfigError("watch_control_file", "argument every_n_steps",
                              f"got {every_n_steps!r}; expected an integer >= 1")
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self.defaults = SpecDefaults(default_stop_policy, nvtx_window, debug_watch, str(path), "control_file")
        self.logger = logger if logger is not None else _log
        self._last_check: int | None = None
        self._version: tuple[int, int] | None = None
        self.checks = 0  # how many times the file was stat()ed
        self.loads = 0  # how many versions were read

    def _changed(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._version = None
            return False
        except OSError as exc:
            self.logger.warning("capture control file %s: cannot stat (%s)", self.path, exc)
            return False
        version = (st.st_mtime_ns, st.st_size)
        if version == self._version:
            return False
        self._version = version
        return True

    def poll(self, step: int, num_microbatches: int = 1) -> list[CaptureSpec]:
        """Specs from a new version of the file, when a check is due and it changed; else []."""
        if self._last_check is not None and 0 <= step - self._last_check < self.every_n_steps:
            return []
        self._last_check = step
        self.checks += 1
        if not self._changed():
            return []
        self.loads += 1
        try:
            data = load_yaml_config(self.path)
            reader = _Reader(str(self.path), "control", data, CONTROL_KEYS)
            windows = parse_windows(reader.data.get("windows"), str(self.path), "windows", relative_base=step)
            specs = []
            for i, window in enumerate(windows):
                if window.start_iter is None:
                    raise ConfigError(str(self.path), f"key windows[{i}].start_iter",
                                      "missing; expected an iteration >= 0 or '+N'")
                specs.append(build_spec(window, step, num_microbatches, self.defaults, f"windows[{i}]"))
        except (ConfigError, OSError, UnicodeDecodeError) as exc:
            self.logger.error("capture control file ignored: %s", exc)
            return []
        self.logger.info("capture control file %s: arming %s", self.path, [s.name for s in specs] or "nothing")
        return specs
