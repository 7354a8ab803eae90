"""What NCCL's RAS client printed (``ncclras``, NCCL 2.24+): the job, its communicators, and the problems, counted once.

RAS threads inside every NCCL process watch each other; the ``ncclras`` client (or ``echo status | nc
localhost 28028``) asks them for the job's state. Its outputs, as NCCL's ``src/ras/client_support.cc``
writes them and ``docs/userguide/source/troubleshooting/ras.rst`` shows them:

- the **text status** (default): ``NCCL version``, ``Job summary`` (nodes, processes, GPUs), the
  ``Communicators`` table (group, comms in group, nodes, ranks per node, ranks per comm, ranks in
  group, status, errors), then ``Errors`` and ``Warnings`` sections, each a list of problems: a kind
  alone (``INCOMPLETE``, ``DEAD``, ``TIMEOUT``) or a communicator ``#<group>-<comm> (<hash>) <kind>``
  (``INCOMPLETE``, ``ERROR``, ``MISMATCH``), with indented detail lines naming ranks and processes;
- the **JSON status** (``ncclras -f json``, NCCL 2.28.7+): every communicator's ranks, their status and
  collective counts, and its missing ranks; the problems are derived here as the text names them
  (missing ranks: INCOMPLETE; an unresponsive or dead rank: DEAD; an initialisation or asynchronous
  error: ERROR; ranks with different operation counts: MISMATCH; RAS timeouts: TIMEOUT);
- **monitor mode** (``ncclras -m``, NCCL 2.29+): one event per line, ``[<time>] <EVENT>: <peer>
  <details>``, or the same as JSON objects (``group``, ``event``, ``peer``, ``details``).

A file may hold several queries one after another (``watch ncclras >> ras.txt``); a problem that every
query repeats is one problem here, with the number of queries that reported it (``occurrences``) and
the first and last. Severity: the section a problem was printed in (``error``, ``warning``); for monitor
events, ours (:data:`EVENT_SEVERITY`): a dead peer is an error, an unresponsive, stuck, timed-out or
disconnected one a warning, a new, connecting or retried one ``info``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError

WHAT = "the output of NCCL's RAS client (ncclras: status text, -f json, or -m monitor events)"
#: Monitor events and the severity given them (events NCCL adds later are warnings until listed).
EVENT_SEVERITY = {"PEER_DEAD": "error", "PEER_TIMEOUT_DEAD": "error", "PEER_UNRESPONSIVE": "warning",
                  "PEER_SEND_STUCK": "warning", "PEER_INIT_TIMEOUT": "warning", "PEER_DISCONNECTED": "warning",
                  "PEER_NEW": "info", "PEER_CONNECTING": "info", "PEER_RETRY": "info"}
SEVERITIES = ("error", "warning", "info")
_VERSION = re.compile(r"^NCCL version (?P<v>\d+\.\d+\.\d+\S*)")
_COMM_ROW = re.compile(r"^\s*(?P<group>\d+)\s+(?P<comms>\d+)\s+(?P<nodes>\d+)\s+(?P<per_node>\d+(?:-\d+)?)\s+"
                       r"(?P<per_comm>\d+)\s+(?P<in_group>\d+)\s+(?P<status>[A-Z]+)\s+(?P<errors>[A-Z,]+)\s*$")
_ISSUE = re.compile(r"^(?:#(?P<group>\d+)-(?P<comm>\d+) \((?P<hash>[0-9a-fA-F]+)\) )?(?P<kind>[A-Z][A-Z_,]+)\s*$")
_MONITOR = re.compile(r"^\[(?P<time>[^\]]+)\] (?P<event>[A-Z][A-Z_]+): ?(?P<rest>.*)$")
_RANK = re.compile(r"\bRank (\d+)\b|The missing rank(?:s)?: ([\d, ]+)")
_PROCESS = re.compile(r"\bProcess (\d+) on node (\S+)")
_PEER = re.compile(r"^(?P<peer>Process \d+ on node \S+ managing GPUs? \S+)\s*(?P<rest>.*)$")
_TOTALS = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
MAX_DETAIL_LINES = 40


@dataclass(frozen=True)
class RasIssue:
    """One problem RAS reported, counted once however many queries repeated it."""

    severity: str
    kind: str
    communicator: str
    summary: str
    details: tuple[str, ...]
    ranks: tuple[int, ...]
    processes: tuple[str, ...]
    occurrences: int
    first_query: int
    last_query: int
    first_line: int
    time: str = ""


@dataclass(frozen=True)
class RasCommunicators:
    """One row of a status query's communicator table."""

    query: int
    group: int
    comms: int
    nodes: int
    ranks_per_node: str
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: str


