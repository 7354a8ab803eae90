"""The Kineto facts of the diagnosis contract, against values recomputed from the raw traces (gzip+json).

``critical_path.coverage``, ``kernels.top``, ``launch.short_kernels`` (kernels only), ``context.hosts``,
``comm.wait`` and ``stragglers.*`` on the shared captures of diagnosis/CASES.md (real54_v100, rank_pair)
and on generated traces built to be each case and to look like it but not be.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.facts import build_facts
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.contract_facts import contract_facts

REAL54 = "hta/df_index_resolver.json.gz"
PAIR = ("hta/trace_filter__sampled_rank-0.json.gz", "hta/trace_filter__sampled_rank-1.json.gz")
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
            "cudaMemsetAsync"}


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def real54(real_fixtures: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = real_fixtures / "kineto" / REAL54
    rows = analyze_traces(path, executor="serial").to_rows()
    return _events(path), {f.id: f for f in build_facts({}, rows, {})}


def test_coverage_states_the_path_over_its_step(real54: Any) -> None:
    """real54's default window is ProfilerStep#2 (345,770 µs in the raw trace, the median of 5 steps); its path is
    238,893 µs (HTA f4d0062 on the same step, cudaMemcpyAsync kept out of its runtime-lock chaining)."""
    events, facts = real54
    steps = sorted((e["dur"], e["name"]) for e in events if e["name"].startswith("ProfilerStep#"))
    assert steps[2] == (345770, "ProfilerStep#2")
    cov = facts["critical_path.coverage:rank1"]
    assert cov.number == pytest.approx(100 * 238893 / 345770)
    assert cov.denominator_value == pytest.approx(345.770)
    assert cov.detail == "path 238.9 ms of a 345.8 ms window (ProfilerStep#2 (median of 5 steps))"


def test_kernels_top_is_the_largest_share_of_kernel_time(real54: Any) -> None:
    """Kernel time is every kernel event's duration (copies and sets, categories gpu_memcpy/gpu_memset, left out);
    the largest name is the NCCL all-reduce, 357.3 ms in CASES.md."""
    events, facts = real54
    per: Counter[str] = Counter()
    launches: Counter[str] = Counter()
    for e in events:
        if e.get("cat") == "kernel":
            per[e["name"]] += e["dur"]
            launches[e["name"]] += 1
    name, us = per.most_common(1)[0]
    top = facts["kernels.top:rank1"]
    assert name.startswith("ncclKernel_AllReduce") and us == pytest.approx(357_300, abs=100)
    assert top.number == pytest.approx(100 * us / sum(per.values()))
    assert top.denominator_value == pytest.approx(sum(per.values()) / 1e3)
    assert top.label == f"kernel time in {name}" and f"in {launches[name]:,} launches" in top.detail


def test_short_kernels_count_kernels_only(real54: Any) -> None:
    """11,913 of 22,290 launches ran shorter than their call, but 2,920 of those launches are memory copies and
    sets: of the 19,370 kernels (their launch call ≤ 50 µs and longer than the kernel), 9,515 are short."""
    events, facts = real54
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime" and e["name"] in LAUNCHES}
    kernels = short = copies = 0
    for e in events:
        call = calls.get((e.get("args") or {}).get("correlation"))
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or call is None:
            continue
        if e["cat"] != "kernel":
            copies += 1
            continue
        kernels += 1
        short += call["dur"] <= 50 and e["dur"] < call["dur"]
    assert (kernels, short, copies) == (19370, 9515, 2920)
    fact = facts["launch.short_kernels:rank1"]
    assert fact.number == pytest.approx(100 * short / kernels) and fact.denominator_value == kernels
    assert fact.detail == "9,515 of 19,370 kernels"


def test_one_trace_is_one_host_and_two_unnamed_ones_are_not_measured(real54: Any, real_fixtures: Any) -> None:
    """A single trace is one process on one host; the rank pair names no host (no host_name, no
    tensorboard_trace_handler file name), so the host count is not measured rather than guessed."""
    facts = real54[1]
    assert facts["context.hosts"].number == 1
    rows = analyze_traces([real_fixtures / "kineto" / p for p in PAIR], executor="serial",
                          analyses=["arrivals"]).to_rows()
    hosts = {f.id: f for f in contract_facts(rows)}["context.hosts"]
    assert not hosts.measured and "no host recorded for ranks 0, 1" in hosts.value.reason


def test_an_empty_window_gives_coverage_not_measured_with_the_reason(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 1,
               "tid": 1} for n, ts, dur in ((1, 0, 49), (2, 100, 49))]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [*events, {"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 5, "pid": 0, "tid": 7, "args": {"stream": 7}}]}))
    rows = analyze_traces(path, executor="serial", analyses=["critical_path"]).to_rows()
    cov = {f.id: f for f in contract_facts(rows)}["critical_path.coverage"]
    assert not cov.measured and "no CPU operators or runtime calls" in cov.value.reason


def _arrival_trace(path: Path, rank: int, host: str | None, starts: list[float], dur: float = 1000) -> Path:
    """A rank whose all-reduces start at ``starts`` (epoch µs), each carrying torch's collective arguments."""
    events = []
    for seq, ts in enumerate(starts):
        events.append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "ts": ts,
                       "dur": dur, "pid": 0, "tid": 20,
                       "args": {"stream": 20, "correlation": seq, "device": 0, "Collective name": "allreduce",
                                "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 6, "dtype": "Float",
                                "Process Group Name": "0", "Seq": seq}})
    meta: dict[str, Any] = {"distributedInfo": {"rank": rank, "world_size": 6}}
    if host is not None:
        meta["host_name"] = host
    path.write_text(json.dumps({**meta, "traceEvents": events}))
    return path


