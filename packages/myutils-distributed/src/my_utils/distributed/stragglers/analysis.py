"""Who is slow: every rank's profile CSV read in lockstep, one step at a time.

The files are merged by step (a k-way merge on the step number), so memory holds one step
per rank plus running counts per (section, rank): it does not grow with the number of steps
(measured in ``bench/bench_distributed.py``: 64 ranks x 10,000 steps); medians over steps
come from log-scale histograms (``robust``).

Decisions:

- **Working, not waiting.** A synchronous collective makes every rank leave it together, so
  the rank that arrived first waits in it for the last: the wait shows up in *its* section
  although the cause is another rank's earlier section. A rank's head start over the last rank
  to come in is waiting, and is taken out, when it left with that rank
  (``my_utils.core.rank_waits``: within a step when the ends coincide, in every step when the
  section ends in a collective); what remains is compared. Inside such a section a rank slow in
  its own work cannot be told from the others (they all leave together): time the section more
  finely to see it.
- **Robust and persistent.** Per step each rank's time is divided by the median of the other
  ranks' (with two ranks the other rank's time). A straggler is late, at least the minimum
  slowdown, on at least the persistent fraction of the compared steps: a median, not a mean,
  so one step 30 times longer is an outlier and not a straggler, and a two-rank run, where one
  rank is always the slower of the two, names nobody unless one is slower by a real margin.
  It must also be late on more steps than chance explains (a one-sided sign test at
  :data:`SIGN_ALPHA`), cost at least :data:`MIN_STEP_SHARE` of the step, and is judged on at
  least ``MIN_STEPS`` compared steps.
- **Outliers and periods.** A step in which a rank took :data:`OUTLIER_RATIO` times the others'
  median and ``min_excess_ms`` more (a scheduler's time slice is not an outlier) is listed;
  one rank's outliers recurring every p steps give the section a period (a stall).
"""

from __future__ import annotations

import bisect
import heapq
import re
import statistics
from collections.abc import Iterator
from pathlib import Path

from my_utils.core.errors import InputError, UsageError
from my_utils.core.lifecycle import remove_scratch, sigterm_exits
from my_utils.core.rank_waits import COLLECTIVE_SPREAD, MIN_STEPS, step_waits
from my_utils.core.safe_io import check_regular, utf8_text
from my_utils.core.scratch import make_scratch
from my_utils.core.step_patterns import recurring
from my_utils.distributed.clock_record import ClockSyncRecord
from my_utils.distributed.stragglers.dask_spool import is_dask, require_dask, spool_on_dask
from my_utils.distributed.stragglers.model import Outlier, RankClock, RankValue, SectionStats, StragglerReport
from my_utils.distributed.stragglers.open_files import open_file_budget
from my_utils.distributed.stragglers.rank_stream import RankStep, iter_rank_steps
from my_utils.distributed.stragglers.robust import LogHistogram, sign_test_p
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


#: A straggler must also be late on more steps than chance gives (one-sided sign test against 1/2,
#: conservative since "late" is rarer than "above"): two ranks under a loaded host can each be the
#: slower one on half the steps.
SIGN_ALPHA = 0.01
#: A straggler must cost the others at least this share of the step (the longest section's median):
#: a 0.2 ms section twice as slow on one rank of a busy host is no straggler.
MIN_STEP_SHARE = 0.01
#: An outlying step: at least this many times the other ranks' median, and ``min_excess_ms`` above it.
OUTLIER_RATIO = 1.5
#: Outlying steps kept per section (the largest): bounded memory whatever the run's length.
MAX_OUTLIERS = 50


class _Tally:
    """One way of counting a section's per-rank times over steps: medians, ratios, late steps, outliers, waits."""

    def __init__(self, min_slowdown: float, min_excess_ms: float) -> None:
        self.min_slowdown = min_slowdown
        self.min_excess_ms = min_excess_ms
        self.work: dict[int, LogHistogram] = {}
        self.ratios: dict[int, LogHistogram] = {}
        self.late: dict[int, int] = {}
        self.above: dict[int, int] = {}
        self.slowest: dict[int, int] = {}
        self.wait_ms: dict[int, float] = {}
        self.outliers: list[tuple[float, int, int, float, float]] = []  # heap of (excess, -step, rank, ms, ref)

    def alone(self, times: dict[int, float]) -> None:
        """A step the section ran on one rank only: its time counts, nothing is compared."""
        for rank, ms in times.items():
            _histogram(self.work, rank).add(ms)

    def add(self, step: int, times: dict[int, float], waits: dict[int, float]) -> None:
        """A step of two ranks or more: each rank's time less its wait, against the median of the *others*
        (with 2 ranks a plain median would be the mean of the pair and halve every slowdown)."""
        work = dict(times)
        for rank, waited in waits.items():
            self.wait_ms[rank] = self.wait_ms.get(rank, 0.0) + waited
            work[rank] -= waited
        ordered = sorted(work.values())
        for rank, ms in work.items():
            _histogram(self.work, rank).add(ms)
            reference = _median_without(ordered, bisect.bisect_left(ordered, ms))
            if reference <= 0:
                continue
            ratio = ms / reference
            _histogram(self.ratios, rank).add(ratio)
            if ratio > 1.0:
                self.above[rank] = self.above.get(rank, 0) + 1
            if ratio >= self.min_slowdown:
                self.late[rank] = self.late.get(rank, 0) + 1
            if ratio >= OUTLIER_RATIO and ms - reference >= self.min_excess_ms:
                item = (ms - reference, -step, rank, ms, reference)
                if len(self.outliers) < MAX_OUTLIERS:
                    heapq.heappush(self.outliers, item)
                else:
                    heapq.heappushpop(self.outliers, item)
        slow = max(work, key=lambda r: (work[r], -r))
        self.slowest[slow] = self.slowest.get(slow, 0) + 1


