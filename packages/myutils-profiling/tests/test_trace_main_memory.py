"""What the main process of ``trace`` holds per rank while the merge is laid out: a few hundred bytes, not the
ranks' lanes, metadata events, step starts or otherData (issue 24: 1,000 ranks kept ~40-60 KB a rank until the
output was written, so the main process's peak at 1,000 ranks was 1.7-2.1x the peak at 100).

Measured with tracemalloc (allocations, not time): the memory held inside :func:`planned` once every rank is laid
out, at two rank counts; the difference divided by the ranks added is what each rank costs."""

from __future__ import annotations

import gc
import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent, iter_events, write_events

# a real trace with many lanes for its size: 149 events, CPU threads and 3 CUDA streams, flows, epoch-µs ts
SMALL = "kineto/hta/critical_path__event_sync_multi_stream.json.gz"
STEPS = 200  # top-level regions per rank (each a step start the clock-uncertainty warning compares)
FEW, MANY = 8, 64
PER_RANK_LIMIT = 4096  # bytes held per added rank: ~1.3 KB now; the old layout held ~34 KB a rank of these inputs


def _ranks(folder: Path, source: Path, n: int) -> tuple[Path, list[Path]]:
    """``n`` ranks: a copy of the real trace each (saying its rank) and an events file of regions + clock records."""
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(source, "rb") as fh:
        doc = json.load(fh)
    t0 = int(min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X") / 1e6)
    traces, events = [], []
    for r in range(n):
        doc["distributedInfo"] = {"rank": r, "world_size": n}
        path = folder / f"rank_{r}.json"
        path.write_text(json.dumps(doc))
        traces.append(path)
        events.append(MetricEvent(name="clock_sync", value=r * 0.01, kind="info", unit="s", source="mytimer",
                                  rank=r, step=0, ts=t0, attrs={"offset_s": r * 0.01, "uncertainty_s": 1e-9,
                                                                "reference_rank": 0, "applied": 0}))
        for s in range(STEPS):
            events.append(MetricEvent(name="iter", value=0.5, kind="duration", unit="ms", source="mytimer", rank=r,
                                      step=s, ts=t0 + s * 0.001, attrs={"depth": 0, "host": f"node{r}"}))
    write_events(folder / "metrics_events.jsonl", events)
    return folder / "metrics_events.jsonl", traces


def _held(events: Path, traces: list[Path], out: Path) -> int:
    """Bytes allocated by the merge and still held once every rank is laid out (before the output is written)."""
    from my_utils.profiling.trace.stream import planned
    from my_utils.profiling.trace.write import write_output

    paths = [str(t) for t in traces]  # the inputs' own memory is the caller's, made before the measure
    gc.collect()
    tracemalloc.start()
    try:
        with planned(iter_events(events), paths, executor="serial") as plan:
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
            write_output(plan, out)
        return held
    finally:
        tracemalloc.stop()


def test_the_main_process_holds_a_few_hundred_bytes_per_rank(real_fixtures: Any, tmp_path: Path) -> None:
    few = _ranks(tmp_path / "few", real_fixtures / SMALL, FEW)
    many = _ranks(tmp_path / "many", real_fixtures / SMALL, MANY)
    _held(*few, tmp_path / "warm.json")  # first-use imports and caches are not the merge's memory
    held_few = _held(*few, tmp_path / "few.json")
    held_many = _held(*many, tmp_path / "many.json")
    # the output really grows with the ranks (each holds its regions, lanes and metadata)
    assert (tmp_path / "many.json").stat().st_size > 0.8 * MANY / FEW * (tmp_path / "few.json").stat().st_size
    per_rank = (held_many - held_few) / (MANY - FEW)
    assert per_rank < PER_RANK_LIMIT, (held_few, held_many, per_rank)
