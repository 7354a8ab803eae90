"""What an ``NCCL_DEBUG=INFO`` log says about each communicator's links, and the bus bandwidth to expect from them.

Per communicator (its ``commId``, shared by its ranks; the lines of one process are tied to it by the
thread that initialised it), the log says: ranks, nodes and ranks per node (``comm … nRanks … nNodes …
localRanks``), collective channels (``N coll channels``), the transport of each channel connection
(``… via NET/IB/0``, ``via P2P/IPC``, ``via SHM``), the network (``Using network IB``) and its NICs
(``NET/IB : Using [0]mlx5_0:1/IB``, ``NET/Socket : Using [0]eth0``), an ``NCCL_ALGO``/``NCCL_PROTO`` set
by the environment, and, with ``NCCL_DEBUG_SUBSYS`` including ``GRAPH``, NCCL's own search result per
graph: ``Pattern <p>, crossNic <c>, nChannels <n>, bw <intra>/<inter>, type <intra>/<inter>`` (GB/s per
channel; ``src/graph/search.cc``). The same reader as the ``nccl_log`` provider's lines (its patterns).

:func:`expected_busbw` turns that into the bus bandwidth a collective of the communicator can expect
(per direction, GB/s, NCCL-tests' definition), with where it came from: NCCL's ring estimate
(``nChannels × bw`` of the ring graph, inter-node ``bw`` when the communicator spans nodes) when the log
has the graph line; else, for a communicator inside one node whose connections are P2P over NVLink
(graph type ``NVL``) or unknown, the GPU's NVLink figure from the hardware table (``kineto.peaks``);
else "not measured" with the reason, naming the transport: TCP sockets between nodes, an InfiniBand NIC
whose speed the log does not print. The Kineto collectives take it (option ``nccl_log`` of the
``collectives`` analysis) in place of their guess from the GPU count.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from my_utils.profiling.formats._text import inert, text_lines
from my_utils.profiling.formats.nccl_log import (
    _CHANNELS,
    _CONNECTION,
    _ENV,
    _INIT,
    _NETWORK,
    _NODES,
    _PREFIX,
    _transport,
)

_GRAPH = re.compile(r"^Pattern (?P<pattern>\d+), crossNic (?P<cross>\d+), nChannels (?P<n>\d+), "
                    r"bw (?P<intra>[\d.]+)/(?P<inter>[\d.]+), type (?P<ti>\w+)/(?P<tx>\w+)")
_NICS = re.compile(r"^NET/(?P<net>IB|Socket) : Using (?P<list>(?:\s*\[\d+\]\S+)+)")
#: NCCL's graph patterns (``src/include/graph.h``): the ring is the one a ring collective's bandwidth follows.
PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "NVLS", 6: "CollNet direct"}
RING = 4


@dataclass(frozen=True)
class GraphLine:
    """One graph NCCL's topology search chose (``NCCL_DEBUG_SUBSYS=GRAPH``): channels and GB/s per channel."""

    pattern: int
    channels: int
    bw_intra: float
    bw_inter: float
    type_intra: str
    type_inter: str
    line: int


