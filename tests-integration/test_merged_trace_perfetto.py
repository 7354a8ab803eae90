"""``myutils-profile trace`` output in the offline Perfetto UI: three ranks + a real torch trace, nothing lost.

The merged trace holds three ranks of MyTimer regions on measured clocks (rank 1's clock
5 s behind, rank 2 a real 20 ms straggler) and a real torch CPU profile of rank 0, whose
overlapping annotations the merge moves to their own lane. The importer must report no
error, keep every slice of the file, name the processes ``rank R (host)``, and show rank 2's
steps 20 ms after rank 0's.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from perfetto_ui import PerfettoUI
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, read_events, write_events
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app

pytestmark = [pytest.mark.slow, pytest.mark.browser]

T0 = 1_700_000_000.0
TORCH_RUN = textwrap.dedent("""
    import sys, torch
    from pathlib import Path
    out = Path(sys.argv[1])
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for step in range(3):
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                model(torch.randn(8, 16)).sum().backward()
    prof.export_chrome_trace(str(out / "torch_rank0.json"))
""")


def _events(path: Path) -> Path:
    events = []
    for rank, offset, applied in ((0, 0.0, 1), (1, 5.0, 0), (2, -3.0, 1)):
        events.append(MetricEvent(name="clock_sync", value=offset, kind="info", unit="s", source="mytimer",
                                  rank=rank, step=0, ts=T0, attrs={"offset_s": offset, "uncertainty_s": 1e-4,
                                                                   "reference_rank": 0, "applied": applied,
                                                                   "host": f"node{rank}"}))
    for step in range(5):
        true = T0 + step * 0.1
        for rank, start in ((0, true), (1, true - 5.0 + 0.001), (2, true + 0.020)):
            for name, delay, ms, depth in (("iter", 0.0, 50.0, 0), ("forward", 0.005, 20.0, 1)):
                events.append(MetricEvent(name=name, value=ms, kind="duration", unit="ms", source="mytimer",
                                          rank=rank, step=step, ts=start + delay, attrs={"depth": depth}))
    out = path / "metrics_events.jsonl"
    write_events(out, events)
    return out


def test_merged_trace_loads_with_every_slice_and_the_straggler_kept(perfetto: PerfettoUI, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    subprocess.run([sys.executable, "-c", TORCH_RUN, str(tmp_path)], check=True, capture_output=True, timeout=300)
    events = _events(tmp_path)
    out = tmp_path / "merged.json.gz"
    res = CliRunner().invoke(app, ["trace", "--events", str(events), "--torch-trace", str(tmp_path / "torch_rank0.json"),
                                   "--output", str(out), "--auto-align-ranks", "--reference-rank", "0"])
    assert res.exit_code == 0, res.output
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert check_trace(doc) == []
    x_in_file = sum(e.get("ph") == "X" for e in doc["traceEvents"])
    regions = sum(e.kind == "duration" for e in read_events(events))
    with perfetto.open(out) as loaded:
        assert loaded.import_errors() == []
        assert loaded.log.page_errors == []
        slices = loaded.query("select count(*) as n from slice")[0]["n"]
        processes = [r["name"] for r in loaded.query("select name from process where name like 'rank %' order by name")]
        starts = loaded.query(
            "select pr.name as process, min(s.ts) as ts from slice s join thread_track tt on s.track_id = tt.id "
            "join thread t using (utid) join process pr using (upid) where s.name like 'iter · step %' "
            "group by pr.name")
        torch_ops = loaded.query("select count(*) as n from slice where name = 'aten::addmm'")[0]["n"]
    assert slices >= x_in_file > regions  # every X of the file is a slice (instants may add more)
    assert processes == ["rank 0 (node0)", "rank 1 (node1)", "rank 2 (node2)"]
    first = {r["process"].split()[1]: r["ts"] for r in starts}
    assert first["2"] - first["0"] == pytest.approx(20e6, abs=1e3)  # ns: the straggler's 20 ms
    assert first["1"] - first["0"] == pytest.approx(1e6, abs=1e3)  # rank 1: 5 s of clock removed, 1 ms late
    assert torch_ops == sum(e.get("name") == "aten::addmm" for e in doc["traceEvents"]) > 0


REAL = "kineto/hta/nccl_parser_config__nccl_data.json.gz"  # 40k events, baseTimeNanoseconds, flows, GPU streams


@pytest.mark.parametrize("overflow", [None, "trim"])
def test_real_multi_rank_merge_loads_with_every_slice(perfetto: PerfettoUI, real_fixtures: Any, tmp_path: Path,
                                                      overflow: str | None) -> None:
    """Two ranks of a real GPU trace through the streaming merge (and trimmed to half its size): no import error."""
    doc = json.loads(gzip.decompress((real_fixtures / REAL).read_bytes()))
    traces = []
    for rank in (0, 1):
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        traces += ["--torch-trace", str(tmp_path / f"trace_rank_{rank}.json")]
        (tmp_path / f"trace_rank_{rank}.json").write_text(json.dumps(doc))
    t0 = doc["baseTimeNanoseconds"] / 1e9
    events = [MetricEvent(name="step", value=5.0, kind="duration", unit="ms", source="mytimer", rank=r, step=s,
                          ts=t0 + s * 0.01, attrs={"depth": 0}) for r in (0, 1) for s in range(20)]
    write_events(tmp_path / "metrics_events.jsonl", events)
    full = tmp_path / "full.json"
    args = ["trace", "--events", str(tmp_path / "metrics_events.jsonl"), *traces, "--executor", "process"]
    res = CliRunner().invoke(app, [*args, "--output", str(full)])
    assert res.exit_code == 0, res.output
    out = full
    if overflow:
        out = tmp_path / "trimmed.json.gz"
        limit = round(full.stat().st_size / 2 / (1 << 20), 2)
        res = CliRunner().invoke(app, [*args, "--output", str(out), "--max-mb", str(limit), "--overflow", overflow])
        assert res.exit_code == 0, res.output
    merged = json.loads(gzip.decompress(out.read_bytes()) if out.name.endswith(".gz") else out.read_bytes())
    assert check_trace(merged) == []
    x_in_file = sum(e.get("ph") == "X" for e in merged["traceEvents"])
    flows = sum(e.get("ph") in ("s", "f") for e in merged["traceEvents"])
    with perfetto.open(out) as loaded:
        assert loaded.import_errors() == []
        assert loaded.log.page_errors == []
        slices = loaded.query("select count(*) as n from slice")[0]["n"]
        steps = loaded.query("select count(*) as n from slice where name like 'step · step %'")[0]["n"]
        arrows = loaded.query("select count(*) as n from flow")[0]["n"]
    assert slices >= x_in_file and steps == len(events)  # every slice of the file, every MyTimer region
    assert arrows == flows // 2  # every flow kept is drawn (the trimmed file keeps none)
    assert (flows == 0) == (overflow == "trim")


def test_a_launch_of_several_kernels_draws_an_arrow_per_kernel(perfetto: PerfettoUI, real_fixtures: Any,
                                                                tmp_path: Path) -> None:
    """One flow start with an end per kernel (Kineto's multi-kernel launches) becomes arrows Perfetto draws."""
    source = real_fixtures / "kineto/hta/mtia_inference_rank_0.json.gz"
    write_events(tmp_path / "metrics_events.jsonl", [])
    out = tmp_path / "merged.json"
    res = CliRunner().invoke(app, ["trace", "--events", str(tmp_path / "metrics_events.jsonl"), "--torch-trace",
                                   str(source), "--output", str(out), "--executor", "serial"])
    assert res.exit_code == 0, res.output
    merged = json.loads(out.read_bytes())
    starts = sum(e.get("ph") == "s" for e in merged["traceEvents"])
    assert starts == sum(e.get("ph") == "f" for e in merged["traceEvents"]) > 0
    with perfetto.open(out) as loaded:
        assert loaded.import_errors() == []
        arrows = loaded.query("select count(*) as n from flow")[0]["n"]
    assert arrows == starts


PAIR = ["kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz"]


def test_the_trace_filter_pair_shows_named_gpu_lanes_every_arrow_and_no_unnamed_track(
        perfetto: PerfettoUI, real_fixtures: Any, tmp_path: Path) -> None:
    """Two real ranks without flow events or MyTimer events: arrows from args.correlation, GPU lanes by stream."""
    source = real_fixtures / "kineto/hta/nccl_parser_config__nccl_data.json.gz"  # two global-scope instants
    out = tmp_path / "pair.json"
    res = CliRunner().invoke(app, ["trace", *[a for p in PAIR for a in ("--torch-trace", str(real_fixtures / p))],
                                   "--torch-trace", str(source), "--output", str(out), "--executor", "serial", "-q"])
    assert res.exit_code == 0, res.output
    merged = json.loads(out.read_bytes())
    assert check_trace(merged) == []
    arrows_in_file = sum(e.get("ph") == "s" for e in merged["traceEvents"])
    assert arrows_in_file > 2000 and merged["otherData"]["arrows_from_correlation"] < arrows_in_file
    with perfetto.open(out) as loaded:
        assert loaded.import_errors() == []
        assert loaded.log.page_errors == []
        arrows = loaded.query("select count(*) as n from flow")[0]["n"]
        lanes = loaded.query("select p.name as process, t.name as lane from thread t join process p using (upid) "
                             "where p.name like 'rank %' and t.name is not null order by p.name, t.tid")
        # a slice (instants too) on a track of no thread and no process is what the UI calls "Unnamed SliceTrack"
        loose = loaded.query("select count(*) as n from slice s where s.track_id not in (select id from thread_track) "
                             "and s.track_id not in (select id from process_track)")[0]["n"]
        on_process = loaded.query("select count(*) as n from slice s join process_track pt on s.track_id = pt.id "
                                  "join process p using (upid) where p.name like 'rank 0 %'")[0]["n"]
    assert arrows == arrows_in_file  # every arrow drawn
    assert loose == 0 and on_process == 2  # the two global instants sit on rank 0's process
    by_rank: dict[str, list[str]] = {}
    for row in lanes:
        by_rank.setdefault(row["process"], []).append(row["lane"])
    rank1 = by_rank["rank 1 (unknown host)"]
    gpu = [name for name in rank1 if name.startswith("GPU ")]
    assert gpu == [f"GPU 1 · stream {s}" for s in (7, 23, 25, 84, 203)] and rank1[-5:] == gpu
