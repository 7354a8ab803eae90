"""``probe_nsys()``: which Nsight Systems is installed, from ``nsys --version``; a seam for the tests.

``run`` is the seam: ``subprocess.run`` by default, so a test puts a fake ``nsys`` executable
first on ``PATH`` (or passes ``run``). Nothing here raises for an absent or broken nsys: the
probe says why it has no version, and the caller decides.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.tracing.launch.nsys_docs import NsysVersion


@dataclass(frozen=True)
class NsysProbe:
    """What ``nsys --version`` said: the executable, its version (None with ``reason``), the raw output."""

    executable: str | None
    version: NsysVersion | None
    output: str = ""
    reason: str | None = None


def probe_nsys(nsys: str = "nsys", run: Callable[..., Any] = subprocess.run, timeout: float = 30.0) -> NsysProbe:
    """Find ``nsys`` (a name on ``PATH`` or a path) and read its version."""
    exe = shutil.which(nsys)
    if exe is None:
        return NsysProbe(None, None, reason=f"{nsys!r} is not an executable on PATH")
    try:
        proc = run([exe, "--version"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return NsysProbe(exe, None, reason=f"{exe} --version failed: {exc}")
    text = f"{proc.stdout or ''}{proc.stderr or ''}".strip()
    if proc.returncode != 0:
        return NsysProbe(exe, None, text, f"{exe} --version exited {proc.returncode}: {text[:200]}")
    try:
        return NsysProbe(exe, NsysVersion.parse(text), text)
    except UsageError:
        return NsysProbe(exe, None, text, f"{exe} --version printed no version: {text[:200]!r}")
