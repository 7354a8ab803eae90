"""``CaptureBackend``: what a capture window switches on and off."""

from __future__ import annotations

from abc import ABC, abstractmethod

from my_utils.tracing.capture.spec import WindowClosing, WindowInfo


class CaptureBackend(ABC):
    """A profiler the controller starts when a window opens and stops when it closes.

    Subclasses implement ``start()`` and ``stop()`` (the seed's contract). They may also
    override ``window_opening``/``window_closed`` to learn which window (name, rank, step
    range) is being captured, e.g. to name output files, and ``step_began`` to mark steps.
    The controller calls ``stop()`` exactly once for every ``start()`` that returned, and
    never overlaps two windows on one backend. A backend that meets an environment problem (no GPU, disk full) should log and
    degrade rather than raise; the controller logs anything that escapes and carries on.
    """

    def window_opening(self, window: WindowInfo) -> None:  # noqa: B027 - optional hook, no-op by default
        """Called just before ``start()`` with the window about to be captured."""

    def window_closed(self, window: WindowInfo, closing: WindowClosing) -> None:  # noqa: B027
        """Called just after ``stop()`` with the window and why it closed."""

    def step_began(self, iteration: int) -> None:  # noqa: B027 - optional hook, no-op by default
        """Called while capturing, when the controller first sees ``iteration`` (a new step began)."""

    @abstractmethod
    def start(self) -> None:
        """Begin capturing."""

    @abstractmethod
    def stop(self) -> None:
        """End capturing (and write whatever the backend writes)."""
