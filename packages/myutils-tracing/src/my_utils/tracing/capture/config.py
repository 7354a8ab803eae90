"""The capture-window configuration of the seed, parsed into frozen values.

Accepted shapes (YAML read with ``safe_load``, or a dict)::

    profile:                    # optional wrapper; the sections may also sit at the top level
      enabled: true
      features:
        capture: {enabled, backend, nvtx_window, default_stop_policy, backend_options,
                  control_file, control_check_every}
      capture:
        debug_watch: false
        schedule: {steps: [5, 10], max_windows_per_step: 2, roles: [generator, critic]}
        roles: [...]            # also accepted here
        windows: [{name, role, start_iter, start_mb_selector, start_profile_names, stop_iter,
                   stop_mb_selector, stop_profile_names, stop_policy, stop_edge, ranks_filter,
                   enable_nvtx_window}, ...]

Every error is a ``ConfigError`` naming the source, the key, the bad value and what is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError


class StopPolicy(str, Enum):
    """When a capturing window stops."""

    #: at the exit of the function (profile name) that started the window
    ON_TRIGGER_FUNC_EXIT = "ON_TRIGGER_FUNC_EXIT"
    #: when one of ``stop_profile_names`` reaches ``stop_edge``
    ON_STOP_PROFILE_NAME = "ON_STOP_PROFILE_NAME"


class Edge(str, Enum):
    """Which side of a hooked region an event is: ``on_enter`` or ``on_exit``."""

    ENTER = "ENTER"
    EXIT = "EXIT"


#: historical spelling kept by the seed, normalised on read
STOP_POLICY_ALIASES: Mapping[str, StopPolicy] = {"ON_TARGET_FUNC_EXIT": StopPolicy.ON_TRIGGER_FUNC_EXIT}
_POLICY_CHOICES = "ON_TARGET_FUNC_EXIT, ON_TRIGGER_FUNC_EXIT, ON_STOP_PROFILE_NAME"

MbSelector = str | int  # "first", "last" or a microbatch index >= 0

FEATURE_KEYS = frozenset({"enabled", "backend", "nvtx_window", "default_stop_policy", "backend_options",
                          "control_file", "control_check_every"})
CAPTURE_KEYS = frozenset({"debug_watch", "schedule", "windows", "roles"})
SCHEDULE_KEYS = frozenset({"steps", "max_windows_per_step", "roles"})
WINDOW_KEYS = frozenset({"name", "role", "start_iter", "start_mb_selector", "start_profile_names", "stop_iter",
                         "stop_mb_selector", "stop_profile_names", "stop_policy", "stop_edge", "ranks_filter",
                         "enable_nvtx_window"})
DEFAULT_BACKEND = "cudaProfilerApi"


@dataclass(frozen=True)
class WindowConfig:
    """One configured capture window (iterations may be None: see ``ProfileManager``)."""

    name: str
    role: str | None = None
    start_iter: int | None = None
    start_mb_selector: MbSelector = "first"
    start_profile_names: tuple[str, ...] = ()
    stop_iter: int | None = None
    stop_mb_selector: MbSelector | None = None  # None: the start microbatch
    stop_profile_names: tuple[str, ...] = ()  # empty: the start names
    stop_policy: StopPolicy | None = None  # None: features.capture.default_stop_policy
    stop_edge: Edge = Edge.EXIT
    ranks_filter: tuple[int, ...] | None = None
    enable_nvtx_window: bool = True


@dataclass(frozen=True)
class ScheduleConfig:
    """``capture.schedule``: the steps where windows may arm, a per-step cap, allowed roles."""

    steps: tuple[int, ...] | None = None
    max_windows_per_step: int | None = None
    roles: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CaptureConfig:
    """The whole capture configuration, validated."""

    enabled: bool = False
    backend: str = DEFAULT_BACKEND
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    nvtx_window: bool = False
    default_stop_policy: StopPolicy = StopPolicy.ON_TRIGGER_FUNC_EXIT
    debug_watch: bool = False
    schedule: ScheduleConfig = ScheduleConfig()
    windows: tuple[WindowConfig, ...] = ()
    control_file: str | None = None
    control_check_every: int = 10
    source: str = "<dict>"


class _Reader:
    """Typed access to one mapping with errors that name ``source`` and the dotted key."""

    def __init__(self, source: str, prefix: str, data: Any, allowed: frozenset[str]) -> None:
        self.source = source
        self.prefix = prefix
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError(source, f"key {prefix}", f"got {_show(data)}; expected a mapping")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            raise ConfigError(source, f"key {prefix}.{unknown[0]}",
                              f"unknown key; allowed keys: {', '.join(sorted(allowed))}")
        self.data = data

    def key(self, name: str) -> str:
        return f"key {self.prefix}.{name}"

    def fail(self, name: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.source, self.key(name), f"got {_show(value)}; expected {expected}")

    def boolean(self, name: str, default: bool) -> bool:
        value = self.data.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, value, "true or false")
        return value

    def integer(self, name: str, default: int | None, minimum: int = 0) -> int | None:
        value = self.data.get(name, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(name, value, f"an integer >= {minimum}")
        return value

    def string(self, name: str, default: str | None) -> str | None:
        value = self.data.get(name, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(name, value, "a non-empty string")
        return value

    def strings(self, name: str, allow_none: bool = False) -> tuple[str, ...] | None:
        value = self.data.get(name)
        if value is None:
            return None if allow_none else ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, value, "a list of non-empty strings")
        return tuple(value)

    def integers(self, name: str) -> tuple[int, ...] | None:
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list | tuple) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise self.fail(name, value, "a list of integers >= 0")
        return tuple(value)

    def choice(self, name: str, default: Any, enum: type[Enum], aliases: Mapping[str, Any] | None = None,
               shown: str = "") -> Any:
        value = self.data.get(name, default)
        if value is None or isinstance(value, enum):
            return value
        text = value.strip().upper() if isinstance(value, str) else None
        if text is not None and aliases and text in aliases:
            return aliases[text]
        try:
            return enum(text)
        except ValueError:
            raise self.fail(name, value, f"one of {shown or ', '.join(m.value for m in enum)}") from None

    def selector(self, name: str, default: MbSelector | None) -> MbSelector | None:
        return parse_selector(self.data.get(name, default), self.source, self.key(name))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_selector(value: Any, source: str, place: str) -> MbSelector | None:
    """A microbatch selector: ``first``, ``last`` or an index >= 0 (ints as digits are accepted)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("first", "last"):
            return text
        if text.isdigit():
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ConfigError(source, place, f"got {_show(value)}; expected first, last or a microbatch index >= 0")