def _histogram(store: dict[int, LogHistogram], rank: int) -> LogHistogram:
    found = store.get(rank)
    if found is None:
        found = store[rank] = LogHistogram()
    return found


class SectionCounts:
    """Running counts for one section; bounded by the number of ranks (and the bins of their times).

    Two tallies run side by side, one taking each rank's ``strict`` waits out of its time, one its
    ``loose`` waits (``my_utils.core.rank_waits``). Which one is reported is decided at the end:
    the loose one when the section ends in a collective (the median of the steps' spread ratios,
    read from a histogram), else the strict one.
    """

    def __init__(self, min_slowdown: float, min_excess_ms: float) -> None:
        self.strict = _Tally(min_slowdown, min_excess_ms)
        self.loose = _Tally(min_slowdown, min_excess_ms)
        self.min_slowdown = min_slowdown
        self.steps = 0  # compared: two ranks or more
        self.seen = 0
        self.spreads = LogHistogram()  # end spread / start spread, per step that can tell
        self.last_start: dict[int, int] = {}
        self.spread_sum = 0.0
        self.first_step: int | None = None
        self.last_step = 0

    def add(self, step: int, times: dict[int, list[float]]) -> None:
        self.seen += 1
        if self.first_step is None:
            self.first_step = step
        self.last_step = step
        ms_of = {rank: ms for rank, (ms, _) in times.items()}
        if len(times) < 2:
            self.strict.alone(ms_of)
            self.loose.alone(ms_of)
            return
        self.steps += 1
        waits = step_waits({rank: (ms, start) for rank, (ms, start) in times.items()})
        if waits.spread_ratio is not None:
            self.spreads.add(waits.spread_ratio)
        self.strict.add(step, ms_of, waits.strict)
        self.loose.add(step, ms_of, waits.loose)
        starts = [start for _, start in times.values()]
        self.spread_sum += (max(starts) - min(starts)) * 1e3
        late = max(times, key=lambda r: (times[r][1], -r))
        self.last_start[late] = self.last_start.get(late, 0) + 1

    @property
    def collective(self) -> bool:
        """Whether the section ends in a collective (the class docstring)."""
        return self.spreads.count >= MIN_STEPS and self.spreads.median() <= COLLECTIVE_SPREAD

    @property
    def tally(self) -> _Tally:
        """The tally reported: waits taken out loosely in a section that ends in a collective, else strictly."""
        return self.loose if self.collective else self.strict

    def median_ms(self) -> float:
        """The median over ranks of each rank's median time per step."""
        return statistics.median(h.median() for h in self.tally.work.values())

    def stats(self, name: str, fraction: float, step_ms: float) -> SectionStats:
        collective = self.collective
        tally = self.tally
        medians = sorted((h.median(), r) for r, h in tally.work.items())
        med = statistics.median(ms for ms, _ in medians)
        near = min(medians, key=lambda item: (abs(item[0] - med), item[1]))
        by_ratio = sorted(((h.median(), r) for r, h in tally.ratios.items()), key=lambda x: (-x[0], x[1]))
        slowdown, slowest_rank = by_ratio[0] if by_ratio else (1.0, medians[-1][1])
        late = tally.late.get(slowest_rank, 0)
        own = next(ms for ms, r in medians if r == slowest_rank)
        others = [ms for ms, r in medians if r != slowest_rank]
        excess = own - statistics.median(others) if others else 0.0
        chance = sign_test_p(late, self.steps)  # late (not merely above) more often than chance: conservative
        flagged = (self.steps >= MIN_STEPS and late >= fraction * self.steps and slowdown >= self.min_slowdown
                   and chance <= SIGN_ALPHA and excess >= MIN_STEP_SHARE * step_ms)
        straggler = slowest_rank if flagged else None
        outliers = [Outlier(rank, -neg_step, ms, ref) for _e, neg_step, rank, ms, ref
                    in sorted(tally.outliers, reverse=True) if rank != straggler]
        period = None
        for rank in sorted({o.rank for o in outliers}):
            mine = [o for o in outliers if o.rank == rank]
            found = recurring([o.step for o in mine], [o.excess_ms for o in mine], self.first_step or 0, self.last_step)
            if found is not None:
                period, recurring_steps = found[0], found[1]
                break
        else:
            recurring_steps = []
        last = max(self.last_start.items(), key=lambda kv: (kv[1], -kv[0]), default=None)
        compared = self.steps or 1
        return SectionStats(
            section=name,
            steps=self.steps,
            seen_steps=self.seen,
            ranks=len(medians),
            min=RankValue(medians[0][1], medians[0][0]),
            median=RankValue(near[1], med),
            max=RankValue(medians[-1][1], medians[-1][0]),
            slowdown=slowdown,
            slowest_rank=slowest_rank,
            slowest_excess_ms=excess,
            slowest_steps=tally.slowest.get(slowest_rank, 0),
            late_steps=late,
            sign_test_p=chance,
            straggler=straggler,
            collective=collective,
            end_spread_ratio=self.spreads.median() if self.spreads.count else None,
            waiting=[RankValue(r, w / compared) for r, w in sorted(tally.wait_ms.items()) if w > 0],
            outliers=outliers,
            period=period,
            recurring_steps=recurring_steps,
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
    min_excess_ms: float = 20.0, executor: str | None = None, max_workers: int | None = None,
) -> StragglerReport:
    """Read every ``profile_rank_<rank>.csv`` of ``log_dir`` and report, per section, who is slow.

    A section's straggler is the rank whose working time is at least ``min_slowdown`` times the
    median of the other ranks' in at least ``persistent_fraction`` of the compared steps (module
    docstring). An outlying step is one at least 1.5 times the others' median and ``min_excess_ms``
    above it.

    ``executor``: ``None`` or ``"serial"`` read in this process, streaming every rank file at
    once when the open-file limit allows (its soft limit is raised toward the hard one when
    needed) and else one rank at a time through temporary files; ``"process"`` parses the ranks
    in a pool of ``max_workers`` processes (default: one per CPU) through temporary files;
    ``"dask"`` (the scheduler in ``$DASK_SCHEDULER_ADDRESS``, else a local cluster of
    ``max_workers`` processes) or a scheduler address such as ``"tcp://host:8786"`` parses them
    in Dask tasks, whose workers must see the rank files at the same paths (the ``[dask]`` extra).
    The result is the same whichever path is taken.
    """
    if not 0 < persistent_fraction <= 1 or not min_slowdown >= 1 or not min_excess_ms >= 0:
        raise UsageError(f"analyze_stragglers(persistent_fraction={persistent_fraction}, min_slowdown={min_slowdown}, "
                         f"min_excess_ms={min_excess_ms}): expected 0 < persistent_fraction <= 1, min_slowdown >= 1 "
                         "and min_excess_ms >= 0")
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
        return _report(log_dir, files, streams, clocks, persistent_fraction, min_slowdown, min_excess_ms)
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
                return _report(log_dir, files, streams, clocks, persistent_fraction, min_slowdown, min_excess_ms)
            from my_utils.core.dask_local import frozen_gc

            with frozen_gc():  # what distributed's import left here: not walked by the report's collections
                return _report(log_dir, files, streams, clocks, persistent_fraction, min_slowdown, min_excess_ms)
        finally:
            remove_scratch(scratch)


