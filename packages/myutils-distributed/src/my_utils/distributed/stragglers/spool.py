"""Ranks read one at a time into compact temporary files, then merged without holding them open.

For runs with more ranks than open files (``open_files``), with ``--executor process`` and on
Dask (:mod:`~my_utils.distributed.stragglers.dask_spool`): each rank's CSV is parsed once
(``iter_rank_steps``, the same checks and messages) into a file of pickled chunks of
``CHUNK_STEPS`` steps, in this process, in a process pool, or by a Dask task that sends the
bytes back; the merge then reads chunk by chunk, opening a rank's file, seeking to where it
stopped and closing it again, so at most one spool file is open and memory holds one chunk
per rank. The pickles are our own files in our own temporary folder, read back by this call only.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_record import ClockSyncRecord
from my_utils.distributed.stragglers.rank_stream import RankStep, iter_rank_steps

__all__ = ["EXECUTORS", "chunk_steps", "read_spooled", "spool_bytes", "spool_rank", "spool_ranks"]

CHUNK_STEPS = 32
#: Steps the merge holds of all ranks together, about: it holds one chunk per rank, so a run of many ranks is
#: spooled in smaller chunks (1,000 ranks x 32 steps held 28 MB; x 4 steps, 3.5 MB)
CHUNK_BUDGET = 4096
#: What ``--executor`` accepts besides Dask (``"dask"``, a scheduler address): this process, a local process pool.
EXECUTORS = ("serial", "process")


def chunk_steps(ranks: int) -> int:
    """Steps per spooled chunk for a run of ``ranks`` ranks (1 to :data:`CHUNK_STEPS`)."""
    return max(1, min(CHUNK_STEPS, CHUNK_BUDGET // max(ranks, 1)))


def _spool(path: str, fh: BinaryIO, steps: int) -> list[ClockSyncRecord]:
    clocks: list[ClockSyncRecord] = []
    chunk: list[tuple[int, dict[str, list[float]]]] = []
    for step in iter_rank_steps(Path(path), clocks):
        chunk.append((step.step, step.sections))
        if len(chunk) >= steps:
            pickle.dump(chunk, fh, protocol=pickle.HIGHEST_PROTOCOL)
            chunk = []
    if chunk:
        pickle.dump(chunk, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return clocks


def spool_rank(path: str, out: str, steps: int = CHUNK_STEPS) -> list[ClockSyncRecord]:
    """Parse the rank file ``path`` into ``out`` in chunks of ``steps`` steps; return its ``CLOCK_SYNC`` records
    (runs in a worker too)."""
    with open(out, "wb") as fh:
        return _spool(path, fh, steps)


def spool_bytes(path: str, steps: int = CHUNK_STEPS) -> tuple[bytes, list[ClockSyncRecord]]:
    """What :func:`spool_rank` writes, as bytes (a Dask task sends them back: no shared scratch folder)."""
    buffer = io.BytesIO()
    clocks = _spool(path, buffer, steps)
    return buffer.getvalue(), clocks


def read_spooled(path: Path, keep_open: bool = False) -> Iterator[RankStep]:
    """The steps ``spool_rank`` wrote; the file open only while a chunk is read, unless ``keep_open``.

    Kept open (when the open-file limit allows one file per rank), the small chunks of a run of
    many ranks cost no reopening: 1,000 ranks x 200 steps in chunks of 4 took 2.8-3.5 s reopened,
    1.7-2.4 s kept open (unbuffered: 1,000 read buffers of 8 KiB would be 8 MB).
    """
    if keep_open:
        with open(path, "rb", buffering=0) as fh:
            while True:
                try:
                    chunk = pickle.load(fh)
                except EOFError:
                    return
                for step, sections in chunk:
                    yield RankStep(step, sections)
    offset = 0
    while True:
        with open(path, "rb") as fh:
            fh.seek(offset)
            try:
                chunk = pickle.load(fh)
            except EOFError:
                return
            offset = fh.tell()
        for step, sections in chunk:
            yield RankStep(step, sections)


def spool_ranks(files: dict[int, Path], scratch: Path, executor: str | None, free_files: int,
                max_workers: int | None = None) -> tuple[dict[int, Path], dict[int, list[ClockSyncRecord]]]:
    """Spool every rank of ``files`` into ``scratch``: (rank -> spool file, rank -> its clock records)."""
    if executor not in (None, *EXECUTORS):
        raise UsageError(f"stragglers: executor {executor!r} is not understood here; use {' or '.join(EXECUTORS)}")
    outs = {rank: scratch / f"rank_{rank}.spool" for rank in files}
    steps = chunk_steps(len(files))
    calls: Sequence[tuple[int, str, str]] = [(rank, str(path), str(outs[rank])) for rank, path in files.items()]
    # each worker costs this process a few descriptors (pipes, a sentinel)
    workers = min(max_workers or os.cpu_count() or 1, len(calls), max(1, (free_files - 8) // 4))
    if executor != "process" or workers <= 1:
        return outs, {rank: spool_rank(path, out, steps) for rank, path, out in calls}
    from my_utils.core.lifecycle import spawn_pool, stop_pool

    # the workers end with this process (a killed run left them parsing, holding the caller's pipes)
    pool = spawn_pool(workers)
    try:
        futures = {rank: pool.submit(spool_rank, path, out, steps) for rank, path, out in calls}
        # in rank order: the first failing rank is the one reported (its InputError crosses intact)
        clocks = {rank: future.result() for rank, future in futures.items()}
    except BaseException:  # an error, Ctrl-C, SIGTERM: the other ranks' work is not needed any more
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return outs, clocks
