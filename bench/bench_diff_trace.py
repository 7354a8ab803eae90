"""Run diff of two Kineto traces vs HTA's TraceDiff (anchor), and the Dask path vs the process pool.

    python bench/bench_diff_trace.py [--quick] [--samples N] [--json OUT] [--fixtures DIR] [--skip-dask]
                                     [--skip-diff] [--workers N] [--ranks N]

1. Diff end to end: ``myutils-profile diff --base-trace control --target-trace test --output X.json``
   against ``TraceDiff.compare_traces`` on the same real pair (kineto/hta/trace_diff__{control,test}),
   both over every iteration of the traces, each sample in a fresh interpreter (imports, parse,
   compare and, for us, writing the JSON, the GPU level and the step-time accounting included).
   Goal (issue 34, was 4x in issue 10): ours >= 5x faster, i.e. <= 0.2x HTA.
   Peak RSS is that of the whole process tree (ours parses the two traces in pool workers).
2. Dask: 8 rank files (``--ranks``; links to the control trace) parsed by ``run_many`` with
   ``executor="dask"`` (a local cluster started for the call) and with ``"process"`` (a spawn
   pool), same worker count, fresh interpreter each. Goal (issue 10): Dask within 15 % of the pool.
   Also printed: the CPU seconds of all the processes of a sample, which is what the wall time
   follows when other work holds the cores: start-up is what Dask adds.
The tools alternate round by round, so paired ratios come from the same stretch of time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from _child import TREE_RSS_SAMPLER, child_sample
from _fixtures import Unavailable, fetch, where
from _report import Report, at_most_times, common_args, interleave, interpreter_label, require, versions_label
from _temp import bench_tempdir

CONTROL = "kineto/hta/trace_diff__control.json.gz"
TEST = "kineto/hta/trace_diff__test.json.gz"

OURS = """
import json, sys, time
""" + TREE_RSS_SAMPLER + """t = time.perf_counter()
from typer.testing import CliRunner
from my_utils.profiling.cli import app
res = CliRunner().invoke(app, ["diff", "--base-trace", sys.argv[1], "--target-trace", sys.argv[2],
                               "--output", sys.argv[3]])
assert res.exit_code == 0, res.output
rows = len(json.load(open(sys.argv[3]))["changes"])
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": max(_peak[0] / 2**20, [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0] / 1024),
                  "rows": rows}))
"""

HTA = """
import json, logging, sys, time, warnings
""" + TREE_RSS_SAMPLER + """warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
t = time.perf_counter()
from hta.trace_diff import TraceDiff
from hta.common.trace import Trace
def load(folder):
    trace = Trace(trace_dir=folder)
    trace.parse_traces()
    return trace
control, test = load(sys.argv[1]), load(sys.argv[2])
def iterations(trace):
    return sorted(i for i in trace.get_trace(trace.get_ranks()[0])["iteration"].unique() if i >= 0)
df = TraceDiff.compare_traces(control, test, control_iteration=iterations(control), test_iteration=iterations(test))
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": max(_peak[0] / 2**20, [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0] / 1024),
                  "rows": len(df)}))
"""

PARALLEL = """
import json, sys, time
from pathlib import Path
if __name__ == "__main__":
    t = time.perf_counter()
    from my_utils.profiling.kineto.read.provider import parse_trace_file
    from my_utils.profiling.formats.parallel import run_many
    files = sorted(Path(sys.argv[1]).glob("rank_*.json.gz"))
    results = run_many(parse_trace_file, [(str(f), None) for f in files], sys.argv[2], max_workers=int(sys.argv[3]))
    s = time.perf_counter() - t
    # CPU of this process and of every process it started: the pool's workers are reaped
    # (RUSAGE_CHILDREN); Dask's fork server still runs and holds the CPU of the workers it forked
    import resource
    cpu = sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
    try:
        import psutil
    except ImportError:
        psutil = None
    for child in psutil.Process().children() if psutil else []:
        c = child.cpu_times()
        cpu += c.user + c.system + c.children_user + c.children_system
    print(json.dumps({"s": s, "cpu_s": cpu, "events": sum(map(len, results))}))
