"""Per-event statistics of a torch profile for the regex keys of ``ops_to_analyze``, and safe file names.

Pure functions over ``(name, value_us)`` samples so the arithmetic is testable without a
profiler. Event names come from the trace (user ``record_function`` labels included), so
they are untrusted when they become file names: :func:`safe_file_stem` keeps every name
inside the output folder.
"""

from __future__ import annotations

import hashlib
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import ConfigError

__all__ = ["DEVICE_METRICS", "METRICS", "OpStats", "compile_ops", "event_value_us", "group_matches",
           "safe_file_stem", "unique_stems"]

# The seed's metric names -> the FunctionEvent attribute that holds them (torch >= 2.4 calls
# CUDA time "device" time; the old ``cuda_*`` names still work but warn).
METRICS: dict[str, str] = {
    "cuda_time_total": "device_time_total",
    "self_cuda_time_total": "self_device_time_total",
    "device_time_total": "device_time_total",
    "self_device_time_total": "self_device_time_total",
    "cpu_time_total": "cpu_time_total",
    "self_cpu_time_total": "self_cpu_time_total",
}
# device metric -> the CPU metric used when the run recorded no device time
DEVICE_METRICS: dict[str, str] = {
    "cuda_time_total": "cpu_time_total",
    "self_cuda_time_total": "self_cpu_time_total",
    "device_time_total": "cpu_time_total",
    "self_device_time_total": "self_cpu_time_total",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 120


@dataclass(frozen=True)
class OpStats:
    """The seed's statistics of one event name (microseconds)."""

    metric: str
    count: int
    total_us: float
    mean_us: float
    median_us: float
    std_us: float
    min_us: float
    max_us: float

    @classmethod
    def of(cls, metric: str, values: list[float]) -> OpStats:
        """Statistics of ``values`` (at least one); ``std_us`` is the population standard deviation."""
        if not values:
            raise ValueError("OpStats.of needs at least one value")
        return cls(metric=metric, count=len(values), total_us=sum(values), mean_us=statistics.fmean(values),
                   median_us=statistics.median(values), std_us=statistics.pstdev(values),
                   min_us=min(values), max_us=max(values))

    def to_json(self) -> dict[str, Any]:
        """The seed's JSON object (``metric`` first, then the numbers)."""
        return {"metric": self.metric, "count": self.count, "total_us": self.total_us, "mean_us": self.mean_us,
                "median_us": self.median_us, "std_us": self.std_us, "min_us": self.min_us, "max_us": self.max_us}


def compile_ops(ops_to_analyze: Mapping[str, str] | None) -> list[tuple[re.Pattern[str], str]]:
    """Check and compile ``{regex: metric}``; a bad regex or metric raises ConfigError naming it."""
    compiled: list[tuple[re.Pattern[str], str]] = []
    for pattern, metric in (ops_to_analyze or {}).items():
        if metric not in METRICS:
            raise ConfigError("ops_to_analyze", f"key {pattern!r}",
                              f"a metric among {', '.join(sorted(METRICS))}, got {metric!r}")
        try:
            compiled.append((re.compile(pattern), metric))
        except re.error as exc:
            raise ConfigError("ops_to_analyze", f"key {pattern!r}", f"a valid regular expression ({exc})") from None
    return compiled


def event_value_us(event: Any, metric: str) -> float:
    """The value of ``metric`` on a torch ``FunctionEvent`` (µs)."""
    return float(getattr(event, METRICS[metric]))


def group_matches(samples: Iterable[tuple[str, Any]], ops: list[tuple[re.Pattern[str], str]],
                  has_device_time: bool) -> dict[str, OpStats]:
    """Statistics per full event name that a pattern finds (``re.search``), first matching pattern wins.

    ``samples`` are ``(name, FunctionEvent)`` pairs. Without device time a device metric is
    read as its CPU counterpart, and ``OpStats.metric`` names the metric actually used.
    """
    values: dict[str, tuple[str, list[float]]] = {}
    for name, event in samples:
        for pattern, metric in ops:
            if pattern.search(name):
                used = metric if has_device_time else DEVICE_METRICS.get(metric, metric)
                values.setdefault(name, (used, []))[1].append(event_value_us(event, used))
                break
    return {name: OpStats.of(metric, vals) for name, (metric, vals) in values.items()}


def safe_file_stem(name: str) -> str:
    """A file-name stem for an event name: no path separators, no leading dots, bounded length."""
    stem = _UNSAFE.sub("_", name).strip("._-")
    if not stem:
        stem = "op"
    if len(stem) > _MAX_STEM:  # the hash keeps two long names that share a prefix apart
        digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        stem = f"{stem[:_MAX_STEM]}-{digest}"
    return stem


def unique_stems(names: Iterable[str]) -> dict[str, str]:
    """``safe_file_stem`` for each name, with a short hash added where two names would share a stem."""
    names = list(names)
    stems = {name: safe_file_stem(name) for name in names}
    counts: dict[str, int] = {}
    for stem in stems.values():
        counts[stem] = counts.get(stem, 0) + 1
    for name, stem in stems.items():
        if counts[stem] > 1:
            stems[name] = f"{stem}-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return stems
