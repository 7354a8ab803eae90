"""``myutils-profile trace`` over 2, 4 and 8 ranks: wall time and peak memory, against the in-memory merge.

    python bench/bench_trace.py [--quick] [--samples N] [--json OUT] [--fixtures DIR] [--ranks 2,4,8]

Inputs: ``R`` copies of a real Kineto trace (``kineto/hta/nccl_parser_config__nccl_data.json.gz``,
40k events with flows; ``--quick``: the 1.7 MB ``trace_filter__sampled_rank-0``), copy ``r``
carrying ``distributedInfo.rank = r``, plus 2,000 MyTimer regions and a clock record per rank
in one ``metrics_events.jsonl``. Each sample runs in a fresh interpreter:

- ``stream``: the ``trace`` command (``--auto-align-ranks --executor process --workers 2``),
  i.e. the streaming merge: tasks lay out each rank's regions and each trace, the main
  process k-way merges their sorted spill files into the output;
- ``in-memory`` (anchor): ``merge_trace`` + ``write_trace`` with the traces read in the main
  process and every event held, the way the command worked before the streaming merge.

Figures: time (interpreter start and imports included), the main process's peak RSS and
the peak of the summed RSS of the whole process tree (workers included), both polled every
20 ms (not ``ru_maxrss``: Linux carries it across ``exec``, so a child would report the bench
process's own peak when that is larger). Goal (issue 10): memory independent of the rank count — the 8-rank peak
of the main process at most 1.25x the 2-rank peak. The tools alternate round by round.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _child import TREE_RSS_SAMPLER, child_sample
from _fixtures import Unavailable, fetch, where
from _report import Report, at_most, common_args, interleave, interpreter_label, require, versions_label
from _temp import bench_tempdir

SOURCE = "kineto/hta/nccl_parser_config__nccl_data.json.gz"
QUICK_SOURCE = "kineto/hta/trace_filter__sampled_rank-0.json.gz"
REGIONS = 2000

SAMPLER = TREE_RSS_SAMPLER + """
def _done(t0, out):
    _stop.set()
    size = sum(p.stat().st_size for p in out.parent.glob(out.name.split(".")[0] + "*"))
    print(json.dumps({"s": time.perf_counter() - t0, "tree_mb": _peak[0] / 2**20, "main_mb": _peak[1] / 2**20,
                      "out_mb": size / 2**20}))
"""

STREAM = SAMPLER + """
from pathlib import Path
if __name__ == "__main__":
    t0 = time.perf_counter()
    from typer.testing import CliRunner
    from my_utils.profiling.cli import app
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    traces = [a for p in sorted(folder.glob("trace_rank_*.json")) for a in ("--torch-trace", str(p))]
    res = CliRunner().invoke(app, ["trace", "--events", str(folder / "metrics_events.jsonl"), *traces, "--output",
                                   str(out), "--auto-align-ranks", "--executor", "process", "--workers", "2", "-q"])
    assert res.exit_code == 0, res.output
    _done(t0, out)
"""

IN_MEMORY = SAMPLER + """
from pathlib import Path
if __name__ == "__main__":
    t0 = time.perf_counter()
    from my_utils.core.events import iter_events
    from my_utils.profiling.trace import merge_trace, read_torch_trace, write_trace
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    traces = [read_torch_trace(p) for p in sorted(folder.glob("trace_rank_*.json"))]
    merged = merge_trace(iter_events(folder / "metrics_events.jsonl"), traces, auto_align=True)
    write_trace(merged, out)
    _done(t0, out)