"""

Sample = dict[str, Any]


def _runner(code: str, args: list[str], cwd: Path, timeout: float) -> Callable[[], Sample | str]:
    failure: list[str] = []

    def run() -> Sample | str:
        result: Sample | str = child_sample(code, list(args), timeout=timeout, cwd=cwd, failure=failure)
        return result
    return run


def _add(report: Report, label: str, samples: dict[str, list[Sample | str]], mine: str, anchor: str,
         goal: Any, keys: tuple[str, ...] = ("s",)) -> None:
    for tool in (mine, anchor):
        if tool not in samples:
            continue
        errors = [s for s in samples[tool] if isinstance(s, str)]
        if errors:
            report.skip(f"{label}: {tool}", f"failed: {errors[0]}")
            continue
        ok = [s for s in samples[tool] if isinstance(s, dict)]
        is_mine = tool == mine
        report.add(f"{label}: {tool} time", [s["s"] for s in ok], "s",
                   anchor=f"{label}: {anchor} time" if is_mine else None,
                   goals=[goal] if is_mine else [], note="" if is_mine else "anchor")
        if "cpu_s" in keys:
            report.add(f"{label}: {tool} CPU (all processes)", [s["cpu_s"] for s in ok], "s",
                       anchor=f"{label}: {anchor} CPU (all processes)" if is_mine else None,
                       note="" if is_mine else "anchor")
        if "rss_mb" in keys:
            report.add(f"{label}: {tool} peak RSS", [s["rss_mb"] for s in ok], "MB",
                       anchor=f"{label}: {anchor} peak RSS" if is_mine else None, note="" if is_mine else "anchor")


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    parser.add_argument("--skip-dask", action="store_true", help="only the diff comparison")
    parser.add_argument("--skip-diff", action="store_true", help="only Dask vs the process pool")
    parser.add_argument("--workers", type=int, default=2, help="worker processes for Dask and the pool")
    parser.add_argument("--ranks", type=int, default=8, help="rank files for Dask and the pool (issue 10: 8)")
    args = parser.parse_args(argv)
    require("my_utils.profiling", "bench_diff_trace")
    report = Report("bench_diff_trace", "trace diff vs HTA TraceDiff; Dask vs process pool", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling", "holistictraceanalysis", "pandas", "distributed"))
    report.label("fixtures", where(args.fixtures))
    rounds = args.samples or (1 if args.quick else 5)
    with bench_tempdir("bench_diff_trace_") as tmp:
        try:
            control, test = fetch(CONTROL, args.fixtures), fetch(TEST, args.fixtures)
        except Unavailable as exc:
            report.skip("trace diff", str(exc))
            report.finish(args.json)
            return 0
        folders = []
        for name, path in (("control", control), ("test", test)):
            folder = tmp / name  # HTA reads a folder of rank files
            folder.mkdir()
            (folder / path.name).symlink_to(path.resolve())
            folders.append(folder)
        tools = {"my_utils": _runner(OURS, [str(control), str(test), str(tmp / "diff.json")], tmp, 900)}
        if args.skip_diff:
            tools = {}
        elif find_spec("hta") is not None:
            tools["HTA"] = _runner(HTA, [str(folders[0]), str(folders[1])], tmp, 900)
        else:
            report.skip("trace diff: HTA", "holistictraceanalysis not installed (pip install -r bench/requirements.txt)")
        samples = interleave(tools, rounds) if tools else {}
        _add(report, "diff control/test", samples, "my_utils", "HTA",
             at_most_times(0.2, "issue 34: >= 5x faster than HTA TraceDiff"), ("s", "rss_mb"))
        rows = {t: next((s["rows"] for s in v if isinstance(s, dict)), None) for t, v in samples.items()}
        if rows:
            report.label("diff rows", ", ".join(f"{t} {n}" for t, n in rows.items()))
        if not args.skip_dask:
            if find_spec("distributed") is None:
                report.skip("dask", "dask.distributed not installed (pip install 'myutils-profiling[dask]')")
            else:
                ranks = tmp / "ranks"
                ranks.mkdir()
                for r in range(2 if args.quick else args.ranks):
                    (ranks / f"rank_{r}.json.gz").symlink_to(control.resolve())
                par = {mode: _runner(PARALLEL, [str(ranks), mode, str(args.workers)], tmp, 900)
                       for mode in ("dask", "process")}
                label = f"{len(list(ranks.iterdir()))} ranks"
                _add(report, label, interleave(par, rounds), "dask", "process",
                     at_most_times(1.15, "issue 10: Dask within 15 % of the process pool"), ("s", "cpu_s"))
                report.label("parallel workers", str(args.workers))
    report.note("every sample is a fresh interpreter: imports, cluster or pool start-up included")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