def _iteration(reader: _Reader, name: str, base: int | None) -> int | None:
    """An iteration; ``"+N"`` means N steps after ``base`` (control files only)."""
    value = reader.data.get(name)
    if base is not None and isinstance(value, str) and value.strip().startswith("+"):
        digits = value.strip()[1:]
        if digits.isdigit():
            return base + int(digits)
        raise reader.fail(name, value, "an iteration >= 0 or '+N' (N steps from now)")
    expected = "an iteration >= 0" + (" or '+N' (N steps from now)" if base is not None else "")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise reader.fail(name, value, expected)
    return value


def parse_window(data: Any, source: str, prefix: str, index: int, relative_base: int | None = None) -> WindowConfig:
    """One entry of ``capture.windows`` (``relative_base`` enables ``"+N"`` iterations)."""
    r = _Reader(source, prefix, data, WINDOW_KEYS)
    name = r.string("name", None) or f"window_{index}"
    start_iter = _iteration(r, "start_iter", relative_base)
    stop_iter = _iteration(r, "stop_iter", relative_base)
    if start_iter is None and stop_iter is not None:
        raise r.fail("stop_iter", stop_iter, "no stop_iter without a start_iter (or set both)")
    if start_iter is not None and stop_iter is not None and stop_iter < start_iter:
        raise r.fail("stop_iter", stop_iter, f"an iteration >= start_iter ({start_iter})")
    start_mb = r.selector("start_mb_selector", "first")
    stop_mb = r.selector("stop_mb_selector", None)
    same_iteration = stop_iter is None or stop_iter == start_iter
    if (same_iteration and isinstance(start_mb, int) and isinstance(stop_mb, int)
            and stop_mb < start_mb):
        raise r.fail("stop_mb_selector", stop_mb,
                     f"a microbatch >= start_mb_selector ({start_mb}) when the window starts and stops "
                     "in the same iteration")
    return WindowConfig(
        name=name,
        role=r.string("role", None),
        start_iter=start_iter,
        start_mb_selector=start_mb if start_mb is not None else "first",
        start_profile_names=r.strings("start_profile_names") or (),
        stop_iter=stop_iter,
        stop_mb_selector=stop_mb,
        stop_profile_names=r.strings("stop_profile_names") or (),
        stop_policy=r.choice("stop_policy", None, StopPolicy, STOP_POLICY_ALIASES, _POLICY_CHOICES),
        stop_edge=r.choice("stop_edge", Edge.EXIT, Edge),
        ranks_filter=r.integers("ranks_filter"),
        enable_nvtx_window=r.boolean("enable_nvtx_window", True),
    )


