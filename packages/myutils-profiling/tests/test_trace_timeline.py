"""What the merged timeline shows, on real Kineto traces: every instant under its rank, launch → kernel arrows
even for traces that carry none, GPU streams named and below the CPU threads, steps by number, hosts when known,
and torch traces merged without any MyTimer events."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app

PAIR = ["kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz"]
FLOWS = "kineto/hta/nccl_parser_config__nccl_data.json.gz"  # its own flows, and two global instants


def _load(path: Path) -> Any:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def _trace(*args: str) -> Any:
    return CliRunner().invoke(app, ["trace", *args, "-q", "--executor", "serial"])


def _lanes(doc: dict[str, Any]) -> dict[int, list[str]]:
    """Each pid's lane names in their sort order."""
    names = {(m["pid"], m["tid"]): m["args"]["name"] for m in doc["traceEvents"] if m.get("name") == "thread_name"}
    order = sorted((m["args"]["sort_index"], m["pid"], m["tid"]) for m in doc["traceEvents"]
                   if m.get("name") == "thread_sort_index")
    out: dict[int, list[str]] = defaultdict(list)
    for _i, pid, tid in order:
        out[pid].append(names[(pid, tid)])
    return out


def _expected_arrows(doc: dict[str, Any]) -> int:
    """Kernels, copies and sets whose launch is in the trace: one arrow each (from the input alone)."""
    launches = Counter(e["args"]["correlation"] for e in doc["traceEvents"]
                       if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                       and "correlation" in e.get("args", {}))
    return sum(1 for e in doc["traceEvents"] if e.get("ph") == "X"
               and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
               and launches.get(e.get("args", {}).get("correlation")) == 1)


def test_torch_traces_alone_merge_with_arrows_named_gpu_lanes_and_no_global_track(real_fixtures: Any,
                                                                                  tmp_path: Path) -> None:
    paths = [real_fixtures / p for p in PAIR]
    inputs = [_load(p) for p in paths]
    assert all(not any(e.get("ph") in ("s", "f") for e in d["traceEvents"]) for d in inputs)  # no flows of their own
    out = tmp_path / "pair.json"
    res = _trace("--torch-trace", str(paths[0]), "--torch-trace", str(paths[1]), "--output", str(out))
    assert res.exit_code == 0, res.output  # no --events: the torch traces alone
    doc = _load(out)
    assert check_trace(doc) == []
    arrows = sum(e.get("ph") == "s" for e in doc["traceEvents"])
    assert arrows == sum(e.get("ph") == "f" for e in doc["traceEvents"]) == sum(map(_expected_arrows, inputs)) > 2000
    assert doc["otherData"]["arrows_from_correlation"] == arrows
    lanes = _lanes(doc)
    for pid, rank in ((1, 0), (2, 1)):
        gpu = [n for n in lanes[pid] if n.startswith("GPU ")]
        assert gpu == [f"GPU {rank} · stream {s}" for s in (7, 23, 25, 84, 203)]  # by stream number, not text
        assert lanes[pid][-len(gpu):] == gpu  # below every CPU thread
    starts = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e.get("ph") == "s"}
    ends = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e.get("ph") == "f"}
    names = {(m["pid"], m["tid"]): m["args"]["name"] for m in doc["traceEvents"] if m.get("name") == "thread_name"}
    assert all(names[k].startswith("torch: ") for k in starts)  # from the launching CPU thread...
    assert all(names[k].startswith("GPU ") for k in ends)  # ...to the stream that ran it
    assert all(e.get("bp") == "e" for e in doc["traceEvents"] if e.get("ph") == "f")