def _report(log_dir: str | Path, files: dict[int, Path], streams: dict[int, Iterator[RankStep]],
            clocks: dict[int, list[ClockSyncRecord]], persistent_fraction: float,
            min_slowdown: float, min_excess_ms: float) -> StragglerReport:
    sections: dict[str, SectionCounts] = {}
    steps = 0
    for step, group in _merged(streams):
        steps += 1
        by_section: dict[str, dict[int, list[float]]] = {}
        for rank, rank_step in group.items():
            for name, entry in rank_step.sections.items():
                by_section.setdefault(name, {})[rank] = entry
        for name, times in by_section.items():
            section = sections.get(name)
            if section is None:
                section = sections[name] = SectionCounts(min_slowdown, min_excess_ms)
            section.add(step, times)
    step_ms = max((s.median_ms() for s in sections.values()), default=0.0)  # the longest section: the step
    return StragglerReport(
        log_dir=str(log_dir),
        ranks=list(files),
        steps=steps,
        # a name read from a file is text we print: never a lone surrogate that cannot be encoded
        sections=[s.stats(utf8_text(name), persistent_fraction, step_ms) for name, s in sections.items()],
        clocks=[RankClock(rank, c.offset_s, c.uncertainty_s, c.reference_rank, c.applied)
                for rank, records in clocks.items() for c in records[-1:]],
        persistent_fraction=persistent_fraction,
        min_slowdown=min_slowdown,
        min_excess_ms=min_excess_ms,
    )