def parse_windows(data: Any, source: str, prefix: str, relative_base: int | None = None
                  ) -> tuple[WindowConfig, ...]:
    """A list of windows with unique names."""
    if data is None:
        return ()
    if not isinstance(data, list | tuple):
        raise ConfigError(source, f"key {prefix}", f"got {_show(data)}; expected a list of windows")
    windows = tuple(parse_window(w, source, f"{prefix}[{i}]", i, relative_base) for i, w in enumerate(data))
    seen: set[str] = set()
    for i, window in enumerate(windows):
        if window.name in seen:
            raise ConfigError(source, f"key {prefix}[{i}].name",
                              f"got {window.name!r}; expected a name no other window uses")
        seen.add(window.name)
    return windows


def _sections(cfg: Mapping[str, Any], source: str) -> tuple[bool, Any, Any]:
    profile = cfg.get("profile")
    if profile is not None and not isinstance(profile, Mapping):
        raise ConfigError(source, "key profile", f"got {_show(profile)}; expected a mapping")
    scope: Mapping[str, Any] = profile if profile is not None else cfg
    enabled = scope.get("enabled", True)
    if not isinstance(enabled, bool):
        key = "profile.enabled" if profile is not None else "enabled"
        raise ConfigError(source, f"key {key}", f"got {_show(enabled)}; expected true or false")
    features = scope.get("features", cfg.get("features"))
    capture = scope.get("capture", cfg.get("capture"))
    if features is not None and not isinstance(features, Mapping):
        raise ConfigError(source, "key features", f"got {_show(features)}; expected a mapping")
    return enabled, (features or {}).get("capture"), capture


def parse_capture_config(cfg: Any, source: str = "<dict>") -> CaptureConfig:
    """Validate a profile configuration (dict, as from ``yaml.safe_load``) into a ``CaptureConfig``."""
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, Mapping):
        raise ConfigError(source, None, f"got {_show(cfg)}; expected a mapping at the top level")
    profile_enabled, feature_data, capture_data = _sections(cfg, source)
    feat = _Reader(source, "features.capture", feature_data, FEATURE_KEYS)
    cap = _Reader(source, "capture", capture_data, CAPTURE_KEYS)
    sched = _Reader(source, "capture.schedule", cap.data.get("schedule"), SCHEDULE_KEYS)
    roles = sched.strings("roles", allow_none=True)
    if roles is None:
        roles = cap.strings("roles", allow_none=True)
    options = feat.data.get("backend_options") or {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise feat.fail("backend_options", options, "a mapping of option names to values")
    schedule = ScheduleConfig(
        steps=sched.integers("steps"),
        max_windows_per_step=sched.integer("max_windows_per_step", None, minimum=1),
        roles=roles,
    )
    windows = parse_windows(cap.data.get("windows"), source, "capture.windows")
    for i, window in enumerate(windows):
        if window.start_iter is None and schedule.steps is None:
            raise ConfigError(source, f"key capture.windows[{i}].start_iter",
                              "missing; expected an iteration >= 0 (or capture.schedule.steps to arm at)")
    backend = feat.string("backend", DEFAULT_BACKEND)
    control_every = feat.integer("control_check_every", 10, minimum=1)
    return CaptureConfig(
        enabled=profile_enabled and feat.boolean("enabled", True),
        backend=backend or DEFAULT_BACKEND,
        backend_options=dict(options),
        nvtx_window=feat.boolean("nvtx_window", False),
        default_stop_policy=feat.choice("default_stop_policy", StopPolicy.ON_TRIGGER_FUNC_EXIT, StopPolicy,
                                        STOP_POLICY_ALIASES, _POLICY_CHOICES),
        debug_watch=cap.boolean("debug_watch", False),
        schedule=schedule,
        windows=windows,
        control_file=feat.string("control_file", None),
        control_check_every=control_every if control_every is not None else 10,
        source=source,
    )


def load_yaml_config(path: str | os.PathLike[str]) -> Any:
    """Read a YAML file with ``yaml.safe_load`` (no object construction from the file)."""
    import yaml

    text = Path(path).read_text(encoding="utf-8")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"line {mark.line + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(str(path), place, f"invalid YAML ({problem})") from None


def load_capture_config(path: str | Path) -> CaptureConfig:
    """Read and validate a YAML profile configuration file."""
    return parse_capture_config(load_yaml_config(path), source=str(path))
