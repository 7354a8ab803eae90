"""Which ``nsys profile`` options (and values) each Nsight Systems version documents, with the source of each row.

The table is written from NVIDIA's documentation, version by version, and only says what a
source shows: the profile switch tables of the 2024.7 and 2026.2 User Guides, and the 2025.6
Release Notes for an option new in that release. For a version between two documented ones
the older one's list holds (plus options a release note dates); for one older than every
documented version, the oldest list is used and :func:`documented_flags` says so. A value
list is checked only where the documentation enumerates the values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from my_utils.core.errors import UsageError

_UG_2024_7 = ("NVIDIA Nsight Systems 2024.7 User Guide, CLI Profile Command Switch Options "
              "(https://docs.nvidia.com/nsight-systems/2024.7/UserGuide/index.html#cli-profile-command-switch-options)")
_UG_2026_2 = ("NVIDIA Nsight Systems 2026.2 User Guide, CLI Profile Command Switch Options "
              "(https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cli-profile-command-switch-options)")
_RN_2025_6 = ("NVIDIA Nsight Systems 2025.6 Release Notes, What's New: 'System-wide CUDA Trace - New "
              "--cuda-trace-scope option' (https://docs.nvidia.com/nsight-systems/2025.6/ReleaseNotes/index.html)")
_UG_PYTORCH = ("NVIDIA Nsight Systems User Guide, PyTorch profiling: --pytorch=autograd-nvtx, autograd-shapes-nvtx, "
               "functions-trace (https://docs.nvidia.com/nsight-systems/UserGuide/index.html)")


@dataclass(frozen=True, order=True)
class NsysVersion:
    """``2024.7.1`` → (2024, 7, 1); compared as numbers."""

    year: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> NsysVersion:
        """``2024.7``, ``2024.7.1.84-247134868870v0`` or ``nsys --version``'s whole line; UsageError otherwise."""
        m = re.search(r"(20\d\d)\.(\d+)(?:\.(\d+))?", text)
        if m is None:
            raise UsageError(f"nsys version {text!r}: expected YEAR.MINOR[.PATCH], e.g. 2024.7.1")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.year}.{self.minor}.{self.patch}" if self.patch else f"{self.year}.{self.minor}"


@dataclass(frozen=True)
class FlagDoc:
    """One documented option of ``nsys profile``: its values where enumerated, and the source."""

    flag: str
    values: tuple[str, ...] = ()
    source: str = ""


def _flags(source: str, *specs: str) -> dict[str, FlagDoc]:
    out = {}
    for spec in specs:
        flag, _, values = spec.partition("=")
        out[flag] = FlagDoc(flag, tuple(v for v in values.split("|") if v), source)
    return out


# the options the launch profiles use, as each documented version lists them (values where enumerated)
_COMMON = ("--trace", "--output", "--force-overwrite=true|false", "--capture-range=none|cudaProfilerApi|hotkey|nvtx",
           "--capture-range-end", "--cuda-graph-trace=graph|node", "--trace-fork-before-exec=true|false",
           "--python-sampling=true|false", "--python-sampling-frequency", "--python-backtrace=cuda|none",
           "--gpu-metrics-devices", "--gpu-metrics-frequency", "--sample=process-tree|system-wide|none",
           "--cpuctxsw=process-tree|system-wide|none", "--cuda-memory-usage=true|false", "--stats=true|false",
           "--export", "--nvtx-capture", "--cudabacktrace", "--kill", "--wait=primary|all", "--delay", "--duration",
           "--show-output=true|false")

#: version → the profile options it documents (see the module docstring for how a version between is read)
NSYS_DOCS: dict[NsysVersion, dict[str, FlagDoc]] = {
    NsysVersion(2024, 7): _flags(_UG_2024_7, *_COMMON),
    NsysVersion(2025, 6): {**_flags(_UG_2024_7, *_COMMON), **_flags(_RN_2025_6, "--cuda-trace-scope")},
    NsysVersion(2026, 2): {**_flags(_UG_2026_2, *_COMMON, "--cuda-event-trace=true|false|auto",
                                    "--cuda-trace-scope"),
                           **_flags(_UG_PYTORCH, "--pytorch=autograd-nvtx|autograd-shapes-nvtx|functions-trace")},
}


def documented_flags(version: NsysVersion) -> tuple[NsysVersion, dict[str, FlagDoc], str | None]:
    """(the documented version used, its options, a note when ``version`` is older than every documented one)."""
    known = sorted(NSYS_DOCS)
    at_or_below = [v for v in known if v <= version]
    if not at_or_below:
        return known[0], NSYS_DOCS[known[0]], (
            f"nsys {version} is older than every version this table documents ({', '.join(map(str, known))}); "
            f"the options are those nsys {known[0]} documents, which an older nsys may lack")
    return at_or_below[-1], NSYS_DOCS[at_or_below[-1]], None