@dataclass
class _Fold:
    comm_id: str
    nranks: int
    line: int
    nnodes: int | None = None
    local_ranks: set[int] = field(default_factory=set)
    channels: int | None = None
    transports: dict[str, int] = field(default_factory=dict)
    graphs: list[GraphLine] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class CommTopology:
    """One communicator's links as the log describes them (module docstring)."""

    comm_id: str
    nranks: int
    nnodes: int | None
    local_ranks: str
    coll_channels: int | None
    transports: tuple[str, ...]
    network: str | None
    nics: tuple[str, ...]
    graphs: tuple[GraphLine, ...]
    hosts: int
    env: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class NcclTopology:
    """Every communicator of one log, the largest first."""

    file: str
    comms: tuple[CommTopology, ...]

    def for_group(self, group_size: int) -> CommTopology | None:
        """The communicator of ``group_size`` ranks (the first initialised of that size), None when none."""
        return next((c for c in sorted(self.comms, key=lambda c: c.line) if c.nranks == group_size), None)

    def tables(self, gpu: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """``nccl_topology``: one row per communicator with its expected bus bandwidth and why."""
        rows = []
        for c in self.comms:
            gbps, why = expected_busbw(c, gpu)
            rows.append({"comm_id": c.comm_id, "nranks": c.nranks, "nnodes": c.nnodes, "local_ranks": c.local_ranks,
                         "coll_channels": c.coll_channels, "transports": ", ".join(c.transports),
                         "network": c.network, "nics": ", ".join(c.nics),
                         "graphs": "; ".join(f"{PATTERNS.get(g.pattern, g.pattern)} {g.channels}ch "
                                             f"{g.bw_intra:g}/{g.bw_inter:g} GB/s {g.type_intra}/{g.type_inter}"
                                             for g in c.graphs),
                         "env": ", ".join(c.env), "expected_busbw_gbps": gbps if gbps == gbps else None,
                         "expected_from": why, "line": c.line})
        return {"nccl_topology": rows}


def read_topology(path: str | Path) -> NcclTopology:
    """Every communicator of an ``NCCL_DEBUG=INFO`` log (any number of processes interleaved)."""
    p = Path(path)
    comms: dict[str, _Fold] = {}
    current: dict[tuple[str, int, int], str] = {}
    network: dict[tuple[str, int], str] = {}
    nics: dict[str, list[str]] = {}
    env: dict[str, str] = {}
    for number, text in text_lines(p, "an NCCL_DEBUG=INFO log"):
        if "NCCL INFO" not in text:
            continue
        m = _PREFIX.match(text) or _PREFIX.search(text)
        if m is None or m.group("level") != "INFO":
            continue
        host, pid, tid = inert(m.group("host"), 100), int(m.group("pid")), int(m.group("tid"))
        msg = m.group("msg")
        key = (host, pid, tid)
        if (g := _INIT.search(msg)) is not None:
            if not g.group("state").startswith("Init"):  # destroy or abort: the thread's setup is over
                current.pop(key, None)
                continue
            cid = g.group("cid") or f"{host}:{pid}:{g.group('comm')}"
            fold = comms.setdefault(cid, _Fold(cid, int(g.group("nranks")), number))
            fold.hosts.add(host)
            fold.ranks.add(int(g.group("rank")))
            current[key] = cid
            continue
        cid_now = current.get(key)
        fold_now = comms.get(cid_now) if cid_now is not None else None
        if (g := _NETWORK.match(msg)) is not None:
            network[(host, pid)] = inert(g.group("net"), 40)
        elif (g := _NICS.match(msg)) is not None:
            nics.setdefault(g.group("net"), [])
            for nic in re.findall(r"\[\d+\]([^\s:<]+(?::\d+/\w+)?)", g.group("list")):  # the NIC, not its address
                if nic not in nics[g.group("net")]:
                    nics[g.group("net")].append(inert(nic, 60))
        elif (g := _ENV.match(msg)) is not None and g.group("var") in ("NCCL_ALGO", "NCCL_PROTO"):
            env[g.group("var")] = inert(g.group("value"), 60)
        elif fold_now is None:
            continue
        elif (g := _NODES.search(msg)) is not None:
            fold_now.nnodes = int(g.group("nnodes"))
            fold_now.local_ranks.add(int(g.group("local")))
        elif (g := _CONNECTION.match(msg)) is not None:
            kind = _transport(g.group("via"))
            fold_now.transports[kind] = fold_now.transports.get(kind, 0) + 1
        elif (g := _CHANNELS.search(msg)) is not None and g.group("kind") == "coll":
            fold_now.channels = int(g.group("n"))
        elif (g := _GRAPH.match(msg)) is not None:
            fold_now.graphs.append(GraphLine(int(g.group("pattern")), int(g.group("n")), float(g.group("intra")),
                                             float(g.group("inter")), g.group("ti"), g.group("tx"), number))
    out = []
    for c in comms.values():
        nets = sorted({network[k] for k in network if k[0] in c.hosts})
        transports = tuple(sorted(c.transports))
        net_kind = next((t.split("/")[1] for t in transports if t.startswith("NET/")), None)
        out.append(CommTopology(
            c.comm_id, c.nranks, c.nnodes, "-".join(map(str, sorted({min(c.local_ranks), max(c.local_ranks)})))
            if c.local_ranks else "", c.channels, transports, ", ".join(nets) or None,
            tuple(nics.get(net_kind or "", [])), tuple(_dedup(c.graphs)), len(c.hosts),
            tuple(f"{k}={v}" for k, v in sorted(env.items())), c.line))
    out.sort(key=lambda c: (-c.nranks, c.line))
    return NcclTopology(p.name, tuple(out))


def _dedup(graphs: list[GraphLine]) -> list[GraphLine]:
    """Each rank prints the graph: one per (pattern, channels, bandwidths, types)."""
    seen: dict[tuple[Any, ...], GraphLine] = {}
    for g in graphs:
        seen.setdefault((g.pattern, g.channels, g.bw_intra, g.bw_inter, g.type_intra, g.type_inter), g)
    return list(seen.values())


def expected_busbw(comm: CommTopology, gpu: str | None = None) -> tuple[float, str]:
    """The bus bandwidth (GB/s per direction) a collective of ``comm`` can expect, and where it came from."""
    spans_nodes = (comm.nnodes or 1) > 1 or any(t.startswith("NET/") for t in comm.transports)
    ring = next((g for g in comm.graphs if g.pattern == RING), None)
    if ring is not None:
        per_channel = ring.bw_inter if spans_nodes else ring.bw_intra
        return ring.channels * per_channel, (
            f"NCCL's ring estimate from the log (line {ring.line}): {ring.channels} channels × {per_channel:g} GB/s "
            f"({'inter-node' if spans_nodes else 'intra-node'}, path {ring.type_inter if spans_nodes else ring.type_intra})")
    if spans_nodes:
        net = next((t for t in comm.transports if t.startswith("NET/")), f"NET/{comm.network or '?'}")
        nics = f" over {', '.join(comm.nics)}" if comm.nics else ""
        if net == "NET/Socket":
            return math.nan, (f"not measured: {comm.nnodes or 'several'} nodes joined by TCP sockets (NET/Socket{nics}); "
                              "the log gives no speed for them (NCCL_DEBUG_SUBSYS=GRAPH prints NCCL's estimate)")
        return math.nan, (f"not measured: {comm.nnodes or 'several'} nodes over {net}{nics}; the log prints no NIC "
                          "speed (NCCL_DEBUG_SUBSYS=GRAPH prints NCCL's estimate)")
    if gpu:
        from my_utils.profiling.hardware.peaks import nvlink_bandwidth

        peak = nvlink_bandwidth(gpu)
        if peak is not None and (not comm.transports or any(t.startswith("P2P") for t in comm.transports)):
            return peak.value / 1e9, (f"NVLink of {peak.model} per direction ({peak.source}); one node, "
                                      f"transports {', '.join(comm.transports) or 'not logged'}")
    return math.nan, (f"not measured: one node, transports {', '.join(comm.transports) or 'not logged'}, and no "
                      f"NVLink figure{' for ' + gpu if gpu else ' (no GPU named)'}")


@lru_cache(maxsize=16)
def cached_topology(path: str) -> NcclTopology:
    """:func:`read_topology` once per path and process (each rank's worker asks for the same log)."""
    return read_topology(path)
