"""Metric events: read/write speed of ``metrics_events.jsonl`` and the analyzer on a 1M-event run.

    python bench/bench_events.py [--quick] [--samples N] [--json OUT]

Figures are CPU seconds of this process (``time.process_time``) per event, so a busy shared
machine slows every tool alike; tools run interleaved (A B A B ...) and ratios are taken per
round against an anchor measured in the same round:

* reading: ``json.loads`` of the same lines (the anchor); "before", the reading loop of
  ``iter_events`` before the fast path (stdlib ``json`` and ``MetricEvent.from_dict`` per
  line); ``iter_events`` and ``iter_event_rows`` on the same file. Goal (brief, after issue
  10): reads >= 5x faster than before.
* writing: ``json.dumps`` of the same objects (the anchor) and ``write_events``.
* the analyzer on 4 ranks x 25,000 steps x 10 names (1M events, 100k with ``--quick``), run
  in a child process: CPU time (also per event, as a ratio to the ``json.loads`` anchor of the
  reading rounds, so that a busy machine does not move it), wall time, peak RSS and the size
  of ``analysis_report.json``.
  Goals: peak RSS well under the 950 MB measured before; the report < 10 MB (issue 10).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _report import (
    Report,
    at_most,
    at_most_times,
    common_args,
    interleave,
    interpreter_label,
    versions_label,
)
from _temp import bench_tempdir

from my_utils.core.events import MetricEvent, iter_event_rows, iter_events, write_events

BEFORE = "read: before (the loop of 4720e2d: json + from_dict)"
NAMES = ["step_time", *[f"layer_{i}" for i in range(8)], "memory.allocated"]

# the child measures itself: its own peak RSS (VmHWM of its memory map), not the bench's —
# Linux keeps ru_maxrss across execve, so that figure could never drop below the bench's own RSS
_ANALYZE = """
import json, resource, sys, time
from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
t, c = time.perf_counter(), time.process_time()
report = MetricsAnalyzer(sys.argv[1]).analyze()
cpu, wall = time.process_time() - c, time.perf_counter() - t
path = report.write(sys.argv[2])
try:
    rss = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0] / 1024
except (OSError, IndexError):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"cpu": cpu, "wall": wall, "rss_mb": rss,
                  "report_mb": path.stat().st_size / 1e6, "steps_rows": len(report.tables["steps"])}))
"""


def generate(ranks: int, steps: int) -> Iterator[MetricEvent]:
    """A MyTimer-like run: a step time, eight regions and a memory gauge per (rank, step)."""
    rnd = random.Random(0)
    for rank in range(ranks):
        for step in range(steps):
            ts = 1.7e9 + step * 0.05
            for name in NAMES:
                if name == "memory.allocated":
                    yield MetricEvent(name, 1e9 + step * 16 + rnd.random(), "gauge", "bytes", "mytimer", rank, step,
                                      ts, "bench")
                else:
                    yield MetricEvent(name, rnd.random() * 10, "duration", "ms", "mytimer", rank, step, ts, "bench",
                                      {} if name == "step_time" else {"depth": 0})


def _reader_before(path: Path) -> Iterator[MetricEvent]:
    """The reading loop of ``iter_events`` before the fast path (commit 4720e2d), as the baseline."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            stripped = raw.strip()
            if stripped:
                yield MetricEvent.from_dict(json.loads(stripped), str(path), f"line {lineno}")


def cpu_per_event(body: Callable[[], int]) -> Callable[[], float]:
    """A sample: CPU microseconds per event of one call of ``body`` (which returns its event count)."""
    def sample() -> float:
        start = time.process_time()
        n = body()
        return (time.process_time() - start) * 1e6 / max(n, 1)
    return sample


