"""``NvtxLabeler``: NVTX ranges through the ``nvtx`` package's Domain API.

Labels are registered strings with cached event attributes, so a hot ``start``/``stop``
is one dictionary lookup plus the C call. With no tool attached (no Nsight, no injection
library) ``nvtx`` hands out dummy domains whose calls do nothing but still cost a Python
call each; the labeler detects that once, at construction, and binds a no-op path.
"""

from __future__ import annotations

import logging
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.tracing._labels import DEFAULT_DOMAIN, ActiveLabelerBase, DormantMixin

_log = logging.getLogger("my_utils.tracing")


def nvtx_tool_status(domain_name: str | None = DEFAULT_DOMAIN) -> tuple[bool, str]:
    """Whether NVTX calls reach a tool in this process, and why not when they do not.

    ``nvtx`` is imported here, not at module import, because it imports numpy. Asking for a
    domain initialises NVTX, which reads ``NVTX_INJECTION64_PATH`` once per process.
    """
    try:
        import nvtx
    except ImportError as exc:
        return False, f"the nvtx package is not importable ({exc}); pip install nvtx"
    if not nvtx.enabled():
        return False, "NVTX_DISABLE is set"
    if type(nvtx.get_domain(domain_name)).__name__ == "DummyDomain":
        return False, "no NVTX tool is attached (run under nsys, or set NVTX_INJECTION64_PATH)"
    return True, ""


class NvtxLabeler(ActiveLabelerBase):
    """NVTX ranges, marks and categories through ``nvtx`` domains (Nsight Systems shows them).

    ``register_label(label, color, domain_name, category)`` caches the domain, the registered
    string and the event attributes; a bare ``start(label)`` reuses them. ``start``/``stop``
    are process ranges (``nvtxDomainRangeStartEx``), ``push``/``pop``/``range`` nested ranges.

    ``enabled=False``, a missing ``nvtx`` package, ``NVTX_DISABLE`` or the absence of any
    tool make the instance dormant: every method is an empty call, ``active`` is False and
    ``reason`` says why. The decision is taken once, here, never per call.
    """

    __slots__ = ("_attrs", "_nvtx")

    def __init__(self, enabled: bool = True, default_domain: str | None = DEFAULT_DOMAIN) -> None:
        super().__init__(enabled, default_domain)
        self._attrs: dict[Any, tuple[Any, Any]] = {}
        self._nvtx: Any = None
        active, reason = (False, "disabled (enabled=False)") if not enabled else nvtx_tool_status(default_domain)
        if active:
            import nvtx

            self._nvtx = nvtx
        else:
            self.reason = reason
            _log.debug("NvtxLabeler(default_domain=%r) is dormant: %s", default_domain, reason)
            self.__class__ = DormantNvtxLabeler

    def _entry(self, label: str, color: str | int | None, domain_name: str | None,
               category: str | int | None) -> tuple[Any, Any]:
        if not isinstance(label, str):
            raise UsageError(f"NvtxLabeler: label must be a str, got {type(label).__name__} {label!r}")
        domain = self._nvtx.get_domain(self.default_domain if domain_name is None else domain_name)
        try:
            if isinstance(category, str):
                category = domain.get_category_id(category)
            attrs = domain.get_event_attributes(message=label, color=color, category=category)
        except (TypeError, ValueError, OverflowError) as exc:
            raise UsageError(
                f"NvtxLabeler: label {label!r}: invalid color {color!r} or category {category!r} ({exc}); "
                "use a colour name such as 'blue', 'green', 'red', 'yellow' or an 0xAARRGGBB int, "
                "and a category name or a non-negative int"
            ) from exc
        return domain, attrs

    def _lookup(self, label: str, color: str | int | None, domain_name: str | None,
                category: str | int | None) -> tuple[Any, Any]:
        if color is None and domain_name is None and category is None:
            entry = self._attrs.get(label)
            if entry is None:
                entry = self._attrs[label] = self._entry(label, None, None, None)
            return entry
        key = (label, color, domain_name, category)
        entry = self._attrs.get(key)
        if entry is None:
            entry = self._attrs[key] = self._entry(label, color, domain_name, category)
        return entry

    def register_label(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Register ``label`` with its colour, domain and category; later bare uses reuse them."""
        entry = self._entry(label, color, domain_name, category)
        self._attrs[label] = entry
        self._attrs[(label, color, domain_name, category)] = entry

    def _emit_push(self, entry: tuple[Any, Any]) -> None:
        entry[0].push_range(entry[1])

    def _emit_pop(self, entry: tuple[Any, Any]) -> None:
        entry[0].pop_range()

    def _emit_start(self, entry: tuple[Any, Any]) -> int:
        range_id: int = entry[0].start_range(entry[1])
        return range_id

    def _emit_end(self, entry: tuple[Any, Any], range_id: int) -> None:
        entry[0].end_range(range_id)

    def _emit_mark(self, entry: tuple[Any, Any]) -> None:
        entry[0].mark(entry[1])


class DormantNvtxLabeler(DormantMixin, NvtxLabeler):
    """An ``NvtxLabeler`` with nothing to record its calls: the bound no-op path."""

    __slots__ = ()
