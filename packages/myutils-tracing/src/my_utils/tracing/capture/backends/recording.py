"""``RecordingBackend``: an in-memory backend for tests (yours and ours)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.spec import WindowClosing, WindowInfo


@dataclass(frozen=True)
class RecordedWindow:
    """One completed window: what opened it and how it closed."""

    info: WindowInfo
    closing: WindowClosing


class RecordingBackend(CaptureBackend):
    """Records every call in order; ``windows`` lists completed windows.

    ``calls`` is a list of ``"start"``/``"stop"`` strings, ``capturing`` tells whether a
    window is open. Starting twice or stopping while idle raises ``AssertionError``, so a
    test using it fails loudly on an unbalanced controller.
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.windows: list[RecordedWindow] = []
        self.opening: list[WindowInfo] = []
        self.capturing = False
        self._lock = threading.Lock()

    def window_opening(self, window: WindowInfo) -> None:
        """Remember the window about to start."""
        self.opening.append(window)

    def start(self) -> None:
        """Record a start."""
        with self._lock:
            if self.capturing:
                raise AssertionError("RecordingBackend.start() while already capturing")
            self.capturing = True
            self.calls.append("start")

    def stop(self) -> None:
        """Record a stop."""
        with self._lock:
            if not self.capturing:
                raise AssertionError("RecordingBackend.stop() without a start()")
            self.capturing = False
            self.calls.append("stop")

    def window_closed(self, window: WindowInfo, closing: WindowClosing) -> None:
        """Record the completed window."""
        self.windows.append(RecordedWindow(window, closing))

    @property
    def starts(self) -> int:
        """How many windows started."""
        return self.calls.count("start")

    @property
    def stops(self) -> int:
        """How many windows stopped."""
        return self.calls.count("stop")