def main() -> None:
    args = common_args(__doc__.splitlines()[0]).parse_args()
    rounds = args.samples or (3 if args.quick else 5)
    io_events = 20_000 if args.quick else 100_000
    steps = 2_500 if args.quick else 25_000
    report = Report("bench_events", "metric events: read/write per event, analyzer on a big run", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("orjson", "myutils-core", "myutils-profiling"))
    report.label("time", "CPU time of this process per event (µs), tools interleaved; the analyzer in a child")
    with bench_tempdir("bench_events_") as tmp:
        path = tmp / "metrics_events.jsonl"
        events = list(generate(4, io_events // (4 * len(NAMES))))
        write_events(path, events)
        lines = path.read_bytes().splitlines()
        objects = [json.loads(line) for line in lines]
        out = tmp / "written.jsonl"
        report.label("shape", f"{len(lines)} events for read/write ({path.stat().st_size / 1e6:.1f} MB), {rounds} rounds")

        def anchor_read() -> int:
            return len([json.loads(line) for line in lines])

        def before_read() -> int:
            return sum(1 for _ in _reader_before(path))

        samples = interleave({
            "json.loads": cpu_per_event(anchor_read),
            "before": cpu_per_event(before_read),
            "iter_events": cpu_per_event(lambda: sum(1 for _ in iter_events(path))),
            "iter_event_rows": cpu_per_event(lambda: sum(1 for _ in iter_event_rows(path))),
            "json.dumps": cpu_per_event(lambda: len([json.dumps(o, separators=(",", ":")) for o in objects])),
            "write_events": cpu_per_event(lambda: write_events(out, events)),
        }, rounds=rounds, warmup=1)
        report.add("read: json.loads per line (anchor)", samples["json.loads"], "µs/event")
        report.add(BEFORE, samples["before"], "µs/event",
                   anchor="read: json.loads per line (anchor)")
        for name in ("iter_events", "iter_event_rows"):
            report.add(f"read: {name}", samples[name], "µs/event", anchor=BEFORE,
                       goals=[at_most_times(0.2, source="brief: >= 5x faster reads")])
            report.add(f"read: {name} vs json.loads", [a / b for a, b in zip(samples[name], samples["json.loads"],
                                                                             strict=True)], "x",
                       note="ratio per round to the stdlib anchor")
        report.add("write: json.dumps per object (anchor)", samples["json.dumps"], "µs/event")
        report.add("write: write_events", samples["write_events"], "µs/event",
                   anchor="write: json.dumps per object (anchor)", goals=[at_most_times(1.5)])
        report.add("read: iter_events events/s", [1e6 / s for s in samples["iter_events"]], "events/s",
                   anchor="read: json.loads events/s")
        report.add("read: json.loads events/s", [1e6 / s for s in samples["json.loads"]], "events/s")
        for held in (events, objects, lines):  # free them before the big run
            held.clear()

        big = tmp / "big" / "metrics_events.jsonl"
        n = write_events(big, generate(4, steps))
        run = subprocess.run([sys.executable, "-c", _ANALYZE, str(big), str(tmp / "big")], capture_output=True,
                             text=True, check=False)
        if run.returncode != 0:
            report.skip("analyzer", f"the analyzer child failed: {run.stderr.strip().splitlines()[-1:]}")
        else:
            got = json.loads(run.stdout.strip().splitlines()[-1])
            report.label("analyzer input", f"{n} events (4 ranks x {steps} steps x {len(NAMES)} names), "
                                           f"{big.stat().st_size / 1e6:.0f} MB")
            report.add("analyzer: CPU time", [got["cpu"]], "s")
            report.add("analyzer: CPU per event", [got["cpu"] * 1e6 / n], "µs/event",
                       anchor="read: json.loads per line (anchor)",
                       note="the whole analysis per event, against json.loads of one line in the same run")
            report.add("analyzer: wall time", [got["wall"]], "s", note="shared machine: CPU time is the figure")
            report.add("analyzer: peak RSS", [got["rss_mb"]], "MB",
                       goals=[at_most(500, source="brief: well under the 950 MB measured before")])
            report.add("analyzer: analysis_report.json", [got["report_mb"]], "MB",
                       goals=[at_most(10, source="issue 10")], note=f"steps table: {got['steps_rows']} rows")
    report.finish(args.json)


if __name__ == "__main__":
    main()
