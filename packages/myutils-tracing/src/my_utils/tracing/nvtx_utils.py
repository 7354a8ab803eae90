"""NVTX labelers: one protocol, three implementations, and ``create_labeler`` to pick one.

Legacy path: ``my_utils.nvtx_utils`` is this module; ``my_utils.create_labeler`` is the
function below. Importing this module imports neither ``nvtx`` (it imports numpy) nor torch.
"""

from __future__ import annotations

import logging
import os

from my_utils.tracing._labels import DEFAULT_DOMAIN, Labeler, NoOpLabeler
from my_utils.tracing._nvtx_labeler import NvtxLabeler, nvtx_tool_status
from my_utils.tracing._torch_labeler import TorchNvtxLabeler, torch_nvtx_status

__all__ = [
    "DEFAULT_DOMAIN",
    "ENV_SWITCH",
    "Labeler",
    "NoOpLabeler",
    "NvtxLabeler",
    "TorchNvtxLabeler",
    "create_labeler",
    "env_enabled",
    "nvtx_tool_status",
    "torch_nvtx_status",
]

_log = logging.getLogger("my_utils.tracing")

ENV_SWITCH = "ENABLE_NVTX"
_TRUE = frozenset({"1", "true", "yes", "on"})


def env_enabled(environ: dict[str, str] | None = None) -> bool:
    """Whether ``ENABLE_NVTX`` switches NVTX on (``1``/``true``/``yes``/``on``, any case)."""
    value = (os.environ if environ is None else environ).get(ENV_SWITCH, "")
    return value.strip().lower() in _TRUE


def create_labeler(
    enabled: bool | None = None, default_domain: str | None = DEFAULT_DOMAIN
) -> NvtxLabeler | TorchNvtxLabeler | NoOpLabeler:
    """The best labeler available: ``NvtxLabeler``, else ``TorchNvtxLabeler``, else ``NoOpLabeler``.

    ``enabled=None`` reads ``ENABLE_NVTX``; an explicit ``enabled`` wins. ``NvtxLabeler`` is
    chosen whenever the ``nvtx`` package imports (with no tool attached it binds its no-op
    path); ``TorchNvtxLabeler`` when only a CUDA build of torch offers NVTX.
    """
    if enabled is None:
        if not env_enabled():
            return NoOpLabeler(default_domain=default_domain, reason=f"{ENV_SWITCH} is not set to 1")
    elif not enabled:
        return NoOpLabeler(default_domain=default_domain, reason="disabled (enabled=False)")
    try:
        import nvtx  # noqa: F401  (only probing whether the package is there)
    except ImportError:
        ok, reason = torch_nvtx_status()
        if ok:
            return TorchNvtxLabeler(enabled=True, default_domain=default_domain)
        _log.debug("create_labeler: neither nvtx nor a CUDA build of torch is available (%s)", reason)
        return NoOpLabeler(default_domain=default_domain, reason=f"nvtx is not installed and {reason}")
    return NvtxLabeler(enabled=True, default_domain=default_domain)
