"""``MemorySnapshotter`` and ``global_snapshotter``: nested regions of CUDA allocator history, one file pair per stop.

The first ``start()`` turns allocator history on, every ``stop()`` dumps everything
recorded since (so a nested snapshot holds its parents' history up to that point), and the
last ``stop()`` turns history off and frees it. Each stop writes two files holding the same
snapshot dict, both or neither:

- ``<output_dir>/<name>__<YYYYmmdd_HHMMSS>__rank<rank>.pt``: ``torch.save``'s zip format, so
  the seed's ``torch.load(path)`` (``weights_only=True``, torch's default) reads it: the dict
  holds only plain data;
- ``<output_dir>/<name>__<YYYYmmdd_HHMMSS>__rank<rank>.pickle``: a plain protocol-4 pickle for
  memory_viz (pytorch.org/memory_viz and ``python -m torch.cuda._memory_viz``), which needs a
  bare pickle and renders protocol-5 ones empty.

``my_utils.memory.load_snapshot`` and ``myutils memory summarize``/``cut`` read either file.

Active only when ``ENABLE_MEMORY_SNAPSHOT=1`` (or ``enabled=True``). Without CUDA it warns
once and does nothing; an allocator error is reported once and switches it off, never
raising into the training loop. Misuse (a ``stop`` that does not match) raises at once.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import time
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.dist_env import env_rank
from my_utils.core.errors import UsageError
from my_utils.memory.cuda_memory import CudaMemory, default_cuda_memory

__all__ = ["ENV_SWITCH", "PICKLE_PROTOCOL", "REGIONS_KEY", "MemorySnapshotter", "global_snapshotter", "save_snapshot",
           "snapshot_file_name", "viz_pickle_path"]

ENV_SWITCH = "ENABLE_MEMORY_SNAPSHOT"
PICKLE_PROTOCOL = 4  # memory_viz renders protocol-5 pickles empty
TORCH_SUFFIX = ".pt"  # torch.save's zip, for torch.load
VIZ_SUFFIX = ".pickle"  # the plain pickle, for memory_viz
# Extra key in the saved dict: the regions closed so far (memory_viz ignores unknown keys;
# ``myutils memory summarize`` reports a delta per region).
REGIONS_KEY = "my_utils_regions"
DEFAULT_MAX_ENTRIES = 100_000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_log = logging.getLogger("my_utils.memory")


def snapshot_file_name(name: str, rank: int, when: float | None = None) -> str:
    """``<name>__<YYYYmmdd_HHMMSS>__rank<rank>.pt`` (its ``.pickle`` sibling has the same stem), the name made safe."""
    safe = _UNSAFE.sub("_", name).strip("._") or "region"
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(time.time() if when is None else when))
    return f"{safe}__{stamp}__rank{rank}.pt"


def viz_pickle_path(path: str | Path) -> Path:
    """The memory_viz sibling of a ``.pt`` snapshot file: the same stem, ``.pickle``."""
    return Path(path).with_suffix(VIZ_SUFFIX)


def save_snapshot(path: str | Path, snapshot: dict[str, Any]) -> Path:
    """Write ``snapshot`` atomically and return ``path``.

    A ``.pt`` path gets ``torch.save``'s zip format (what ``torch.load`` reads) plus the
    protocol-4 ``.pickle`` sibling memory_viz opens, both or neither; any other name gets the
    protocol-4 pickle alone (torch is then not needed).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix != TORCH_SUFFIX:
        with atomic_write(target, "wb", encoding=None) as fh:
            pickle.dump(snapshot, fh, protocol=PICKLE_PROTOCOL)
        return target
    try:
        import torch  # lazily: ``import my_utils.memory`` stays light
    except ImportError:
        raise UsageError(f"{target}: writing a .pt snapshot needs torch (it is torch.save's format); install "
                         f"torch or name the file {target.with_suffix(VIZ_SUFFIX).name}") from None
    viz = viz_pickle_path(target)
    viz_written = False
    try:
        # Both are written to temporary files first; the .pickle is renamed into place just
        # before the .pt, and removed again should the .pt's rename fail.
        with atomic_write(target, "wb", encoding=None) as pt:
            torch.save(snapshot, pt)
            with atomic_write(viz, "wb", encoding=None) as fh:
                pickle.dump(snapshot, fh, protocol=PICKLE_PROTOCOL)
            viz_written = True
    except BaseException:
        if viz_written:
            viz.unlink(missing_ok=True)
        raise
    return target


