"""myutils-profile trace: one clock for MyTimer and torch, measured offsets only, lateness kept, split outputs."""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app
from my_utils.profiling.trace.lanes import SLACK_US, pack

T0 = 1_700_000_000.0
STEP_S = 0.1
LATE_S = 0.020  # rank 2 starts every step 20 ms after rank 0: a straggler, not a clock error
LATE1_S = 0.001  # rank 1: 1 ms late, ten times its clock uncertainty


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _region(rank: int, step: int, start: float, ms: float, name: str = "iter", depth: int = 0) -> MetricEvent:
    return MetricEvent(name=name, value=ms, kind="duration", unit="ms", source="mytimer", rank=rank, step=step,
                       ts=start, attrs={"depth": depth, "node_id": depth, "host": f"node{rank // 2}"})


def _sync(rank: int, offset: float, unc: float, applied: int) -> MetricEvent:
    return MetricEvent(name="clock_sync", value=offset, kind="info", unit="s", source="mytimer", rank=rank, step=0,
                       ts=T0, attrs={"offset_s": offset, "uncertainty_s": unc, "reference_rank": 0,
                                     "applied": applied})


def _three_ranks(path: Path, unc1: float = 1e-4) -> Path:
    """Rank 1's clock runs 5 s behind (offset +5, not applied); rank 2's logger applied its -3 s already."""
    events: list[MetricEvent] = [_sync(0, 0.0, 0.0, 1), _sync(1, 5.0, unc1, 0), _sync(2, -3.0, 2e-4, 1)]
    for step in range(10):
        true = T0 + step * STEP_S
        events.append(_region(0, step, true, 50.0))
        events.append(_region(1, step, true - 5.0 + LATE1_S, 50.0))
        events.append(_region(2, step, true + LATE_S, 50.0))
        events.append(_region(2, step, true + LATE_S + 0.01, 10.0, name="inner", depth=1))
    out = path / "metrics_events.jsonl"
    write_events(out, events)
    return out


def _region_name(e: dict[str, Any]) -> Any:
    """A MyTimer region's name (a step's top-level slice is shown as 'iter · step 6', its name in args.region)."""
    return e.get("args", {}).get("region", e.get("name")) if e.get("cat") == "mytimer" else e.get("name")


