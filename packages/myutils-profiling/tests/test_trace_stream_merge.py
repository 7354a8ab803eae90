"""The streaming ``trace`` merge on real Kineto traces: same events as the inputs, memory flat in the rank count,
every executor, ``--max-mb`` splitting or trimming to files that really fit, no spill file left behind."""

from __future__ import annotations

import gzip
import json
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, iter_events, read_events, write_events
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app

FLAT = "kineto/hta/trace_filter__sampled_rank-0.json.gz"  # 4.8k X events, epoch-µs ts, no flows
FLOWS = "kineto/hta/nccl_parser_config__nccl_data.json.gz"  # 40k events, baseTimeNanoseconds, flows
REGIONS = 200
OFFSET_S = 0.25  # rank r's clock runs r * 0.25 s behind: --auto-align-ranks adds it (not applied by its logger)


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _load(path: Path) -> Any:
    with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as fh:
        return json.load(fh)


def _ranks(folder: Path, source: Path, n: int) -> tuple[Path, list[Path]]:
    """``n`` copies of a real trace (copy r says rank r) + MyTimer regions and clock records for each rank."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = _load(source)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    base_us = doc.get("baseTimeNanoseconds", 0) / 1e3
    t0 = int((base_us + min(e["ts"] for e in xs)) / 1e6)  # whole seconds: region times are exact µs
    traces, events = [], []
    for r in range(n):
        doc["distributedInfo"] = {"rank": r, "world_size": n}
        path = folder / f"trace_rank_{r}.json"
        path.write_text(json.dumps(doc))
        traces.append(path)
        events.append(MetricEvent(name="clock_sync", value=r * OFFSET_S, kind="info", unit="s", source="mytimer",
                                  rank=r, step=0, ts=t0, attrs={"offset_s": r * OFFSET_S, "uncertainty_s": 1e-6,
                                                                "reference_rank": 0, "applied": 0}))
        for s in range(REGIONS):
            events.append(MetricEvent(name="iter", value=0.5, kind="duration", unit="ms", source="mytimer", rank=r,
                                      step=s, ts=t0 + s * 0.001, attrs={"depth": 0, "host": f"node{r}"}))
    write_events(folder / "metrics_events.jsonl", events)
    return folder / "metrics_events.jsonl", traces


def _expected(events: Path, traces: list[Path]) -> Counter[tuple[Any, ...]]:
    """(rank, lane, name, unix µs on rank 0's clock, dur) of every input event, read from the inputs alone."""
    out: Counter[tuple[Any, ...]] = Counter()
    for e in iter_events(events):
        if e.kind == "duration" and e.rank is not None and e.ts is not None:
            shown = f"{e.name} · step {e.step}" if e.attrs.get("depth") == 0 else e.name  # a step's slice: its number
            out[(e.rank, "mytimer", shown, round((e.ts + e.rank * OFFSET_S) * 1e6), round(e.value * 1e3))] += 1
    for path in traces:
        doc = _load(path)
        rank = doc["distributedInfo"]["rank"]
        base = doc.get("baseTimeNanoseconds", 0) / 1e3 + rank * OFFSET_S * 1e6
        names = {(m.get("pid"), m.get("tid")): m["args"]["name"] for m in doc["traceEvents"]
                 if m.get("ph") == "M" and m.get("name") == "thread_name"}
        labels = {m.get("pid"): m["args"]["labels"] for m in doc["traceEvents"]
                  if m.get("ph") == "M" and m.get("name") == "process_labels"}
        for ev in doc["traceEvents"]:
            if ev.get("ph") == "X":
                lane = "torch: " + (names.get((ev.get("pid"), ev.get("tid"))) or f"{ev.get('pid')}/{ev.get('tid')}")
                if labels.get(ev.get("pid"), "").startswith("GPU "):  # a device's stream, by its own name
                    lane = f"{labels[ev['pid']]} · stream {ev['tid']}"
                out[(rank, lane, ev["name"], round(base + ev["ts"]), round(ev["dur"]))] += 1
    return out


def _merged(doc: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    """The same tuples read back from a merged trace (lane names without their overlap suffix)."""
    procs = {m["pid"]: int(m["args"]["name"].split()[1]) for m in doc["traceEvents"] if m.get("name") == "process_name"}
    lanes = {m["tid"]: m["args"]["name"].split(" (overlapping")[0] for m in doc["traceEvents"]
             if m.get("name") == "thread_name"}
    origin_us = doc["otherData"]["time_origin_unix_s"] * 1e6
    return Counter((procs[e["pid"]], lanes[e["tid"]], e["name"], round(origin_us + e["ts"]), round(e["dur"]))
                   for e in doc["traceEvents"] if e.get("ph") == "X")


@pytest.fixture(scope="module")
def four_ranks(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    return _ranks(tmp_path_factory.mktemp("four"), real_fixtures / FLAT, 4)


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_merged_ranks_hold_exactly_the_input_events(four_ranks: tuple[Path, list[Path]], tmp_path: Path,
                                                    executor: str) -> None:
    events, traces = four_ranks
    out = tmp_path / "merged.json.gz"
    res = _run("trace", "--events", str(events), *[a for t in traces for a in ("--torch-trace", str(t))],
               "--output", str(out), "--auto-align-ranks", "--executor", executor, "--workers", "2")
    assert res.exit_code == 0, res.output
    doc = _load(out)
    assert check_trace(doc) == []
    assert _merged(doc) == _expected(events, traces)
    names = sorted(m["args"]["name"] for m in doc["traceEvents"] if m.get("name") == "process_name")
    assert names == [f"rank {r} (node{r})" for r in range(4)]
    pids = {m["pid"] for m in doc["traceEvents"] if m.get("ph") == "M"}
    tids = [m["tid"] for m in doc["traceEvents"] if m.get("name") == "thread_name"]
    assert len(set(tids)) == len(tids) and min(tids) > max(pids)  # unique, and above every pid
    assert doc["otherData"]["clock_offsets"]["3"]["shift_torch_s"] == 3 * OFFSET_S
    # in time order, but for a flow's later events: a flow travels whole, at its start (no part holds half of one)
    ts = [e["ts"] for e in doc["traceEvents"] if e.get("ph") not in ("M", "s", "t", "f")]
    assert ts == sorted(ts)
    assert doc["otherData"]["arrows_from_correlation"] == sum(e.get("ph") == "s" for e in doc["traceEvents"]) > 0


@pytest.mark.slow
def test_dask_executor_gives_the_same_trace(four_ranks: tuple[Path, list[Path]], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    events, traces = four_ranks
    outs = {}
    for executor in ("serial", "dask"):
        outs[executor] = tmp_path / f"{executor}.json"
        res = _run("trace", "--events", str(events), *[a for t in traces for a in ("--torch-trace", str(t))],
                   "--output", str(outs[executor]), "--auto-align-ranks", "--executor", executor, "--workers", "2")
        assert res.exit_code == 0, res.output
    assert outs["serial"].read_bytes() == outs["dask"].read_bytes()


def _peak(events: Path, traces: list[Path], out: Path) -> int:
    from my_utils.profiling.trace.stream import planned
    from my_utils.profiling.trace.write import write_output

    tracemalloc.start()
    try:
        with planned(iter_events(events), [str(t) for t in traces], executor="process", max_workers=2) as plan:
            write_output(plan, out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_main_process_memory_does_not_grow_with_the_rank_count(real_fixtures: Any, tmp_path: Path) -> None:
    two = _ranks(tmp_path / "two", real_fixtures / FLAT, 2)
    eight = _ranks(tmp_path / "eight", real_fixtures / FLAT, 8)
    _peak(*two, tmp_path / "warm.json")  # first-use imports and caches are not the merge's memory
    peak2 = _peak(*two, tmp_path / "two.json")
    peak8 = _peak(*eight, tmp_path / "eight.json")
    # the inputs hold 4x the events and the output is 4x larger: a merge holding them would be >= 4x
    assert (tmp_path / "eight.json").stat().st_size > 3.5 * (tmp_path / "two.json").stat().st_size
    assert peak8 < 2 * peak2, (peak2, peak8)


def test_split_parts_fit_and_hold_every_event(real_fixtures: Any, tmp_path: Path) -> None:
    events, traces = _ranks(tmp_path / "in", real_fixtures / FLAT, 2)
    whole = tmp_path / "whole.json"
    assert _run("trace", "--events", str(events), "--torch-trace", str(traces[0]), "--torch-trace", str(traces[1]),
                "--output", str(whole), "--executor", "serial").exit_code == 0
    limit = 0.4 * whole.stat().st_size / (1 << 20)
    out = tmp_path / "split.json.gz"
    res = _run("trace", "--events", str(events), "--torch-trace", str(traces[0]), "--torch-trace", str(traces[1]),
               "--output", str(out), "--executor", "serial", "--max-mb", f"{limit:.3f}")
    assert res.exit_code == 0, res.output
    parts = sorted(tmp_path.glob("split.part*.json.gz"))
    assert len(parts) >= 3 and not out.exists()
    got: Counter[tuple[Any, ...]] = Counter()
    for p in parts:
        data = gzip.decompress(p.read_bytes())
        assert len(data) <= float(f"{limit:.3f}") * (1 << 20)
        doc = json.loads(data)
        assert check_trace(doc) == []
        assert doc["otherData"]["part"]["count"] == len(parts)
        got += _merged(doc)
    assert got == _merged(_load(whole))


def _counts(doc: dict[str, Any]) -> Counter[str]:
    c: Counter[str] = Counter()
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        c["M" if ph == "M" else "mytimer" if e.get("cat") == "mytimer" else "flow" if ph in ("s", "t", "f")
          else "torch"] += 1
    return c


def test_trim_drops_flows_then_short_torch_events_until_one_file_fits(real_fixtures: Any, tmp_path: Path) -> None:
    events, traces = _ranks(tmp_path / "in", real_fixtures / FLOWS, 2)
    args = ["--events", str(events), "--torch-trace", str(traces[0]), "--torch-trace", str(traces[1]),
            "--executor", "serial"]
    whole = tmp_path / "whole.json"
    assert _run("trace", *args, "--output", str(whole)).exit_code == 0
    full = _counts(_load(whole))
    assert full["flow"] > 0 and full["torch"] > 0
    limit = round(0.5 * whole.stat().st_size / (1 << 20), 3)
    out = tmp_path / "trimmed.json"
    res = _run("trace", *args, "--output", str(out), "--max-mb", str(limit), "--overflow", "trim")
    assert res.exit_code == 0, res.output
    assert [p.name for p in tmp_path.glob("trimmed*")] == ["trimmed.json"]
    assert out.stat().st_size <= limit * (1 << 20)
    doc = _load(out)
    assert check_trace(doc) == []
    kept = _counts(doc)
    trimmed = doc["otherData"]["trimmed"]
    assert kept["mytimer"] == full["mytimer"] == 2 * REGIONS and kept["M"] == full["M"]  # never trimmed
    assert kept["flow"] == 0 and trimmed["dropped"]["flow_events"] == full["flow"]
    dropped_torch = trimmed["dropped"]["torch_slices"] + trimmed["dropped"]["torch_other"]
    assert dropped_torch > 0 and kept["torch"] + dropped_torch == full["torch"]
    threshold = trimmed["torch_min_duration_us"]
    assert all(e["dur"] >= threshold for e in doc["traceEvents"] if e.get("ph") == "X")
    assert "--overflow trim: dropped" in res.stderr and doc["otherData"]["warnings"]


def test_trim_below_the_regions_says_what_limit_fits(real_fixtures: Any, tmp_path: Path) -> None:
    events, traces = _ranks(tmp_path / "in", real_fixtures / FLAT, 1)
    out = tmp_path / "t.json"
    res = _run("trace", "--events", str(events), "--torch-trace", str(traces[0]), "--output", str(out),
               "--max-mb", "0.001", "--overflow", "trim", "--executor", "serial")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "give --max-mb" in res.stderr and not out.exists()
    need = float(res.stderr.split("give --max-mb ")[1].split()[0])
    res = _run("trace", "--events", str(events), "--torch-trace", str(traces[0]), "--output", str(out),
               "--max-mb", str(need), "--overflow", "trim", "--executor", "serial")
    assert res.exit_code == 0, res.output
    assert out.stat().st_size <= need * (1 << 20)
    assert _counts(_load(out))["mytimer"] == REGIONS


def test_spill_files_are_removed_on_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [MetricEvent(name="iter", value=1.0, kind="duration", source="mytimer", rank=0, step=0,
                                      ts=1.7e9)])
    bad = tmp_path / "trace_rank_0.json"  # relative timestamps and no baseTimeNanoseconds: cannot be placed
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 5, "dur": 1, "pid": 1, "tid": 1}]}))
    out = tmp_path / "t.json"
    res = _run("trace", "--events", str(events), "--torch-trace", str(bad), "--output", str(out),
               "--executor", "serial")
    assert res.exit_code == 2 and "baseTimeNanoseconds" in res.stderr
    assert not out.exists() and list(spill.iterdir()) == []
    ok = _run("trace", "--events", str(events), "--output", str(out), "--executor", "serial")
    assert ok.exit_code == 0 and list(spill.iterdir()) == []


