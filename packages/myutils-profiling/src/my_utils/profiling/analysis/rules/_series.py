"""Per-(name, rank) step series built from metric events: what every built-in rule reads.

Rules receive events (the plugin contract); the analyzer hands them one event per
(name, step, rank) already aggregated, a third-party host may hand raw ones: both give the
same series here, because values of one step combine by kind — ``duration``/``counter``
add up, a ``gauge`` keeps its peak, a ``ratio`` its mean. Series are keyed
``(name, rank, source)``: two providers both measuring ``step_time`` (MyTimer and
torch.profiler in one run) are two series, never added together.

Building the series is the analysis's largest cost on a big run (one pass over every
aggregated event), and every built-in rule needs them: an events sequence that is a
``SeriesSource`` (the analyzer's aggregated events) builds them once and ``build_series``
hands each caller its own copy of the lists, so a rule that sorts or appends in place cannot
change what the next rule reads. Any other sequence (a third party's list of raw events) is
read afresh on every call, as before: the rule plugin contract is unchanged.

The statistics several rules take of one series after its warm-up steps (mean, spread, sorted
values, median, MAD: ``_stats.Summary``) are shared the same way: :func:`step_summary` computes
them once per (series, warm-up) for a ``SeriesSource`` and returns the same immutable object to
every rule (anomalies and variability each sorted the same values up to three times).
"""

from __future__ import annotations

from abc import abstractmethod
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.rules._stats import Summary, summarize, summarize_sorted

#: Kineto families measured on the device: their shares are of GPU busy time, not step time.
GPU_FAMILIES: tuple[str, ...] = ("kernel:", "memcpy:", "memset:", "device_op:")
#: Totals computed by providers from other events: never a bottleneck candidate themselves.
AGGREGATE_PREFIXES: tuple[str, ...] = ("gpu.", "device.", "trace.", "memory.", "timer.")
STEP_TIME = "step_time"
#: Sources whose duration events are timed regions carrying their start (``ts``): MyTimer. The
#: analyzer keeps each cell's first start for them (``EventAggregate.starts``) and the rules read
#: them through ``_waits`` to tell a rank's work from its wait for the other ranks.
START_SOURCES: frozenset[str] = frozenset({"mytimer"})
_MEMORY_UNITS = frozenset({"b", "bytes", "byte", "kb", "mb", "gb", "kib", "mib", "gib"})


@dataclass
class Series:
    """One name on one rank: a value per step (sorted by step) and what the name is."""

    name: str
    rank: int | None
    kind: str
    unit: str
    source: str
    depth: int | None = None
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    events: int = 0
    #: what the events stand for: launches of a kernel, calls of an op (a pre-aggregated event's
    #: ``attrs["occurrences"]`` or ``attrs["count"]``), else one per event
    occurrences: int = 0

    @property
    def total(self) -> float:
        """Sum of the per-step values."""
        return float(sum(self.values))


def is_memory(series: Series) -> bool:
    """A memory level: a gauge in bytes (any scale), or a gauge whose name says memory."""
    if series.kind != "gauge":
        return False
    return series.unit.lower() in _MEMORY_UNITS or "mem" in series.name.lower()


def is_candidate_duration(series: Series) -> bool:
    """A timed region or operation (not the step itself, not a provider-made total)."""
    return (series.kind == "duration" and series.name != STEP_TIME
            and not series.name.startswith(AGGREGATE_PREFIXES))


def is_gpu_family(name: str) -> bool:
    """A name measured on the device (Kineto kernels, copies, sets, device ops)."""
    return name.startswith(GPU_FAMILIES)


SeriesKey: TypeAlias = "tuple[str, int | None, str]"


def build_series(events: Iterable[MetricEvent]) -> dict[SeriesKey, Series]:
    """Series keyed (name, rank, source), values per step combined by kind; events without a step are left out.

    From a ``SeriesSource`` the series built once for its current events, copied (see the
    module docstring); from anything else, built from the events now.
    """
    if isinstance(events, SeriesSource):
        return events.series()
    return _build_series(events)


def copy_series(series: dict[SeriesKey, Series]) -> dict[SeriesKey, Series]:
    """Fresh ``Series`` with their own ``steps``/``values`` lists (a list copy: ~1 ms per 100k points)."""
    return {key: Series(s.name, s.rank, s.kind, s.unit, s.source, s.depth, list(s.steps), list(s.values), s.events,
                        s.occurrences)
            for key, s in series.items()}


