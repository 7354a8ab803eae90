"""PerfStatProvider: ``perf stat`` output, as printed (human) or with ``-x`` (CSV).

Human output: each ``Performance counter stats for '<command>'`` block is one step (0, 1,
...), each counter line one ``perf:<event>`` counter event (``msec`` becomes ``ms``) with
perf's own metric (``# 5.19 insn per cycle``), the run-to-run noise (``( +- 0.12% )``) and
the share of time a multiplexed counter ran (``(50.00%)``) in ``attrs``; the footer gives
``perf.time_elapsed``/``perf.time_user``/``perf.time_sys`` in seconds.

CSV output (``perf stat -x,``; the fields perf documents: optional interval time stamp,
optional CPU/core/socket and CPU count, counter value, unit, event, optional cgroup, optional
variance, run time, percentage running, optional metric value and unit): the same events,
with the interval time and aggregation in ``attrs``.

``<not counted>`` and ``<not supported>`` are not measured: the value is NaN (``null`` in
the events file, never 0) and ``attrs["status"]`` says which. ``perf.ipc`` is derived from
``instructions`` and ``cycles`` of the same block (or interval and CPU), not copied from
perf's comment (``perf.ipc:<pmu>`` on hybrid CPUs, ``perf.ipc@CPU3`` per CPU or socket with
``-A``/``--per-socket``); it is NaN with the reason when either counter was not measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import rank_from_name
from my_utils.profiling.formats._text import TextLogProvider, inert, shown, text_lines

_WHAT = "a perf stat output"
_NOT_MEASURED = {"<not counted>": "not counted", "<not supported>": "not supported"}
#: the units perf prints before an event name (evsel->unit of the software, power and uncore events)
_UNITS = {"msec": "ms", "usec": "us", "nsec": "ns", "sec": "s", "Joules": "J", "MiB": "MiB", "KiB": "KiB",
          "GiB": "GiB", "B": "B", "Watts": "W", "ns": "ns", "ms": "ms", "us": "us"}
_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
_HEADER = re.compile(r"^\s*Performance counter stats for (?P<target>.*?)(?:\s+\((?P<runs>\d+) runs\))?:\s*$")
_COUNTER = re.compile(rf"^\s*(?P<value><not counted>|<not supported>|{_NUMBER})\s+(?P<rest>\S.*)$")
_FOOTER = re.compile(rf"^\s*(?P<value>{_NUMBER})(?:\s*\+-\s*{_NUMBER})?\s+seconds\s+(?P<what>time elapsed|user|sys)\b")
_RUNNING = re.compile(r"\s*\((?P<pct>\d+(?:\.\d+)?)%\)\s*$")
_NOISE = re.compile(r"\s*\(\s*\+-\s*(?P<pct>\d+(?:\.\d+)?)%\s*\)\s*$")
_METRIC = re.compile(rf"^\s*(?P<value>{_NUMBER})\s*(?P<unit>.*?)\s*$")
_CSV_SEPARATORS = (",", ";", "\t", "|")
_IPC_EVENT = re.compile(r"^(?:(?P<pmu>[\w-]+)/)?(?P<event>instructions|cycles)/?(?::[a-zA-Z]+)?$")
_COUNT_LIKE = re.compile(rf"^(?:<not counted>|<not supported>|{_NUMBER})$")


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class _Counter:
    """One counter line, parsed (human or CSV)."""

    value: float
    status: str | None
    unit: str
    event: str
    attrs: dict[str, Any] = field(default_factory=dict)


def _human_counter(line: str) -> _Counter | None:
    """A human-format counter line, or None when ``line`` is not one."""
    m = _COUNTER.match(line)
    if m is None:
        return None
    raw, rest = m.group("value"), m.group("rest")
    attrs: dict[str, Any] = {}
    running = _RUNNING.search(rest)
    if running:
        attrs["running_pct"] = float(running.group("pct"))
        rest = rest[:running.start()]
    noise = _NOISE.search(rest)
    if noise:
        attrs["stddev_pct"] = float(noise.group("pct"))
        rest = rest[:noise.start()]
    left, hash_, metric = rest.partition("#")
    tokens = left.split()
    if not tokens:
        return None
    unit = ""
    if len(tokens) >= 2 and tokens[0] in _UNITS:
        unit = _UNITS[tokens[0]]
        tokens = tokens[1:]
    event = " ".join(tokens)
    if hash_:
        mm = _METRIC.match(metric)
        if mm is not None and mm.group("unit"):
            value = _number(mm.group("value"))
            if value is not None:
                attrs["perf_metric"] = value
                attrs["perf_metric_unit"] = inert(mm.group("unit"), 60)
    status = _NOT_MEASURED.get(raw)
    value = math.nan if status else _number(raw)
    if value is None:
        return None
    return _Counter(value, status, unit, event, attrs)


def _csv_counter(fields: list[str]) -> _Counter | None:
    """A ``perf stat -x`` line split at its separator, or None when it is not a counter line.

    perf prints, in order: [interval time] [aggregation id [CPU count]] value, unit, event,
    [cgroup] [variance%] run time, percentage running [metric value, metric unit].
    """
    n = len(fields)
    for i in range(min(4, n)):
        if n - i < 5:  # value, unit, event, run time, percentage: five fields at least
            break
        raw, unit, event = fields[i].strip(), fields[i + 1].strip(), fields[i + 2].strip()
        if not _COUNT_LIKE.match(raw) or _COUNT_LIKE.match(unit) or not event or _COUNT_LIKE.match(event):
            continue
        j = i + 3
        attrs: dict[str, Any] = {}
        if j < n and fields[j].strip() and _number(fields[j].strip()) is None and not fields[j].strip().endswith("%"):
            attrs["cgroup"] = inert(fields[j].strip(), 80)
            j += 1
        if j < n and fields[j].strip().endswith("%") and _number(fields[j].strip()[:-1]) is not None:
            attrs["stddev_pct"] = _number(fields[j].strip()[:-1])
            j += 1
        if j + 1 >= n:
            continue
        run_time, pct = _number(fields[j].strip()), _number(fields[j + 1].strip())
        if run_time is None or pct is None:
            continue
        if pct < 100.0:
            attrs["running_pct"] = pct
        if j + 3 < n and fields[j + 3].strip():
            metric = _number(fields[j + 2].strip())
            if metric is not None:
                attrs["perf_metric"] = metric
                attrs["perf_metric_unit"] = inert(fields[j + 3].strip(), 60)
        prefix = [f.strip() for f in fields[:i]]
        if prefix and re.fullmatch(r"\d+\.\d+", prefix[0]):
            attrs["interval_s"] = float(prefix[0])
            prefix = prefix[1:]
        if prefix and prefix[0] == "summary":
            prefix = prefix[1:]
        if prefix:
            attrs["aggregate"] = inert(prefix[0], 60)
            if len(prefix) > 1 and prefix[1].isdigit():
                attrs["cpus"] = int(prefix[1])
        status = _NOT_MEASURED.get(raw)
        value = math.nan if status else _number(raw)
        if value is None:
            continue
        return _Counter(value, status, _UNITS.get(unit, inert(unit, 20)), event, attrs)
    return None


def _csv_line(line: str) -> _Counter | None:
    for sep in _CSV_SEPARATORS:
        if sep in line:
            counter = _csv_counter(line.split(sep))
            if counter is not None:
                return counter
    return None


def looks_like_perf_stat(text: str) -> bool:
    """Whether ``text`` (the head of a file) holds a perf stat block header or a ``-x`` counter line."""
    if "Performance counter stats for" in text:
        return True
    return any(_csv_line(line) is not None for line in text.splitlines()[:200])


class _Ipc:
    """Pairs ``instructions`` and ``cycles`` of one group (block, interval, CPU, PMU) into ``perf.ipc``."""

    def __init__(self) -> None:
        self.groups: dict[tuple[Any, ...], dict[str, tuple[float, str | None, int]]] = {}

    def add(self, key: tuple[Any, ...], counter: _Counter, line: int) -> None:
        m = _IPC_EVENT.match(counter.event)
        if m is None:
            return
        group = (*key, m.group("pmu") or "")
        self.groups.setdefault(group, {})[m.group("event")] = (counter.value, counter.status, line)

    def flush(self, make: Any) -> Iterator[MetricEvent]:
        for group, found in self.groups.items():
            if "instructions" not in found or "cycles" not in found:
                continue
            (ins, ins_status, ins_line), (cyc, cyc_status, cyc_line) = found["instructions"], found["cycles"]
            pmu = group[-1]
            attrs: dict[str, Any] = {"lines": [ins_line, cyc_line], "derived_from": "instructions / cycles"}
            if len(group) == 4:  # a CSV group: (step, interval time, aggregation, PMU)
                attrs.update({k: v for k, v in (("interval_s", group[1]), ("aggregate", group[2])) if v is not None})
            if ins_status or cyc_status or cyc == 0 or math.isnan(ins) or math.isnan(cyc):
                why = (f"instructions {ins_status}" if ins_status else f"cycles {cyc_status}" if cyc_status
                       else "cycles is 0")
                attrs["status"] = f"not measured: {why}"
                value = math.nan
            else:
                value = ins / cyc
            where = f"@{group[2]}" if len(group) == 4 and group[2] else ""  # per CPU/socket: one series each
            name = (f"perf.ipc:{pmu}" if pmu else "perf.ipc") + where
            yield make(name, value, "ratio", "instructions/cycle", group, attrs)
        self.groups.clear()


def read_perf_stat(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Parse one ``perf stat`` output file (human or ``-x`` CSV) into metric events."""
    rank = rank if rank is not None else rank_from_name(path)
    out: list[MetricEvent] = []
    ipc = _Ipc()
    block = -1  # human blocks seen; CSV lines outside any block belong to step 0
    command = ""
    runs: int | None = None
    counters = 0
    base = {"file": path.name}

    def make(name: str, value: float, kind: str, unit: str, group: tuple[Any, ...],
             attrs: dict[str, Any]) -> MetricEvent:
        step = group[0]
        extra: dict[str, Any] = {"command": command} if command else {}
        if runs:
            extra["runs"] = runs
        return MetricEvent(name=name, value=value, kind=kind, unit=unit, source="perf_stat", rank=rank,
                           step=step, attrs={**base, **extra, **attrs})

    in_block = False  # between a block's header and its "seconds time elapsed" line
    for number, line in text_lines(path, _WHAT):
        header = _HEADER.match(line)
        if header:
            out.extend(ipc.flush(make))
            block += 1
            in_block = True
            command = inert(header.group("target").strip().strip("'\""), 200)
            runs = int(header.group("runs")) if header.group("runs") else None
            continue
        if block >= 0:
            footer = _FOOTER.match(line)
            if footer:
                value = _number(footer.group("value"))
                what = footer.group("what").split()[-1]
                if value is not None:
                    out.append(make(f"perf.time_{what}", value, "gauge", "s", (block,), {"line": number}))
                in_block = in_block and what != "elapsed"
                continue
        if in_block:
            counter = _human_counter(line)
            if counter is not None:
                counters += 1
                out.append(_event(make, counter, (block,), number))
                ipc.add((block,), counter, number)
                continue
            # perf's own comment lines (metric continuations, TopdownL1 groups, --table rows) hold a '#'
            if line.strip() and "#" not in line and _csv_line(line) is None:
                raise InputError(path, f"line {number}", "a perf stat counter line '<count> [unit] <event> "
                                 f"[# metric]' inside the block opened at its header; found {shown(line)}")
        counter = _csv_line(line) if line.strip() else None
        if counter is not None:
            counters += 1
            step = max(block, 0)
            group = (step, counter.attrs.get("interval_s"), counter.attrs.get("aggregate"))
            out.append(_event(make, counter, group, number))
            ipc.add(group, counter, number)
    out.extend(ipc.flush(make))
    if counters == 0:
        raise UnsupportedInputError(path, None, f"{_WHAT}: a 'Performance counter stats for' block or "
                                    "'perf stat -x,' counter lines; found none")
    return out


def _event(make: Any, counter: _Counter, group: tuple[Any, ...], line: int) -> MetricEvent:
    attrs: dict[str, Any] = {"line": line, "event": inert(counter.event), **counter.attrs}
    if counter.status:
        attrs["status"] = counter.status
    return make(f"perf:{inert(counter.event)}", counter.value, "counter", counter.unit, group, attrs)


class PerfStatProvider(TextLogProvider):
    """Counters from ``perf stat`` output files (a file, or a folder of ``.txt``/``.log``/``.csv`` files)."""

    name = "perf_stat"
    patterns = ("*.txt", "*.log", "*.csv", "*.perf")
    what = "perf stat output"
    expected = _WHAT

    def looks_like(self, head: str) -> bool:
        """A perf stat block header or ``-x`` counter lines."""
        return looks_like_perf_stat(head)

    def read(self, path: Path) -> list[MetricEvent]:
        """One file's events."""
        return read_perf_stat(path, self.rank)
