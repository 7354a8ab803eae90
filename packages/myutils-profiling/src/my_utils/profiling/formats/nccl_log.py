"""NcclLogProvider: what ``NCCL_DEBUG=INFO`` logs say about each rank's communicators.

NCCL prefixes every line with ``<host>:<pid>:<tid> [<cudaDev>]`` (after an optional
``[date time]`` and whatever the launcher adds, such as ``[rank0]:``), so one log may hold
every process of a job, interleaved. Lines are read one at a time and folded per process
(host, pid); the events come out at the end, one set per process, with the process's rank
taken from its largest communicator (``comm ... rank R nranks N``: the world, not a
sub-group). Per process:

- ``nccl.version`` (info, the version code ``major*10000 + minor*100 + patch``; the text in
  ``attrs["version"]``), ``nccl.cuda_driver`` (info);
- ``nccl.network:<name>`` (info: the largest node count of its communicators, unit
  ``nodes``; ``IB``, ``Socket`` or a plugin's name) and, when TCP sockets carry a job that
  spans nodes, ``nccl.check:socket_across_nodes`` (info, value: the log line that says
  ``Using network Socket``);
- per communicator: ``nccl.comm.nranks``, ``nccl.comm.nnodes``, ``nccl.comm.local_ranks``,
  ``nccl.comm.rings`` and ``nccl.comm.trees`` (channels of each graph),
  ``nccl.comm.coll_channels``, ``nccl.comm.p2p_channels`` (info) and ``nccl.comm.init_time``
  (s), with the communicator, its rank in it, cudaDev, nvmlDev and busId in ``attrs``;
- ``nccl.transport:<kind>`` (counter: connections set up via ``NET/IB``, ``NET/Socket``,
  ``P2P``, ``SHM``...), ``nccl.algo:<coll>/<algo>/<proto>`` (counter: the tuner's choices,
  ``NCCL_DEBUG_SUBSYS=TUNING``), ``nccl.coll:<coll>`` (counter: calls logged with
  ``NCCL_DEBUG_SUBSYS=COLL``; elements in ``attrs``), ``nccl.env:<NCCL_VAR>`` (info: a
  setting NCCL took from the environment, its value in ``attrs``), ``nccl.warnings`` and
  ``nccl.comm.aborts`` (counters).

Every event names the file, the first line it rests on, the host and the pid. A file with no
NCCL line is refused; text between NCCL lines (the program's own output) is left alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from my_utils.core.errors import UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import rank_from_name
from my_utils.profiling.formats._text import TextLogProvider, inert, text_lines

_WHAT = "an NCCL_DEBUG=INFO log"
_PREFIX = re.compile(
    r"(?P<host>[\w.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:\S+:\d+ (?:\(\S*\) )?)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b ?(?P<msg>.*)$")
_BARE_VERSION = re.compile(r"^\s*NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
_VERSION = re.compile(r"^NCCL version (?P<version>(?P<ma>\d+)\.(?P<mi>\d+)\.(?P<pa>\d+)\S*)")
_DRIVER = re.compile(r"^cudaDriverVersion (?P<v>\d+)")
_NETWORK = re.compile(r"^Using network (?P<net>\S.*?)\s*$")
_INIT = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>-?\d+)"
    r"(?: nvmlDev (?P<nvml>-?\d+))? busId (?P<bus>[0-9a-fA-F]+)(?: commId (?P<cid>0x[0-9a-fA-F]+))?"
    r".*? - (?P<state>Init START|Init COMPLETE|Destroy COMPLETE|Abort COMPLETE)")
_NODES = re.compile(r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+)"
                    r" localRanks (?P<local>\d+) localRank (?P<lrank>\d+)")
_RING = re.compile(r"^Channel (?P<c>\d+)/(?P<n>\d+) :(?P<order>(?:\s+\d+)+)\s*$")
_TREES = re.compile(r"^Trees (?P<trees>(?:\[\d+\] \S+\s*)+)$")
_CONNECTION = re.compile(r"^Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\] (?:\[(?:send|receive)\] )?via (?P<via>\S+)")
_CHANNELS = re.compile(r"(?P<n>\d+) (?P<kind>coll|collnet|nvls|p2p) channels(?!\s+per)")
_TIMINGS = re.compile(r"^Init timings(?: - \w+)?: rank \d+ nranks \d+ total (?P<total>\d+(?:\.\d+)?)")
_ENV = re.compile(r"^(?P<var>NCCL_\w+) set by environment to (?P<value>.*?)\s*$")
_TUNING = re.compile(r"^(?P<coll>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)")
_COLL = re.compile(r"^(?P<coll>\w+): opCount [0-9a-fA-F]+ sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
                   r"datatype \d+ op \d+ root -?\d+ comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) \[nranks=\d+\]")


_UNSAFE = re.compile(r"[^\w.+\-/]")


@lru_cache(maxsize=4096)  # a log names few collectives, hosts and algorithms, once per call line
def _name_part(text: str) -> str:
    """A name read from the log, safe inside an event name (no separators of our own names)."""
    return _UNSAFE.sub("_", inert(text, 60))


@lru_cache(maxsize=4096)
def _host(text: str) -> str:
    return inert(text, 100)


def _transport(via: str) -> str:
    """``NET/IB/0/GDRDMA`` -> ``NET/IB``; ``P2P/CUMEM/read`` -> ``P2P``; ``SHM/direct/direct`` -> ``SHM``."""
    parts = via.split("/")
    return "/".join(parts[:2]) if parts[0] == "NET" and len(parts) > 1 else parts[0]


@dataclass
class _Comm:
    """One communicator as one process saw it."""

    ptr: str
    line: int
    rank: int | None = None
    nranks: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    values: dict[str, tuple[float, int]] = field(default_factory=dict)  # event suffix -> (value, line)
    rings: set[int] = field(default_factory=set)
    ring_count: int | None = None


@dataclass
class _Process:
    """What one process (host, pid) said, folded as the lines stream by."""

    host: str
    pid: int
    line: int
    infos: dict[str, tuple[float, int, dict[str, Any]]] = field(default_factory=dict)
    comms: dict[str, _Comm] = field(default_factory=dict)
    counters: dict[str, list[Any]] = field(default_factory=dict)  # name -> [count, first line, attrs]
    network: tuple[str, int] | None = None

    def count(self, name: str, line: int, by: float = 1.0, **attrs: Any) -> None:
        slot = self.counters.get(name)
        if slot is None:
            self.counters[name] = [by, line, dict(attrs)]
            return
        slot[0] += by
        for key, value in attrs.items():  # numeric attrs accumulate (min/max/total), text keeps the first
            if key.endswith("_min"):
                slot[2][key] = min(slot[2].get(key, value), value)
            elif key.endswith("_max"):
                slot[2][key] = max(slot[2].get(key, value), value)
            elif key.endswith("_total"):
                slot[2][key] = slot[2].get(key, 0) + value


class _Log:
    """The fold of one log file: processes by (host, pid), each thread's current communicator."""

    def __init__(self) -> None:
        self.processes: dict[tuple[str, int], _Process] = {}
        self.current: dict[tuple[str, int, int], str] = {}  # (host, pid, tid) -> comm pointer being set up
        self.bare_version: tuple[str, int] | None = None
        self.nccl_lines = 0

    def process(self, host: str, pid: int, line: int) -> _Process:
        key = (host, pid)
        proc = self.processes.get(key)
        if proc is None:
            proc = self.processes[key] = _Process(host, pid, line)
        return proc

    def comm(self, proc: _Process, tid_key: tuple[str, int, int], ptr: str | None, line: int) -> _Comm | None:
        if ptr is None:
            ptr = self.current.get(tid_key)
            if ptr is None:  # a line outside any init seen on this thread: the process's latest communicator
                return next(reversed(proc.comms.values()), None)
        comm = proc.comms.get(ptr)
        if comm is None:
            comm = proc.comms[ptr] = _Comm(ptr, line)
        self.current[tid_key] = ptr
        return comm

    def feed(self, number: int, line: str) -> None:
        if "NCCL" not in line:  # most lines of a job log: the program's own output
            return
        # anchored first (the usual line); searched when a launcher put a prefix before NCCL's
        m = _PREFIX.match(line) or _PREFIX.search(line)
        if m is None:
            bare = _BARE_VERSION.match(line)
            if bare and self.bare_version is None:
                self.bare_version = (bare.group("version"), number)
                self.nccl_lines += 1
            return
        self.nccl_lines += 1
        host, pid, tid = _host(m.group("host")), int(m.group("pid")), int(m.group("tid"))
        proc = self.process(host, pid, number)
        tid_key = (host, pid, tid)
        msg = m.group("msg")
        if m.group("level") == "WARN":
            proc.count("nccl.warnings", number, first=inert(msg, 200))
            return
        if m.group("level") != "INFO":
            return
        self._info(proc, tid_key, number, msg)

    def _info(self, proc: _Process, tid_key: tuple[str, int, int], number: int, msg: str) -> None:
        # the lines that come once per collective call (COLL, TUNING subsystems) are tried first
        if "opCount" in msg and (m := _COLL.match(msg)) is not None:
            proc.count(f"nccl.coll:{_name_part(m.group('coll'))}", number, elements_total=int(m.group("count")))
        elif " Bytes -> Algo " in msg and (m := _TUNING.match(msg)) is not None:
            size = int(m.group("bytes"))
            proc.count(f"nccl.algo:{_name_part(m.group('coll'))}/{_name_part(m.group('algo'))}/"
                       f"{_name_part(m.group('proto'))}", number, bytes_min=size, bytes_max=size)
        elif (m := _VERSION.match(msg)) is not None:
            code = int(m.group("ma")) * 10000 + int(m.group("mi")) * 100 + int(m.group("pa"))
            proc.infos.setdefault("nccl.version", (float(code), number, {"version": inert(m.group("version"), 60)}))
        elif (m := _DRIVER.match(msg)) is not None:
            proc.infos.setdefault("nccl.cuda_driver", (float(m.group("v")), number, {}))
        elif (m := _NETWORK.match(msg)) is not None:
            if proc.network is None:
                proc.network = (_name_part(m.group("net")), number)
        elif (m := _INIT.search(msg)) is not None:
            self._init(proc, tid_key, number, m)
        elif (m := _NODES.search(msg)) is not None:
            comm = self.comm(proc, tid_key, m.group("comm"), number)
            assert comm is not None  # a pointer was given
            comm.rank, comm.nranks = int(m.group("rank")), int(m.group("nranks"))
            comm.values["nnodes"] = (float(m.group("nnodes")), number)
            comm.values["local_ranks"] = (float(m.group("local")), number)
        elif (m := _RING.match(msg)) is not None:
            comm = self.comm(proc, tid_key, None, number)
            if comm is not None:
                comm.rings.add(int(m.group("c")))
                comm.ring_count = int(m.group("n"))
                comm.attrs.setdefault("ring0", " ".join(m.group("order").split())[:200])
        elif (m := _TREES.match(msg)) is not None:
            comm = self.comm(proc, tid_key, None, number)
            if comm is not None:
                comm.values.setdefault("trees", (float(len(re.findall(r"\[\d+\]", m.group("trees")))), number))
        elif (m := _CONNECTION.match(msg)) is not None:
            proc.count(f"nccl.transport:{_name_part(_transport(m.group('via')))}", number)
        elif "channels" in msg and (found := _CHANNELS.findall(msg)):
            comm = self.comm(proc, tid_key, None, number)
            if comm is not None:
                for n, kind in found:
                    comm.values.setdefault(f"{kind}_channels", (float(n), number))
        elif (m := _TIMINGS.match(msg)) is not None:
            comm = self.comm(proc, tid_key, None, number)
            if comm is not None:
                comm.values.setdefault("init_time", (float(m.group("total")), number))
        elif (m := _ENV.match(msg)) is not None:
            proc.infos.setdefault(f"nccl.env:{_name_part(m.group('var'))}",
                                  (1.0, number, {"value": inert(m.group("value"), 200)}))

    def _init(self, proc: _Process, tid_key: tuple[str, int, int], number: int, m: re.Match[str]) -> None:
        state = m.group("state")
        if state == "Abort COMPLETE":
            proc.count("nccl.comm.aborts", number)
        if state in ("Destroy COMPLETE", "Abort COMPLETE"):
            self.current.pop(tid_key, None)
            return
        comm = self.comm(proc, tid_key, m.group("comm"), number)
        assert comm is not None  # a pointer was given
        comm.rank, comm.nranks = int(m.group("rank")), int(m.group("nranks"))
        comm.attrs.update(comm=m.group("comm"), comm_rank=comm.rank, cuda_dev=int(m.group("dev")),
                          bus_id=m.group("bus"), state="complete" if state == "Init COMPLETE" else "started")
        if m.group("nvml") is not None:
            comm.attrs["nvml_dev"] = int(m.group("nvml"))
        if m.group("cid") is not None:
            comm.attrs["comm_id"] = m.group("cid")
        comm.values["nranks"] = (float(comm.nranks), number)

    def events(self, path: Path, default_rank: int | None) -> Iterator[MetricEvent]:
        base = {"file": path.name}
        if self.bare_version is not None and not any("nccl.version" in p.infos for p in self.processes.values()):
            text, number = self.bare_version
            parts = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
            assert parts is not None  # the pattern matched these digits
            code = int(parts.group(1)) * 10000 + int(parts.group(2)) * 100 + int(parts.group(3))
            yield MetricEvent(name="nccl.version", value=float(code), kind="info", source="nccl_log",
                              rank=default_rank, attrs={**base, "line": number, "version": inert(text, 60)})
        for proc in sorted(self.processes.values(), key=lambda p: p.line):
            yield from self._process_events(proc, base, default_rank)

    def _process_events(self, proc: _Process, base: dict[str, Any], default_rank: int | None) -> Iterator[MetricEvent]:
        world = max((c for c in proc.comms.values() if c.nranks is not None),
                    key=lambda c: c.nranks or 0, default=None)  # the first of the largest
        rank = world.rank if world is not None else default_rank
        where = {**base, "host": proc.host, "pid": proc.pid}

        def event(name: str, value: float, kind: str, line: int, unit: str = "", /, **attrs: Any) -> MetricEvent:
            return MetricEvent(name=name, value=value, kind=kind, unit=unit, source="nccl_log", rank=rank,
                               attrs={**where, "line": line, **attrs})

        for name, (value, line, attrs) in proc.infos.items():
            yield event(name, value, "info", line, "", **attrs)
        nnodes = [c.values["nnodes"][0] for c in proc.comms.values() if "nnodes" in c.values]
        most_nodes = max(nnodes) if nnodes else math.nan
        if proc.network is not None:
            net, line = proc.network
            yield event(f"nccl.network:{net}", most_nodes, "info", line, "nodes", network=net)
            if net.lower() == "socket" and most_nodes > 1:
                yield event("nccl.check:socket_across_nodes", float(line), "info", line, "line", network=net,
                            nnodes=int(most_nodes))
        for comm in proc.comms.values():
            attrs = dict(comm.attrs)
            attrs.setdefault("comm", comm.ptr)
            if comm.rank is not None:
                attrs.setdefault("comm_rank", comm.rank)
            if comm.ring_count is not None:
                comm.values.setdefault("rings", (float(comm.ring_count), comm.line))
            for suffix, (value, line) in comm.values.items():
                unit = "s" if suffix == "init_time" else ""
                yield event(f"nccl.comm.{suffix}", value, "gauge" if unit else "info", line, unit, **attrs)
        for name, (count, line, attrs) in proc.counters.items():
            yield event(name, float(count), "counter", line, "", **attrs)