"""

Sample = dict[str, Any]


def _ranks(source: Path, folder: Path, ranks: int) -> Path:
    """``ranks`` copies of ``source`` (copy r says rank r) and MyTimer regions for each rank."""
    from my_utils.core.events import MetricEvent, write_events

    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as fh:
        doc = json.load(fh)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    t0 = (doc.get("baseTimeNanoseconds", 0) / 1e3 + min(e["ts"] for e in xs)) / 1e6
    span = (max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs)) / 1e6
    events = []
    for r in range(ranks):
        doc["distributedInfo"] = {"rank": r, "world_size": ranks}
        (folder / f"trace_rank_{r}.json").write_text(json.dumps(doc), encoding="utf-8")
        events.append(MetricEvent(name="clock_sync", value=0.0, kind="info", unit="s", source="mytimer", rank=r,
                                  step=0, ts=t0, attrs={"offset_s": 0.0, "uncertainty_s": 1e-5, "reference_rank": 0,
                                                        "applied": 1}))
        for s in range(REGIONS):
            events.append(MetricEvent(name="step", value=span / REGIONS * 500, kind="duration", unit="ms",
                                      source="mytimer", rank=r, step=s, ts=t0 + s * span / REGIONS,
                                      attrs={"depth": 0, "host": f"node{r}"}))
    write_events(folder / "metrics_events.jsonl", events)
    return folder


def _runner(code: str, folder: Path, out: Path, cwd: Path, timeout: float) -> Callable[[], Sample | str]:
    failure: list[str] = []

    def run() -> Sample | str:
        sample: Sample | str = child_sample(code, [str(folder), str(out)], timeout=timeout, cwd=cwd,
                                            failure=failure)
        print(f"bench_trace: {folder.name}: {out.stem}: {sample}", file=sys.stderr, flush=True)
        return sample

    return run


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    parser.add_argument("--ranks", default=None, help="rank counts, comma-separated (default 2,4,8; quick 2,4)")
    args = parser.parse_args(argv)
    require("my_utils.profiling", "bench_trace")
    report = Report("bench_trace", "myutils-profile trace over many ranks: streaming merge vs in-memory merge",
                    quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling", "psutil"))
    report.label("fixtures", where(args.fixtures))
    counts = [int(c) for c in (args.ranks or ("2,4" if args.quick else "2,4,8")).split(",")]
    rounds = args.samples or (1 if args.quick else 3)
    timeout = 300.0 if args.quick else 1200.0
    relpath = QUICK_SOURCE if args.quick else SOURCE
    with bench_tempdir("bench_trace_") as tmp:
        try:
            source = fetch(relpath, args.fixtures)
        except Unavailable as exc:
            report.skip("trace over ranks", str(exc))
            report.finish(args.json)
            return 0
        report.label("input", f"{relpath} x ranks, {REGIONS} MyTimer regions per rank")
        tools: dict[str, Callable[[], Sample | str]] = {}
        for n in counts:
            folder = _ranks(source, tmp / f"ranks_{n}", n)
            tools[f"{n} ranks: stream"] = _runner(STREAM, folder, tmp / f"stream_{n}.json", tmp, timeout)
            tools[f"{n} ranks: in-memory"] = _runner(IN_MEMORY, folder, tmp / f"memory_{n}.json", tmp, timeout)
        samples = interleave(tools, rounds)
        good: dict[str, list[Sample]] = {}
        for name, got in samples.items():
            errors = [s for s in got if isinstance(s, str)]
            if errors:
                report.skip(name, f"failed: {errors[0]}")
                continue
            good[name] = [s for s in got if isinstance(s, dict)]
        for n in counts:
            mine, anchor = f"{n} ranks: stream", f"{n} ranks: in-memory"
            if mine not in good:
                continue
            has_anchor = anchor in good
            report.label(f"{n} ranks output", f"{good[mine][0]['out_mb']:.1f} MB")
            if has_anchor:
                report.add(f"{n} ranks: in-memory time", [s["s"] for s in good[anchor]], "s", note="anchor")
            report.add(f"{n} ranks: stream time", [s["s"] for s in good[mine]], "s",
                       anchor=f"{n} ranks: in-memory time" if has_anchor else None)
            if has_anchor:
                report.add(f"{n} ranks: in-memory main-process peak RSS", [s["main_mb"] for s in good[anchor]], "MB",
                           note="anchor")
            report.add(f"{n} ranks: stream main-process peak RSS", [s["main_mb"] for s in good[mine]], "MB",
                       anchor=f"{n} ranks: in-memory main-process peak RSS" if has_anchor else None)
            report.add(f"{n} ranks: stream process-tree peak RSS", [s["tree_mb"] for s in good[mine]], "MB",
                       note="main process + 2 workers")
        low, high = min(counts), max(counts)
        base, top = f"{low} ranks: stream", f"{high} ranks: stream"
        if high > low and base in good and top in good:
            low_mb = statistics.median(s["main_mb"] for s in good[base])
            report.add(f"stream main-process peak, {high} ranks / {low} ranks",
                       [s["main_mb"] / low_mb for s in good[top]], "x",
                       goals=[at_most(1.25, "issue 10: memory independent of the rank count")])
            low_tree = statistics.median(s["tree_mb"] for s in good[base])
            report.add(f"stream process-tree peak, {high} ranks / {low} ranks",
                       [s["tree_mb"] / low_tree for s in good[top]], "x", note="workers hold one trace each")
            if f"{high} ranks: in-memory" in good and f"{low} ranks: in-memory" in good:
                low_anchor = statistics.median(s["main_mb"] for s in good[f"{low} ranks: in-memory"])
                report.add(f"in-memory main-process peak, {high} ranks / {low} ranks",
                           [s["main_mb"] / low_anchor for s in good[f"{high} ranks: in-memory"]], "x",
                           note="anchor: grows with the rank count")
    report.note("time includes interpreter start and imports; the stream runs 2 worker processes")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
