"""Who is slow: every rank's profile CSV read in lockstep, one step at a time.

The files are merged by step (a k-way merge on the step number), so memory holds one step
per rank plus running sums per (section, rank): it does not grow with the number of steps
(measured in ``bench/bench_distributed.py``: 64 ranks x 10,000 steps). Per step and section:
the slowest rank and each rank's time over the median of the other ranks; per section at the end: the
ranks' mean times (min / median / max), the slowdown max / median, and the persistent
straggler if one rank was slowest in most steps by a real margin.
"""

from __future__ import annotations

import bisect
import heapq
import re
import shutil
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from my_utils.core.errors import InputError, UsageError
from my_utils.core.lifecycle import sigterm_exits
from my_utils.core.safe_io import check_regular, utf8_text
from my_utils.core.scratch import make_scratch
from my_utils.distributed.clock_record import ClockSyncRecord
from my_utils.distributed.stragglers.dask_spool import is_dask, require_dask, spool_on_dask
from my_utils.distributed.stragglers.model import RankClock, RankValue, SectionStats, StragglerReport
from my_utils.distributed.stragglers.open_files import open_file_budget
from my_utils.distributed.stragglers.rank_stream import RankStep, iter_rank_steps
from my_utils.distributed.stragglers.spool import EXECUTORS, read_spooled, spool_ranks

__all__ = ["analyze_stragglers", "find_rank_files"]

_RANK_FILE = re.compile(r"^profile_rank_(\d+)\.csv$")


def find_rank_files(log_dir: str | Path) -> dict[int, Path]:
    """``{rank: path}`` of the ``profile_rank_<rank>.csv`` files directly in ``log_dir``.

    Each must be a regular file: a FIFO, socket, device or folder of that name is an
    ``InputError`` before anything is read (opening a FIFO would block forever).
    """
    folder = Path(log_dir)
    if not folder.is_dir():
        raise InputError(folder, None, "a folder holding profile_rank_<rank>.csv files (it does not exist "
                         "or is not a folder)")
    files = {}
    for path in folder.iterdir():
        match = _RANK_FILE.match(path.name)
        if match:
            files[int(match.group(1))] = path
    if not files:
        raise InputError(folder, None, "profile_rank_<rank>.csv files (GlobalLogger writes one per rank); found none")
    ordered = dict(sorted(files.items()))
    for path in ordered.values():
        check_regular(path)
    return ordered


@dataclass
class _Section:
    """Running sums for one section; bounded by the number of ranks."""

    steps: int = 0
    total_ms: dict[int, float] = field(default_factory=dict)
    count: dict[int, int] = field(default_factory=dict)
    ratio_sum: dict[int, float] = field(default_factory=dict)
    slowest: dict[int, int] = field(default_factory=dict)
    last_start: dict[int, int] = field(default_factory=dict)
    spread_sum: float = 0.0

    def add(self, times: dict[int, list[float]]) -> None:
        for rank, (ms, _) in times.items():
            self.total_ms[rank] = self.total_ms.get(rank, 0.0) + ms
            self.count[rank] = self.count.get(rank, 0) + 1
        if len(times) < 2:
            return
        self.steps += 1
        # each rank against the median of the *others*: with 2 ranks a plain median would be
        # the mean of the pair and halve every slowdown
        ordered = sorted(ms for ms, _ in times.values())
        for rank, (ms, _) in times.items():
            reference = _median_without(ordered, bisect.bisect_left(ordered, ms))
            if reference > 0:
                self.ratio_sum[rank] = self.ratio_sum.get(rank, 0.0) + ms / reference
        slow = max(times, key=lambda r: (times[r][0], -r))
        self.slowest[slow] = self.slowest.get(slow, 0) + 1
        starts = [start for _, start in times.values()]
        self.spread_sum += (max(starts) - min(starts)) * 1e3
        late = max(times, key=lambda r: (times[r][1], -r))
        self.last_start[late] = self.last_start.get(late, 0) + 1

    def stats(self, name: str, fraction: float, min_slowdown: float) -> SectionStats:
        means = sorted((self.total_ms[r] / self.count[r], r) for r in self.total_ms)
        med = statistics.median(ms for ms, _ in means)
        near = min(means, key=lambda item: (abs(item[0] - med), item[1]))
        slowest_rank, slowest_steps = max(self.slowest.items(), key=lambda kv: (kv[1], -kv[0]),
                                          default=(means[-1][1], 0))
        mean_ratio = self.ratio_sum.get(slowest_rank, 0.0) / self.steps if self.steps else 1.0
        flagged = (self.steps > 0 and slowest_steps >= fraction * self.steps and mean_ratio >= min_slowdown)
        last = max(self.last_start.items(), key=lambda kv: (kv[1], -kv[0]), default=None)
        return SectionStats(
            section=name,
            steps=self.steps,
            ranks=len(means),
            min=RankValue(means[0][1], means[0][0]),
            median=RankValue(near[1], med),
            max=RankValue(means[-1][1], means[-1][0]),
            slowdown=means[-1][0] / med if med > 0 else 1.0,
            slowest_rank=slowest_rank,
            slowest_steps=slowest_steps,
            slowest_mean_ratio=mean_ratio,
            straggler=slowest_rank if flagged else None,
            start_spread_ms=self.spread_sum / self.steps if self.steps else 0.0,
            last_to_start_rank=last[0] if last else None,
        )


