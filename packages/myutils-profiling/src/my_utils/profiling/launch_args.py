"""Parse the launcher's argument groups: step windows and env injection in one call.

``profile_prepare`` (templates/profile_cli_common.sh) appends ``PROFILE_SETTINGS`` to the
training command: ``--torch_profiler.*``, ``--nsys_profiler.*``, ``--profiling_env.*``
and ``--nsys_launch.*``. A framework calls ``setup_profiling()`` once at start-up::

    prof = setup_profiling()                   # parses sys.argv, exports --profiling_env.*
    args = my_parser.parse_args(prof.remaining)
    torch_prof = prof.torch_profiler.make_profiler(rank=rank)   # None when disabled
    for step in ...:
        prof.nsys_profiler.on_step(step)       # cudaProfilerStart/Stop at the window edges
        ...
        if torch_prof: torch_prof.step()

Both ``--group.key=value`` and ``--group.key value`` are accepted; unknown keys of the
four groups are errors naming the key and the known ones (a typo must not silently
disable profiling). Step windows are half-open: ``[start_step, stop_step)``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import ConfigError

_log = logging.getLogger("my_utils.profiling.launch_args")

GROUPS = ("torch_profiler", "nsys_profiler", "profiling_env", "nsys_launch")
_WHERE = "command line"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(_WHERE, f"--{key}", f"true or false; found {value!r}")


def _int(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(_WHERE, f"--{key}", f"a non-negative step number; found {value!r}") from None
    if n < 0:
        raise ConfigError(_WHERE, f"--{key}", f"a non-negative step number; found {value!r}")
    return n


def _window(group: str, start: int, stop: int) -> None:
    if stop <= start:
        raise ConfigError(_WHERE, f"--{group}.stop_step",
                          f"a step after --{group}.start_step={start} (the window is [start, stop)); found {stop}")


@dataclass(frozen=True)
class TorchProfilerSettings:
    """``--torch_profiler.*``: record steps ``[start_step, stop_step)`` with torch.profiler."""

    enabled: bool = False
    start_step: int = 0
    stop_step: int = 0
    output_dir: str = "./logs/torch_profiler"
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False

    def in_window(self, step: int) -> bool:
        """True for the steps the profiler records."""
        return self.enabled and self.start_step <= step < self.stop_step

    def schedule_args(self) -> dict[str, int]:
        """``torch.profiler.schedule`` arguments for the window (one warm-up step when possible)."""
        warmup = 1 if self.start_step >= 1 else 0
        return {"wait": self.start_step - warmup, "warmup": warmup,
                "active": self.stop_step - self.start_step, "repeat": 1}

    def make_profiler(self, rank: int | None = None, on_trace_ready: Callable[[Any], None] | None = None) -> Any:
        """A started ``torch.profiler.profile`` for the window (None when disabled).

        Call its ``step()`` once per training step and ``stop()`` at the end; traces go to
        ``output_dir`` as ``rank<rank>.<ns>.pt.trace.json`` (tensorboard_trace_handler).
        """
        if not self.enabled:
            return None
        import torch.profiler as tp

        if rank is None:
            rank = env_rank(0)
        activities = [tp.ProfilerActivity.CPU]
        if _cuda_available():
            activities.append(tp.ProfilerActivity.CUDA)
        handler = on_trace_ready or tp.tensorboard_trace_handler(self.output_dir, worker_name=f"rank{rank}")
        prof = tp.profile(
            activities=activities, schedule=tp.schedule(**self.schedule_args()), on_trace_ready=handler,
            record_shapes=self.record_shapes, profile_memory=self.profile_memory, with_stack=self.with_stack,
        )
        prof.start()
        return prof


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a broken CUDA install is "no CUDA" for profiling purposes
        return False


@dataclass(frozen=True)
class NsysSettings:
    """``--nsys_profiler.*``: the capture window nsys waits for (``cudaProfilerApi``)."""

    enabled: bool = False
    start_step: int = 0
    stop_step: int = 0
    capture_range: str = "cudaProfilerApi"
    output: str = ""

    def action(self, step: int) -> str | None:
        """``"start"`` at ``start_step``, ``"stop"`` at ``stop_step``, else None."""
        if not self.enabled:
            return None
        if step == self.start_step:
            return "start"
        if step == self.stop_step:
            return "stop"
        return None

    def on_step(self, step: int, backend: Any = None) -> str | None:
        """Call at the start of each step: opens/closes the capture through ``backend``.

        ``backend`` needs ``start()``/``stop()`` (e.g. a tracing CudaProfilerBackend); by
        default ``torch.cuda.profiler`` is used when CUDA is available, else nothing
        happens (reported once). Returns the action taken.
        """
        act = self.action(step)
        if act is None:
            return None
        if backend is not None:
            getattr(backend, act)()
        elif _cuda_available():
            import torch.cuda.profiler as cuda_profiler

            (cuda_profiler.start if act == "start" else cuda_profiler.stop)()
        else:
            _log.warning("nsys window %s at step %d skipped: CUDA is not available", act, step)
        return act


@dataclass(frozen=True)
class ProfilingArgs:
    """The parsed argument groups and the arguments left for the framework's own parser."""

    torch_profiler: TorchProfilerSettings = field(default_factory=TorchProfilerSettings)
    nsys_profiler: NsysSettings = field(default_factory=NsysSettings)
    profiling_env: Mapping[str, str] = field(default_factory=dict)
    nsys_launch: Mapping[str, str] = field(default_factory=dict)
    remaining: tuple[str, ...] = ()

    def apply_env(self, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
        """Export ``--profiling_env.*`` into ``environ`` (``os.environ``); returns what was set."""
        target = os.environ if environ is None else environ
        for key, value in self.profiling_env.items():
            target[key] = value
        return dict(self.profiling_env)


_TORCH_KEYS = {"enable": "enabled", "enabled": "enabled", "start_step": "start_step", "stop_step": "stop_step",
               "output_dir": "output_dir", "record_shapes": "record_shapes",
               "profile_memory": "profile_memory", "with_stack": "with_stack"}
_NSYS_KEYS = {"enable": "enabled", "enabled": "enabled", "start_step": "start_step", "stop_step": "stop_step",
              "capture_range": "capture_range", "output": "output"}


def _split(argv: Sequence[str]) -> tuple[dict[str, dict[str, str]], list[str]]:
    groups: dict[str, dict[str, str]] = {g: {} for g in GROUPS}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        head = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        group, dot, key = head.partition(".")
        if not (dot and group in GROUPS):
            rest.append(arg)
            i += 1
            continue
        if not key:
            raise ConfigError(_WHERE, arg, f"--{group}.<key>=<value>")
        if "=" in arg:
            value = arg.split("=", 1)[1]
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            i += 1
            value = argv[i]
        else:
            raise ConfigError(_WHERE, arg, f"a value: --{group}.{key}=<value>")
        groups[group][key] = value
        i += 1
    return groups, rest


def parse_profiling_args(argv: Sequence[str] | None = None) -> ProfilingArgs:
    """Parse the four groups out of ``argv`` (default ``sys.argv[1:]``); touches nothing."""
    groups, rest = _split(list(sys.argv[1:] if argv is None else argv))

    def build(group: str, keys: dict[str, str], cls: Any) -> Any:
        kwargs: dict[str, Any] = {}
        for key, value in groups[group].items():
            attr = keys.get(key)
            if attr is None:
                raise ConfigError(_WHERE, f"--{group}.{key}", f"one of {', '.join(sorted(keys))}")
            default = getattr(cls(), attr)
            if isinstance(default, bool):
                kwargs[attr] = _bool(f"{group}.{key}", value)
            elif isinstance(default, int):
                kwargs[attr] = _int(f"{group}.{key}", value)
            else:
                kwargs[attr] = value
        settings = cls(**kwargs)
        if settings.enabled:
            _window(group, settings.start_step, settings.stop_step)
        return settings

    return ProfilingArgs(
        torch_profiler=build("torch_profiler", _TORCH_KEYS, TorchProfilerSettings),
        nsys_profiler=build("nsys_profiler", _NSYS_KEYS, NsysSettings),
        profiling_env=dict(groups["profiling_env"]),
        nsys_launch=dict(groups["nsys_launch"]),
        remaining=tuple(rest),
    )


def setup_profiling(argv: Sequence[str] | None = None,
                    environ: MutableMapping[str, str] | None = None) -> ProfilingArgs:
    """Parse the groups and export ``--profiling_env.*``: the one call a framework makes."""
    args = parse_profiling_args(argv)
    args.apply_env(environ)
    return args