def test_in_memory_merge_trace_is_the_streamed_result(four_ranks: tuple[Path, list[Path]], tmp_path: Path) -> None:
    from my_utils.profiling.trace import merge_trace, read_torch_trace, write_trace

    events, traces = four_ranks
    merged = merge_trace(iter_events(events), [read_torch_trace(t) for t in traces[:2]])
    paths = write_trace(merged, tmp_path / "mem.json")
    streamed = tmp_path / "streamed.json"
    assert _run("trace", "--events", str(events), "--torch-trace", str(traces[0]), "--torch-trace", str(traces[1]),
                "--output", str(streamed), "--auto-align-ranks", "--executor", "serial").exit_code == 0
    assert _merged(_load(paths[0])) == _merged(_load(streamed))


@pytest.mark.parametrize("args, message", [(["--overflow", "cut", "--max-mb", "1"], "--overflow cut: expected one of"),
                                           (["--workers", "0"], "--workers 0: expected a positive number"),
                                           (["--executor", "threads"], "executor 'threads' is not understood")])
def test_bad_options_exit_2_and_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [MetricEvent(name="iter", value=1.0, kind="duration", source="mytimer", rank=r, step=0,
                                      ts=1.7e9) for r in range(2)])
    out = tmp_path / "t.json"
    res = _run("trace", "--events", str(events), "--output", str(out), *args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.output and not out.exists()


def test_a_launch_with_several_kernels_keeps_an_arrow_per_kernel(real_fixtures: Any, tmp_path: Path) -> None:
    """Kineto writes one 's' and an 'f' per kernel when one launch runs several: every end keeps its arrow."""
    source = real_fixtures / "kineto/hta/mtia_inference_rank_0.json.gz"  # 110 launches with 2+ ends
    groups: dict[tuple[Any, Any], list[str]] = {}
    for ev in _load(source)["traceEvents"]:
        if ev.get("ph") in ("s", "t", "f") and "id" in ev:
            groups.setdefault((ev.get("cat"), ev["id"]), []).append(ev["ph"])
    drawable = [g for g in groups.values() if g.count("s") == 1 and g.count("f") >= 1 and "t" not in g]
    arrows = sum(g.count("f") for g in drawable)
    assert arrows > len(drawable), "the fixture has launches with several ends"
    out = tmp_path / "merged.json"
    write_events(tmp_path / "metrics_events.jsonl", [])  # the torch trace alone
    res = _run("trace", "--events", str(tmp_path / "metrics_events.jsonl"), "--torch-trace", str(source),
               "--output", str(out), "--executor", "serial")
    assert res.exit_code == 0, res.output
    doc = _load(out)
    phases = Counter(e["ph"] for e in doc["traceEvents"] if e.get("ph") in ("s", "t", "f"))
    assert phases["s"] == phases["f"] == arrows and phases["t"] == 0
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "f"}
    assert set(starts) == set(ends) and all(isinstance(i, int) and i < 2**53 for i in starts)
    assert all(starts[i]["ts"] <= ends[i]["ts"] for i in starts)
    unpaired = sum(len(g) for g in groups.values() if g not in drawable)
    assert doc["otherData"].get("unpaired_flow_events_dropped", 0) == unpaired
    assert check_trace(doc) == []


