"""What NCCL INFO logs say about links (``nccl.topology``): the two real logs (counted here with regular
expressions over their lines), a log with NCCL's graph lines (hand-built, see data/MANIFEST.md), and the expected
bus bandwidth fed into the Kineto collectives."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.collectives import collective_rows
from my_utils.profiling.kineto.run import read_rank
from my_utils.profiling.nccl.topology import expected_busbw, read_topology

GRAPH_LOG = Path(__file__).resolve().parent / "data" / "nccl_graph_2nodes.log"
EXAMPLE = "nccl/dsl__example_2.502726.o.nccl2.22.3.log"
DEEPSPEED = "nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log"


@pytest.mark.parametrize(("key", "network"), [(EXAMPLE, "Socket"), (DEEPSPEED, "IB")])
def test_real_logs(real_fixtures: Any, key: str, network: str) -> None:
    path = real_fixtures / key
    text = Path(path).read_text()
    ids = sorted(set(re.findall(r"commId (0x[0-9a-f]+) - Init START", text)))
    topo = read_topology(path)
    assert sorted(c.comm_id for c in topo.comms) == ids
    vias = {re.sub(r"^(NET/\w+).*", r"\1", v) for v in re.findall(r" via (\S+)", text)}
    for c in topo.comms:
        assert c.nranks == 2 and c.nnodes == 2 and c.coll_channels == 2
        assert set(c.transports) == vias and c.network == network
        gbps, why = expected_busbw(c, "NVIDIA GeForce RTX 3090")
        assert math.isnan(gbps) and why.startswith("not measured: 2 nodes")
        assert ("TCP sockets" in why) == (network == "Socket")
    if network == "IB":
        assert topo.comms[0].nics == ("mlx5_0:1/IB", "mlx5_1:1/RoCE")
    else:
        assert "NCCL_ALGO=Ring" in topo.comms[0].env and "148.187" not in topo.comms[0].nics[0]


def test_graph_lines_give_nccls_own_estimate() -> None:
    """The ring graph's channels × GB/s per channel: inter-node for the 16-rank communicator (8 × 20), intra-node for
    the 8-rank one (16 × 20); the 2-rank one has no graph line: the GPU's NVLink figure, or not measured."""
    topo = {c.nranks: c for c in read_topology(GRAPH_LOG).comms}
    assert set(topo) == {16, 8, 2}
    assert [(g.pattern, g.channels, g.bw_intra, g.bw_inter) for g in topo[16].graphs] == [(4, 8, 40.0, 20.0),
                                                                                          (1, 8, 40.0, 20.0)]
    assert topo[16].transports == ("NET/IB", "P2P") and topo[16].nnodes == 2
    assert expected_busbw(topo[16])[0] == 8 * 20.0
    assert expected_busbw(topo[8])[0] == 16 * 20.0
    h100, why = expected_busbw(topo[2], "NVIDIA H100 80GB HBM3")
    assert h100 == pytest.approx(450.0) and "NVLink" in why
    assert math.isnan(expected_busbw(topo[2])[0])
    rows = read_topology(GRAPH_LOG).tables()["nccl_topology"]
    assert [r["expected_busbw_gbps"] for r in rows] == [160.0, 320.0, None]


def _allreduce_trace(tmp_path: Path, group: int) -> Path:
    args = {"Collective name": "allreduce", "In msg nelems": 64 << 20, "Out msg nelems": 64 << 20,
            "Group size": group, "dtype": "Float", "Process Group Name": "0", "stream": 20, "correlation": 1,
            "device": 0}
    kernel = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 0, "dur": 10_000,
              "pid": 0, "tid": 20, "args": args}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [kernel]}))
    return path


def test_the_log_decides_the_collectives_link(tmp_path: Path) -> None:
    """A 16-rank allreduce on an 8-GPU H100 host: without the log its link is not measured (the group leaves the host);
    with the log, NCCL's 160 GB/s estimate for that communicator is the link, and the bus bandwidth is judged."""
    d = read_rank(_allreduce_trace(tmp_path, 16)).data
    d = replace(d, context=dict(d.context, gpu="NVIDIA H100 80GB HBM3", gpu_count=8))
    (plain,) = collective_rows(d)
    assert math.isnan(plain.link_gbps) and "16 ranks > 8 GPUs" in plain.link
    (logged,) = collective_rows(d, nccl_log=str(GRAPH_LOG))
    assert logged.link_gbps == 160.0 and "NCCL's ring estimate" in logged.link
    busbw = (64 << 20) * 4 / 10e-3 / 1e9 * 2 * 15 / 16
    assert logged.busbw_gbps == pytest.approx(busbw)
    assert logged.link_pct == pytest.approx(100 * busbw / 160.0)
    assert logged.flagged == (busbw / 160.0 < 0.25)


def test_the_collectives_option(tmp_path: Path) -> None:
    """``options={"collectives": {"nccl_log": ...}}`` reaches the analysis in its worker."""
    from my_utils.profiling.kineto import analyze_traces

    rows = analyze_traces(_allreduce_trace(tmp_path, 16), executor="serial", analyses=["collectives"],
                          options={"collectives": {"nccl_log": str(GRAPH_LOG)}}).to_rows()["kineto_collectives"]
    assert rows[0]["link_gbps"] == 160.0 and rows[0]["link"].endswith("[NCCL log nccl_graph_2nodes.log]")
