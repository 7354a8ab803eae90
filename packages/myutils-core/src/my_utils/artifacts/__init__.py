"""The seed's ``my_utils.artifacts``: dump utilities and Nsight Compute CSV helpers, by their homes.

Names resolve lazily from the distribution that ships them (``import my_utils.artifacts``
imports nothing else); a name whose distribution is missing raises an ImportError that says
what to ``pip install``:

- ``dump_artifacts(obj, folder)`` / ``load_artifacts(folder)`` (myutils-core,
  ``my_utils.core.artifacts``): any nesting of tensors, numpy arrays, TensorDicts, PIL images,
  dataclasses and containers to a folder of safe files with a manifest, and back; pickle
  only with ``allow_pickle=True``, since loading a pickle runs code from the file.
- ``DumpTensorIO``, ``ChecksumUtils`` (myutils-core, ``my_utils.core.debug``): the seed's
  tensor dumps by name and step, and batch checksums.
- ``read_ncu_csv(path)`` (myutils-profiling, ``my_utils.profiling.ncu.provider``): one Nsight
  Compute ``--csv`` export (details or raw page) as a list of ``MetricEvent``, one per kernel
  launch and metric, named ``ncu:<metric>`` (durations in ms), with the kernel name, launch
  id, stream, section and NVTX ranges in ``attrs``; SM throughput is the event
  ``ncu:sm__throughput.avg.pct_of_peak_sustained_elapsed`` (details page: "Compute (SM)
  Throughput"), in percent of peak.
- ``ncu_summary(paths)`` and ``ncu_compare(base_paths, target_paths)`` (myutils-profiling,
  ``my_utils.profiling.ncu.analyze_files`` and ``my_utils.profiling.analysis.diff_ncu``): per-kernel summaries of ncu
  exports (``NcuAnalysis.kernels``: each ``KernelSummary.sol_compute_pct`` is the kernel's SM
  throughput in % of peak, with memory throughput, bound, occupancy, roofline) and the
  per-kernel metric comparison of two runs' exports (``NcuDiff``); a myutils-profiling
  release without ``my_utils.profiling.ncu`` names the upgrade (``read_ncu_csv`` reads the
  exports with any release).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

# name -> (home module, attribute there, distribution that ships it)
ARTIFACT_NAMES: Final[dict[str, tuple[str, str, str]]] = {
    "dump_artifacts": ("my_utils.core.artifacts", "dump_artifacts", "myutils-core"),
    "load_artifacts": ("my_utils.core.artifacts", "load_artifacts", "myutils-core"),
    "DumpTensorIO": ("my_utils.core.debug", "DumpTensorIO", "myutils-core"),
    "ChecksumUtils": ("my_utils.core.debug", "ChecksumUtils", "myutils-core"),
    "read_ncu_csv": ("my_utils.profiling.ncu.provider", "read_ncu_csv", "myutils-profiling"),
    "ncu_summary": ("my_utils.profiling.ncu", "analyze_files", "myutils-profiling"),
    "ncu_compare": ("my_utils.profiling.analysis.diff_ncu", "diff_ncu", "myutils-profiling"),
}

__all__ = sorted(ARTIFACT_NAMES)


def resolve(name: str) -> Any:
    """The object ``my_utils.artifacts.<name>`` stands for; ImportError with the pip hint when absent."""
    from my_utils.core._legacy import LegacyHomeMissing, _dist_version, _import_home

    try:
        home, attribute, dist = ARTIFACT_NAMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = _import_home(home, dist, f"{__name__}.{name}")
    try:
        return getattr(module, attribute)
    except AttributeError:
        version = _dist_version(dist)
        raise LegacyHomeMissing(
            f"{__name__}.{name} is {home}.{attribute}, which the installed {dist!r} {version} does not have "
            f"(a release without it). Run: pip install --upgrade {dist}", name=home) from None


def __getattr__(name: str) -> Any:
    """PEP 562: resolve on first use; ``from ... import`` gets the ImportError, ``hasattr`` answers False."""
    from my_utils.core._legacy import _asked_by_from_import

    try:
        value = resolve(name)
    except ImportError as exc:
        if _asked_by_from_import(sys._getframe(1)):
            raise
        raise AttributeError(str(exc), name=name, obj=sys.modules[__name__]) from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The names above (resolving none of them)."""
    return sorted(set(globals()) | set(ARTIFACT_NAMES))


if TYPE_CHECKING:  # what type checkers see; runtime resolution is lazy
    from my_utils.core.artifacts import dump_artifacts as dump_artifacts
    from my_utils.core.artifacts import load_artifacts as load_artifacts
    from my_utils.core.debug import ChecksumUtils as ChecksumUtils
    from my_utils.core.debug import DumpTensorIO as DumpTensorIO
    from my_utils.profiling.ncu.provider import read_ncu_csv as read_ncu_csv