def _median_without(ordered: list[float], index: int) -> float:
    """The median of ``ordered`` (sorted, 2+ values) without the value at ``index``, in O(1)."""
    n = len(ordered) - 1

    def at(k: int) -> float:  # k-th value of the list without `index`
        return ordered[k] if k < index else ordered[k + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _merged(streams: dict[int, Iterator[RankStep]]) -> Iterator[tuple[int, dict[int, RankStep]]]:
    """(step, {rank: that rank's step}) in step order, holding one step per rank."""
    heap: list[tuple[int, int]] = []
    heads: dict[int, RankStep] = {}
    for rank, stream in streams.items():
        first = next(stream, None)
        if first is not None:
            heads[rank] = first
            heap.append((first.step, rank))
    heapq.heapify(heap)
    while heap:
        step = heap[0][0]
        group: dict[int, RankStep] = {}
        while heap and heap[0][0] == step:
            _, rank = heapq.heappop(heap)
            group[rank] = heads[rank]
            following = next(streams[rank], None)
            if following is not None:
                heads[rank] = following
                heapq.heappush(heap, (following.step, rank))
        yield step, group


def analyze_stragglers(
    log_dir: str | Path, *, persistent_fraction: float = 0.5, min_slowdown: float = 1.2,
    executor: str | None = None, max_workers: int | None = None,
) -> StragglerReport:
    """Read every ``profile_rank_<rank>.csv`` of ``log_dir`` and report, per section, who is slow.

    A section's straggler is the rank slowest in at least ``persistent_fraction`` of its steps
    whose time is on average at least ``min_slowdown`` times the median of the other ranks.

    ``executor``: ``None`` or ``"serial"`` read in this process, streaming every rank file at
    once when the open-file limit allows (its soft limit is raised toward the hard one when
    needed) and else one rank at a time through temporary files; ``"process"`` parses the ranks
    in a pool of ``max_workers`` processes (default: one per CPU) through temporary files;
    ``"dask"`` (the scheduler in ``$DASK_SCHEDULER_ADDRESS``, else a local cluster of
    ``max_workers`` processes) or a scheduler address such as ``"tcp://host:8786"`` parses them
    in Dask tasks, whose workers must see the rank files at the same paths (the ``[dask]`` extra).
    The result is the same whichever path is taken.
    """
    if not 0 < persistent_fraction <= 1 or min_slowdown < 1:
        raise UsageError(f"analyze_stragglers(persistent_fraction={persistent_fraction}, min_slowdown={min_slowdown}):"
                         " expected 0 < persistent_fraction <= 1 and min_slowdown >= 1")
    dask = is_dask(executor)
    if executor not in (None, *EXECUTORS) and not dask:
        raise UsageError(f"analyze_stragglers(executor={executor!r}): expected None, {', '.join(map(repr, EXECUTORS))}"
                         ", 'dask' or a Dask scheduler address such as 'tcp://host:8786'")
    if dask:
        require_dask(str(executor))  # before any work: a missing extra is said at once
    files = find_rank_files(log_dir)
    budget = open_file_budget(len(files))  # before any work: a run that cannot fit says so now
    if budget.direct and executor in (None, "serial"):
        clocks: dict[int, list[ClockSyncRecord]] = {rank: [] for rank in files}
        streams = {rank: iter_rank_steps(path, clocks[rank]) for rank, path in files.items()}
        return _report(log_dir, files, streams, clocks, persistent_fraction, min_slowdown)
    # SIGTERM cleans up like Ctrl-C; the scratch folder names this process, so after a SIGKILL
    # the next run (of any command) removes it
    with sigterm_exits():
        scratch = make_scratch("myutils-stragglers-")
        try:
            if dask:  # parsed by Dask tasks, their bytes written here
                spooled, clocks = spool_on_dask(files, scratch, str(executor), max_workers)
            else:
                spooled, clocks = spool_ranks(files, scratch, executor, budget.free, max_workers)
            streams = {rank: read_spooled(path, keep_open=budget.direct) for rank, path in spooled.items()}
            if not dask:
                return _report(log_dir, files, streams, clocks, persistent_fraction, min_slowdown)
            from my_utils.core.dask_local import frozen_gc

            with frozen_gc():  # what distributed's import left here: not walked by the report's collections
                return _report(log_dir, files, streams, clocks, persistent_fraction, min_slowdown)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _report(log_dir: str | Path, files: dict[int, Path], streams: dict[int, Iterator[RankStep]],
            clocks: dict[int, list[ClockSyncRecord]], persistent_fraction: float,
            min_slowdown: float) -> StragglerReport:
    sections: dict[str, _Section] = {}
    steps = 0
    for _, group in _merged(streams):
        steps += 1
        by_section: dict[str, dict[int, list[float]]] = {}
        for rank, rank_step in group.items():
            for name, entry in rank_step.sections.items():
                by_section.setdefault(name, {})[rank] = entry
        for name, times in by_section.items():
            sections.setdefault(name, _Section()).add(times)
    return StragglerReport(
        log_dir=str(log_dir),
        ranks=list(files),
        steps=steps,
        # a name read from a file is text we print: never a lone surrogate that cannot be encoded
        sections=[s.stats(utf8_text(name), persistent_fraction, min_slowdown) for name, s in sections.items()],
        clocks=[RankClock(rank, c.offset_s, c.uncertainty_s, c.reference_rank, c.applied)
                for rank, records in clocks.items() for c in records[-1:]],
        persistent_fraction=persistent_fraction,
        min_slowdown=min_slowdown,
    )
