"""``TorchNvtxLabeler``: NVTX ranges through ``torch.cuda.nvtx`` (the fallback backend).

``torch.cuda.nvtx`` has no domains, colours or categories: those arguments are accepted
for protocol compatibility and ignored. On a CPU build of torch every ``torch.cuda.nvtx``
call raises, so the labeler checks once, at construction, and goes dormant with a single
warning instead of failing (or paying a try/except) on every call.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from my_utils.tracing._labels import DEFAULT_DOMAIN, ActiveLabelerBase, DormantMixin

_log = logging.getLogger("my_utils.tracing")
_warned_lock = threading.Lock()
_warned: set[str] = set()


def torch_nvtx_status() -> tuple[bool, str]:
    """Whether ``torch.cuda.nvtx`` works in this build of torch, and why not when it does not."""
    try:
        import torch
    except ImportError as exc:
        return False, f"torch is not importable ({exc})"
    if not hasattr(torch._C, "_nvtx"):
        return False, (f"torch {torch.__version__} is a build without CUDA, where every "
                       "torch.cuda.nvtx call raises")
    return True, ""


def _warn_once(reason: str) -> None:
    with _warned_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    _log.warning("TorchNvtxLabeler emits nothing: %s", reason)


class TorchNvtxLabeler(ActiveLabelerBase):
    """NVTX ranges through ``torch.cuda.nvtx``: ``range_push``/``range_pop``, ``range_start``/
    ``range_end`` and ``mark``. ``color``, ``domain_name`` and ``category`` are ignored.

    Dormant (every method an empty call, ``active`` False, ``reason`` set) when
    ``enabled=False``, or when torch is missing or built without CUDA; the latter is
    reported once per process through logging.
    """

    __slots__ = ("_nvtx",)

    def __init__(self, enabled: bool = True, default_domain: str | None = DEFAULT_DOMAIN) -> None:
        super().__init__(enabled, default_domain)
        self._nvtx: Any = None
        if not enabled:
            self.reason = "disabled (enabled=False)"
            self.__class__ = DormantTorchNvtxLabeler
            return
        ok, reason = torch_nvtx_status()
        if ok:
            import torch.cuda.nvtx

            self._nvtx = torch.cuda.nvtx
        else:
            self.reason = reason
            _warn_once(reason)
            self.__class__ = DormantTorchNvtxLabeler

    def _lookup(self, label: str, color: str | int | None, domain_name: str | None,
                category: str | int | None) -> str:
        return label

    def _emit_push(self, entry: str) -> None:
        self._nvtx.range_push(entry)

    def _emit_pop(self, entry: str) -> None:
        self._nvtx.range_pop()

    def _emit_start(self, entry: str) -> int:
        range_id: int = self._nvtx.range_start(entry)
        return range_id

    def _emit_end(self, entry: str, range_id: int) -> None:
        self._nvtx.range_end(range_id)

    def _emit_mark(self, entry: str) -> None:
        self._nvtx.mark(entry)


class DormantTorchNvtxLabeler(DormantMixin, TorchNvtxLabeler):
    """A ``TorchNvtxLabeler`` that cannot emit: the bound no-op path."""

    __slots__ = ()