def _run(tmp_path: Path, lateness: dict[int, tuple[str | None, float]]) -> dict[str, Any]:
    base = 1_700_000_000_000_000.0
    paths = [_arrival_trace(tmp_path / f"rank{r}.json", r, host, [base + k * 100_000 + late for k in range(5)],
                            dur=1000 + 25_000)
             for r, (host, late) in lateness.items()]
    rows = analyze_traces(paths, executor="serial", analyses=["arrivals"]).to_rows()
    return {f.id: f for f in contract_facts(rows)} | {"_rows": rows}


def test_a_late_host_is_the_straggler_not_its_last_rank(tmp_path: Path) -> None:
    """Ring-like: ranks 0-2 on host a44 arrive together (spread 2 ms), ranks 3-5 on a43 18-20 ms later; rank 5 is
    last by under 1 ms. The straggler is host a43 (18.85 ms median lag), not rank 5."""
    lateness = {0: ("a44", 0), 1: ("a44", 1500), 2: ("a44", 2000), 3: ("a43", 18500), 4: ("a43", 19000),
                5: ("a43", 19800)}
    facts = _run(tmp_path, lateness)
    host = facts["stragglers.host"]
    assert host.label == "host a43 arrives late at collectives" and host.ranks == (3, 4, 5)
    assert host.number == pytest.approx((19000 - 1500) / 1e3)  # host medians: a43 19,000 µs, a44 1,500 µs
    assert "a44 (ranks 0, 1, 2): 0.00 ms behind, spread 2.00 ms inside" in host.detail
    assert "stragglers.rank" not in facts and facts["context.hosts"].number == 2


def test_one_slow_rank_on_a_host_is_named(tmp_path: Path) -> None:
    """Looks like the above but is not: one host, and one rank (4) arrives 20 ms after the others, which arrive
    within 0.5 ms: no host straggler, rank 4 named; every other rank waited ~20 ms inside each all-reduce."""
    lateness = {r: ("a44", 0 if r != 4 else 20_000) for r in range(6)}
    lateness[1] = ("a44", 500)
    facts = _run(tmp_path, lateness)
    assert "stragglers.host" not in facts and facts["context.hosts"].number == 1
    rank = facts["stragglers.rank"]
    assert rank.ranks == (4,) and rank.number == pytest.approx(20.0)
    wait = facts["comm.wait:rank0"]
    assert wait.number == pytest.approx(5 * 20_000 / 1e3) and "mostly for rank 4" in wait.detail
    assert facts["comm.wait:rank4"].number == 0