def read_nccl_log(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Parse one ``NCCL_DEBUG=INFO`` log (every process in it) into metric events."""
    log = _Log()
    for number, line in text_lines(path, _WHAT):
        log.feed(number, line)
    if log.nccl_lines == 0:
        raise UnsupportedInputError(path, None, f"{_WHAT}: lines '<host>:<pid>:<tid> [<dev>] NCCL INFO ...'; "
                                    "found none (was NCCL_DEBUG=INFO set for this run?)")
    default = rank if rank is not None else rank_from_name(path)
    return list(log.events(path, default))


def looks_like_nccl_log(text: str) -> bool:
    """Whether ``text`` (the head of a file) holds an NCCL debug line."""
    return any(_PREFIX.search(line) or _BARE_VERSION.match(line) for line in text.splitlines())


class NcclLogProvider(TextLogProvider):
    """NCCL versions, transports, rings/trees and communicators from ``NCCL_DEBUG=INFO`` logs."""

    name = "nccl_log"
    patterns = ("*.log", "*.txt", "*.out", "*.err")
    what = "NCCL_DEBUG=INFO log"
    expected = _WHAT
    head_bytes = 1 << 20  # job logs start with the launcher's and the program's own output

    def looks_like(self, head: str) -> bool:
        """An NCCL debug line."""
        return looks_like_nccl_log(head)

    def read(self, path: Path) -> list[MetricEvent]:
        """One file's events."""
        return read_nccl_log(path, self.rank)
