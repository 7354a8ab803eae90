"""What the diagnosis adds to ``analyze`` (issue 33: at most 10 % on the 54 MB trace).

    python bench/bench_diagnosis.py [--quick] [--samples N] [--json OUT] [--fixtures DIR]

``myutils-profile analyze --trace T`` runs in a fresh child per sample on the real 54 MB / 216k-event
trace (kineto/hta/df_index_resolver) and on the 6-rank nsys ring (nsys/dsl_ring_6ranks). Inside that
child the diagnosis's entry points are wrapped with a clock: the rules (``MetricsAnalyzer._run_rules``),
the findings promoted from facts (``fact_findings``, ``nsight_findings``), the diagnosis itself
(``diagnose``: verdict, advice gate, savings, severity, ranking) and the headline (``build_headline``).
Each sample gives the command's whole time (imports, reading, every analysis, the reports written)
and the diagnosis's share of it; the anchor, measured in the same process, is the same command's time
without the diagnosis (whole minus diagnosis). Goal: whole <= 1.10x the anchor.

The wrappers add one ``perf_counter`` pair per call (a few calls per run). ``--quick`` runs a 1.8 MB
trace: a smoke run, not a figure to quote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _fixtures import Unavailable, fetch, where
from _report import Report, at_most_times, common_args, interleave, interpreter_label, require, versions_label
from _temp import bench_tempdir

BIG = "kineto/hta/df_index_resolver.json.gz"
SMALL = "kineto/hta/trace_filter__sampled_rank-0.json.gz"
RING = "nsys/dsl_ring_6ranks"

# our command in a child, the diagnosis's entry points timed; prints {"whole": s, "diagnosis": s} last
CHILD = """
import json, sys, time
t0 = time.perf_counter()
spent = [0.0]

def timed(fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start
    return wrapper

from my_utils.profiling.analysis import analyzer, diagnosis, fact_rules, headline
from my_utils.profiling.analysis.nsight import rules as nsight_rules
diagnosis.diagnose = timed(diagnosis.diagnose)
fact_rules.fact_findings = timed(fact_rules.fact_findings)
headline.build_headline = timed(headline.build_headline)
nsight_rules.nsight_findings = timed(nsight_rules.nsight_findings)
analyzer.MetricsAnalyzer._run_rules = timed(analyzer.MetricsAnalyzer._run_rules)
from my_utils.profiling.cli import main
sys.argv = ["myutils-profile", "analyze", *sys.argv[1:-1], "--output-dir", sys.argv[-1], "--formats", "json", "-q"]
try:
    main()
except SystemExit as exc:
    if exc.code not in (0, None):
        raise
print(json.dumps({"whole": time.perf_counter() - t0, "diagnosis": spent[0]}))
"""


def _sample(args: list[str], out: Path) -> dict[str, float] | str:
    proc = subprocess.run([sys.executable, "-c", CHILD, *args, str(out)], capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        return f"exited {proc.returncode}: {(proc.stderr.strip().splitlines() or ['no message'])[-1][:200]}"
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    args = parser.parse_args(argv)
    require("my_utils.profiling", "bench_diagnosis")
    report = Report("bench_diagnosis", "what the diagnosis adds to analyze", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling"))
    report.label("fixtures", where(args.fixtures))
    rounds = args.samples or (1 if args.quick else 5)
    with bench_tempdir("bench_diagnosis_") as tmp:
        inputs: list[tuple[str, list[str]]] = []
        try:
            trace = fetch(SMALL if args.quick else BIG, args.fixtures)
            inputs.append(("analyze --trace (quick)" if args.quick else "analyze --trace 54 MB", ["--trace", str(trace)]))
            if not args.quick:
                ring = [fetch(f"{RING}/{name}", args.fixtures) for name in (
                    "ault43.cscs.ch_485050.sqlite", "ault43.cscs.ch_485052.sqlite", "ault43.cscs.ch_485055.sqlite",
                    "ault44.cscs.ch_739537.sqlite", "ault44.cscs.ch_739538.sqlite", "ault44.cscs.ch_739541.sqlite")]
                inputs.append(("analyze the 6-rank nsys ring", [str(p) for p in ring]))
        except Unavailable as exc:
            report.skip("diagnosis", str(exc))
        for label, cli_args in inputs:
            samples = interleave({"run": lambda a=cli_args: _sample(a, tmp / "out")}, rounds)["run"]
            errors = [s for s in samples if isinstance(s, str)]
            if errors:
                report.skip(label, f"failed: {errors[0]}")
                continue
            ok: list[dict[str, Any]] = samples
            report.add(f"{label}: without the diagnosis", [s["whole"] - s["diagnosis"] for s in ok], "s",
                       note="anchor (same process)")
            report.add(f"{label}: the diagnosis alone", [s["diagnosis"] for s in ok], "s")
            report.add(f"{label}: whole", [s["whole"] for s in ok], "s", anchor=f"{label}: without the diagnosis",
                       goals=[at_most_times(1.10, "issue 33: the diagnosis adds <= 10 %")])
    report.note("each sample is a fresh process: imports, reading, every analysis and the JSON report included")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
