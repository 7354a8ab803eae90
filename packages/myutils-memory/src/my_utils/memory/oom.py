"""The OOM recorder: when CUDA runs out of memory, each rank writes a bundle, then the error goes on unchanged.

``install_oom_recorder()`` is the one call. On CUDA it turns allocator history on (so the
snapshot holds stacks) and attaches torch's out-of-memory observer, which runs inside the
failing allocation, while the allocator still holds the state that failed. Everywhere it
also wraps ``sys.excepthook`` and ``threading.excepthook``: an uncaught
``torch.OutOfMemoryError`` adds the error to the bundle (or writes one) before the previous
hook prints it as usual. Code that catches OOMs itself uses ``with recorder.guard():``,
which records and re-raises the very same exception object.

``MYUTILS_OOM_RECORDER`` sets the folder bundles go to when ``output_dir`` is not given
(default ``./oom_reports``); ``MYUTILS_OOM_RECORDER=0`` makes ``install_oom_recorder`` do
nothing, so a job can switch it off without a code change.

A bundle, ``<dir>/oom__<YYYYmmdd_HHMMSS>__rank<rank>[_n]/``: ``snapshot.pt`` (``torch.save``'s zip,
for ``torch.load``) and ``snapshot.pickle`` (the same dict as a protocol-4 pickle, for
memory_viz), when CUDA history is available; ``allocator_stats.json`` (``memory_stats()`` and
``mem_get_info()``), ``largest_blocks.json`` (the largest live blocks with their stacks) and
``summary.txt`` (the error, the requested size, free/total memory, the largest blocks).
Recording never raises: a failure is logged once and the original error still propagates.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.safe_io import strict_json
from my_utils.memory.cuda_memory import CudaMemory, default_cuda_memory
from my_utils.memory.snapshot import DEFAULT_MAX_ENTRIES, save_snapshot
from my_utils.memory.snapshot_io import block_addresses
from my_utils.memory.stack_frames import StackNamer
from my_utils.memory.summary_render import format_bytes, terminal_text

__all__ = ["ENV_VAR", "OomRecorder", "install_oom_recorder", "is_oom_error", "requested_bytes"]

ENV_VAR = "MYUTILS_OOM_RECORDER"
DEFAULT_DIR = "oom_reports"
LARGEST_BLOCKS = 20
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_TRIED = re.compile(r"Tried to allocate ([0-9.]+) ?(B|KiB|MiB|GiB|TiB)")
_log = logging.getLogger("my_utils.memory")
_installed: list[OomRecorder] = []


def is_oom_error(exc: BaseException) -> bool:
    """True for ``torch.OutOfMemoryError`` (torch is not imported: no torch, no torch OOM)."""
    torch = sys.modules.get("torch")
    oom = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    return isinstance(oom, type) and isinstance(exc, oom)


def requested_bytes(message: str) -> int | None:
    """The size in ``"Tried to allocate 2.00 GiB"`` of a CUDA OOM message, in bytes."""
    m = _TRIED.search(message)
    return round(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def largest_blocks(snapshot: dict[str, Any], n: int = LARGEST_BLOCKS) -> list[dict[str, Any]]:
    """The ``n`` largest live blocks of a snapshot, with device, address, size, every recorded frame and ``stack``:
    the operation and the user's frames that allocated it (``stack_frames``; the allocator's own frames open every
    stack recorded with C++ frames), ``""`` without frames."""
    blocks = [{"device": seg.get("device", 0), "address": addr, "size": int(b.get("size", 0)),
               "requested_size": b.get("requested_size"), "frames": b.get("frames", [])}
              for seg in snapshot.get("segments", []) for addr, b in block_addresses(seg)
              if b.get("state") == "active_allocated"]
    blocks.sort(key=lambda b: -b["size"])
    namer = StackNamer()
    return [{**b, "stack": namer.identify(b["frames"]).text()} for b in blocks[:n]]


class OomRecorder:
    """Writes OOM bundles for one rank into ``output_dir``."""

    def __init__(self, output_dir: str | Path, *, rank: int | None = None, cuda: CudaMemory | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.rank = env_rank(0) if rank is None else rank
        self.cuda = cuda if cuda is not None else default_cuda_memory()
        self.bundles: list[Path] = []
        self._observed: Path | None = None  # a bundle the observer wrote that awaits its exception
        self._reported = False
        self._uninstall: list[Callable[[], None]] = []

    # -- writing -----------------------------------------------------------------------

    def record(self, exc: BaseException | None = None, *, requested: int | None = None,
               device: int | None = None, device_free: int | None = None) -> Path | None:
        """Write a bundle for this OOM (``exc`` when known) and return its folder; never raises."""
        try:
            return self._write(exc, requested, device, device_free)
        except Exception as err:  # a full disk or a driver error must not hide the OOM itself
            if not self._reported:
                self._reported = True
                _log.warning("OOM recorder: writing the bundle in %s failed: %s: %s",
                             self.output_dir, type(err).__name__, err)
            return None

    def _bundle_dir(self) -> Path:
        stamp = time.strftime("%Y%m%d_%H%M%S")
        base = self.output_dir / f"oom__{stamp}__rank{self.rank}"
        path, n = base, 1
        while path.exists() or path.with_name(path.name + ".partial").exists():
            n += 1
            path = base.with_name(f"{base.name}_{n}")
        return path

    def _write(self, exc: BaseException | None, requested: int | None, device: int | None,
               device_free: int | None) -> Path:
        if requested is None and exc is not None:
            requested = requested_bytes(str(exc))
        final = self._bundle_dir()
        tmp = final.with_name(final.name + ".partial")  # renamed when complete: no half bundle
        tmp.mkdir(parents=True)
        try:
            self._fill(tmp, exc, requested, device, device_free)
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.bundles.append(final)
        return final

    def _fill(self, tmp: Path, exc: BaseException | None, requested: int | None, device: int | None,
              device_free: int | None) -> None:
        notes: list[str] = []
        reason = self.cuda.unavailable_reason()
        snap: dict[str, Any] | None = None
        stats: dict[str, Any] = {}
        free_total: tuple[int, int] | None = None
        if reason is not None:
            notes.append(f"no snapshot or allocator stats: CUDA is unavailable ({reason})")
        else:
            for what in ("snapshot", "memory_stats", "mem_get_info"):
                try:
                    if what == "snapshot":
                        snap = self.cuda.snapshot()
                    elif what == "memory_stats":
                        stats = self.cuda.memory_stats()
                    else:
                        free_total = self.cuda.mem_get_info()
                except Exception as err:
                    notes.append(f"{what}() failed: {type(err).__name__}: {err}")
        if snap is not None:
            save_snapshot(tmp / "snapshot.pt", snap)
        blocks = largest_blocks(snap) if snap is not None else []
        # strict JSON (no bare NaN/Infinity: other tools refuse them); unknown types as text
        (tmp / "allocator_stats.json").write_text(strict_json(
            {"memory_stats": stats, "mem_get_info": list(free_total) if free_total else None,
             "device": device, "device_free": device_free}, indent=1, default=str), encoding="utf-8")
        (tmp / "largest_blocks.json").write_text(strict_json(blocks, indent=1, default=str), encoding="utf-8")
        (tmp / "summary.txt").write_text(
            _summary_text(self.rank, exc, requested, free_total, device_free, blocks, notes), encoding="utf-8")

    def add_error(self, bundle: Path, exc: BaseException) -> None:
        """Append the exception's text to a bundle the observer wrote before the error was raised."""
        try:
            with open(bundle / "summary.txt", "a", encoding="utf-8") as fh:
                fh.write(f"\nerror raised: {type(exc).__name__}: {exc}\n")
        except OSError as err:
            _log.warning("OOM recorder: cannot add the error to %s: %s", bundle, err)

    def on_exception(self, exc: BaseException) -> None:
        """What the hooks call for an uncaught or guarded exception (OOMs only)."""
        if not is_oom_error(exc) or getattr(exc, "_my_utils_oom_recorded", False):
            return
        observed, self._observed = self._observed, None
        if observed is not None:
            self.add_error(observed, exc)
        else:
            self.record(exc)
        with contextlib.suppress(Exception):  # a C-level exception object may refuse attributes
            exc._my_utils_oom_recorded = True  # type: ignore[attr-defined]

    # -- hooks ---------------------------------------------------------------------------

    def guard(self) -> contextlib.AbstractContextManager[None]:
        """``with recorder.guard(): step()``: an OOM inside is recorded, then re-raised unchanged."""
        return _guard(self)

    def observe(self, device: int, alloc: int, device_allocated: int, device_free: int) -> None:
        """torch's out-of-memory observer: called inside the failing allocation."""
        self._observed = self.record(None, requested=alloc, device=device, device_free=device_free)

    def uninstall(self) -> None:
        """Undo what ``install_oom_recorder`` did (hooks restored, history off)."""
        while self._uninstall:
            with contextlib.suppress(Exception):
                self._uninstall.pop()()
        if self in _installed:
            _installed.remove(self)


