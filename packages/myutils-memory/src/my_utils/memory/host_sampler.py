"""Host metrics of this process through psutil: resident memory and CPU use (imported lazily)."""

from __future__ import annotations

from typing import Any

__all__ = ["HostSampler"]


class HostSampler:
    """Process RSS (bytes) and CPU use (% of one core since the previous sample)."""

    def __init__(self) -> None:
        self._proc: Any = None

    def open(self) -> str | None:
        """None when psutil works here, else why not (never raises)."""
        try:
            import psutil
        except ImportError as exc:
            return f"psutil is not installed ({exc}); pip install 'myutils-memory[system]'"
        try:
            self._proc = psutil.Process()
            self._proc.cpu_percent(None)  # the first call only sets the reference point
        except Exception as exc:
            return f"psutil cannot read this process ({type(exc).__name__}: {exc})"
        return None

    def sample(self) -> dict[str, float]:
        """``host_rss_bytes`` and ``host_cpu_pct`` now (empty when psutil is unavailable)."""
        if self._proc is None:
            return {}
        with self._proc.oneshot():
            return {"host_rss_bytes": float(self._proc.memory_info().rss),
                    "host_cpu_pct": float(self._proc.cpu_percent(None))}
