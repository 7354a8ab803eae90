"""NCCL Inspector analyses (``nccl.inspector``) on the hand-built two-process logs, every figure recomputed with json."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from my_utils.profiling.formats.nccl_inspector import size_bucket
from my_utils.profiling.nccl.inspector import analyze_inspector, escape_label

LOGS = Path(__file__).resolve().parent / "data" / "nccl_inspector"


def _records() -> list[tuple[str, dict]]:
    return [(p.name, json.loads(line)) for p in sorted(LOGS.glob("*.log"))
            for line in p.read_text().splitlines() if line.strip()]


def test_top_collectives_and_p2p() -> None:
    a = analyze_inspector(LOGS)
    want: dict[tuple, list[dict]] = defaultdict(list)
    for _f, r in _records():
        kind = "coll" if "coll_perf" in r else "p2p"
        perf = r[f"{kind}_perf"]
        key = (kind, r["header"]["id"], perf[kind], size_bucket(perf[f"{kind}_msg_size_bytes"]), perf.get("p2p_peer"))
        want[key].append(perf)
    got = {("coll", x.comm, x.op, x.size, None): x for x in a.top_collectives}
    got |= {("p2p", x.comm, x.op, x.size, x.peer): x for x in a.top_p2p}
    assert set(got) == set(want)
    for key, perfs in want.items():
        kind = key[0]
        row = got[key]
        times = [p[f"{kind}_exec_time_us"] for p in perfs]
        bws = [p[f"{kind}_busbw_gbs"] for p in perfs]
        assert row.count == len(perfs) and row.total_us == pytest.approx(sum(times))
        assert row.busbw_gmean_gbs == pytest.approx(math.exp(statistics.fmean(math.log(b) for b in bws)))
        assert row.busbw_min_gbs == min(bws)
    totals = [x.total_us for x in a.top_collectives]
    assert totals == sorted(totals, reverse=True)
    assert a.top_collectives[0].op == "AllReduce" and a.top_collectives[0].size == "256MiB"


def test_rank_skew_per_collective() -> None:
    """One collective = (communicator, collective, sequence number) on two ranks or more: skew = max - min time."""
    inst: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for _f, r in _records():
        if "coll_perf" in r:
            p = r["coll_perf"]
            inst[(r["header"]["id"], p["coll"], p["coll_sn"])][r["header"]["rank"]] = p
    skews: dict[tuple, list[float]] = defaultdict(list)
    for (comm, coll, _sn), by_rank in inst.items():
        if len(by_rank) >= 2:
            times = [p["coll_exec_time_us"] for p in by_rank.values()]
            skews[(comm, coll)].append(max(times) - min(times))
    got = {(x.comm, x.op): x for x in analyze_inspector(LOGS).rank_skew}
    assert set(got) == set(skews)
    for key, values in skews.items():
        assert got[key].instances == len(values)
        assert got[key].mean_skew_us == pytest.approx(statistics.fmean(values))
        assert got[key].max_skew_us == max(values)
    # the verbose ReduceScatter gives both ranks' start times: its spread and the last to start
    rs = got[("0x7f8c496ae9f661", "ReduceScatter")]
    starts = {r["metadata"]["pid"]: r["coll_perf"]["event_trace_ts"]["coll_start_ts"] for _f, r in _records()
              if "coll_perf" in r and "event_trace_ts" in r["coll_perf"]}
    assert rs.mean_start_spread_us == pytest.approx(max(starts.values()) - min(starts.values()), abs=0.01)
    assert rs.last_to_start == 2  # pid 48212 holds rank 2 of the 8-rank world


_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\} (?P<value>\S+)$')


def test_prometheus_text_reads_back() -> None:
    """Every sample line is ``name{labels} value``, each family has HELP and TYPE, and the values are the tables'."""
    a = analyze_inspector(LOGS)
    text = a.prometheus()
    families: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    declared = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group("labels")))
        families[m.group("name")].append((labels, float(m.group("value"))))
    assert declared == set(families)
    means = {(s["comm_name"], s["coll"], s["message_size"]): v for s, v in families["nccl_collective_exec_time_microseconds"]}
    for row in a.top_collectives:
        assert means[(row.comm_name, row.op, row.size)] == pytest.approx(row.mean_us, rel=1e-5)
    assert len(families["nccl_collective_rank_skew_microseconds"]) == len(a.rank_skew)
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