def test_working_and_waiting_on_the_rank_pair_match_the_raw_kernels(real_fixtures: Any) -> None:
    """Rank pair: the k-th NCCL kernel of each name on rank 0 and rank 1 is one collective; a rank waits from its
    own start to the later rank's (at most its kernel's length). Recomputed here from the raw events."""
    starts: dict[int, dict[str, list[tuple[float, float, str | None]]]] = {}
    for rank, name in enumerate(PAIR):
        events = _events(real_fixtures / "kineto" / name)
        calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
        main = next(e["tid"] for e in events if e["name"].startswith("ProfilerStep#"))
        ranges = [e for e in events if e.get("cat") == "user_annotation" and not e["name"].startswith(
            ("ProfilerStep#", "nccl:"))]

        def region(call: dict[str, Any], ranges: list[dict[str, Any]] = ranges, main: Any = main) -> str | None:
            for tid in (call["tid"], main):  # the launching thread, else the main thread
                open_ = [e for e in ranges if e["tid"] == tid and e["ts"] <= call["ts"] < e["ts"] + e["dur"]]
                if open_:
                    return max(open_, key=lambda e: (e["ts"], -e["dur"]))["name"]
            return None

        per: dict[str, list[tuple[float, float, str | None]]] = defaultdict(list)
        for e in sorted(events, key=lambda e: e["ts"]):
            if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
                per[e["name"]].append((e["ts"], e["dur"], region(calls[e["args"]["correlation"]])))
        starts[rank] = per
    wait = {0: 0.0, 1: 0.0}
    comm = {0: 0.0, 1: 0.0}
    by_region: dict[tuple[int, str | None], float] = defaultdict(float)
    for name in set(starts[0]) & set(starts[1]):
        for (t0, d0, r0), (t1, d1, r1) in zip(starts[0][name], starts[1][name], strict=False):
            wait[0] += min(max(t1 - t0, 0.0), d0)
            wait[1] += min(max(t0 - t1, 0.0), d1)
            by_region[(0, r0)] += min(max(t1 - t0, 0.0), d0)
            by_region[(1, r1)] += min(max(t0 - t1, 0.0), d1)
            comm[0] += d0
            comm[1] += d1
    rows = analyze_traces([real_fixtures / "kineto" / p for p in PAIR], executor="serial",
                          analyses=["arrivals"]).to_rows()
    got = {r["rank"]: r for r in rows["kineto_collective_wait"] if r["step"] is None}
    for rank in (0, 1):
        assert (got[rank]["wait_us"], got[rank]["comm_us"]) == (pytest.approx(wait[rank]), pytest.approx(comm[rank]))
        assert got[rank]["working_us"] == pytest.approx(comm[rank] - wait[rank])
    per_step = [r for r in rows["kineto_collective_wait"] if r["step"] is not None and r["rank"] == 0]
    assert sum(r["wait_us"] for r in per_step) == pytest.approx(wait[0])
    # rank 0's backward holds all-reduces that mostly wait for rank 1: its own time is the rest
    regions = {(r["rank"], r["region"]): r for r in rows["kineto_collective_wait_regions"]}
    assert {k: r["wait_us"] for k, r in regions.items()} == pytest.approx(dict(by_region))
    backward = regions[(0, "## backward ##")]
    assert backward["waited_for"] == 1 and backward["wait_us"] > backward["working_us"] > 0
    top = max((k for k in by_region if k[0] == 0), key=lambda k: by_region[k])
    fact = {f.id: f for f in contract_facts(rows)}["comm.wait:rank0"]
    assert fact.number == pytest.approx(wait[0] / 1e3)
    assert f"most of it under {top[1]} ({by_region[top] / 1e3:,.1f} ms of its" in fact.detail


def test_hosts_from_tensorboard_trace_handler_file_names(tmp_path: Path) -> None:
    """Without host_name in the metadata, torch's tensorboard_trace_handler names each file <host>_<pid>.<ms>:
    two ranks on ault43 and one on ault44 are 2 hosts, read from the file names (and said so)."""
    base = 1_700_000_000_000_000.0
    paths = [_arrival_trace(tmp_path / f"{host}_{pid}.1700000000000.pt.trace.json", rank, None,
                            [base + k * 100_000 for k in range(3)])
             for rank, host, pid in ((0, "ault43", 101), (1, "ault43", 102), (2, "ault44", 103))]
    rows = analyze_traces(paths, executor="serial", analyses=["arrivals"]).to_rows()
    assert [c["host"] for c in rows["kineto_context"]] == ["ault43", "ault43", "ault44"]
    hosts = {f.id: f for f in contract_facts(rows)}["context.hosts"]
    assert (hosts.number, hosts.detail) == (2, "ault43, ault44")
    assert hosts.source == "file name (tensorboard_trace_handler)"
