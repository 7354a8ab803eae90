"""The operation model's cost in ``analyze``, and ``analyze`` against TraceLens's perf report (issue 38).

    python bench/bench_ops.py [--quick] [--samples N] [--json OUT] [--fixtures DIR] [--tracelens-python PY]

1. ``myutils-profile analyze --trace T`` on the real 54 MB / 216k-event trace (kineto/hta/df_index_resolver)
   with every registered Kineto analysis, against the same command with the ``ops`` analysis (the operation
   model: ``analysis.ops``) left out of the registry. Goal (issue 38): the model adds at most 15 %, i.e.
   <= 1.15x the run without it, in wall time and in the CPU seconds of the process tree. The same
   pair on ``trace_diff__test`` (32.8 MB, shapes recorded: every shape costed) is printed too.
2. The full ``analyze`` against TraceLens's ``generate_perf_report_pytorch`` (CSV output) on the 54 MB
   trace. Goal (issue 38): >= 5x faster (<= 0.2x) at <= 1/5 of its peak memory. TraceLens is a bench-only
   anchor installed from its source into its own interpreter (``--tracelens-python``; default
   ``$TRACELENS_PYTHON``): ``git clone https://github.com/AMD-AGI/TraceLens``, then in a fresh venv
   ``pip install pandas numpy tqdm openpyxl tabulate orjson pyyaml matplotlib psutil`` and
   ``pip install --no-deps ./TraceLens`` (its xprof/protobuf pins are for JAX and are not needed here).

Every sample is a fresh process (imports included), the tools alternating round by round; time is
wall and user + system CPU of the process and everything it started (``wait4``), memory the peak
summed RSS of that tree (polled every 20 ms). ``--quick`` runs a 1.8 MB trace: a smoke run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _fixtures import Unavailable, fetch, where
from _report import Report, at_most_times, common_args, interleave, interpreter_label, require, versions_label
from _temp import bench_tempdir

BIG = "kineto/hta/df_index_resolver.json.gz"
SHAPES = "kineto/hta/trace_diff__test.json.gz"
SMALL = "kineto/hta/trace_filter__sampled_rank-0.json.gz"

# our command in a child: with "without", the ops analysis is taken out of the registry first
ANALYZE = """
import sys
from my_utils.profiling.kineto import registry
if sys.argv[1] == "without":
    registry.ANALYSES = tuple(a for a in registry.ANALYSES if a.name != "ops")
from my_utils.profiling.cli import main
sys.argv = ["myutils-profile", "analyze", "--trace", sys.argv[2], "--output-dir", sys.argv[3], "--formats", "json"]
main()
"""


def _measure(argv: list[str], cwd: Path, timeout: float) -> dict[str, float] | str:
    """Run ``argv``; its wall time, CPU seconds (the tree, via wait4) and peak tree RSS, or why it failed."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    me = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        total = 0
        try:
            total = me.memory_info().rss + sum(c.memory_info().rss for c in me.children(recursive=True))
        except psutil.Error:
            pass
        peak = max(peak, total)
        if time.perf_counter() - start > timeout:
            proc.kill()
            proc.wait()
            return f"timed out after {timeout:.0f} s"
        time.sleep(0.02)
    wall = time.perf_counter() - start
    usage = _children_cpu()
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no message"])[-1]
        return f"exited {proc.returncode}: {last[:200]}"
    return {"s": wall, "cpu_s": usage, "rss_mb": peak / 2**20}


_CPU_SEEN = [0.0]