@contextlib.contextmanager
def _guard(recorder: OomRecorder) -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        recorder.on_exception(exc)
        raise


def _summary_text(rank: int, exc: BaseException | None, requested: int | None, free_total: tuple[int, int] | None,
                  device_free: int | None, blocks: list[dict[str, Any]], notes: list[str]) -> str:
    lines = [f"CUDA out of memory on rank {rank} at {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    if exc is not None:
        lines.append(f"error: {type(exc).__name__}: {exc}")
    lines.append(f"requested: {format_bytes(requested) if requested is not None else 'unknown'}")
    if device_free is not None:
        lines.append(f"device free at the failing allocation: {format_bytes(device_free)}")
    if free_total is not None:
        lines.append(f"device free/total now: {format_bytes(free_total[0])} / {format_bytes(free_total[1])}")
    lines += [f"note: {n}" for n in notes]
    lines.append(f"largest live blocks ({len(blocks)}):")
    for b in blocks:
        where = terminal_text(b["stack"]) if b["stack"] else "no stack"
        lines.append(f"  {format_bytes(b['size']):>12}  device {b['device']}  {where}")
    return "\n".join(lines) + "\n"


def install_oom_recorder(output_dir: str | Path | None = None, *, rank: int | None = None,
                         cuda: CudaMemory | None = None, max_entries: int = DEFAULT_MAX_ENTRIES) -> OomRecorder | None:
    """Install the recorder for this process; returns it, or None when ``MYUTILS_OOM_RECORDER=0``."""
    env = os.environ.get(ENV_VAR, "").strip()
    if output_dir is None and env == "0":
        return None
    recorder = OomRecorder(output_dir or env or DEFAULT_DIR, rank=rank, cuda=cuda)
    _hook_exceptions(recorder)
    reason = recorder.cuda.unavailable_reason()
    if reason is None:
        _attach_cuda(recorder, max_entries)
    else:
        _log.info("OOM recorder: %s; bundles will hold the error but no allocator state", reason)
    _installed.append(recorder)
    return recorder


def _hook_exceptions(recorder: OomRecorder) -> None:
    previous = sys.excepthook
    previous_thread = threading.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        recorder.on_exception(exc)
        previous(kind, exc, tb)

    def thread_hook(args: Any) -> None:
        if args.exc_value is not None:
            recorder.on_exception(args.exc_value)
        previous_thread(args)

    sys.excepthook = excepthook
    threading.excepthook = thread_hook

    def restore() -> None:
        if sys.excepthook is excepthook:
            sys.excepthook = previous
        if threading.excepthook is thread_hook:
            threading.excepthook = previous_thread

    recorder._uninstall.append(restore)


def _attach_cuda(recorder: OomRecorder, max_entries: int) -> None:
    try:
        recorder.cuda.start_history(max_entries)
        recorder._uninstall.append(recorder.cuda.stop_history)
    except Exception as exc:
        _log.warning("OOM recorder: allocator history could not start (%s: %s); bundles will lack stacks",
                     type(exc).__name__, exc)
    try:
        import torch

        torch._C._cuda_attach_out_of_memory_observer(recorder.observe)  # type: ignore[attr-defined]
    except Exception as exc:  # an old torch: the exception hooks still record
        _log.warning("OOM recorder: cannot attach torch's OOM observer (%s: %s); recording uncaught OOMs only",
                     type(exc).__name__, exc)
