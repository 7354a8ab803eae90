"""``IntegrationConfig``: one file that drives MyTimer, capture windows, ModuleProfiler and the monitor.

The same file serves a plain training loop (``ProfilingSession``), the Lightning callback and
the Hugging Face callback, so moving a run between them changes no profiling setting.
Format (YAML with ``safe_load``, or JSON; every key optional)::

    output_dir: ./prof_out          # as in the profiling collector config: where every file goes
    run_id: baseline                # as in the collector config: the timer's tag
    rank: 0                         # default: RANK (then 0)
    timer: {enabled: true, use_cuda: auto}
    module_profiler: {enabled: true}
    monitor: {enabled: false, prefix: monitor, interval: 1.0, track_hardware_metrics: true}
    profile:                        # the capture configuration of myutils-tracing, unchanged
      features: {capture: {enabled: true, backend: torch_profiler}}
      capture: {windows: [{name: w, start_iter: 2, start_mb_selector: last}]}

``profile`` (or top-level ``features``/``capture``) is read by ``parse_capture_config``, so every
key and error of ``load_capture_config`` applies; without any of them nothing is captured. A
``torch_profiler`` backend writes into ``<output_dir>/captures`` unless its options say otherwise. Errors are ``ConfigError`` naming the file and
the key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError

__all__ = ["IntegrationConfig", "ModuleProfilerSettings", "MonitorSettings", "TimerSettings"]

_CAPTURE_KEYS = frozenset({"profile", "features", "capture"})
TOP_KEYS = frozenset({"output_dir", "run_id", "rank", "timer", "module_profiler", "monitor", "description"}) | _CAPTURE_KEYS
_TIMER_KEYS = frozenset({"enabled", "use_cuda"})
_MODULE_KEYS = frozenset({"enabled"})
_MONITOR_KEYS = frozenset({"enabled", "prefix", "interval", "track_hardware_metrics"})


@dataclass(frozen=True)
class TimerSettings:
    """``timer``: MyTimer regions ``train_step`` and ``microbatch`` written to ``profile_rank_<r>.csv``."""

    enabled: bool = True
    use_cuda: bool | str = "auto"


@dataclass(frozen=True)
class ModuleProfilerSettings:
    """``module_profiler``: per-leaf-module forward times, summarised to ``module_summary_rank<r>.csv``."""

    enabled: bool = True


@dataclass(frozen=True)
class MonitorSettings:
    """``monitor``: ``GPU_Performance_Tracker`` arguments (needs myutils-memory)."""

    enabled: bool = False
    prefix: str = "monitor"
    interval: float = 1.0
    track_hardware_metrics: bool = True


@dataclass(frozen=True)
class IntegrationConfig:
    """The validated configuration; ``capture`` is the raw capture mapping (``parse_capture_config`` input)."""

    output_dir: Path = Path("prof_out")  # a str or other PathLike given to the constructor becomes a Path
    run_id: str = ""
    rank: int | None = None
    timer: TimerSettings = TimerSettings()
    module_profiler: ModuleProfilerSettings = ModuleProfilerSettings()
    monitor: MonitorSettings = MonitorSettings()
    capture: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<dict>"

    def __post_init__(self) -> None:
        if not isinstance(self.output_dir, Path):
            object.__setattr__(self, "output_dir", Path(os.fspath(self.output_dir)))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> IntegrationConfig:
        """Read a ``.yaml``/``.yml`` (safe_load) or JSON file; ``output_dir`` is relative to its folder."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(str(p), None, f"a readable UTF-8 config file ({exc})") from None
        if p.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                place = f"line {mark.line + 1}" if mark is not None else None
                raise ConfigError(str(p), place, f"valid YAML ({getattr(exc, 'problem', None) or exc})") from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(str(p), f"line {exc.lineno}, column {exc.colno}", f"valid JSON ({exc.msg})") from None
        return cls.from_dict(data, source=str(p), base=p.parent)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>", base: str | os.PathLike[str] | None = None
                  ) -> IntegrationConfig:
        """Validate a mapping; the capture part is checked at once by ``parse_capture_config``."""
        from my_utils.tracing.capture.config import parse_capture_config

        if data is None:
            data = {}
        top = _section(data, source, "", TOP_KEYS)
        capture = {k: v for k, v in top.items() if k in _CAPTURE_KEYS}
        parse_capture_config(capture, source=source)  # raises ConfigError naming the capture key
        out = top.get("output_dir", "prof_out")
        if not isinstance(out, str) or not out:
            raise _bad(source, "output_dir", out, "a folder path")
        output_dir = Path(out)
        if base is not None and not output_dir.is_absolute():
            output_dir = Path(base) / output_dir
        run_id = top.get("run_id", "")
        if not isinstance(run_id, str):
            raise _bad(source, "run_id", run_id, "a string")
        rank = top.get("rank")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise _bad(source, "rank", rank, "an integer >= 0")
        timer = _section(top.get("timer"), source, "timer", _TIMER_KEYS)
        use_cuda = timer.get("use_cuda", "auto")
        if use_cuda not in (True, False, "auto"):
            raise _bad(source, "timer.use_cuda", use_cuda, "true, false or auto")
        module = _section(top.get("module_profiler"), source, "module_profiler", _MODULE_KEYS)
        monitor = _section(top.get("monitor"), source, "monitor", _MONITOR_KEYS)
        interval = monitor.get("interval", 1.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval > 0:
            raise _bad(source, "monitor.interval", interval, "a number of seconds > 0")
        prefix = monitor.get("prefix", "monitor")
        if not isinstance(prefix, str) or not prefix:
            raise _bad(source, "monitor.prefix", prefix, "a non-empty string")
        return cls(
            output_dir=output_dir,
            run_id=run_id,
            rank=rank,
            timer=TimerSettings(_flag(timer, source, "timer", "enabled", True), use_cuda),
            module_profiler=ModuleProfilerSettings(_flag(module, source, "module_profiler", "enabled", True)),
            monitor=MonitorSettings(_flag(monitor, source, "monitor", "enabled", False), prefix, float(interval),
                                    _flag(monitor, source, "monitor", "track_hardware_metrics", True)),
            capture=capture,
            source=source,
        )


def _bad(source: str, key: str, value: Any, expected: str) -> ConfigError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return ConfigError(source, f"key {key}", f"got {shown}; expected {expected}")


def _section(data: Any, source: str, name: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, f"key {name}" if name else None,
                          f"got {type(data).__name__}; expected a mapping")
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        key = f"{name}.{unknown[0]}" if name else unknown[0]
        raise ConfigError(source, f"key {key}", f"unknown key; allowed keys: {', '.join(sorted(allowed))}")
    return data


def _flag(section: Mapping[str, Any], source: str, name: str, key: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise _bad(source, f"{name}.{key}", value, "true or false")
    return value
