"""Which host range runs inside which: the dominant parent of every ``cpu_op``/``annotation`` name.

The Kineto provider reports inclusive times per name (``cpu_op:aten::item``), so a parent and
its only child carry the same time twice: a diff that lists both counts one slow-down twice.
This pass (fed in the provider's own pass over the trace, see ``kineto.read_trace``) keeps
the host ranges of each thread as numbers, then nests them by time (a range inside another
on the same thread is its child) and answers, per name, the enclosing name under which most
of its time runs and what share of its time that is. ``ProfilerStep#N`` spans are steps,
never parents.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.profiling.kineto.read.aggregate import group_of

_HOST_GROUPS = ("cpu_op", "annotation")
_NOT_A_LANE = (list, dict)


@dataclass(frozen=True)
class Parent:
    """The enclosing name under which ``share`` (0..1) of a name's time runs."""

    name: str
    share: float


class NestingPass:
    """A ``read_trace`` consumer: ``add(ev)`` per trace event, then ``finish(...)`` → ``{name: Parent}``.

    Names are the provider's (``cpu_op:<op>``, ``annotation:<label>``); a name that never
    runs inside another has no entry.
    """

    needs_lanes = True  # typed events with pid/tid (see kineto.TracePass)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.lanes: dict[tuple[Any, Any], int] = {}
        self.lane = array("i")
        self.ts = array("d")
        self.dur = array("d")
        self.name = array("i")

    def add(self, ev: dict[str, Any]) -> None:
        """Keep a host range (``ph`` X, a cpu_op or user annotation with numeric ``ts``/``dur``)."""
        if ev.get("ph") != "X":
            return
        group = group_of(ev.get("cat"))
        if group not in _HOST_GROUPS:
            return
        label = ev.get("name", "")
        label = label if isinstance(label, str) else str(label)
        ts, dur = ev.get("ts"), ev.get("dur", 0)
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or isinstance(ts, bool):
            return  # the provider's own pass refuses such an event, naming it
        if label.startswith("ProfilerStep#"):
            return
        self._keep(group, label, ev.get("pid"), ev.get("tid"), ts, dur)

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for a run of typed events (``trace_events.KinetoEvent``); a missing ``ts`` is NaN there."""
        groups: dict[str | None, str | None] = {}
        for ev in events:
            if ev.ph != "X":
                continue
            cat = ev.cat
            group = groups.get(cat, "")
            if group == "":
                group = groups[cat] = group_of(cat)
            if group not in _HOST_GROUPS:
                continue
            ts = ev.ts
            label = ev.name
            if ts != ts or label.startswith("ProfilerStep#"):
                continue
            self._keep(group, label, ev.pid, ev.tid, ts, ev.dur)

    def _keep(self, group: str | None, label: str, pid: Any, tid: Any, ts: float, dur: float) -> None:
        if pid.__class__ in _NOT_A_LANE or tid.__class__ in _NOT_A_LANE:
            return  # a list or object where a thread id belongs: on no lane (before: TypeError, unhashable)
        full = f"{group}:{label}"
        nid = self.names.get(full)
        if nid is None:
            nid = self.names[full] = len(self.name_list)
            self.name_list.append(full)
        key = (pid, tid)
        lid = self.lanes.get(key)
        if lid is None:
            lid = self.lanes[key] = len(self.lanes)
        self.lane.append(lid)
        self.ts.append(ts)
        self.dur.append(dur)
        self.name.append(nid)

    def finish(self, metadata: Mapping[str, Any], event_count: int, rank: int | None) -> dict[str, Parent]:
        """Nest the ranges of each thread; return each name's dominant parent."""
        under: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        total: dict[int, float] = defaultdict(float)
        order = sorted(range(len(self.ts)), key=lambda i: (self.lane[i], self.ts[i], -self.dur[i]))
        stack: list[tuple[float, int]] = []  # (end, name id) of the open ranges of the current lane
        lane = -1
        for i in order:
            if self.lane[i] != lane:
                lane, stack = self.lane[i], []
            start, dur, nid = self.ts[i], self.dur[i], self.name[i]
            while stack and stack[-1][0] <= start:
                stack.pop()
            total[nid] += dur
            if stack and stack[-1][1] != nid:  # a recursive call is not its own parent
                under[nid][stack[-1][1]] += dur
            stack.append((start + dur, nid))
        out: dict[str, Parent] = {}
        for nid, parents in under.items():
            pid, time = max(parents.items(), key=lambda kv: kv[1])
            if total[nid] > 0:
                out[self.name_list[nid]] = Parent(self.name_list[pid], min(1.0, time / total[nid]))
        return out
