"""The analyzer on 1M metric events against a bare ``json.loads`` of the same events, in the same run.

    python bench/bench_analyzer.py [--quick] [--samples N] [--json OUT]

Input: a MyTimer-like run of 4 ranks x 25,000 steps x 10 names (1M events, ~190 MB; 100k with
``--quick``), written once per run in a temporary folder. Each round runs, interleaved, one
child interpreter per tool, each measuring itself (CPU time of its own work, so interpreter
start-up and imports are left out; peak RSS from ``VmHWM``):

* ``json.loads``: the anchor — every line of the file through the standard library's
  ``json.loads``, nothing kept;
* ``analyzer``: ``MetricsAnalyzer(path).analyze()``, the whole analysis (reading, aggregation,
  every rule, facts, tables) as ``myutils profile analyze`` runs it;
* ``analyzer, statistics not shared``: the same with every rule computing its own series
  statistics and totals (what the rules did before ``_series.step_summary`` and
  ``_series.series_total``); its report
  must be identical (but for ``overhead``, MyTimer's cost calibrated on the host at each run),
  and the bench stops (exit 1) when it is not.

Goals (issue 22): the analyzer costs at most 1.5x the ``json.loads`` anchor per event (the
ratio is taken per round), and its peak RSS stays under 300 MB. The analyzer child also counts
how many series summaries the rules asked for and how many were computed: with sharing each
(series, warm-up) is summarised once (by a sort, or from a nearby warm-up's sorted values).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import (
    Report,
    at_most,
    at_most_times,
    common_args,
    interleave,
    interpreter_label,
    require,
    versions_label,
)
from _temp import bench_tempdir

_PEAK = """
def _peak_mb():
    try:
        return [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0] / 1024
    except (OSError, IndexError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""

_LOADS = _PEAK + """
import json, sys, time
loads = json.loads
start = time.process_time()
n = 0
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        loads(line)
        n += 1
cpu = time.process_time() - start
print(json.dumps({"cpu": cpu, "events": n, "rss_mb": _peak_mb()}))
"""

_ANALYZE = _PEAK + """
import json, sys, time
from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
from my_utils.profiling.analysis.rules import _series, _stats
asked = [0]
made = [0]
summarize, summarize_sorted = _stats.summarize, _stats.summarize_sorted
def counting(values, skip=0):
    made[0] += 1
    return summarize(values, skip)
def counting_sorted(values, ordered, skip=0):  # made from a nearby warm-up's sorted values
    made[0] += 1
    return summarize_sorted(values, ordered, skip)
_series.summarize = counting
_series.summarize_sorted = counting_sorted
step_summary = _series.step_summary
def asking(events, series, warmup):
    asked[0] += 1
    return step_summary(events, series, warmup)
for name in ("anomalies", "variability"):
    module = __import__(f"my_utils.profiling.analysis.rules.{name}", fromlist=["step_summary"])
    module.step_summary = asking
if sys.argv[3] == "separate":  # every rule computes its own statistics, with the separate functions
    sys.path.insert(0, sys.argv[4])
    from test_analyzer_shared_series import _separately
    _series.SeriesSource.summary = lambda self, series, warmup: _separately(series, warmup)
    _series.SeriesSource.total = lambda self, series: series.total
start, wall = time.process_time(), time.perf_counter()
report = MetricsAnalyzer(sys.argv[1]).analyze()
cpu, wall = time.process_time() - start, time.perf_counter() - wall
text = report.to_json()
data = json.loads(text)
data["inputs"].pop("analyzed_with", None)
data.pop("overhead", None)  # MyTimer's cost, calibrated on this host at each run: not a result of the events
with open(sys.argv[2], "w", encoding="utf-8") as fh:
    json.dump(data, fh, sort_keys=True)
if report.summary["rule_errors"]:
    sys.exit(f"rules failed: {report.summary['rule_errors']}")
print(json.dumps({"cpu": cpu, "wall": wall, "events": report.inputs["events"], "rss_mb": _peak_mb(),
                  "findings": len(report.findings), "asked": asked[0], "made": made[0]}))
"""

TESTS = Path(__file__).resolve().parent.parent / "packages" / "myutils-profiling" / "tests"


def _child(code: str, *args: str) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=3600,
                              check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"a child failed (exit {proc.returncode}): {last[:200]}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result
    return run


def main(argv: list[str]) -> int:
    args = common_args(__doc__ or "").parse_args(argv)
    require("my_utils.profiling", "bench_analyzer")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_events import NAMES, generate

    from my_utils.core.events import write_events

    rounds = args.samples or (2 if args.quick else 5)
    steps = 2_500 if args.quick else 25_000
    report = Report("bench_analyzer", "the analyzer on 1M events against json.loads of them", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling", "myutils-core", "orjson"))
    report.label("load", f"load average {os.getloadavg()[0]:.2f} (1 min) at the start")
    with bench_tempdir("bench_analyzer_") as tmp:
        path = tmp / "run" / "metrics_events.jsonl"
        n = write_events(path, generate(4, steps))
        report.label("input", f"{n} events (4 ranks x {steps} steps x {len(NAMES)} names), "
                              f"{path.stat().st_size / 1e6:.0f} MB; {rounds} interleaved rounds, one child each")
        try:
            samples = interleave({
                "json.loads": _child(_LOADS, str(path)),
                "analyzer": _child(_ANALYZE, str(path), str(tmp / "shared.json"), "shared"),
                "separate": _child(_ANALYZE, str(path), str(tmp / "separate.json"), "separate", str(TESTS)),
            }, rounds=rounds)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            report.skip("all figures", str(exc))
            report.finish(args.json)
            return 0
        same = (tmp / "shared.json").read_text(encoding="utf-8") == (tmp / "separate.json").read_text(encoding="utf-8")
    if not same:
        print("bench_analyzer: the report with shared statistics differs from the one without", file=sys.stderr)
        return 1

    def per_event(tool: str) -> list[float]:
        return [s["cpu"] * 1e6 / s["events"] for s in samples[tool]]

    anchor = "json.loads per event (anchor)"
    report.add(anchor, per_event("json.loads"), "µs/event", note="stdlib json, every line, nothing kept")
    report.add("analyzer per event", per_event("analyzer"), "µs/event", anchor=anchor,
               goals=[at_most_times(1.5, source="issue 22")], note="the whole analysis, CPU time of the child")
    report.add("analyzer per event, statistics not shared", per_event("separate"), "µs/event",
               anchor="analyzer per event", note="each rule its own statistics (before); identical report")
    report.add("analyzer CPU time", [s["cpu"] for s in samples["analyzer"]], "s")
    report.add("analyzer wall time", [s["wall"] for s in samples["analyzer"]], "s",
               note="shared machine: CPU time is the figure")
    report.add("analyzer peak RSS", [s["rss_mb"] for s in samples["analyzer"]], "MB",
               goals=[at_most(300, source="issue 22")])
    report.add("json.loads peak RSS", [s["rss_mb"] for s in samples["json.loads"]], "MB")
    first = samples["analyzer"][0]
    report.add("series summaries asked for by the rules", [first["asked"]], "")
    report.add("series summaries computed", [first["made"]], "",
               note="each (series, warm-up) once; the rest are the shared object")
    report.add("findings", [first["findings"]], "", note="identical with and without the sharing")
    report.label("load after", f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