def _starts(doc: dict[str, Any], name: str = "iter") -> dict[int, list[float]]:
    pids = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    out: dict[int, list[float]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and _region_name(e) == name:
            rank = int(pids[e["pid"]].split()[1])
            out.setdefault(rank, []).append(e["ts"])
    return {k: sorted(v) for k, v in out.items()}


def test_measured_offsets_align_clocks_and_keep_a_late_rank_late(tmp_path: Path) -> None:
    events = _three_ranks(tmp_path)
    out = tmp_path / "merged.json"
    res = _run("trace", "--events", str(events), "--output", str(out), "--auto-align-ranks", "--reference-rank", "0")
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert check_trace(doc) == []
    starts = _starts(doc)
    for a, b in zip(starts[0], starts[1], strict=True):
        assert b - a == pytest.approx(LATE1_S * 1e6, abs=0.5)  # 5 s of clock offset removed (µs; float unix seconds carry ~0.25 µs)
    for a, c in zip(starts[0], starts[2], strict=True):
        assert c - a == pytest.approx(LATE_S * 1e6, abs=0.5)  # the straggler's 20 ms kept
    names = sorted(e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name")
    assert names == ["rank 0 (node0)", "rank 1 (node0)", "rank 2 (node1)"]
    clocks = doc["otherData"]["clock_offsets"]
    assert clocks["1"]["offset_s"] == 5.0 and clocks["1"]["uncertainty_s"] == 1e-4
    assert clocks["1"]["shift_mytimer_s"] == 5.0 and clocks["2"]["shift_mytimer_s"] == 0.0
    assert doc["otherData"]["warnings"] == []
    # without alignment rank 1 stays 5 s early: the option is what moves it
    raw = tmp_path / "raw.json"
    assert _run("trace", "--events", str(events), "--output", str(raw)).exit_code == 0
    unaligned = _starts(json.loads(raw.read_text()))
    assert unaligned[0][0] - unaligned[1][0] == pytest.approx(5e6 - LATE1_S * 1e6, abs=0.5)


def test_uncertainty_larger_than_the_gaps_is_warned(tmp_path: Path) -> None:
    events = _three_ranks(tmp_path, unc1=0.05)  # ±50 ms against a 1 ms gap
    out = tmp_path / "merged.json"
    res = _run("trace", "--events", str(events), "--output", str(out), "--auto-align-ranks")
    assert res.exit_code == 0
    assert "rank 1: clock uncertainty ±50.000 ms exceeds" in res.stderr
    assert "rank 2" not in res.stderr  # its ±0.2 ms is well below its 20 ms lateness
    assert len(json.loads(out.read_text())["otherData"]["warnings"]) == 1


def test_reference_rank_rebases_the_offsets(tmp_path: Path) -> None:
    events = _three_ranks(tmp_path)
    out = tmp_path / "merged.json"
    assert _run("trace", "--events", str(events), "--output", str(out), "--auto-align-ranks",
                "--reference-rank", "1").exit_code == 0
    doc = json.loads(out.read_text())
    clocks = doc["otherData"]["clock_offsets"]
    assert clocks["0"]["offset_s"] == -5.0 and clocks["1"]["offset_s"] == 0.0
    assert clocks["0"]["uncertainty_s"] == pytest.approx(1e-4)
    starts = _starts(doc)
    assert starts[2][0] - starts[0][0] == pytest.approx(LATE_S * 1e6, abs=0.5)


TORCH_AND_MYTIMER = textwrap.dedent("""
    import sys, time, torch
    from pathlib import Path
    from my_utils.core.timer import MyTimer
    from my_utils.profiling import MetricsCollector, MyTimerMetricsProvider
    out = Path(sys.argv[1])
    timer = MyTimer(tag="train")
    collector = MetricsCollector(output_dir=str(out))
    collector.register_provider(MyTimerMetricsProvider(timer, rank=0))
    model = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for step in range(4):
            timer.set_step(step)
            with timer.region("fwd"):
                with torch.profiler.record_function("fwd_rf"):
                    model(x).sum().backward()
            time.sleep(0.05)
            timer.step()
    prof.export_chrome_trace(str(out / "torch_rank0.json"))
    collector.collect(step=3)
""")


def test_real_torch_profile_and_mytimer_land_on_one_clock(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    subprocess.run([sys.executable, "-c", TORCH_AND_MYTIMER, str(tmp_path)], check=True, capture_output=True,
                   timeout=300)
    raw = json.loads((tmp_path / "torch_rank0.json").read_text())
    base_us = raw["baseTimeNanoseconds"] / 1e3  # the unix time of the trace's zero
    first = min(e["ts"] for e in raw["traceEvents"] if e.get("ph") == "X")
    assert first < 1e15 and base_us > 1e15  # ts alone is not unix time: it needs the base
    out = tmp_path / "merged.json.gz"
    res = _run("trace", "--events", str(tmp_path / "metrics_events.jsonl"), "--torch-trace",
               str(tmp_path / "torch_rank0.json"), "--output", str(out), "--auto-align-ranks")
    assert res.exit_code == 0, res.output
    with gzip.open(out, "rt") as fh:
        doc = json.load(fh)
    assert check_trace(doc) == []  # the torch trace's overlapping annotations moved to their own lane
    regions = sorted((e for e in doc["traceEvents"] if _region_name(e) == "fwd"), key=lambda e: e["ts"])
    assert [e["name"] for e in regions] == [f"fwd · step {s}" for s in range(4)]  # a step's slice says its number
    inner = sorted((e for e in doc["traceEvents"] if e.get("name") == "fwd_rf"), key=lambda e: e["ts"])
    assert len(regions) == len(inner) == 4
    pids = {e["pid"] for e in regions + inner}
    assert len(pids) == 1  # one process for the rank
    for outer, rf in zip(regions, inner, strict=True):
        # the record_function range runs inside the MyTimer region: same clock within 1 ms
        assert outer["ts"] - 1000 <= rf["ts"] <= outer["ts"] + outer["dur"]
        assert rf["ts"] + rf["dur"] <= outer["ts"] + outer["dur"] + 1000
    # and the steps are 50 ms apart, so a wrong mapping could not pass by landing in a neighbour
    assert all(b["ts"] - a["ts"] > 40_000 for a, b in itertools.pairwise(regions))


MAKE_CSV = textwrap.dedent("""
    import sys, time
    from my_utils.core.logger import GlobalLogger
    from my_utils.core.timer import MyTimer
    from my_utils.distributed.clock_estimate import ClockEstimate
    from my_utils.distributed.clock_record import record_clock_sync
    rank, offset = int(sys.argv[2]), float(sys.argv[3])
    log = GlobalLogger()
    log.setup(sys.argv[1], rank=rank, world_size=2)
    record_clock_sync(ClockEstimate(offset_s=offset, uncertainty_s=1e-4 * rank, best_rtt_s=2e-4 * rank, samples=8,
                                    kept=1, measured_at_s=time.time()), reference_rank=0, apply=True)
    timer = MyTimer(tag="train")
    timer.set_logger(log)
    for step in range(3):
        timer.set_step(step)
        with timer.region("iter"):
            time.sleep(0.01)
        timer.step()
    log.close()
""")


def test_profile_csvs_with_real_clock_sync_rows(tmp_path: Path) -> None:
    pytest.importorskip("my_utils.distributed")
    logs = tmp_path / "logs"
    for rank, offset in ((0, 0.0), (1, 2.5)):
        subprocess.run([sys.executable, "-c", MAKE_CSV, str(logs), str(rank), str(offset)], check=True,
                       capture_output=True, timeout=120)
    out = tmp_path / "merged.json"
    res = _run("trace", "--events", str(logs), "--output", str(out), "--auto-align-ranks")
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert check_trace(doc) == []
    clocks = doc["otherData"]["clock_offsets"]
    assert clocks["1"]["offset_s"] == 2.5 and clocks["1"]["applied"] is True
    assert clocks["1"]["shift_mytimer_s"] == 0.0  # the logger already applied it: never twice
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"]
    assert len(names) == 2 and all(n.startswith(("rank 0 (", "rank 1 (")) for n in names)
    assert len(_starts(doc)[1]) == 3


def test_ingested_events_carry_the_clock_sync_rows(tmp_path: Path) -> None:
    """CSV -> metrics_events.jsonl (the mytimer provider) -> trace: the offsets survive ingest."""
    pytest.importorskip("my_utils.distributed")
    from my_utils.core.providers import run_provider_on_input

    logs = tmp_path / "logs"
    for rank, offset in ((0, 0.0), (1, 2.5)):
        subprocess.run([sys.executable, "-c", MAKE_CSV, str(logs), str(rank), str(offset)], check=True,
                       capture_output=True, timeout=120)
    events_path, _ = run_provider_on_input("mytimer", logs, tmp_path / "events", {})
    from my_utils.core.events import read_events

    syncs = sorted((e.rank, e.value, e.attrs["reference_rank"]) for e in read_events(events_path)
                   if e.name == "clock_sync")
    assert syncs == [(0, 0.0, "0"), (1, 2.5, "0")]
    out = tmp_path / "merged.json"
    res = _run("trace", "--events", str(events_path), "--output", str(out), "--auto-align-ranks")
    assert res.exit_code == 0, res.output
    clocks = json.loads(out.read_text())["otherData"]["clock_offsets"]
    assert clocks["1"]["offset_s"] == 2.5 and clocks["1"]["applied"] is True


def test_max_mb_splits_into_parts_that_each_open(tmp_path: Path) -> None:
    events = [_region(r, s, T0 + s * 0.001, 0.5) for r in range(4) for s in range(3000)]
    path = tmp_path / "metrics_events.jsonl"
    write_events(path, events)
    out = tmp_path / "big.json.gz"
    res = _run("trace", "--events", str(path), "--output", str(out), "--max-mb", "0.5")
    assert res.exit_code == 0, res.output
    parts = sorted(tmp_path.glob("big.part*.json.gz"))
    assert len(parts) >= 3 and not out.exists()
    total = 0
    for p in parts:
        data = gzip.decompress(p.read_bytes())
        assert len(data) <= 0.5 * (1 << 20)
        doc = json.loads(data)
        assert check_trace(doc) == []
        assert doc["otherData"]["part"]["count"] == len(parts)
        total += sum(1 for e in doc["traceEvents"] if e.get("ph") == "X")
    assert total == len(events)


@pytest.mark.parametrize("content, expected", [
    ('{"name": "clock_sync", "value": 1, "rank": 1, "attrs": {"offset_s": "x", "uncertainty_s": 0, '
     '"reference_rank": 0}}', "attrs.offset_s"),
    ('{"name": "iter", "value": 1}\n{broken', "line 2"),
])
def test_bad_events_exit_2_and_write_nothing(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "metrics_events.jsonl"
    path.write_text(content + "\n")
    out = tmp_path / "t.json"
    res = _run("trace", "--events", str(path), "--output", str(out), "--auto-align-ranks")
    assert res.exit_code == 2, res.output
    assert expected in res.stderr and "Traceback" not in res.output
    assert not out.exists() and not list(tmp_path.glob(".t.json*"))


def test_no_spans_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    write_events(path, [MetricEvent(name="mem", value=1.0, kind="gauge", source="mytimer", rank=0, step=0)])
    res = _run("trace", "--events", str(path), "--output", str(tmp_path / "t.json"))
    assert res.exit_code == 2 and "found none" in res.stderr


spans = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 300)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(spans)
def test_pack_keeps_every_event_and_every_lane_nests(raw: list[tuple[int, int]]) -> None:
    events = [{"ts": float(t), "dur": float(d), "i": i} for i, (t, d) in enumerate(raw)]
    lanes = pack(events)
    assert sorted(e["i"] for lane in lanes for e in lane) == list(range(len(events)))
    for lane in lanes:
        for a in lane:
            for b in lane:
                a0, a1, b0, b1 = a["ts"], a["ts"] + a["dur"], b["ts"], b["ts"] + b["dur"]
                partial = a0 < b0 < a1 - SLACK_US and a1 + SLACK_US < b1
                assert not partial


# -- thresholds of the merge at their values (issue 36): intervals that touch as well as overlap

def _lanes(*spans: tuple[float, float]) -> list[list[int]]:
    """The lanes ``pack`` makes of (ts, dur) spans, as span indices."""
    events = [{"ts": ts, "dur": dur, "i": i} for i, (ts, dur) in enumerate(spans)]
    return [[e["i"] for e in lane] for lane in pack(events)]


@pytest.mark.parametrize(("spans", "lanes"), [
    (((0.0, 10.0), (10.0, 5.0)), [[0, 1]]),                          # touching: one after the other
    (((0.0, 10.0), (10.0 - SLACK_US / 2, 5.0)), [[0, 1]]),           # under 1 ns of rounding: no overlap
    (((0.0, 10.0), (10.0 - 2 * SLACK_US, 5.0)), [[0], [1]]),         # 2 ns: a partial overlap moves it
    (((0.0, 10.0), (5.0, 5.0)), [[0, 1]]),                           # a child ending where its parent ends nests
    (((0.0, 10.0), (5.0, 5.0 + SLACK_US / 2)), [[0, 1]]),            # ... within the 1 ns of rounding
    (((0.0, 10.0), (5.0, 5.0 + 2 * SLACK_US)), [[0], [1]]),          # ... but not beyond it
    (((0.0, 10.0), (0.0, 10.0)), [[0, 1]]),                          # the same interval twice nests
    (((0.0, 10.0), (2.0, 3.0), (5.0, 5.0)), [[0, 1, 2]]),            # a child touching its sibling
])
def test_pack_at_the_touching_and_overlapping_bounds(spans: tuple[tuple[float, float], ...],
                                                     lanes: list[list[int]]) -> None:
    assert _lanes(*spans) == lanes


def test_bucket_puts_a_duration_equal_to_a_threshold_in_that_threshold() -> None:
    from my_utils.profiling.trace.records import THRESHOLDS_US, bucket

    for i, threshold in enumerate(THRESHOLDS_US):
        assert bucket(threshold) == i  # trim keeps dur >= threshold: an event at it is counted as kept
        if i:
            assert bucket(threshold * (1 - 1e-9)) == i - 1
    assert bucket(-1.0) == 0 and bucket(float("inf")) == len(THRESHOLDS_US) - 1


@pytest.mark.parametrize(("gap", "warned"), [(0.5, True), (1.0, False), (2.0, False)])
def test_clock_uncertainty_warns_only_above_the_gap(gap: float, warned: bool) -> None:
    from my_utils.profiling.trace.clock import ClockSync, uncertainty_warnings

    unit = 2.0**-10  # s: binary fractions, so that the gap equals the uncertainty exactly, not within rounding
    offsets = {1: ClockSync(rank=1, offset_s=0.0, uncertainty_s=unit, reference_rank=0, applied=False)}
    starts = {0: {s: s * 0.5 for s in range(5)}, 1: {s: s * 0.5 + gap * unit for s in range(5)}}
    got = uncertainty_warnings(offsets, starts, 0)
    assert bool(got) is warned
    if warned:
        assert got[0].startswith("rank 1: clock uncertainty ±0.977 ms exceeds the median 0.488 ms gap")


@pytest.mark.parametrize(("ms", "ok"), [(0.0, True), (-0.0, True), (1e-9, True), (-1e-9, False)])
def test_a_region_of_zero_ms_is_placed_a_negative_one_refused(tmp_path: Path, ms: float, ok: bool) -> None:
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [_region(0, 0, T0, 5.0), _region(0, 1, T0 + STEP_S, ms)])
    out = tmp_path / "t.json"
    res = _run("trace", "--events", str(events), "--output", str(out), "--executor", "serial")
    if ok:
        assert res.exit_code == 0, res.output
        slices = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "X"]
        assert sorted(e["dur"] for e in slices) == [0, 5000]  # ms -> µs
    else:
        assert res.exit_code == 2 and "a MyTimer duration to be a finite number of ms >= 0" in res.stderr
        assert not out.exists()


@pytest.mark.parametrize(("first_us", "ok"), [(946_684_800e6, True), (946_684_800e6 - 1, False)])
def test_epoch_timestamps_start_at_2000_without_base_time(tmp_path: Path, first_us: float, ok: bool) -> None:
    """A trace without ``baseTimeNanoseconds`` is placed when its µs are unix time (2000-01-01 or later)."""
    from my_utils.core.errors import InputError
    from my_utils.profiling.trace import read_torch_trace

    path = tmp_path / "trace_rank_0.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": first_us, "dur": 1, "pid": 1,
                                                 "tid": 1}]}))
    if ok:
        assert read_torch_trace(path).events[0]["ts"] == first_us
    else:
        with pytest.raises(InputError, match="baseTimeNanoseconds"):
            read_torch_trace(path)
