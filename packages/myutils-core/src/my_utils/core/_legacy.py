"""Where the seed's top-level names and flat modules live now.

``my_utils/__init__.py`` and the nine flat alias modules call into this module. A name
whose distribution is missing raises an ImportError that says which distribution to
install; any other import failure (a missing torch, a bug) propagates unchanged.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from types import ModuleType
from typing import Any, Final

# name -> (home module, distribution that ships it)
LEGACY_NAMES: Final[dict[str, tuple[str, str]]] = {
    "GlobalLogger": ("my_utils.core.logger", "myutils-core"),
    "get_global_logger": ("my_utils.core.logger", "myutils-core"),
    "MyTimer": ("my_utils.core.timer", "myutils-core"),
    "global_timer": ("my_utils.core.timer", "myutils-core"),
    "create_labeler": ("my_utils.tracing.nvtx_utils", "myutils-tracing"),
    "NvtxLabeler": ("my_utils.tracing.nvtx_utils", "myutils-tracing"),
    "TorchNvtxLabeler": ("my_utils.tracing.nvtx_utils", "myutils-tracing"),
    "NoOpLabeler": ("my_utils.tracing.nvtx_utils", "myutils-tracing"),
    "ProfileManager": ("my_utils.tracing.capture", "myutils-tracing"),
    "CaptureController": ("my_utils.tracing.capture", "myutils-tracing"),
    "CaptureBackend": ("my_utils.tracing.capture", "myutils-tracing"),
    "CudaProfilerBackend": ("my_utils.tracing.capture", "myutils-tracing"),
    "HookEvent": ("my_utils.tracing.capture", "myutils-tracing"),
    "ForwardProfilerHook": ("my_utils.hooks.forward", "myutils-hooks"),
    "ModuleProfiler": ("my_utils.hooks.module_profiler", "myutils-hooks"),
    "ClockSynchronizer": ("my_utils.distributed.clock_sync", "myutils-distributed"),
    "SocketClockSynchronizer": ("my_utils.distributed.clock_sync", "myutils-distributed"),
    "global_snapshotter": ("my_utils.memory.snapshot", "myutils-memory"),
    "GPU_Performance_Tracker": ("my_utils.memory.gpu_tracker", "myutils-memory"),
    "get_profiling_templates_dir": ("my_utils.profiling.templates", "myutils-profiling"),
}

# flat module -> (home module, distribution that ships it)
LEGACY_MODULES: Final[dict[str, tuple[str, str]]] = {
    "utils": ("my_utils.core.utils", "myutils-core"),
    "logger": ("my_utils.core.logger", "myutils-core"),
    "nvtx_utils": ("my_utils.tracing.nvtx_utils", "myutils-tracing"),
    "moduleProfiler": ("my_utils.hooks.module_profiler", "myutils-hooks"),
    "profilerwrapper": ("my_utils.legacy.profiler_wrapper", "myutils-legacy"),
    "memory_snapshot": ("my_utils.memory.snapshot", "myutils-memory"),
    "gpu_mem_tracker": ("my_utils.memory.gpu_tracker", "myutils-memory"),
    "DITProfiler": ("my_utils.legacy.dit_profiler", "myutils-legacy"),
    "clockSyncUtils": ("my_utils.distributed.clock_sync", "myutils-distributed"),
}


def _dist_installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _import_home(target: str, dist: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        # Translate only "the providing distribution is absent"; a missing torch or a
        # bug inside an installed distribution must surface as it is.
        missing = exc.name or ""
        home_missing = target == missing or target.startswith(missing + ".")
        if home_missing and missing.startswith("my_utils.") and not _dist_installed(dist):
            raise ImportError(
                f"{what} now lives in {target}, shipped by the {dist!r} distribution, "
                f"which is not installed. Run: pip install {dist}",
                name=target,
            ) from exc
        raise


def resolve_legacy_name(name: str) -> Any:
    """Return the object a seed top-level name refers to, importing its home module.

    Raises AttributeError for unknown names and ImportError (with a pip hint) when the
    distribution that ships the name is not installed.
    """
    try:
        target, dist = LEGACY_NAMES[name]
    except KeyError:
        raise AttributeError(f"module 'my_utils' has no attribute {name!r}") from None
    module = _import_home(target, dist, f"my_utils.{name}")
    return getattr(module, name)


def available_legacy_names() -> list[str]:
    """Names whose distribution is installed (checked in metadata, nothing imported)."""
    installed = {dist for _, dist in LEGACY_NAMES.values() if _dist_installed(dist)}
    return [name for name, (_, dist) in LEGACY_NAMES.items() if dist in installed]


def alias_module(module_name: str) -> None:
    """Make the flat legacy module ``module_name`` the very same object as its new home."""
    flat = module_name.rpartition(".")[2]
    target, dist = LEGACY_MODULES[flat]
    sys.modules[module_name] = _import_home(target, dist, module_name)