def test_without_torch_trace_the_traces_the_events_name_beside_them_are_merged(real_fixtures: Any,
                                                                                 tmp_path: Path) -> None:
    events, traces = _ranks(tmp_path / "run", real_fixtures / FLAT, 1)
    torch_rows = [MetricEvent(name="aten::mm", value=1.0, kind="duration", unit="ms", source="torch_profiler",
                              rank=0, step=0, attrs={"file": f"/elsewhere/{name}"})
                  for name in (traces[0].name, "not_here.json")]
    found = [*read_events(events), *torch_rows]
    write_events(events, found)
    out = tmp_path / "merged.json"
    res = _run("trace", "--events", str(events), "--output", str(out), "--executor", "serial")
    assert res.exit_code == 0, res.output
    doc = _load(out)
    # the one that exists, by name; written as its file name (it lies outside the working folder)
    assert doc["otherData"]["ranks"][0]["torch_traces"] == [traces[0].name]
    # before: every input's absolute path, the user's folders in a trace shared outside the team
    assert str(tmp_path) not in json.dumps(doc["otherData"])
    assert _merged(doc) == _expected(events, traces)
    assert "'/elsewhere/not_here.json'" in res.stderr  # the other one is said, not dropped silently
    full = tmp_path / "full.json"
    res = _run("trace", "--events", str(events), "--output", str(full), "--executor", "serial", "--full-paths")
    assert res.exit_code == 0, res.output
    assert _load(full)["otherData"]["ranks"][0]["torch_traces"] == [str(traces[0])]  # asked for: as given