def test_a_trace_with_flows_keeps_its_own_and_its_global_instants_go_under_its_rank(real_fixtures: Any,
                                                                                  tmp_path: Path) -> None:
    source = real_fixtures / FLOWS
    raw = _load(source)
    global_instants = [e["name"] for e in raw["traceEvents"] if e.get("ph") in ("i", "I") and e.get("s") == "g"]
    assert len(global_instants) == 2
    out = tmp_path / "merged.json"
    assert _trace("--torch-trace", str(source), "--output", str(out)).exit_code == 0
    doc = _load(out)
    assert check_trace(doc) == [] and "arrows_from_correlation" not in doc["otherData"]
    instants = [e for e in doc["traceEvents"] if e.get("name") in global_instants]
    assert len(instants) == 2 and all(e["s"] == "p" and e["pid"] == 1 for e in instants)
    assert not any(e.get("s") == "g" for e in doc["traceEvents"])


MAKE_CSV = textwrap.dedent("""
    import sys, time
    from my_utils.core.logger import GlobalLogger
    from my_utils.core.timer import MyTimer
    log = GlobalLogger()
    log.setup(sys.argv[1], rank=int(sys.argv[2]), world_size=2)
    timer = MyTimer(tag="train")
    timer.set_logger(log)
    for step in range(3):
        timer.set_step(step)
        with timer.region("iter"):
            with timer.region("fwd"):
                time.sleep(0.002)
        timer.step()
    log.close()
""")


def test_steps_by_number_and_the_host_from_the_profile_csv(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for rank in (0, 1):  # real profile CSVs, without any clock record: the machine_id still names the host
        subprocess.run([sys.executable, "-c", MAKE_CSV, str(logs), str(rank)], check=True, capture_output=True,
                       timeout=120)
    out = tmp_path / "merged.json"
    res = _trace("--events", str(logs), "--output", str(out))
    assert res.exit_code == 0, res.output
    doc = _load(out)
    processes = sorted(m["args"]["name"] for m in doc["traceEvents"] if m.get("name") == "process_name")
    assert processes == [f"rank 0 ({socket.gethostname()})", f"rank 1 ({socket.gethostname()})"]
    regions = Counter(e["name"] for e in doc["traceEvents"] if e.get("cat") == "mytimer")
    assert regions == {**{f"iter · step {s}": 2 for s in range(3)}, "fwd": 6}  # the step's slice says its step
    assert all(e["args"]["region"] == "iter" for e in doc["traceEvents"] if e.get("name", "").startswith("iter"))


@pytest.mark.parametrize("name, meta, host", [
    ("trace_rank_0.json", {"host_name": "gpu-node-3"}, "gpu-node-3"),  # torch >= 2.1 writes host_name
    ("node7_4242.1700000000123.pt.trace.json", {}, "node7"),  # tensorboard_trace_handler's file name
    ("trace_rank_0.json", {}, "unknown host"),  # nothing says it
])
def test_the_host_of_a_torch_trace(tmp_path: Path, name: str, meta: dict[str, Any], host: str) -> None:
    source = tmp_path / name
    source.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 1}],
                                  "baseTimeNanoseconds": 1_700_000_000_000_000_000,
                                  "distributedInfo": {"rank": 0}, **meta}))
    out = tmp_path / "merged.json"
    assert _trace("--torch-trace", str(source), "--output", str(out)).exit_code == 0
    (process,) = [m["args"]["name"] for m in _load(out)["traceEvents"] if m.get("name") == "process_name"]
    assert process == f"rank 0 ({host})"


def test_neither_events_nor_torch_traces_is_a_usage_error(tmp_path: Path) -> None:
    res = _trace("--output", str(tmp_path / "t.json"))
    assert res.exit_code == 2 and "give --events" in res.stderr and not (tmp_path / "t.json").exists()


def test_events_without_regions_and_torch_traces_with_nothing_say_so(tmp_path: Path) -> None:
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [MetricEvent(name="mem", value=1.0, kind="gauge", source="mytimer", rank=0, step=0)])
    res = _trace("--events", str(events), "--output", str(tmp_path / "t.json"))
    assert res.exit_code == 2 and "found none" in res.stderr