@dataclass(frozen=True)
class RasReport:
    """A RAS output read whole: its queries, the job, the communicators, the problems (module docstring)."""

    file: str
    mode: str  # "status", "json", "monitor"
    queries: int
    nccl_version: str | None = None
    job: dict[str, int] = field(default_factory=dict)
    communicators: tuple[RasCommunicators, ...] = ()
    issues: tuple[RasIssue, ...] = ()

    def counts(self) -> dict[str, int]:
        """Distinct problems per severity (``error``, ``warning``, ``info``)."""
        got = Counter(i.severity for i in self.issues)
        return {s: got.get(s, 0) for s in SEVERITIES}

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """``nccl_ras_issues`` (one row per distinct problem, errors first) and ``nccl_ras_communicators``."""
        issues = [{**asdict(i), "details": " | ".join(i.details), "ranks": ", ".join(map(str, i.ranks)),
                   "processes": ", ".join(i.processes)} for i in self.issues]
        return {"nccl_ras_issues": issues, "nccl_ras_communicators": [asdict(c) for c in self.communicators]}


class _Issues:
    """Problems as they are read, merged by (severity, kind, communicator, summary)."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def add(self, severity: str, kind: str, comm: str, lines: list[str], query: int, line: int,
            time: str = "") -> None:
        summary = lines[0].strip() if lines else ""
        key = (severity, kind, comm, summary)
        text = " ".join(lines)
        ranks = sorted({int(x) for a, b in _RANK.findall(text) for x in ([a] if a else b.replace(",", " ").split())
                        if x.isdigit()})
        procs = [f"{pid} on {node}" for pid, node in _PROCESS.findall(text)]
        got = self.found.get(key)
        if got is None:
            self.found[key] = {"severity": severity, "kind": kind, "communicator": comm, "summary": summary,
                               "details": tuple(x.strip() for x in lines[1:MAX_DETAIL_LINES]), "ranks": set(ranks),
                               "processes": dict.fromkeys(procs), "queries": {query}, "first_line": line,
                               "time": time, "count": 1}
        else:
            got["ranks"].update(ranks)
            got["processes"].update(dict.fromkeys(procs))
            got["queries"].add(query)
            got["count"] += 1

    def result(self, monitor: bool) -> tuple[RasIssue, ...]:
        out = [RasIssue(g["severity"], g["kind"], g["communicator"], g["summary"], g["details"],
                        tuple(sorted(g["ranks"])), tuple(g["processes"]),
                        g["count"] if monitor else len(g["queries"]), min(g["queries"]), max(g["queries"]),
                        g["first_line"], g["time"]) for g in self.found.values()]
        out.sort(key=lambda i: (SEVERITIES.index(i.severity), i.first_line))
        return tuple(out)


def read_ras(path: str | Path) -> RasReport:
    """Read one RAS output (any of the three forms of the module docstring) into a :class:`RasReport`."""
    from my_utils.profiling.formats._text import text_lines

    p = Path(path)
    lines = text_lines(p, WHAT)
    for number, text in lines:
        if not text.strip():
            continue
        first = text.lstrip()
        if first.startswith("{"):
            return _read_json(p, _chain([(number, text)], lines))
        if _MONITOR.match(text) or text.startswith("RAS Monitor Mode"):
            return _read_monitor(p, _chain([(number, text)], lines))
        return _read_status(p, _chain([(number, text)], lines))
    raise UnsupportedInputError(p, None, f"{WHAT}; the file is empty")


def _chain(first: list[tuple[int, str]], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield from first
    yield from rest


def _read_status(path: Path, lines: Iterator[tuple[int, str]]) -> RasReport:
    issues = _Issues()
    comms: list[RasCommunicators] = []
    version: str | None = None
    job: dict[str, int] = {}
    queries = 0
    section = ""  # "", "errors", "warnings"
    current: tuple[str, str, list[str], int] | None = None  # kind, comm, lines, first line
    known = False
    after_totals = False
    for number, text in lines:
        m = _VERSION.match(text)
        if m:
            version = m.group("v")
            known = True
            continue
        if text.startswith("Job summary"):
            queries += 1
            section, known = "", True
            continue
        if text.startswith("(total)"):
            after_totals = True
            continue
        if after_totals:
            after_totals = False
            t = _TOTALS.match(text)
            if t:
                job = dict(zip(("nodes", "processes_per_node", "gpus_per_process", "processes", "gpus"),
                               map(int, t.groups()), strict=True))
            continue
        if text.startswith("Communicators..."):
            known = True
            queries = max(queries, 1)
            continue
        if text in ("Errors", "Warnings"):
            if current is not None:
                issues.add(_severity(section), current[0], current[1], current[2], queries, current[3])
                current = None
            section = text.lower()
            queries = max(queries, 1)
            known = True
            continue
        row = _COMM_ROW.match(text)
        if row and not section:
            g = row.groupdict()
            comms.append(RasCommunicators(queries, int(g["group"]), int(g["comms"]), int(g["nodes"]), g["per_node"],
                                          int(g["per_comm"]), int(g["in_group"]), g["status"], g["errors"]))
            known = True
            continue
        if section:
            if not text.strip() or set(text.strip()) == {"="}:
                if current is not None and not text.strip():
                    issues.add(_severity(section), current[0], current[1], current[2], queries, current[3])
                    current = None
                continue
            head = _ISSUE.match(text) if not text.startswith(" ") else None
            if head:
                if current is not None:
                    issues.add(_severity(section), current[0], current[1], current[2], queries, current[3])
                h = head.groupdict()
                comm = f"#{h['group']}-{h['comm']} ({h['hash']})" if h["hash"] else ""
                current = (h["kind"], comm, [], number)
            elif current is not None and text.startswith(" "):
                current[2].append(text)
            else:  # the next query's preamble, or program output between queries: the section is over
                if current is not None:
                    issues.add(_severity(section), current[0], current[1], current[2], queries, current[3])
                    current = None
                section = ""
    if current is not None:
        issues.add(_severity(section), current[0], current[1], current[2], queries, current[3])
    if not known:
        raise UnsupportedInputError(path, "line 1", f"{WHAT}; found no 'Job summary', 'Communicators' or "
                                                     "'NCCL version' line")
    return RasReport(path.name, "status", max(queries, 1), version, job, tuple(comms), issues.result(False))


def _severity(section: str) -> str:
    return "error" if section == "errors" else "warning"


def _objects(path: Path, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, Any]]:
    """Each top-level JSON object (NCCL prints them over several lines, closed by a ``}`` alone)."""
    buffer: list[str] = []
    start = 0
    for number, text in lines:
        if not buffer:
            if not text.strip():
                continue
            if not text.lstrip().startswith("{"):
                raise InputError(path, f"line {number}", f"{WHAT}: a JSON object; found {text.strip()[:60]!r}")
            start = number
        buffer.append(text)
        if text.rstrip() == "}" or (len(buffer) == 1 and text.rstrip().endswith("}")):
            try:
                yield start, json.loads("\n".join(buffer))
            except json.JSONDecodeError as exc:
                raise InputError(path, f"line {start}", f"{WHAT}: a JSON object ({exc.msg})") from None
            buffer = []
        elif len(buffer) > 1_000_000:
            raise InputError(path, f"line {start}", f"{WHAT}: a JSON object closed by a '}}' line")
    if buffer:
        raise InputError(path, f"line {start}", f"{WHAT}: a complete JSON object; the file ends inside one")


def _read_json(path: Path, lines: Iterator[tuple[int, str]]) -> RasReport:
    issues = _Issues()
    queries = 0
    version: str | None = None
    monitor = False
    for number, obj in _objects(path, lines):
        if not isinstance(obj, dict):
            raise InputError(path, f"line {number}", f"{WHAT}: a JSON object; found a {type(obj).__name__}")
        if "event" in obj:
            monitor = True
            _monitor_event(issues, str(obj.get("event")), _peer(obj.get("peer")), str(obj.get("details") or ""),
                           number, str(obj.get("timestamp") or ""))
            continue
        if "communicators" not in obj:
            raise InputError(path, f"line {number}", f"{WHAT}: a status object with 'communicators' or a monitor "
                                                     "event with 'event'")
        queries += 1
        version = str(obj.get("nccl_version") or version or "") or None
        _json_status(issues, obj, queries, number)
    return RasReport(path.name, "monitor" if monitor and not queries else "json", max(queries, 1), version,
                     issues=issues.result(monitor and not queries))


def _peer(peer: Any) -> str:
    if not isinstance(peer, dict):
        return ""
    if "addr" in peer:
        return f"peer {peer['addr']}"
    devs = peer.get("cuda_devs")
    gpus = ",".join(map(str, devs)) if isinstance(devs, list) else "?"
    return f"Process {peer.get('pid')} on node {peer.get('host')} managing GPU {gpus}"


def _json_status(issues: _Issues, obj: dict[str, Any], query: int, line: int) -> None:
    for comm in obj.get("communicators") or []:
        if not isinstance(comm, dict):
            continue
        cid = f"({str(comm.get('hash', '')).removeprefix('0x')})"
        missing = [m for m in comm.get("missing_ranks") or [] if isinstance(m, dict)]
        if missing:
            issues.add("error", "INCOMPLETE", cid, [f"Missing communicator data from {len(missing)} rank(s)"] +
                       [f"Rank {m.get('rank')} -- GPU {m.get('cuda_dev')} managed by process {m.get('pid')} on node "
                        f"{m.get('host')}" for m in missing], query, line)
        dead = [m for m in missing if (m.get("status") or {}).get("considered_dead")]
        if dead:
            issues.add("error", "DEAD", cid, [f"{len(dead)} rank(s) considered dead (unreachable via the RAS network)"]
                       + [f"Process {m.get('pid')} on node {m.get('host')} managing GPU {m.get('cuda_dev')}"
                          for m in dead], query, line)
        ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)]
        errors = [r for r in ranks if (r.get("status") or {}).get("init_state") not in (0, 7, None)
                  or (r.get("status") or {}).get("async_error") not in (0, None)]
        if errors:
            issues.add("error", "ERROR", cid, [f"Initialization or asynchronous error on {len(errors)} rank(s)"] +
                       [f"Rank {r.get('rank')} reported init_state {(r.get('status') or {}).get('init_state')}, "
                        f"async_error {(r.get('status') or {}).get('async_error')}" for r in errors], query, line)
        counts = {json.dumps(r.get("collective_counts"), sort_keys=True) for r in ranks}
        if len(counts) > 1:
            issues.add("warning", "MISMATCH", cid, ["Communicator ranks have different collective operation counts"],
                       query, line)
    ras = obj.get("ras")
    timeouts = ras.get("timeouts_count") if isinstance(ras, dict) else None
    if isinstance(timeouts, int) and timeouts > 0:
        issues.add("warning", "TIMEOUT", "", [f"Encountered {timeouts} communication timeouts while gathering "
                                              "communicator data"], query, line)


def _monitor_event(issues: _Issues, event: str, peer: str, details: str, line: int, time: str) -> None:
    """One monitor event; the same event about the same peer is one problem (its details carry changing seconds)."""
    if not peer:
        m = _PEER.match(details)
        peer, details = (m.group("peer"), m.group("rest")) if m else (details, "")
    issues.add(EVENT_SEVERITY.get(event, "warning"), event, "", [peer] + ([f"  {details}"] if details else []), 1,
               line, time)


def _read_monitor(path: Path, lines: Iterator[tuple[int, str]]) -> RasReport:
    issues = _Issues()
    for number, text in lines:
        m = _MONITOR.match(text)
        if m:
            _monitor_event(issues, m.group("event"), "", m.group("rest").strip(), number, m.group("time"))
    return RasReport(path.name, "monitor", 1, issues=issues.result(True))