def _children_cpu() -> float:
    """CPU seconds of the waited-for children since the last call (RUSAGE_CHILDREN grows monotonically)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = r.ru_utime + r.ru_stime
    delta, _CPU_SEEN[0] = total - _CPU_SEEN[0], total
    return delta


def _tool(argv: list[str], cwd: Path, out: Path) -> Callable[[], Any]:
    failure: list[str] = []

    def run() -> Any:
        if failure:
            return failure[0]
        shutil.rmtree(out, ignore_errors=True)
        result = _measure(argv, cwd, 1800)
        if isinstance(result, str):
            failure.append(result)
        return result
    return run


def _add(report: Report, label: str, samples: dict[str, list[Any]], mine: str, anchor: str, goal: Any,
         keys: tuple[str, ...]) -> None:
    for tool in (mine, anchor):
        errors = [s for s in samples.get(tool, []) if isinstance(s, str)]
        if tool not in samples or errors:
            report.skip(f"{label}: {tool}", f"failed: {errors[0]}" if errors else "not run")
            continue
        ok = samples[tool]
        is_mine = tool == mine
        for key, what, unit in (("s", "time", "s"), ("cpu_s", "CPU (process tree)", "s"),
                                ("rss_mb", "peak RSS", "MB")):
            if key in keys:
                report.add(f"{label}: {tool} {what}", [s[key] for s in ok], unit,
                           anchor=f"{label}: {anchor} {what}" if is_mine else None,
                           goals=[goal] if is_mine else [], note="" if is_mine else "anchor")


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    parser.add_argument("--tracelens-python", type=Path, default=os.environ.get("TRACELENS_PYTHON") or None,
                        help="an interpreter with TraceLens installed from its source (the anchor of part 2)")
    args = parser.parse_args(argv)
    require("my_utils.profiling", "bench_ops")
    report = Report("bench_ops", "the operation model's cost in analyze; analyze vs TraceLens", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling", "pandas", "numpy"))
    report.label("fixtures", where(args.fixtures))
    rounds = args.samples or (1 if args.quick else 3)
    with bench_tempdir("bench_ops_") as tmp:
        try:
            big = fetch(SMALL if args.quick else BIG, args.fixtures)
            shapes = fetch(SMALL if args.quick else SHAPES, args.fixtures)
        except Unavailable as exc:
            report.skip("operation model", str(exc))
            report.finish(args.json)
            return 0
        for label, trace in (("analyze 54 MB" if not args.quick else "analyze (quick)", big),
                             *((("analyze with shapes", shapes),) if not args.quick else ())):
            tools = {mode: _tool([sys.executable, "-c", ANALYZE, mode, str(trace), str(tmp / mode)], tmp, tmp / mode)
                     for mode in ("with ops", "without")}
            samples = interleave(tools, rounds)
            _add(report, label, samples, "with ops", "without",
                 at_most_times(1.15, "issue 38: the operation model adds <= 15 %"), ("s", "cpu_s"))
        tl = args.tracelens_python
        if tl is None or not Path(tl).exists():
            report.skip("analyze vs TraceLens", "no TraceLens interpreter (--tracelens-python or $TRACELENS_PYTHON; "
                                                "see this bench's docstring for the install)")
        else:
            report.label("TraceLens", str(tl))
            tools = {
                "my_utils": _tool([sys.executable, "-c", ANALYZE, "with ops", str(big), str(tmp / "ours")], tmp,
                                  tmp / "ours"),
                "TraceLens": _tool([str(tl), "-m", "TraceLens.Reporting.generate_perf_report_pytorch",
                                    "--profile_json_path", str(big), "--output_csvs_dir", str(tmp / "tl")], tmp,
                                   tmp / "tl"),
            }
            samples = interleave(tools, rounds)
            label = "analyze vs TraceLens perf report"
            _add(report, label, samples, "my_utils", "TraceLens", at_most_times(0.2, "issue 38: >= 5x faster"),
                 ("s", "cpu_s"))
            _add(report, label, samples, "my_utils", "TraceLens",
                 at_most_times(0.2, "issue 38: <= 1/5 of TraceLens's peak memory"), ("rss_mb",))
    report.note("every sample is a fresh process: imports, parse and every analysis included; our analyze does "
                "far more than the perf report (critical path, idle, collectives, verdict, findings)")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
