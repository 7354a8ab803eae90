"""NcclRasProvider: NCCL's RAS client output (``ncclras`` status text, ``-f json``, ``-m`` monitor events) as events.

The file is read by :func:`my_utils.profiling.nccl.ras.read_ras` (the formats, the severities and how
repeated queries are counted once are described there). Events, per file (no step, no rank: RAS
speaks for the whole job):

- ``nccl.ras.errors``, ``nccl.ras.warnings``, ``nccl.ras.info`` (counter): distinct problems per severity;
- ``nccl.ras.issue:<KIND>`` (counter: ``INCOMPLETE``, ``DEAD``, ``MISMATCH``, ``TIMEOUT``, ``PEER_DEAD``...),
  one per distinct problem, value its occurrences, ``attrs``: severity, communicator, summary, ranks,
  processes, the first line;
- ``nccl.ras.job.nodes`` / ``processes`` / ``gpus`` (info) from the job summary, ``nccl.ras.communicators``
  (info: communicator groups in the last query), ``nccl.version`` (info) when printed.
"""

from __future__ import annotations

import re
from pathlib import Path

from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._text import TextLogProvider, inert


def read_nccl_ras(path: Path) -> list[MetricEvent]:
    """The events of one RAS output (module docstring)."""
    from my_utils.profiling.nccl.ras import read_ras

    report = read_ras(path)
    base = {"file": path.name, "mode": report.mode, "queries": report.queries}

    def event(name: str, value: float, kind: str, unit: str = "", **attrs: object) -> MetricEvent:
        return MetricEvent(name=name, value=value, kind=kind, unit=unit, source="nccl_ras", attrs={**base, **attrs})

    out = [event(f"nccl.ras.{sev}s" if sev != "info" else "nccl.ras.info", n, "counter", "problems")
           for sev, n in report.counts().items()]
    for i in report.issues:
        out.append(event(f"nccl.ras.issue:{inert(i.kind, 40)}", i.occurrences, "counter", "queries" if
                         report.mode != "monitor" else "events", severity=i.severity,
                         communicator=inert(i.communicator, 60), summary=inert(i.summary, 200),
                         ranks=list(i.ranks)[:64], processes=[inert(p, 80) for p in i.processes[:16]],
                         line=i.first_line, time=inert(i.time, 40)))
    for key in ("nodes", "processes", "gpus"):
        if key in report.job:
            out.append(event(f"nccl.ras.job.{key}", report.job[key], "info", key))
    last = [c for c in report.communicators if c.query == max((x.query for x in report.communicators), default=0)]
    if last:
        out.append(event("nccl.ras.communicators", len(last), "info", "groups",
                         status=sorted({c.status for c in last}), errors=sorted({c.errors for c in last})))
    if report.nccl_version:
        out.append(event("nccl.version", 0.0, "info", "", version=inert(report.nccl_version, 40)))
    return out


_EVENT_LINE = re.compile(r"^\[[^\]\n]+\] PEER_[A-Z_]+:", re.MULTILINE)


def looks_like_ras(text: str) -> bool:
    """Whether the head of a file is RAS client output."""
    return ("Job summary\n===" in text or "\nCommunicators..." in text or "RAS Monitor Mode" in text
            or '"communicators_count"' in text or '"group": "LIFECYCLE"' in text or '"group": "TRACE"' in text
            or _EVENT_LINE.search(text) is not None)


class NcclRasProvider(TextLogProvider):
    """Problems per severity and the job's state from NCCL RAS client output."""

    name = "nccl_ras"
    patterns = ("*.txt", "*.log", "*.json", "*.out")
    what = "NCCL RAS client output"
    expected = "the output of NCCL's RAS client (ncclras)"

    def looks_like(self, head: str) -> bool:
        """RAS client output."""
        return looks_like_ras(head)

    def read(self, path: Path) -> list[MetricEvent]:
        """One file's events."""
        return read_nccl_ras(path)