class SeriesSource(Sequence[MetricEvent]):
    """An events sequence whose series ``build_series`` builds once and then hands out as copies.

    A subclass implements the ``Sequence`` methods and ``series_version()``: a value that
    changes whenever the events it yields change (the memo is rebuilt then), so a stale memo
    is never returned. It may override ``build_series_now()`` with a faster build, which must
    give what ``build_series`` gives for a plain list of the same events.
    """

    _series_memo: tuple[Hashable, dict[SeriesKey, Series]] | None = None
    _summary_memo: tuple[Hashable, dict[tuple[SeriesKey, int], Summary]] | None = None
    _total_memo: tuple[Hashable, dict[SeriesKey, float]] | None = None

    @abstractmethod
    def series_version(self) -> Hashable:
        """A token equal between two calls only if the events did not change in between."""

    def build_series_now(self) -> dict[SeriesKey, Series]:
        """The series of the events as they are now (no memo): one pass over them."""
        return _build_series(self)

    def _own_series(self) -> tuple[Hashable, dict[SeriesKey, Series]]:
        """(version, the memo's series): built for the current version when needed; never handed out."""
        version = self.series_version()
        memo = self._series_memo
        if memo is None or memo[0] != version:
            memo = self._series_memo = (version, self.build_series_now())
        return memo

    def named(self, keep: Callable[[str, str | None], bool]) -> Iterator[MetricEvent]:
        """The events whose ``(name, source)`` ``keep`` accepts, in order (a subclass may skip the others unbuilt)."""
        return (e for e in self if keep(e.name, e.source))

    def series(self) -> dict[SeriesKey, Series]:
        """The series of these events (``build_series``), built on the first call, a copy on each."""
        return copy_series(self._own_series()[1])

    def summary(self, series: Series, warmup_steps: int) -> Summary:
        """:func:`step_summary` of ``series``, computed once per (series, warm-up) while the events are unchanged.

        A series that is not one of this source's (another key, or a copy whose steps or values
        were changed) is summarised afresh: the answer is always that of the values given.
        """
        version, own_series = self._own_series()
        key = (series.name, series.rank, series.source)
        own = own_series.get(key)
        if own is None or (own is not series and (own.values != series.values or own.steps != series.steps)):
            return summarize(after_warmup(series, warmup_steps)[1])
        store = self._summary_memo
        if store is None or store[0] != version:
            store = self._summary_memo = (version, {})
        k = max(0, warmup_steps)
        memo = store[1]
        found = memo.get((key, k))
        if found is None:  # the values after warm-up, as after_warmup cuts them (no copy kept)
            near = _nearby_sorted(memo, key, own.values, k)
            found = memo[(key, k)] = summarize(own.values, k) if near is None else \
                summarize_sorted(own.values, near, k)
        return found

    def total(self, series: Series) -> float:
        """``series.total``, summed once per series while the events are unchanged (see :meth:`summary`).

        A series that is not one of this source's, or whose values were changed, is summed afresh.
        """
        version, own_series = self._own_series()
        key = (series.name, series.rank, series.source)
        own = own_series.get(key)
        if own is None or (own is not series and own.values != series.values):
            return series.total
        store = self._total_memo
        if store is None or store[0] != version:
            store = self._total_memo = (version, {})
        found = store[1].get(key)
        if found is None:
            found = store[1][key] = own.total
        return found


#: A summary of the same series with a warm-up at most this many steps away is re-sorted by
#: moving those values in or out (anomalies and variability skip 1 step, their explanations 0).
_NEARBY = 8


