"""NcclLogProvider on the two real NCCL_DEBUG=INFO logs, with totals counted independently, and bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError
from my_utils.profiling.formats.nccl_log import NcclLogProvider, read_nccl_log

SOCKET_LOG = "nccl/dsl__example_2.502726.o.nccl2.22.3.log"     # 2 nodes over TCP sockets, NCCL 2.22.3
IB_LOG = "nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log"  # 2 nodes over InfiniBand, NCCL 2.20.5


def _by_host(text: str, needle: str) -> Counter[str]:
    """How many lines holding ``needle`` each host wrote (plain string operations)."""
    return Counter(line.split(":", 1)[0] for line in text.splitlines() if needle in line and " NCCL " in line)


def test_socket_log_per_rank(real_fixtures: Path) -> None:
    path = real_fixtures / SOCKET_LOG
    text = path.read_text()
    events = NcclLogProvider.from_input(path).collect()
    assert {e.rank for e in events} == {0, 1} and {e.source for e in events} == {"nccl_log"}
    hosts = {e.rank: e.attrs["host"] for e in events}
    assert hosts == {0: "ault42", 1: "ault43"}
    version = [e for e in events if e.name == "nccl.version"]
    assert [(e.rank, e.value, e.attrs["version"]) for e in version] == [(0, 22203.0, "2.22.3+cuda11.8"),
                                                                          (1, 22203.0, "2.22.3+cuda11.8")]
    sockets = _by_host(text, "via NET/Socket")
    for rank, host in hosts.items():
        (transport,) = [e for e in events if e.rank == rank and e.name.startswith("nccl.transport:")]
        assert transport.name == "nccl.transport:NET/Socket" and transport.value == sockets[host] == 4
        (net,) = [e for e in events if e.rank == rank and e.name.startswith("nccl.network:")]
        assert net.name == "nccl.network:Socket" and net.value == 2.0 and net.unit == "nodes"
        # the check names the line that says so, counted here from the text itself
        line = 1 + next(i for i, t in enumerate(text.splitlines()) if t.startswith(f"{host}:")
                        and t.endswith("Using network Socket"))
        (check,) = [e for e in events if e.rank == rank and e.name == "nccl.check:socket_across_nodes"]
        assert check.value == line == check.attrs["line"] and check.attrs["nnodes"] == 2
    comm = {e.name: e for e in events if e.rank == 0 and e.name.startswith("nccl.comm.")}
    assert comm["nccl.comm.nranks"].value == 2 and comm["nccl.comm.nnodes"].value == 2
    assert comm["nccl.comm.rings"].value == 2 and comm["nccl.comm.trees"].value == 2
    assert comm["nccl.comm.init_time"].value == 0.08 and comm["nccl.comm.init_time"].unit == "s"
    assert comm["nccl.comm.nranks"].attrs["bus_id"] == "41000" and comm["nccl.comm.nranks"].attrs["cuda_dev"] == 0
    env = {e.name: e.attrs["value"] for e in events if e.rank == 0 and e.name.startswith("nccl.env:")}
    assert env["nccl.env:NCCL_ALGO"] == "Ring" and env["nccl.env:NCCL_PROTO"] == "Simple"


def test_ib_log_two_communicators_per_rank(real_fixtures: Path) -> None:
    path = real_fixtures / IB_LOG
    text = path.read_text()
    events = read_nccl_log(path)
    assert not [e for e in events if e.name.startswith("nccl.check:")]  # IB: nothing to flag
    assert {e.name for e in events if e.name.startswith("nccl.network:")} == {"nccl.network:IB"}
    # the version line NCCL prints without a host prefix belongs to no process
    (version,) = [e for e in events if e.name == "nccl.version"]
    assert version.rank is None and version.attrs["version"] == "2.20.5+cuda11.8"
    assert version.attrs["line"] == 1 + text.splitlines().index("NCCL version 2.20.5+cuda11.8")
    warns, aborts, ib = _by_host(text, "NCCL WARN"), _by_host(text, "Abort COMPLETE"), _by_host(text, "via NET/IB")
    for rank, host in ((0, "ault43"), (1, "ault44")):
        mine = {e.name: e for e in events if e.rank == rank and e.attrs.get("host") == host}
        assert mine["nccl.transport:NET/IB"].value == ib[host] == 8
        assert mine["nccl.comm.aborts"].value == aborts[host] == 1
        assert (mine["nccl.warnings"].value if "nccl.warnings" in mine else 0) == warns[host]
        nranks = [e for e in events if e.rank == rank and e.name == "nccl.comm.nranks"]
        assert len(nranks) == 2 and {e.attrs["comm_id"] for e in nranks} == {"0xf6c61d1c216d20e5",
                                                                             "0x806f7a883ece10f5"}
    assert warns["ault43"] == 4 and not warns["ault44"]


def test_rank_comes_from_the_largest_communicator(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(
        "[rank5]: h1:7:7 [5] NCCL INFO comm 0xa rank 1 nranks 2 cudaDev 5 nvmlDev 5 busId 5000 commId 0x1 - Init START\n"
        "h1:7:7 [5] NCCL INFO comm 0xa rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n"
        "[2025-12-02 10:00:00] h1:7:9 [5] NCCL INFO comm 0xb rank 5 nRanks 8 nNodes 1 localRanks 8 localRank 5 MNNVL 0\n"
        "h1:7:9 [5] NCCL INFO Channel 00/04 :    0   1   2   3   4   5   6   7\n"
        "h1:7:9 [5] NCCL INFO Channel 00/0 : 5[5] -> 6[6] via P2P/CUMEM/read\n"
        "h1:7:9 [5] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}\n"
        "h1:7:9 [5] NCCL INFO AllReduce: 1024 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}\n"
        "h1:7:9 [5] NCCL INFO AllReduce: 4096 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}\n"
        "h1:7:7 [5] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 "
        "comm 0xb [nranks=8] stream 0x3\n"
    )
    events = read_nccl_log(path)
    assert {e.rank for e in events} == {5}
    by = {e.name: e for e in events}
    assert by["nccl.comm.rings"].value == 4 and by["nccl.comm.rings"].attrs["comm"] == "0xb"
    assert by["nccl.transport:P2P"].value == 1
    assert by["nccl.algo:AllReduce/TREE/LL"].value == 2
    assert by["nccl.algo:AllReduce/TREE/LL"].attrs == {**by["nccl.algo:AllReduce/TREE/LL"].attrs,
                                                        "bytes_min": 1024, "bytes_max": 4096}
    assert by["nccl.coll:AllReduce"].value == 1 and by["nccl.coll:AllReduce"].attrs["elements_total"] == 1024


def test_untrusted_names_stay_inert(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("h:1:1 [0] NCCL INFO Using network <script>x</script>\u202e\n"
                    "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to " + "r" * 5000 + "\n")
    names = [e.name for e in read_nccl_log(path)]
    net = next(n for n in names if n.startswith("nccl.network:"))
    assert re.fullmatch(r"nccl\.network:[\w.+\-/]+", net) and "<" not in net
    long = next(e for e in read_nccl_log(path) if e.name == "nccl.env:NCCL_ALGO")
    assert len(long.attrs["value"]) <= 200


@pytest.mark.parametrize(("data", "kind", "match"), [
    (b"epoch 1 loss 2.3\nepoch 2 loss 2.1\n", UnsupportedInputError,
     r"x\.log: an NCCL_DEBUG=INFO log: lines .* found none \(was NCCL_DEBUG=INFO set for this run\?\)"),
    (b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nok\n\xc3\x28 bad\n", InputError,
     r"x\.log:line 3: an NCCL_DEBUG=INFO log \(UTF-8 text\)"),
    (b"\x00\x01\x02binary", UnsupportedInputError, r"x\.log: an NCCL_DEBUG=INFO log \(text\); found binary data"),
])
def test_bad_input(tmp_path: Path, data: bytes, kind: type, match: str) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(data)
    with pytest.raises(kind, match=match):
        NcclLogProvider.from_input(path).collect()


def test_ingest_exit_2_one_line_and_nothing_written(real_fixtures: Path, tmp_path: Path) -> None:
    bad = tmp_path / "train.log"
    bad.write_text("epoch 1 loss 2.3\n")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"run_id": "t", "providers": [
        {"provider": "nccl_log", "input": str(real_fixtures / SOCKET_LOG)},
        {"provider": "nccl_log", "input": str(bad)}]}))
    cmd = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()", "ingest", "--config", str(config),
           "--output-dir", str(tmp_path / "out")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and str(bad) in line and "NCCL_DEBUG=INFO" in line
    assert not (tmp_path / "out").exists()


_LINES = st.sampled_from([
    "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init COMPLETE",
    "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
    "h:1:2 [0] NCCL INFO Using network Socket", "h:1:2 [0] NCCL INFO Channel 00/02 :    0   1",
    "h:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1", "NCCL version 2.1.1", "h:1:2 [0] misc.cc:1 NCCL WARN x",
    "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Abort COMPLETE", "plain text",
])


@settings(derandomize=True, database=None, max_examples=60, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=40)), max_size=12))
def test_any_text_gives_events_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "n.log"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        events = read_nccl_log(path)
    except MyUtilsError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert events and all(e.source == "nccl_log" for e in events)


def test_provider_contract(real_fixtures: Path, tmp_path: Path) -> None:
    from my_utils.core.testing import check_metrics_provider

    bad = tmp_path / "bad.log"
    bad.write_bytes(b"h:1:1 [0] NCCL INFO NCCL version 2.21.5\n\xff\n")
    unsupported = tmp_path / "train.log"
    unsupported.write_text("epoch 1\n")
    report = check_metrics_provider("nccl_log", real_fixtures / IB_LOG, bad_input=bad, unsupported_input=unsupported)
    assert report.name == "nccl_log" and not report.second_collect


# -- boundaries and units (issue 36): each value at its threshold, each unit with a value whose scale error shows

def _log(tmp_path: Path, *lines: str) -> dict[str, list[Any]]:
    path = tmp_path / "job.log"
    path.write_text("".join(line + "\n" for line in lines))
    by: dict[str, list[Any]] = {}
    for e in read_nccl_log(path):
        by.setdefault(e.name, []).append(e)
    return by


@pytest.mark.parametrize(("nodes", "flagged"), [(1, False), (2, True), (3, True)])
def test_sockets_are_flagged_from_two_nodes_on(tmp_path: Path, nodes: int, flagged: bool) -> None:
    by = _log(tmp_path, "h:1:1 [0] NCCL INFO Using network Socket",
              f"h:1:1 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes {nodes} localRanks 1 localRank 0 MNNVL 0")
    (net,) = by["nccl.network:Socket"]
    assert (net.value, net.unit) == (float(nodes), "nodes")
    assert ("nccl.check:socket_across_nodes" in by) is flagged
    if flagged:
        (check,) = by["nccl.check:socket_across_nodes"]
        assert (check.value, check.attrs["line"], check.attrs["nnodes"]) == (1.0, 1, nodes)


def test_ib_across_nodes_is_not_flagged(tmp_path: Path) -> None:
    by = _log(tmp_path, "h:1:1 [0] NCCL INFO Using network IB",
              "h:1:1 [0] NCCL INFO comm 0xa rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0")
    assert "nccl.check:socket_across_nodes" not in by and by["nccl.network:IB"][0].value == 2.0


def test_init_time_is_seconds_as_nccl_prints_it(tmp_path: Path) -> None:
    by = _log(tmp_path, "h:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1 - "
              "Init START",
              "h:1:1 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 2 total 1.52 (kernels 0.21, alloc "
              "0.05, bootstrap 1.10, allgathers 0.01, topo 0.10, graphs 0.01, connections 0.03, rest 0.01)")
    (init,) = by["nccl.comm.init_time"]
    assert (init.value, init.unit, init.kind) == (1.52, "s", "gauge")  # not 1520 (ms) nor 0.00152
    assert {e.unit for name, es in by.items() if name.startswith("nccl.comm.") and name != "nccl.comm.init_time"
            for e in es} == {""}


@pytest.mark.parametrize(("text", "code"), [("2.9.9", 20909), ("2.10.3", 21003), ("2.22.3+cuda12.4", 22203),
                                            ("3.0.0", 30000)])
def test_version_code_orders_versions(tmp_path: Path, text: str, code: int) -> None:
    by = _log(tmp_path, f"h:1:1 [0] NCCL INFO NCCL version {text}")
    assert by["nccl.version"][0].value == code and by["nccl.version"][0].attrs["version"] == text
    bare = _log(tmp_path, f"NCCL version {text}")
    assert bare["nccl.version"][0].value == code and bare["nccl.version"][0].rank is None


def test_equal_communicators_keep_the_first_ones_rank(tmp_path: Path) -> None:
    by = _log(tmp_path, "h:1:1 [0] NCCL INFO comm 0xa rank 1 nRanks 4 nNodes 1 localRanks 4 localRank 1 MNNVL 0",
              "h:1:2 [0] NCCL INFO comm 0xb rank 3 nRanks 4 nNodes 1 localRanks 4 localRank 3 MNNVL 0",
              "h:1:3 [0] NCCL INFO comm 0xc rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0")
    assert {e.rank for es in by.values() for e in es} == {1}


def test_tuner_sizes_are_bytes_and_calls_count_elements(tmp_path: Path) -> None:
    by = _log(tmp_path, "h:1:1 [0] NCCL INFO AllGather: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
              "h:1:1 [0] NCCL INFO AllGather: 524288 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
              "h:1:1 [0] NCCL INFO AllGather: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
              "h:1:1 [0] NCCL INFO AllGather: opCount 1 sendbuff 0x1 recvbuff 0x2 count 300 datatype 7 op 0 root 0 "
              "comm 0xb [nranks=8] stream 0x3",
              "h:1:1 [0] NCCL INFO AllGather: opCount 2 sendbuff 0x1 recvbuff 0x2 count 700 datatype 7 op 0 root 0 "
              "comm 0xb [nranks=8] stream 0x3")
    (algo,) = by["nccl.algo:AllGather/RING/SIMPLE"]
    assert (algo.value, algo.attrs["bytes_min"], algo.attrs["bytes_max"]) == (3.0, 524288, 2097152)
    (coll,) = by["nccl.coll:AllGather"]
    assert (coll.value, coll.attrs["elements_total"]) == (2.0, 1000)


def test_channels_of_each_kind_and_not_the_per_peer_count(tmp_path: Path) -> None:
    by = _log(tmp_path, "h:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
              "h:1:1 [0] NCCL INFO 24 coll channels, 4 collnet channels, 0 nvls channels, 32 p2p channels, "
              "2 p2p channels per peer")
    assert [by[f"nccl.comm.{k}_channels"][0].value for k in ("coll", "collnet", "nvls", "p2p")] == [24, 4, 0, 32]


def test_a_bare_version_line_is_not_a_second_version_when_processes_say_theirs(tmp_path: Path) -> None:
    """NCCL prints 'NCCL version' once without its prefix and again per process: one version per process."""
    by = _log(tmp_path, "NCCL version 2.21.5+cuda12.4",
              "h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
              "h:2:1 [1] NCCL INFO NCCL version 2.21.5+cuda12.4")
    assert [(e.attrs["pid"], e.value) for e in by["nccl.version"]] == [(1, 22105.0), (2, 22105.0)]
