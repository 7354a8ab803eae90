"""The labeler protocol, the no-op labeler and the bookkeeping shared by real labelers.

A labeler emits named ranges and marks for a timeline tool (Nsight Systems through NVTX).
Every labeler has the same surface, so instrumented code never checks which one it holds.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol, runtime_checkable

_log = logging.getLogger("my_utils.tracing")

DEFAULT_DOMAIN = "my_utils"


@runtime_checkable
class Labeler(Protocol):
    """What every labeler offers: registered labels, start/stop ranges, push/pop, marks."""

    def register_label(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Prepare ``label`` once (string handle, colour, category) so later calls are cheap."""

    def start(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> Any:
        """Open a process range (it may end on another thread); return the token for ``stop``."""

    def stop(self, token: Any) -> None:
        """Close the range opened by ``start`` that returned ``token``."""

    def range(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> Any:
        """A context manager: a nested (push/pop) range around the ``with`` body."""

    def mark(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Emit an instantaneous event."""

    def push(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Open a nested range on this thread; ``pop`` closes the innermost one."""

    def pop(self) -> None:
        """Close the innermost range opened by ``push``."""


class _NullRange:
    """A reusable context manager that does nothing (shared: no allocation per ``with``)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:  # no *args: no tuple per exit
        return None


NULL_RANGE = _NullRange()


class MisuseReporter:
    """Reports unbalanced ``stop``/``pop`` calls: the first one as a warning, later ones at debug.

    Unbalanced calls are bugs in the instrumented code, but a timeline annotation must never
    stop a training run, so the labeler repairs its stack and keeps going.
    """

    __slots__ = ("count", "owner")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.count = 0

    def report(self, what: str, fix: str) -> None:
        """Record one problem; log the first with the fix, the others quietly."""
        self.count += 1
        if self.count == 1:
            _log.warning("%s: %s; %s (reported once; later problems are logged at debug level)",
                         self.owner, what, fix)
        else:
            _log.debug("%s: %s (problem #%d)", self.owner, what, self.count)


class _Token:
    """What ``start`` returns: the backend's entry for the label and the tool's range id."""

    __slots__ = ("entry", "label", "range_id")

    def __init__(self, entry: Any, range_id: int, label: str) -> None:
        self.entry = entry
        self.range_id = range_id
        self.label = label

    def __repr__(self) -> str:
        return f"<NVTX range {self.label!r} id={self.range_id}>"


class _PushRange:
    """Context manager of an active ``range()``: push on enter, pop back to its depth on exit.

    Popping back to the depth found on entry means a ``push`` left open inside the body (a
    bug) is closed here instead of shifting every later range.
    """

    __slots__ = ("_depth", "_entry", "_label", "_owner")

    def __init__(self, owner: ActiveLabelerBase, entry: Any, label: str) -> None:
        self._owner = owner
        self._entry = entry
        self._label = label
        self._depth = 0

    def __enter__(self) -> None:
        self._depth = self._owner._push_entry(self._entry)

    def __exit__(self, *exc: object) -> None:
        self._owner._pop_to(self._depth - 1, self._label)


class ActiveLabelerBase:
    """Range bookkeeping shared by the labelers that emit: open tokens and per-thread stacks.

    Subclasses resolve a label to an ``entry`` (``_lookup``) and emit through ``_emit_*``.
    Unbalanced ``stop``/``pop`` calls are repaired and reported once, never raised: a
    timeline annotation must not stop a training run.
    """

    __slots__ = ("_open", "_problems", "_tls", "default_domain", "enabled", "reason")

    def __init__(self, enabled: bool, default_domain: str | None) -> None:
        self.enabled = bool(enabled)
        self.default_domain = default_domain
        self.reason = ""
        self._problems = MisuseReporter(f"{type(self).__name__}(default_domain={default_domain!r})")
        self._open: set[_Token] = set()
        self._tls = threading.local()

    # -- what a concrete labeler provides ----------------------------------------------

    def _lookup(self, label: str, color: str | int | None, domain_name: str | None,
                category: str | int | None) -> Any:
        raise NotImplementedError

    def _emit_push(self, entry: Any) -> None:
        raise NotImplementedError

    def _emit_pop(self, entry: Any) -> None:
        raise NotImplementedError

    def _emit_start(self, entry: Any) -> int:
        raise NotImplementedError

    def _emit_end(self, entry: Any, range_id: int) -> None:
        raise NotImplementedError

    def _emit_mark(self, entry: Any) -> None:
        raise NotImplementedError

    # -- the protocol ------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether calls reach a tool."""
        return True

    @property
    def problems(self) -> int:
        """How many unbalanced ``stop``/``pop`` calls were repaired so far."""
        return self._problems.count

    def register_label(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Prepare ``label`` so later calls are a lookup (see the concrete labeler)."""
        self._lookup(label, color, domain_name, category)

    def start(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> Any:
        """Start a process range; pass the returned token to ``stop``."""
        entry = self._lookup(label, color, domain_name, category)
        token = _Token(entry, self._emit_start(entry), label)
        self._open.add(token)
        return token

    def stop(self, token: Any) -> None:
        """End the range of ``token``; an unknown or already stopped token is reported, not raised."""
        try:
            self._open.remove(token)
        except (KeyError, TypeError):
            self._problems.report(f"stop({token!r}) for a range that is not open",
                                  "pass the token returned by start() to stop() exactly once")
            return
        self._emit_end(token.entry, token.range_id)

    def _stack(self) -> list[Any]:
        stack: list[Any] | None = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def _push_entry(self, entry: Any) -> int:
        stack = self._stack()
        self._emit_push(entry)
        stack.append(entry)
        return len(stack)

    def _pop_to(self, depth: int, label: str) -> None:
        stack = self._stack()
        if len(stack) <= depth:
            self._problems.report(f"range {label!r} was already popped inside its own body",
                                  "do not pop() a range opened by range()")
            return
        if len(stack) > depth + 1:
            self._problems.report(
                f"range {label!r} ended with {len(stack) - depth - 1} push() still open inside it",
                "pop() every push() before the enclosing range ends")
        while len(stack) > depth:
            self._emit_pop(stack.pop())

    def push(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Open a nested range on this thread."""
        self._push_entry(self._lookup(label, color, domain_name, category))

    def pop(self) -> None:
        """Close this thread's innermost ``push``; a pop with none open is reported, not raised."""
        stack = self._stack()
        if not stack:
            self._problems.report("pop() with no open push() on this thread",
                                  "pair every pop() with an earlier push()")
            return
        self._emit_pop(stack.pop())

    def range(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> Any:
        """A nested range around a ``with`` body."""
        return _PushRange(self, self._lookup(label, color, domain_name, category), label)

    def mark(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Emit an instantaneous event."""
        self._emit_mark(self._lookup(label, color, domain_name, category))

    def __repr__(self) -> str:
        state = "active" if self.active else f"dormant: {self.reason}"
        return f"{type(self).__name__}(default_domain={self.default_domain!r}, {state})"


class DormantMixin:
    """The no-op path of an active labeler class, bound once when nothing would record.

    A labeler switches its ``__class__`` to ``Dormant<X>(DormantMixin, X)`` in ``__init__``:
    the same object, whose methods are empty calls (no per-call flag test).
    """

    __slots__ = ()

    @property
    def active(self) -> bool:
        """Never active."""
        return False

    def register_label(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Do nothing."""

    def start(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Do nothing; the token is ``None``."""
        return None

    def stop(self, token: Any) -> None:
        """Do nothing."""

    def push(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Do nothing."""

    def pop(self) -> None:
        """Do nothing."""

    def range(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> _NullRange:
        """A shared context manager that does nothing."""
        return NULL_RANGE

    def mark(
        self, label: str, color: str | int | None = None, domain_name: str | None = None,
        category: str | int | None = None,
    ) -> None:
        """Do nothing."""


class NoOpLabeler(DormantMixin):
    """A labeler that emits nothing; every method is as cheap as a Python call can be.

    ``create_labeler`` returns it when NVTX is disabled or no backend is usable.
    """

    __slots__ = ("default_domain", "enabled", "reason")

    def __init__(self, enabled: bool = False, default_domain: str | None = DEFAULT_DOMAIN,
                 reason: str = "") -> None:
        self.enabled = False
        self.default_domain = default_domain
        self.reason = reason or "NVTX disabled"

    @property
    def problems(self) -> int:
        """Always 0: a no-op labeler keeps no stack."""
        return 0

    def __repr__(self) -> str:
        return f"NoOpLabeler(default_domain={self.default_domain!r}, reason={self.reason!r})"