def _nearby_sorted(memo: dict[tuple[SeriesKey, int], Summary], key: SeriesKey, values: Sequence[float],
                   k: int) -> list[float] | None:
    """``sorted(values[k:])`` made from the sorted values of a summary of ``values`` with a nearby warm-up.

    The same list as sorting: ``sorted`` is stable, so of equal values (``0.0`` and ``-0.0``) the
    earlier comes first, and one value ``v`` of ``values[j]`` goes in, or comes out, at
    ``bisect_left(v)`` once every value before it is out. None when there is no such summary, or
    a value is NaN (it has no place in a sorted list; a series never holds one).
    """
    n = len(values)
    for j in (*range(k + 1, min(k + _NEARBY, n) + 1), *range(k - 1, max(k - _NEARBY, 0) - 1, -1)):
        other = memo.get((key, j))
        if other is None or other.source is not values:
            continue
        moved = values[j:k] if j < k else values[k:j]
        if any(v != v for v in moved):
            return None
        ordered = list(other.ordered)
        if j < k:  # take out values[j], values[j + 1], ...: each the first of its equals left
            for v in moved:
                del ordered[bisect_left(ordered, v)]
        else:  # put in values[j - 1], values[j - 2], ...: each before its equals (all later in values)
            for v in reversed(moved):
                ordered.insert(bisect_left(ordered, v), v)
        return ordered
    return None


def series_total(events: Iterable[MetricEvent], series: Series) -> float:
    """``series.total``, summed once per analysis for the analyzer's events (a ``SeriesSource``), afresh for any
    other events; the same float either way (five rules and the tables each summed every series, some twice)."""
    if isinstance(events, SeriesSource):
        return events.total(series)
    return series.total


def step_summary(events: Iterable[MetricEvent], series: Series, warmup_steps: int) -> Summary:
    """The shared statistics (``_stats.Summary``) of ``series``' values after ``warmup_steps`` steps.

    Computed once per analysis for the analyzer's events (a ``SeriesSource``), afresh for any
    other events; the same numbers either way.
    """
    if isinstance(events, SeriesSource):
        return events.summary(series, warmup_steps)
    return summarize(after_warmup(series, warmup_steps)[1])


def _build_series(events: Iterable[MetricEvent]) -> dict[SeriesKey, Series]:
    """``build_series`` of the events themselves: one pass over them."""
    acc: dict[SeriesKey, tuple[Series, dict[int, list[float]]]] = {}
    for e in events:
        if e.step is None or e.value != e.value:  # NaN: a provider that could not measure
            continue
        key = (e.name, e.rank, e.source)
        entry = acc.get(key)
        if entry is None:
            depth = e.attrs.get("depth") if isinstance(e.attrs, dict) else None
            entry = acc[key] = (Series(e.name, e.rank, e.kind, e.unit, e.source,
                                       depth if isinstance(depth, int) else None), {})
        series, per_step = entry
        attrs = e.attrs if isinstance(e.attrs, dict) else {}
        n = attrs.get("count", 1)
        n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
        series.events += n
        occ = attrs.get("occurrences", n)
        series.occurrences += occ if isinstance(occ, int) and not isinstance(occ, bool) and occ > 0 else n
        slot = per_step.get(e.step)
        if slot is None:
            per_step[e.step] = [e.value, 1.0]
        elif series.kind == "gauge":
            slot[0] = max(slot[0], e.value)
        else:
            slot[0] += e.value
            slot[1] += 1
    out: dict[SeriesKey, Series] = {}
    for key, (series, per_step) in acc.items():
        for step in sorted(per_step):
            value, n = per_step[step]
            series.steps.append(step)
            series.values.append(value / n if series.kind == "ratio" else value)
        out[key] = series
    return out


def after_warmup(series: Series, warmup_steps: int) -> tuple[list[int], list[float]]:
    """The steps and values without the first ``warmup_steps`` steps of the series."""
    k = max(0, warmup_steps)
    if len(series.steps) <= k:
        return [], []
    return series.steps[k:], series.values[k:]


def step_ranges(steps: list[int]) -> str:
    """``3-7, 12, 20-21``: consecutive steps as ranges, for titles and details."""
    if not steps:
        return "-"
    parts: list[str] = []
    start = prev = steps[0]
    for s in steps[1:]:
        if s == prev + 1:
            prev = s
            continue
        parts.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = s
    parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(parts)


def series_id(series: Series) -> str:
    """A stable id part for findings: ``<source>:<name>:rank<r>`` (``:norank`` without a rank)."""
    rank = f"rank{series.rank}" if series.rank is not None else "norank"
    return f"{series.source}:{series.name}:{rank}" if series.source else f"{series.name}:{rank}"


def rank_label(rank: int | None) -> str:
    """``rank 3`` or ``no rank``."""
    return f"rank {rank}" if rank is not None else "no rank"