def _exact(path: Path) -> Any:
    """A trace read with every number as a Decimal: µs with ns decimals compare exactly."""
    from decimal import Decimal

    with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as fh:
        return json.load(fh, parse_float=Decimal, parse_int=Decimal)


def _input_flows(doc: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    """(cat, name, start lane, end lane, start ns, end ns, end bp) of every arrow a viewer draws from a Kineto
    trace: a start 's' with its one or more ends 'f' (Kineto writes an 'f' per kernel of one launch)."""
    base = doc.get("baseTimeNanoseconds", 0)
    names = {(m.get("pid"), m.get("tid")): m["args"]["name"] for m in doc["traceEvents"]
             if m.get("ph") == "M" and m.get("name") == "thread_name"}
    labels = {m.get("pid"): m["args"]["labels"] for m in doc["traceEvents"]
              if m.get("ph") == "M" and m.get("name") == "process_labels"}

    def lane(ev: dict[str, Any]) -> str:
        if str(labels.get(ev.get("pid"), "")).startswith("GPU "):
            return f"{labels[ev['pid']]} · stream {ev['tid']}"
        return "torch: " + (names.get((ev.get("pid"), ev.get("tid"))) or f"{ev.get('pid')}/{ev.get('tid')}")

    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for ev in doc["traceEvents"]:
        if ev.get("ph") in ("s", "t", "f") and "id" in ev:
            groups.setdefault((ev.get("cat"), ev["id"]), []).append(ev)
    out: Counter[tuple[Any, ...]] = Counter()
    for group in groups.values():
        starts = [e for e in group if e["ph"] == "s"]
        ends = [e for e in group if e["ph"] == "f"]
        if len(starts) != 1 or not ends or any(e["ph"] == "t" for e in group):
            continue  # half an arrow (its start before the window): nothing a viewer can draw
        s = starts[0]
        for f in ends:
            out[(s.get("cat"), s.get("name"), lane(s), lane(f), int(base + s["ts"] * 1000), int(base + f["ts"] * 1000),
                 s.get("bp"), f.get("bp"))] += 1
    return out


def _output_flows(doc: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    """The same tuples from a merged trace: one start and one end per id, placed by its thread's lane name."""
    lanes = {m["tid"]: m["args"]["name"].split(" (overlapping")[0] for m in doc["traceEvents"]
             if m.get("name") == "thread_name"}
    origin_ns = doc["otherData"]["time_origin_unix_s"] * 1_000_000_000
    by_id: dict[Any, dict[str, list[dict[str, Any]]]] = {}
    for ev in doc["traceEvents"]:
        if ev.get("ph") in ("s", "t", "f"):
            by_id.setdefault(ev["id"], {}).setdefault(ev["ph"], []).append(ev)
    out: Counter[tuple[Any, ...]] = Counter()
    for flow, phases in by_id.items():
        assert sorted(phases) == ["f", "s"] and len(phases["s"]) == len(phases["f"]) == 1, (flow, phases)
        (s,), (f,) = phases["s"], phases["f"]
        out[(s.get("cat"), s.get("name"), lanes[s["tid"]], lanes[f["tid"]], int(origin_ns + s["ts"] * 1000),
             int(origin_ns + f["ts"] * 1000), s.get("bp"), f.get("bp"))] += 1
    return out


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_every_flow_keeps_its_ids_times_lanes_and_binding(real_fixtures: Any, tmp_path: Path, executor: str) -> None:
    """Each arrow of the input comes out whole: one 's' and one 'f' per id, each at its own time, on its own
    thread, with its binding point (an end written at its start's time once moved all 4,317 of this trace's)."""
    source = real_fixtures / FLOWS
    want = _input_flows(_exact(source))
    assert sum(want.values()) > 4000 and all(t[5] > t[4] for t in want)  # every end after its start here
    write_events(tmp_path / "metrics_events.jsonl", [])  # the torch trace alone
    out = tmp_path / "merged.json"
    res = _run("trace", "--events", str(tmp_path / "metrics_events.jsonl"), "--torch-trace", str(source),
               "--output", str(out), "--executor", executor, "--workers", "2")
    assert res.exit_code == 0, res.output
    doc = _exact(out)
    assert _output_flows(doc) == want
    ids = [e["id"] for e in doc["traceEvents"] if e.get("ph") == "s"]
    assert len(set(ids)) == len(ids) and all(int(i) == i and 0 <= i < 2**53 for i in ids)


def test_trim_keeps_the_events_exactly_at_its_threshold(tmp_path: Path) -> None:
    """Half the slices last 1 µs, half 2 µs, and only the 2 µs half fits: trim's threshold is 2 µs, and the
    slices of exactly 2 µs are kept (``dur >= threshold``), every one of them."""
    t0 = 1_700_000_000e6  # unix µs: placed without baseTimeNanoseconds
    slices = [{"ph": "X", "name": f"op{i % 7}", "cat": "cpu_op", "ts": t0 + 10 * i, "dur": 1 + i % 2, "pid": 1,
               "tid": 1} for i in range(4000)]
    trace = tmp_path / "trace_rank_0.json"
    trace.write_text(json.dumps({"traceEvents": slices}))
    write_events(tmp_path / "metrics_events.jsonl", [])
    args = ["--events", str(tmp_path / "metrics_events.jsonl"), "--torch-trace", str(trace), "--executor", "serial"]
    whole = tmp_path / "whole.json"
    assert _run("trace", *args, "--output", str(whole)).exit_code == 0
    out = tmp_path / "trimmed.json"
    res = _run("trace", *args, "--output", str(out), "--max-mb", f"{0.75 * whole.stat().st_size / (1 << 20):.4f}",
               "--overflow", "trim")
    assert res.exit_code == 0, res.output
    doc = _load(out)
    assert doc["otherData"]["trimmed"]["torch_min_duration_us"] == 2.0
    assert sorted(e["dur"] for e in doc["traceEvents"] if e.get("ph") == "X") == [2] * 2000
