"""What both legacy profilers need from torch.profiler: activities, CUDA presence, atomic trace export.

torch is imported inside the functions, so importing ``my_utils.legacy`` stays light.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["cuda_available", "export_trace", "profiler_activities", "time_basis"]


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (False, never an exception, on a broken driver)."""
    import torch

    try:
        return bool(torch.cuda.is_available())
    except Exception:  # some builds raise from is_available when the driver is broken
        return False


def profiler_activities(use_cuda: bool) -> list[Any]:
    """CPU, plus CUDA when ``use_cuda``."""
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if use_cuda else [ProfilerActivity.CPU]


def time_basis(use_cuda: bool) -> str:
    """One sentence for outputs saying which clock their times come from."""
    if use_cuda:
        return "times are CUDA (device) times"
    return "no CUDA device: times are CPU times (torch.cuda.is_available() is False)"


def export_trace(prof: Any, path: Path) -> Path:
    """``prof.export_chrome_trace`` into a temporary file beside ``path``, renamed over it when complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise
    return path


def with_suppressed_unlink(path: str) -> None:
    """Remove ``path`` if it is still there."""
    try:
        os.unlink(path)
    except OSError:
        pass