class MemorySnapshotter:
    """Nested memory-history regions; ``stop(name)`` saves a ``.pt``/``.pickle`` pair and returns the ``.pt``.

    ``enabled=None`` reads ``ENABLE_MEMORY_SNAPSHOT`` at each outermost ``start``; ``rank``
    defaults to torchrun's ``RANK`` (else 0); ``cuda`` is the allocator seam (tests pass a
    ``RecordingCudaMemory``).
    """

    def __init__(self, output_dir: str | Path = ".", *, enabled: bool | None = None, rank: int | None = None,
                 cuda: CudaMemory | None = None) -> None:
        self.output_dir = Path(output_dir)
        self._enabled = enabled
        self._rank = rank
        self._cuda = cuda
        self._logger: logging.Logger | logging.LoggerAdapter[Any] = _log
        self._stack: list[tuple[str, float]] = []
        self._closed: list[dict[str, Any]] = []
        self._off_reason: str | None = None  # set once: no CUDA, or an allocator error
        self._active = False  # whether the current outermost region records
        self.saved: list[Path] = []

    def set_logger(self, logger: Any) -> None:
        """Report through ``logger`` (a ``logging.Logger``/adapter, or a GlobalLogger's logger)."""
        get = getattr(logger, "get_logger", None)
        if callable(get):  # a GlobalLogger: use its logger
            logger = get()
        if not isinstance(logger, (logging.Logger, logging.LoggerAdapter)):
            raise UsageError(f"MemorySnapshotter.set_logger(): expected a logging.Logger or a GlobalLogger, "
                             f"got {type(logger).__name__}")
        self._logger = logger

    @property
    def enabled(self) -> bool:
        """Whether regions record: the ``enabled`` argument, else ``ENABLE_MEMORY_SNAPSHOT=1``."""
        if self._enabled is not None:
            return self._enabled
        return os.environ.get(ENV_SWITCH, "").strip() == "1"

    @property
    def open_regions(self) -> tuple[str, ...]:
        """Names of the regions started and not yet stopped, outermost first."""
        return tuple(name for name, _ in self._stack)

    @property
    def rank(self) -> int:
        """The rank written into file names."""
        return self._rank if self._rank is not None else env_rank(0)

    def _seam(self) -> CudaMemory:
        if self._cuda is None:
            self._cuda = default_cuda_memory()
        return self._cuda

    def _switch_off(self, reason: str) -> None:
        if self._off_reason is None:
            self._off_reason = reason
            self._logger.warning("MemorySnapshotter: %s; memory snapshots are off for this process", reason)
        self._active = False

    def start(self, name: str, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        """Open region ``name``; the outermost start turns allocator history on."""
        if not self._stack:
            if not self.enabled:
                return  # off: nothing is tracked, so a stray stop() is a no-op too
            self._active = self._off_reason is None and self._begin(max_entries)
        self._stack.append((name, time.time()))

    def _begin(self, max_entries: int) -> bool:
        reason = self._seam().unavailable_reason()
        if reason is not None:
            self._switch_off(f"CUDA memory history is unavailable: {reason}")
            return False
        try:
            self._seam().start_history(max_entries)
        except Exception as exc:  # an environment problem: report once, never raise
            self._switch_off(f"starting memory history failed: {type(exc).__name__}: {exc}")
            return False
        return True

    def stop(self, name: str) -> Path | None:
        """Close region ``name`` (the innermost open one); save its snapshot pair and return the ``.pt`` path."""
        if not self._stack:
            if not self.enabled:
                return None
            raise UsageError(f"MemorySnapshotter.stop({name!r}) called with no open region; "
                             f"call start({name!r}) first")
        top, started = self._stack[-1]
        if top != name:
            raise UsageError(f"MemorySnapshotter.stop({name!r}) called while {top!r} is the innermost open "
                             f"region (open: {', '.join(self.open_regions)}); stop {top!r} first")
        self._stack.pop()
        self._closed.append({"name": name, "start_us": started * 1e6, "stop_us": time.time() * 1e6,
                             "depth": len(self._stack)})
        path = self._dump(name) if self._active else None
        if not self._stack:
            if self._active:
                try:
                    self._seam().stop_history()
                except Exception as exc:
                    self._switch_off(f"stopping memory history failed: {type(exc).__name__}: {exc}")
            self._closed = []
            self._active = False
        return path

    def _dump(self, name: str) -> Path | None:
        try:
            snap = self._seam().snapshot()
            snap[REGIONS_KEY] = list(self._closed)
            path = save_snapshot(self.output_dir / snapshot_file_name(name, self.rank), snap)
        except Exception as exc:  # allocator error or full disk: report once, keep training
            self._switch_off(f"saving the snapshot of region {name!r} failed: {type(exc).__name__}: {exc}")
            return None
        self.saved.append(path)
        self._logger.info("MemorySnapshotter: saved %s", path)
        return path


global_snapshotter = MemorySnapshotter()
"""The process-wide snapshotter of the seed (``from my_utils.memory_snapshot import global_snapshotter``)."""
