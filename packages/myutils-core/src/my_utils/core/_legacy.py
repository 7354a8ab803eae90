"""Where the seed's top-level names and flat modules live now.

``my_utils/__init__.py`` and the nine flat alias modules call into this module. A name whose
home module is missing raises an ImportError that says which distribution to install: when
that distribution is absent, and also when an installed release of it lacks the module (a
skeleton or an older version). Any other import failure (a missing torch, a bug) propagates
unchanged.

``hasattr(my_utils, NAME)`` must answer False rather than raise, yet ``from my_utils import
NAME`` must keep the pip hint. Both reach the package's ``__getattr__`` through ``hasattr``
(the import system's ``_handle_fromlist`` asks ``hasattr`` first), and an AttributeError
raised there loses its message in ``from ... import`` (CPython replaces it with "cannot
import name"). So :func:`module_getattr` raises the ImportError only to the import system's
fromlist handler and the same message as an AttributeError to everybody else.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from types import FrameType, ModuleType
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
    # the seed's package list names the part "legacy_profilers"
    "legacy_profilers": ("my_utils.legacy", "myutils-legacy"),
}


def _dist_version(dist: str) -> str | None:
    """The installed version of ``dist``, or None when it is not installed (nothing is imported)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _dist_installed(dist: str) -> bool:
    return _dist_version(dist) is not None


class LegacyHomeMissing(ImportError):
    """The module a legacy name now lives in is not there; the message says what to install."""


def _import_home(target: str, dist: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        # Translate only "the home module (or its my_utils parent) is not there"; a missing
        # torch or a bug inside an installed distribution must surface as it is.
        missing = exc.name or ""
        home_missing = target == missing or target.startswith(missing + ".")
        if not (home_missing and missing.startswith("my_utils.")):
            raise
        version = _dist_version(dist)
        if version is None:
            message = (f"{what} now lives in {target}, shipped by the {dist!r} distribution, "
                       f"which is not installed. Run: pip install {dist}")
        else:
            message = (f"{what} now lives in {target}, which the installed {dist!r} {version} does not ship "
                       f"(a release without it). Run: pip install --upgrade {dist}")
        raise LegacyHomeMissing(message, name=target) from exc


def resolve_legacy_name(name: str) -> Any:
    """Return the object a seed top-level name refers to, importing its home module.

    Raises AttributeError for unknown names and :class:`LegacyHomeMissing` (an ImportError
    with a pip hint) when the home module is missing.
    """
    try:
        target, dist = LEGACY_NAMES[name]
    except KeyError:
        raise AttributeError(f"module 'my_utils' has no attribute {name!r}") from None
    module = _import_home(target, dist, f"my_utils.{name}")
    return getattr(module, name)


def _asked_by_from_import(caller: FrameType | None) -> bool:
    """Whether ``caller`` is importlib's fromlist handler, i.e. a ``from my_utils import NAME``."""
    return (caller is not None and caller.f_code.co_name == "_handle_fromlist"
            and caller.f_globals.get("__name__") == "importlib._bootstrap")


def module_getattr(name: str, caller: FrameType | None) -> Any:
    """The PEP 562 ``__getattr__`` of ``my_utils``; ``caller`` is the frame that asked.

    A missing home raises ImportError to ``from my_utils import NAME`` and AttributeError
    (same message, the ImportError as its cause) to attribute access, ``getattr`` and
    ``hasattr``, which therefore answers False instead of raising.
    """
    try:
        return resolve_legacy_name(name)
    except ImportError as exc:
        if _asked_by_from_import(caller):
            raise
        raise AttributeError(str(exc), name=name, obj=sys.modules.get("my_utils")) from exc


def available_legacy_names() -> list[str]:
    """Names whose distribution is installed (checked in metadata, nothing imported)."""
    installed = {dist for _, dist in LEGACY_NAMES.values() if _dist_installed(dist)}
    return [name for name, (_, dist) in LEGACY_NAMES.items() if dist in installed]


def alias_module(module_name: str) -> None:
    """Make the flat legacy module ``module_name`` the very same object as its new home."""
    flat = module_name.rpartition(".")[2]
    target, dist = LEGACY_MODULES[flat]
    sys.modules[module_name] = _import_home(target, dist, module_name)
